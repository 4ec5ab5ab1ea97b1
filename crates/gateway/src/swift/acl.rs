//! Swift container ACLs (`X-Container-Read`, `X-Container-Write`): comma-separated
//! elements, each
//! - `.r:*` (any referrer, anonymous requests included), `.r:example.com` (that host),
//!   `.r:.example.com` (its subdomains), `.r:-host` (not that host; a later element
//!   decides over an earlier one);
//! - `.rlistings`: referrers may also list the container;
//! - `*` or `*:*` (any authenticated user), `uid` or `uid:*` (any subuser of `uid`),
//!   `uid:name` (that subuser).

/// Who asks, as the ACL sees it.
#[derive(Debug, Default)]
pub struct Who<'a> {
    /// The token's user and subuser (`<uid>:<name>`), if there was a token.
    pub user: Option<(&'a str, &'a str)>,
    /// The host of the `Referer` header, lower-case.
    pub referrer: Option<String>,
}

/// Whether `acl` lets `who` in; `listing`: the request lists the container, which
/// referrers may only with `.rlistings`.
pub fn allows(acl: &str, who: &Who<'_>, listing: bool) -> bool {
    let elements: Vec<&str> = acl.split(',').map(str::trim).filter(|e| !e.is_empty()).collect();
    if let Some((uid, subuser)) = who.user {
        let named = elements.iter().any(|&e| {
            e == "*" || e == "*:*" || e == uid || e == subuser || e.strip_suffix(":*").is_some_and(|u| u == uid)
        });
        if named {
            return true;
        }
    }
    let mut referrer_allowed = false;
    for element in &elements {
        let Some(host) = referrer_element(element) else { continue };
        let (deny, host) = match host.strip_prefix('-') {
            Some(host) => (true, host),
            None => (false, host),
        };
        if host_matches(host, who.referrer.as_deref()) {
            referrer_allowed = !deny;
        }
    }
    referrer_allowed && (!listing || elements.contains(&".rlistings"))
}

/// The host of a referrer element (`.r:`, `.ref:`, `.referer:`, `.referrer:`).
fn referrer_element(element: &str) -> Option<&str> {
    let (kind, host) = element.split_once(':')?;
    matches!(kind, ".r" | ".ref" | ".referer" | ".referrer").then_some(host)
}

/// Whether a referrer element's host (`*`, `host`, `.domain`) matches the request's.
fn host_matches(pattern: &str, referrer: Option<&str>) -> bool {
    match (pattern, referrer) {
        ("*", _) => true,
        (_, None) => false,
        (domain, Some(host)) if domain.starts_with('.') => host.ends_with(domain) || host == &domain[1..],
        (pattern, Some(host)) => pattern.eq_ignore_ascii_case(host),
    }
}

/// Checks and normalizes an ACL header's value, as Swift's `clean_acl`: 400 (the
/// message) for an empty referrer, an unknown `.` element, or referrers in a write ACL.
pub fn clean(acl: &str, write: bool) -> Result<String, String> {
    let mut cleaned = Vec::new();
    for element in acl.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        if element == ".rlistings" {
            if write {
                return Err("Referrers not allowed in write ACL: '.rlistings'".into());
            }
            cleaned.push(element.to_owned());
        } else if let Some(host) = referrer_element(element) {
            if write {
                return Err(format!("Referrers not allowed in write ACL: '{element}'"));
            }
            let bare = host.strip_prefix('-').unwrap_or(host);
            if bare.is_empty() || bare.contains(['/', ' ']) {
                return Err(format!("No host/domain value after referrer designation in ACL: '{element}'"));
            }
            cleaned.push(format!(".r:{host}"));
        } else if element.starts_with('.') {
            return Err(format!("Unknown designator '{element}' in ACL"));
        } else {
            cleaned.push(element.to_owned());
        }
    }
    Ok(cleaned.join(","))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn user<'a>(uid: &'a str, subuser: &'a str) -> Who<'a> {
        Who { user: Some((uid, subuser)), referrer: None }
    }

    fn referrer(host: Option<&str>) -> Who<'static> {
        Who { user: None, referrer: host.map(str::to_owned) }
    }

    #[test]
    fn users_are_named_by_uid_subuser_or_wildcards() {
        let bob = user("bob", "bob:swift");
        assert!(allows("alice,bob", &bob, false));
        assert!(allows("bob:swift", &bob, true));
        assert!(allows("bob:*", &bob, false));
        assert!(allows("*:*", &bob, false));
        assert!(!allows("bob:other,alice", &bob, false));
        assert!(!allows("", &bob, false));
        assert!(!allows("bob", &referrer(None), false), "an anonymous request is no user");
    }

    #[test]
    fn referrers_need_rlistings_to_list_and_later_elements_decide() {
        let anyone = referrer(None);
        assert!(allows(".r:*", &anyone, false));
        assert!(!allows(".r:*", &anyone, true));
        assert!(allows(".r:*,.rlistings", &anyone, true));
        let site = referrer(Some("www.example.com"));
        assert!(allows(".r:.example.com", &site, false));
        assert!(!allows(".r:example.org", &site, false));
        assert!(!allows(".r:*,.r:-www.example.com", &site, false));
        assert!(allows(".r:-www.example.com,.r:*", &site, false));
        assert!(!allows(".r:.example.com", &anyone, false), "no Referer matches no host");
        assert!(allows(".r:*", &user("bob", "bob:swift"), false), "referrer grants hold for users too");
    }

    #[test]
    fn acls_are_cleaned_as_swift_does() {
        assert_eq!(clean(" .ref:* , bob ,.rlistings", false).unwrap(), ".r:*,bob,.rlistings");
        assert_eq!(clean(".r:-evil.com", false).unwrap(), ".r:-evil.com");
        assert!(clean(".r:", false).is_err());
        assert!(clean(".r:*", true).is_err());
        assert!(clean(".rlistings", true).is_err());
        assert!(clean(".unknown", false).is_err());
        assert_eq!(clean("alice:swift", true).unwrap(), "alice:swift");
    }

    proptest! {
        #[test]
        fn any_acl_is_cleaned_or_refused_and_evaluated_without_panicking(acl in ".{0,60}", host in "[a-z.]{0,12}") {
            if let Ok(cleaned) = clean(&acl, false) {
                prop_assert_eq!(clean(&cleaned, false), Ok(cleaned.clone()), "cleaning is idempotent");
            }
            let _ = allows(&acl, &referrer(Some(&host)), true);
        }
    }
}
