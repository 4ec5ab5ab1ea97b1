//! Cross-origin resource sharing: a bucket's CORS rules, checked when put, and the answers
//! they give to a browser's preflight (OPTIONS) and to its actual requests. Pure: the
//! front looks the bucket up and sends the headers.

use crate::access::glob::matches;
use serde::{Deserialize, Serialize};

/// Most rules a bucket may have, as AWS.
pub const MAX_RULES: usize = 100;

/// The methods a rule may allow.
const METHODS: [&str; 5] = ["GET", "PUT", "HEAD", "POST", "DELETE"];

/// One CORS rule.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CorsRule {
    /// Optional id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// Origins, each with at most one `*`.
    pub allowed_origins: Vec<String>,
    /// Methods (GET, PUT, HEAD, POST, DELETE).
    pub allowed_methods: Vec<String>,
    /// Request headers a preflight may name, each with at most one `*`; compared
    /// case-insensitively.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allowed_headers: Vec<String>,
    /// Response headers the browser may show the page.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub expose_headers: Vec<String>,
    /// How long a browser may cache the preflight's answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_age_seconds: Option<i32>,
}

/// Checks rules as PutBucketCors does; the error says what is wrong.
pub fn validate(rules: &[CorsRule]) -> Result<(), String> {
    if rules.is_empty() || rules.len() > MAX_RULES {
        return Err(format!("a CORS configuration has 1 to {MAX_RULES} rules"));
    }
    for rule in rules {
        if rule.allowed_origins.is_empty() || rule.allowed_methods.is_empty() {
            return Err("every CORS rule needs an AllowedOrigin and an AllowedMethod".into());
        }
        if let Some(method) = rule.allowed_methods.iter().find(|m| !METHODS.contains(&m.as_str())) {
            return Err(format!("Found unsupported HTTP method in CORS config. Unsupported method is {method}"));
        }
        for (what, values) in [("AllowedOrigin", &rule.allowed_origins), ("AllowedHeader", &rule.allowed_headers)] {
            if let Some(bad) = values.iter().find(|v| v.matches('*').count() > 1) {
                return Err(format!("{what} \"{bad}\" can not have more than one wildcard."));
            }
        }
    }
    Ok(())
}

/// What a browser asks.
pub struct CorsRequest<'a> {
    /// The `Origin` header.
    pub origin: &'a str,
    /// The method (of a preflight: `Access-Control-Request-Method`).
    pub method: &'a str,
    /// The headers a preflight names in `Access-Control-Request-Headers` (none for an
    /// actual request).
    pub headers: Vec<String>,
}

/// The first rule that allows `request`.
pub fn matching<'r>(rules: &'r [CorsRule], request: &CorsRequest<'_>) -> Option<&'r CorsRule> {
    rules.iter().find(|rule| {
        rule.allowed_origins.iter().any(|o| matches(o, request.origin, false))
            && rule.allowed_methods.iter().any(|m| m == request.method)
            && request.headers.iter().all(|h| rule.allowed_headers.iter().any(|a| matches(a, h, true)))
    })
}

/// The names of `Access-Control-Request-Headers`, lower-cased.
pub fn requested_headers(value: &str) -> Vec<String> {
    value.split(',').map(|h| h.trim().to_ascii_lowercase()).filter(|h| !h.is_empty()).collect()
}

