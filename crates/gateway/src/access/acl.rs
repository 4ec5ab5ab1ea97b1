//! Access control lists: grants of READ, WRITE, READ_ACP, WRITE_ACP or FULL_CONTROL to a
//! user or a group, as canned ACLs, `x-amz-grant-*` headers or an AccessControlPolicy
//! body set them.

use serde::{Deserialize, Serialize};

/// A permission an ACL grants.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Permission {
    /// Buckets: list. Objects: read data and metadata.
    Read,
    /// Buckets: create, overwrite and delete any object. Not for objects.
    Write,
    /// Read the ACL.
    ReadAcp,
    /// Replace the ACL.
    WriteAcp,
    /// All of the above.
    FullControl,
}

impl Permission {
    /// The name S3 uses.
    pub fn name(self) -> &'static str {
        match self {
            Permission::Read => "READ",
            Permission::Write => "WRITE",
            Permission::ReadAcp => "READ_ACP",
            Permission::WriteAcp => "WRITE_ACP",
            Permission::FullControl => "FULL_CONTROL",
        }
    }

    /// The permission of an S3 name.
    pub fn named(name: &str) -> Option<Permission> {
        [Permission::Read, Permission::Write, Permission::ReadAcp, Permission::WriteAcp, Permission::FullControl]
            .into_iter()
            .find(|p| p.name() == name)
    }
}

/// The predefined groups.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Group {
    /// Anyone, anonymous requests included.
    AllUsers,
    /// Any authenticated user.
    AuthenticatedUsers,
    /// The log delivery group (no Shoal requester belongs to it).
    LogDelivery,
}

const GROUPS: [(Group, &str); 3] = [
    (Group::AllUsers, "http://acs.amazonaws.com/groups/global/AllUsers"),
    (Group::AuthenticatedUsers, "http://acs.amazonaws.com/groups/global/AuthenticatedUsers"),
    (Group::LogDelivery, "http://acs.amazonaws.com/groups/s3/LogDelivery"),
];

impl Group {
    /// The group's URI.
    pub fn uri(self) -> &'static str {
        GROUPS.iter().find(|(g, _)| *g == self).map_or("", |(_, uri)| uri)
    }

    /// The group of a URI.
    pub fn of_uri(uri: &str) -> Option<Group> {
        GROUPS.iter().find(|(_, u)| *u == uri).map(|(g, _)| *g)
    }
}

/// Who a grant is for.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Grantee {
    /// A user, by uid (the canonical id).
    User(String),
    /// A user by email address, as a request names one; stored ACLs hold the user instead.
    Email(String),
    /// A group.
    Group(Group),
}

/// One grant.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Grant {
    /// Who.
    pub grantee: Grantee,
    /// What.
    pub permission: Permission,
}

/// An ACL: its grants in the order they were given.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Acl {
    /// The grants.
    pub grants: Vec<Grant>,
}

fn grant(grantee: Grantee, permission: Permission) -> Grant {
    Grant { grantee, permission }
}

impl Acl {
    /// The canned ACL `name` of a resource owned by `owner` in a bucket owned by
    /// `bucket_owner`; `None` when the name is unknown.
    pub fn canned(name: &str, owner: &str, bucket_owner: &str) -> Option<Acl> {
        let mut grants = vec![grant(Grantee::User(owner.to_owned()), Permission::FullControl)];
        let group = |g: Group, p: Permission| grant(Grantee::Group(g), p);
        match name {
            "private" | "aws-exec-read" => {}
            "public-read" => grants.push(group(Group::AllUsers, Permission::Read)),
            "public-read-write" => {
                grants.push(group(Group::AllUsers, Permission::Read));
                grants.push(group(Group::AllUsers, Permission::Write));
            }
            "authenticated-read" => grants.push(group(Group::AuthenticatedUsers, Permission::Read)),
            "log-delivery-write" => {
                grants.push(group(Group::LogDelivery, Permission::Write));
                grants.push(group(Group::LogDelivery, Permission::ReadAcp));
            }
            "bucket-owner-read" if owner != bucket_owner => {
                grants.push(grant(Grantee::User(bucket_owner.to_owned()), Permission::Read))
            }
            "bucket-owner-full-control" if owner != bucket_owner => {
                grants.push(grant(Grantee::User(bucket_owner.to_owned()), Permission::FullControl))
            }
            "bucket-owner-read" | "bucket-owner-full-control" => {}
            _ => return None,
        }
        Some(Acl { grants })
    }

    /// Full control for `owner` alone (the `private` canned ACL).
    pub fn private(owner: &str) -> Acl {
        Acl { grants: vec![grant(Grantee::User(owner.to_owned()), Permission::FullControl)] }
    }

    /// The ACL of the `x-amz-grant-*` headers given (permission, header value); `None`
    /// when none is given, an error naming the bad part otherwise.
    pub fn from_headers(headers: &[(Permission, Option<&str>)]) -> Result<Option<Acl>, String> {
        let mut grants = Vec::new();
        for (permission, value) in headers {
            let Some(value) = value else { continue };
            for item in value.split(',').map(str::trim).filter(|i| !i.is_empty()) {
                let (kind, who) =
                    item.split_once('=').ok_or_else(|| format!("a grantee is type=value, not '{item}'"))?;
                let who = who.trim().trim_matches('"');
                let grantee = match kind.trim() {
                    "id" => Grantee::User(who.to_owned()),
                    "emailAddress" => Grantee::Email(who.to_owned()),
                    "uri" => Grantee::Group(Group::of_uri(who).ok_or_else(|| format!("unknown group '{who}'"))?),
                    other => return Err(format!("unknown grantee type '{other}'")),
                };
                if who.is_empty() {
                    return Err(format!("an empty grantee in '{item}'"));
                }
                grants.push(grant(grantee, *permission));
            }
        }
        Ok((!grants.is_empty() || headers.iter().any(|(_, v)| v.is_some())).then_some(Acl { grants }))
    }

