//! Who may do what: bucket policies, ACLs, object ownership and public access blocks,
//! combined as AWS documents it. Pure: no IO, no clock (the caller passes the request's
//! context, the current time included), so every rule is a table test.
//!
//! Order of evaluation: an explicit Deny in the bucket policy refuses (but never locks the
//! bucket owner out of the policy calls); the owner of the resource may act; else an Allow
//! from the policy, else a grant of the ACL that governs the action (unless the bucket's
//! ownership controls disable ACLs), else AccessDenied.

pub mod acl;
pub mod glob;
pub mod policy;

use acl::{Acl, Permission};
use policy::{Context, Decision, Policy, Request};
use serde::{Deserialize, Serialize};

/// A bucket's public access block (all off when the bucket has none).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PublicAccessBlock {
    /// Refuse requests that set a public ACL.
    pub block_public_acls: bool,
    /// Ignore the public grants of ACLs.
    pub ignore_public_acls: bool,
    /// Refuse a public bucket policy.
    pub block_public_policy: bool,
    /// While the policy is public, only the owner gets what it allows.
    pub restrict_public_buckets: bool,
}

/// A bucket's object ownership control.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum Ownership {
    /// The writer owns each object (what a bucket without controls does).
    #[default]
    ObjectWriter,
    /// The bucket owner owns objects written with `bucket-owner-full-control`.
    BucketOwnerPreferred,
    /// ACLs are off; the bucket owner owns every object.
    BucketOwnerEnforced,
}

impl Ownership {
    /// The S3 name.
    pub fn name(self) -> &'static str {
        match self {
            Ownership::ObjectWriter => "ObjectWriter",
            Ownership::BucketOwnerPreferred => "BucketOwnerPreferred",
            Ownership::BucketOwnerEnforced => "BucketOwnerEnforced",
        }
    }

    /// The control of an S3 name.
    pub fn named(name: &str) -> Option<Ownership> {
        [Ownership::ObjectWriter, Ownership::BucketOwnerPreferred, Ownership::BucketOwnerEnforced]
            .into_iter()
            .find(|o| o.name() == name)
    }
}

/// Which ACL governs an action.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Governed {
    /// The bucket's ACL (bucket calls, and writes and deletes of objects).
    Bucket(Permission),
    /// The object's ACL.
    Object(Permission),
    /// No ACL: only owners and the policy.
    Owners,
}