/// The response headers of a request `rule` allows: to a preflight (`preflight` true) or
/// to the actual request.
pub fn response_headers(rule: &CorsRule, request: &CorsRequest<'_>, preflight: bool) -> Vec<(&'static str, String)> {
    let any_origin = rule.allowed_origins.iter().any(|o| o == "*");
    let mut headers = vec![
        ("access-control-allow-origin", if any_origin { "*".to_owned() } else { request.origin.to_owned() }),
        ("vary", "Origin, Access-Control-Request-Headers, Access-Control-Request-Method".to_owned()),
    ];
    if !any_origin {
        headers.push(("access-control-allow-credentials", "true".to_owned()));
    }
    if preflight {
        headers.push(("access-control-allow-methods", rule.allowed_methods.join(", ")));
        if !request.headers.is_empty() {
            headers.push(("access-control-allow-headers", request.headers.join(", ")));
        }
        if let Some(age) = rule.max_age_seconds {
            headers.push(("access-control-max-age", age.to_string()));
        }
    }
    if !rule.expose_headers.is_empty() {
        headers.push(("access-control-expose-headers", rule.expose_headers.join(", ")));
    }
    headers
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(origins: &[&str], methods: &[&str], headers: &[&str]) -> CorsRule {
        let strings = |v: &[&str]| v.iter().map(|s| s.to_string()).collect();
        CorsRule {
            allowed_origins: strings(origins),
            allowed_methods: strings(methods),
            allowed_headers: strings(headers),
            ..Default::default()
        }
    }

    fn ask<'a>(origin: &'a str, method: &'a str, headers: &str) -> CorsRequest<'a> {
        CorsRequest { origin, method, headers: requested_headers(headers) }
    }

    #[test]
    fn rules_match_origins_methods_and_headers_with_wildcards() {
        let rules = [
            rule(&["https://app.example.com"], &["PUT", "GET"], &["content-type", "x-amz-*"]),
            rule(&["http://*.example.org"], &["GET"], &[]),
            rule(&["*"], &["HEAD"], &["*"]),
        ];
        for (request, expected) in [
            (ask("https://app.example.com", "PUT", "Content-Type, X-Amz-Date"), Some(0)),
            (ask("https://app.example.com", "PUT", "authorization"), None),
            (ask("https://app.example.com", "DELETE", ""), None),
            (ask("https://evil.example.com", "GET", ""), None),
            (ask("http://a.b.example.org", "GET", ""), Some(1)),
            (ask("http://example.org", "GET", ""), None),
            (ask("http://a.example.org", "GET", "x-custom"), None),
            (ask("null", "HEAD", "anything, at-all"), Some(2)),
        ] {
            let found = matching(&rules, &request).map(|r| rules.iter().position(|x| x == r).unwrap());
            assert_eq!(found, expected, "{} {} {:?}", request.origin, request.method, request.headers);
        }
    }

    #[test]
    fn answers_carry_the_origin_methods_headers_and_age() {
        let mut r = rule(&["https://app.example.com"], &["PUT", "GET"], &["*"]);
        r.max_age_seconds = Some(600);
        r.expose_headers = vec!["ETag".into()];
        let request = ask("https://app.example.com", "PUT", "content-type");
        let preflight: std::collections::BTreeMap<_, _> = response_headers(&r, &request, true).into_iter().collect();
        assert_eq!(preflight["access-control-allow-origin"], "https://app.example.com");
        assert_eq!(preflight["access-control-allow-methods"], "PUT, GET");
        assert_eq!(preflight["access-control-allow-headers"], "content-type");
        assert_eq!(preflight["access-control-max-age"], "600");
        assert_eq!(preflight["access-control-allow-credentials"], "true");
        assert_eq!(preflight["access-control-expose-headers"], "ETag");
        let actual: std::collections::BTreeMap<_, _> = response_headers(&r, &request, false).into_iter().collect();
        assert!(!actual.contains_key("access-control-allow-methods"));
        let any = rule(&["*"], &["GET"], &[]);
        let headers = response_headers(&any, &ask("https://x", "GET", ""), false);
        assert!(headers.contains(&("access-control-allow-origin", "*".into())));
        assert!(!headers.iter().any(|(h, _)| *h == "access-control-allow-credentials"));
    }

    #[test]
    fn bad_configurations_say_why() {
        assert!(validate(&[rule(&["*"], &["GET"], &[])]).is_ok());
        for (rules, reason) in [
            (vec![], "1 to 100"),
            (vec![rule(&[], &["GET"], &[])], "needs an AllowedOrigin"),
            (vec![rule(&["*"], &["PATCH"], &[])], "Unsupported method is PATCH"),
            (vec![rule(&["http://*.*.com"], &["GET"], &[])], "more than one wildcard"),
            (vec![rule(&["*"], &["GET"], &["x-*-*"])], "more than one wildcard"),
            (vec![rule(&["*"], &["GET"], &[]); 101], "1 to 100"),
        ] {
            assert!(validate(&rules).unwrap_err().contains(reason), "{reason}");
        }
    }

    proptest::proptest! {
        #[test]
        fn any_rule_and_request_are_matched_without_panic(
            origin in "\\PC{0,30}", pattern in "\\PC{0,30}", method in "[A-Z]{0,7}", headers in "\\PC{0,40}",
        ) {
            let rules = [rule(&[&pattern], &[&method], &[&pattern])];
            let _ = validate(&rules);
            let request = ask(&origin, &method, &headers);
            if let Some(r) = matching(&rules, &request) {
                let _ = response_headers(r, &request, true);
            }
        }
    }
}