    /// Whether `who` (a uid; `None` when anonymous) holds `permission` (or full control).
    /// Grants to the public groups count only unless `ignore_public`.
    pub fn allows(&self, who: Option<&str>, permission: Permission, ignore_public: bool) -> bool {
        self.grants.iter().any(|g| {
            let grantee = match &g.grantee {
                Grantee::User(uid) => who == Some(uid.as_str()),
                Grantee::Group(Group::AllUsers) => !ignore_public,
                Grantee::Group(Group::AuthenticatedUsers) => !ignore_public && who.is_some(),
                Grantee::Group(Group::LogDelivery) | Grantee::Email(_) => false,
            };
            grantee && (g.permission == permission || g.permission == Permission::FullControl)
        })
    }

    /// Whether the ACL grants anything to everyone or to every authenticated user.
    pub fn is_public(&self) -> bool {
        self.grants.iter().any(|g| matches!(g.grantee, Grantee::Group(Group::AllUsers | Group::AuthenticatedUsers)))
    }

    /// Whether the ACL grants `bucket_owner` full control (what BucketOwnerEnforced and
    /// BucketOwnerPreferred accept from another writer).
    pub fn gives_full_control_to(&self, uid: &str) -> bool {
        self.grants
            .iter()
            .any(|g| g.permission == Permission::FullControl && g.grantee == Grantee::User(uid.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canned_acls_grant_as_s3_documents() {
        let read = |acl: &Acl, who: Option<&str>| acl.allows(who, Permission::Read, false);
        let private = Acl::canned("private", "o", "o").unwrap();
        assert!(read(&private, Some("o")) && !read(&private, Some("x")) && !read(&private, None));
        let public = Acl::canned("public-read", "o", "o").unwrap();
        assert!(read(&public, None) && !public.allows(None, Permission::Write, false));
        assert!(!public.allows(None, Permission::Read, true), "ignored public grants");
        let authenticated = Acl::canned("authenticated-read", "o", "o").unwrap();
        assert!(read(&authenticated, Some("x")) && !read(&authenticated, None));
        let everyone = Acl::canned("public-read-write", "o", "o").unwrap();
        assert!(everyone.allows(None, Permission::Write, false) && everyone.is_public());
        let owner_read = Acl::canned("bucket-owner-read", "writer", "b").unwrap();
        assert!(read(&owner_read, Some("b")) && !owner_read.allows(Some("b"), Permission::WriteAcp, false));
        let owner_full = Acl::canned("bucket-owner-full-control", "writer", "b").unwrap();
        assert!(owner_full.gives_full_control_to("b") && owner_full.allows(Some("b"), Permission::WriteAcp, false));
        assert_eq!(Acl::canned("bucket-owner-full-control", "b", "b").unwrap().grants.len(), 1);
        assert!(Acl::canned("mostly-private", "o", "o").is_none());
        assert!(!private.is_public() && !owner_full.is_public());
    }

    #[test]
    fn grant_headers_name_users_emails_and_groups() {
        let acl = Acl::from_headers(&[
            (Permission::Read, Some(r#"uri="http://acs.amazonaws.com/groups/global/AllUsers", id="bob""#)),
            (Permission::WriteAcp, Some("emailAddress=carol@example.com")),
            (Permission::FullControl, None),
        ])
        .unwrap()
        .unwrap();
        assert_eq!(
            acl.grants,
            [
                grant(Grantee::Group(Group::AllUsers), Permission::Read),
                grant(Grantee::User("bob".into()), Permission::Read),
                grant(Grantee::Email("carol@example.com".into()), Permission::WriteAcp),
            ]
        );
        assert_eq!(Acl::from_headers(&[(Permission::Read, None)]), Ok(None));
        for bad in ["bob", r#"uri="http://example.com/group""#, r#"name="bob""#, r#"id="""#] {
            assert!(Acl::from_headers(&[(Permission::Read, Some(bad))]).is_err(), "{bad}");
        }
    }

    #[test]
    fn full_control_implies_every_permission() {
        let acl = Acl { grants: vec![grant(Grantee::User("u".into()), Permission::FullControl)] };
        for p in [Permission::Read, Permission::Write, Permission::ReadAcp, Permission::WriteAcp] {
            assert!(acl.allows(Some("u"), p, false));
            assert_eq!(Permission::named(p.name()), Some(p));
        }
        let read_acp = Acl { grants: vec![grant(Grantee::User("u".into()), Permission::ReadAcp)] };
        assert!(read_acp.allows(Some("u"), Permission::ReadAcp, false));
        assert!(!read_acp.allows(Some("u"), Permission::Read, false));
    }

    proptest::proptest! {
        #[test]
        fn any_grant_header_is_parsed_or_refused_without_panic(value in "\\PC{0,120}") {
            if let Ok(Some(acl)) = Acl::from_headers(&[(Permission::Read, Some(&value))]) {
                let _ = acl.allows(None, Permission::Read, false);
            }
        }
    }
}