macro_rules! actions {
    ($($name:ident => $governed:expr, $object:expr;)*) => {
        /// The S3 actions requests ask for, as policies name them.
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        pub enum Action { $(#[doc = concat!("`s3:", stringify!($name), "`")] $name,)* }

        impl Action {
            /// Every action.
            pub const ALL: &'static [Action] = &[$(Action::$name,)*];

            /// The policy name, `s3:…`.
            pub fn name(self) -> &'static str {
                match self { $(Action::$name => concat!("s3:", stringify!($name)),)* }
            }

            fn governed(self) -> Governed {
                use Governed::*;
                use Permission::*;
                match self { $(Action::$name => $governed,)* }
            }

            /// The action that names a version: GetObject asked with a version id is
            /// GetObjectVersion, and likewise.
            pub fn of_version(self, versioned: bool) -> Action {
                match (self, versioned) {
                    (Action::GetObject, true) => Action::GetObjectVersion,
                    (Action::GetObjectAcl, true) => Action::GetObjectVersionAcl,
                    (Action::PutObjectAcl, true) => Action::PutObjectVersionAcl,
                    (Action::DeleteObject, true) => Action::DeleteObjectVersion,
                    (action, _) => action,
                }
            }

            /// Whether the action is on an object (its resource `bucket/key`), not the bucket.
            pub fn on_object(self) -> bool {
                match self { $(Action::$name => $object,)* }
            }
        }
    };
}

actions! {
    ListBucket => Bucket(Read), false;
    ListBucketVersions => Bucket(Read), false;
    ListBucketMultipartUploads => Bucket(Read), false;
    GetBucketAcl => Bucket(ReadAcp), false;
    PutBucketAcl => Bucket(WriteAcp), false;
    DeleteBucket => Owners, false;
    GetBucketLocation => Owners, false;
    GetBucketPolicy => Owners, false;
    PutBucketPolicy => Owners, false;
    DeleteBucketPolicy => Owners, false;
    GetBucketPolicyStatus => Owners, false;
    GetBucketVersioning => Owners, false;
    PutBucketVersioning => Owners, false;
    GetBucketTagging => Owners, false;
    PutBucketTagging => Owners, false;
    GetBucketNotification => Owners, false;
    PutBucketNotification => Owners, false;
    GetLifecycleConfiguration => Owners, false;
    PutLifecycleConfiguration => Owners, false;
    GetBucketObjectLockConfiguration => Owners, false;
    PutBucketObjectLockConfiguration => Owners, false;
    GetBucketOwnershipControls => Owners, false;
    PutBucketOwnershipControls => Owners, false;
    GetBucketPublicAccessBlock => Owners, false;
    PutBucketPublicAccessBlock => Owners, false;
    GetBucketCORS => Owners, false;
    PutBucketCORS => Owners, false;
    GetEncryptionConfiguration => Owners, false;
    PutEncryptionConfiguration => Owners, false;
    PutObject => Bucket(Write), true;
    DeleteObject => Bucket(Write), true;
    DeleteObjectVersion => Bucket(Write), true;
    AbortMultipartUpload => Bucket(Write), true;
    ListMultipartUploadParts => Bucket(Write), true;
    GetObject => Object(Read), true;
    GetObjectVersion => Object(Read), true;
    GetObjectAttributes => Object(Read), true;
    GetObjectAcl => Object(ReadAcp), true;
    GetObjectVersionAcl => Object(ReadAcp), true;
    PutObjectAcl => Object(WriteAcp), true;
    PutObjectVersionAcl => Object(WriteAcp), true;
    GetObjectTagging => Owners, true;
    PutObjectTagging => Owners, true;
    DeleteObjectTagging => Owners, true;
    GetObjectRetention => Owners, true;
    PutObjectRetention => Owners, true;
    GetObjectLegalHold => Owners, true;
    PutObjectLegalHold => Owners, true;
    BypassGovernanceRetention => Owners, true;
}

/// What a bucket says about access.
#[derive(Clone, Copy, Debug)]
pub struct BucketRules<'a> {
    /// The bucket's name.
    pub name: &'a str,
    /// Its owner's uid.
    pub owner: &'a str,
    /// Its ACL.
    pub acl: &'a Acl,
    /// Its policy.
    pub policy: Option<&'a Policy>,
    /// Its public access block.
    pub public_access_block: PublicAccessBlock,
    /// Its ownership control.
    pub ownership: Ownership,
}

impl<'a> BucketRules<'a> {
    /// Whether ACLs are off (BucketOwnerEnforced).
    pub fn acls_disabled(&self) -> bool {
        self.ownership == Ownership::BucketOwnerEnforced
    }

    /// Who owns an object `writer` wrote: the bucket owner while ACLs are off.
    pub fn object_owner<'w>(&self, writer: &'w str) -> &'w str
    where
        'a: 'w,
    {
        if self.acls_disabled() { self.owner } else { writer }
    }
}

/// The object an action is on, when it exists.
#[derive(Clone, Copy, Debug)]
pub struct ObjectRules<'a> {
    /// The key.
    pub key: &'a str,
    /// The object's owner.
    pub owner: &'a str,
    /// Its ACL.
    pub acl: &'a Acl,
}

/// One request to judge.
pub struct Ask<'a> {
    /// The requester's uid; `None` when anonymous.
    pub who: Option<&'a str>,
    /// What it asks.
    pub action: Action,
    /// The key an object action names (whether or not the object exists).
    pub key: Option<&'a str>,
    /// The object, when the action is on one that exists.
    pub object: Option<ObjectRules<'a>>,
    /// The values of condition keys.
    pub context: &'a dyn Context,
}

/// The ARN of a bucket, or of an object in it.
pub fn resource_arn(bucket: &str, key: Option<&str>) -> String {
    match key {
        Some(key) => format!("arn:aws:s3:::{bucket}/{key}"),
        None => format!("arn:aws:s3:::{bucket}"),
    }
}

/// Whether `ask` may be done on `bucket`.
pub fn allowed(bucket: &BucketRules<'_>, ask: &Ask<'_>) -> bool {
    let bucket_owner = ask.who == Some(bucket.owner);
    let policy_actions =
        matches!(ask.action, Action::GetBucketPolicy | Action::PutBucketPolicy | Action::DeleteBucketPolicy);
    if bucket_owner && policy_actions {
        return true;
    }
    let decision = bucket.policy.map_or(Decision::Silent, |policy| {
        let resource = resource_arn(bucket.name, ask.key.filter(|_| ask.action.on_object()));
        let decision = policy.evaluate(&Request {
            principal: ask.who,
            action: ask.action.name(),
            resource: &resource,
            context: ask.context,
        });
        let restricted = bucket.public_access_block.restrict_public_buckets && !bucket_owner && policy.is_public();
        if restricted && decision == Decision::Allow { Decision::Silent } else { decision }
    });
    if decision == Decision::Deny {
        return false;
    }
    let enforced = bucket.acls_disabled();
    // Under BucketOwnerEnforced the bucket owner owns every object, whoever wrote it.
    let object_owner = ask.object.is_some_and(|o| ask.who == Some(bucket.object_owner(o.owner)));
    let owner = match ask.action.governed() {
        Governed::Bucket(_) => bucket_owner,
        Governed::Object(Permission::ReadAcp | Permission::WriteAcp) => object_owner,
        Governed::Object(_) => object_owner && enforced,
        Governed::Owners => bucket_owner || object_owner,
    };
    if owner || decision == Decision::Allow {
        return true;
    }
    let ignore_public = bucket.public_access_block.ignore_public_acls;
    match ask.action.governed() {
        _ if enforced => false,
        Governed::Bucket(permission) => bucket.acl.allows(ask.who, permission, ignore_public),
        Governed::Object(permission) => ask.object.is_some_and(|o| o.acl.allows(ask.who, permission, ignore_public)),
        Governed::Owners => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use acl::Acl;

    struct NoKeys;

    impl Context for NoKeys {
        fn values(&self, _key: &str) -> Option<std::borrow::Cow<'_, [String]>> {
            None
        }
    }

    fn canned(name: &str, owner: &str) -> Acl {
        Acl::canned(name, owner, "o").unwrap()
    }

    fn ask<'a>(who: Option<&'a str>, action: Action, object: Option<ObjectRules<'a>>) -> Ask<'a> {
        Ask { who, action, key: Some("k"), object, context: &NoKeys }
    }

    #[test]
    fn owners_acls_policies_and_controls_combine_as_aws_documents() {
        let private = canned("private", "o");
        let public_read = canned("public-read", "o");
        let public_write = canned("public-read-write", "o");
        let bob_object = canned("private", "bob");
        let bob_object_shared = canned("bucket-owner-read", "bob");
        let deny_delete = Policy::parse(
            r#"{"Statement":[{"Effect":"Deny","Principal":"*","Action":["s3:DeleteObject","s3:PutBucketPolicy"],"Resource":["arn:aws:s3:::b","arn:aws:s3:::b/*"]}]}"#,
            "b",
        )
        .unwrap();
        let allow_bob = Policy::parse(
            r#"{"Statement":[{"Effect":"Allow","Principal":{"AWS":"arn:aws:iam:::user/bob"},"Action":"s3:GetObject","Resource":"arn:aws:s3:::b/*"}]}"#,
            "b",
        )
        .unwrap();
        let public_policy = Policy::parse(
            r#"{"Statement":[{"Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::b/*"}]}"#,
            "b",
        )
        .unwrap();
        fn bucket(acl: &Acl) -> BucketRules<'_> {
            BucketRules {
                name: "b",
                owner: "o",
                acl,
                policy: None,
                public_access_block: PublicAccessBlock::default(),
                ownership: Ownership::ObjectWriter,
            }
        }
        fn owned_by<'a>(owner: &'a str, acl: &'a Acl) -> Option<ObjectRules<'a>> {
            Some(ObjectRules { key: "k", owner, acl })
        }
        let (private, public_read, public_write) = (&private, &public_read, &public_write);
        let (bob_object, bob_object_shared) = (&bob_object, &bob_object_shared);
        let ignore = PublicAccessBlock { ignore_public_acls: true, ..Default::default() };
        let restrict = PublicAccessBlock { restrict_public_buckets: true, ..Default::default() };
        use Action::*;
        let rows: Vec<(BucketRules<'_>, Ask<'_>, bool)> = vec![
            (bucket(private), ask(Some("o"), ListBucket, None), true),
            (bucket(private), ask(Some("bob"), ListBucket, None), false),
            (bucket(private), ask(None, ListBucket, None), false),
            (bucket(public_read), ask(None, ListBucket, None), true),
            (BucketRules { public_access_block: ignore, ..bucket(public_read) }, ask(None, ListBucket, None), false),
            (bucket(public_read), ask(None, PutObject, None), false),
            (bucket(public_write), ask(None, PutObject, None), true),
            (bucket(private), ask(Some("o"), GetObject, owned_by("o", private)), true),
            (bucket(private), ask(Some("bob"), GetObject, owned_by("o", private)), false),
            (bucket(private), ask(Some("bob"), GetObject, owned_by("o", public_read)), true),
            // The bucket owner reads another writer's object only if its ACL says so...
            (bucket(private), ask(Some("o"), GetObject, owned_by("bob", bob_object)), false),
            (bucket(private), ask(Some("o"), GetObject, owned_by("bob", bob_object_shared)), true),
            // ... but may always delete it, and its writer may change its ACL.
            (bucket(private), ask(Some("o"), DeleteObject, owned_by("bob", bob_object)), true),
            (bucket(private), ask(Some("bob"), PutObjectAcl, owned_by("bob", bob_object)), true),
            (bucket(private), ask(Some("bob"), PutBucketAcl, None), false),
            // Ownership enforced: ACLs are off, the bucket owner owns everything.
            (
                BucketRules { ownership: Ownership::BucketOwnerEnforced, ..bucket(public_read) },
                ask(None, ListBucket, None),
                false,
            ),
            (
                BucketRules { ownership: Ownership::BucketOwnerEnforced, ..bucket(private) },
                ask(Some("o"), GetObject, owned_by("bob", bob_object)),
                true,
            ),
            (
                BucketRules { ownership: Ownership::BucketOwnerEnforced, ..bucket(private) },
                ask(Some("bob"), GetObject, owned_by("bob", bob_object)),
                false,
            ),
            // Policies: an explicit deny wins over ownership and ACLs, never over the policy calls.
            (
                BucketRules { policy: Some(&deny_delete), ..bucket(public_write) },
                ask(Some("o"), DeleteObject, owned_by("o", private)),
                false,
            ),
            (BucketRules { policy: Some(&deny_delete), ..bucket(public_write) }, ask(None, DeleteObject, None), false),
            (
                BucketRules { policy: Some(&deny_delete), ..bucket(private) },
                ask(Some("o"), PutBucketPolicy, None),
                true,
            ),
            (
                BucketRules { policy: Some(&allow_bob), ..bucket(private) },
                ask(Some("bob"), GetObject, owned_by("o", private)),
                true,
            ),
            (
                BucketRules { policy: Some(&allow_bob), ..bucket(private) },
                ask(Some("carol"), GetObject, owned_by("o", private)),
                false,
            ),
            (BucketRules { policy: Some(&allow_bob), ..bucket(private) }, ask(Some("bob"), PutObject, None), false),
            (
                BucketRules { policy: Some(&public_policy), ..bucket(private) },
                ask(None, GetObject, owned_by("o", private)),
                true,
            ),
            (
                BucketRules { policy: Some(&public_policy), public_access_block: restrict, ..bucket(private) },
                ask(None, GetObject, owned_by("o", private)),
                false,
            ),
            (
                BucketRules { policy: Some(&public_policy), public_access_block: restrict, ..bucket(private) },
                ask(Some("o"), GetObject, owned_by("o", private)),
                true,
            ),
            (
                BucketRules { policy: Some(&public_policy), ..bucket(private) },
                ask(None, GetObjectAcl, owned_by("o", private)),
                false,
            ),
        ];
        for (i, (rules, ask, expected)) in rows.iter().enumerate() {
            assert_eq!(
                allowed(rules, ask),
                *expected,
                "row {i}: {:?} {:?} on {:?}",
                ask.who,
                ask.action,
                ask.object.map(|o| o.owner)
            );
        }
    }

    #[test]
    fn actions_are_named_as_policies_name_them() {
        for &action in Action::ALL {
            let name = action.name().strip_prefix("s3:").unwrap();
            assert!(policy::ACTIONS.contains(&name), "{name}");
        }
        assert_eq!(resource_arn("b", Some("a/b")), "arn:aws:s3:::b/a/b");
        assert_eq!(Ownership::named("BucketOwnerEnforced"), Some(Ownership::BucketOwnerEnforced));
    }
}
