//! Access control on the S3 side: who asks (a [`Caller`] with the request's policy
//! condition keys), the checks operations make through [`crate::access`], ACLs to and
//! from their S3 forms, and the policy, ACL, ownership and public access block calls.

use super::common::ShoalS3;
use crate::access::acl::{Acl, Grantee as AclGrantee, Group, Permission as AclPermission};
use crate::access::policy::{Context, Policy, normal_key};
use crate::access::{Action, Ask, ObjectRules, Ownership, PublicAccessBlock, allowed};
use crate::error::{custom_error, rados_error};
use crate::head::ObjectMeta;
use crate::meta::{BucketInfo, UserInfo};
use crate::request::{Origin, SwiftCaller};
use s3s::dto::*;
use s3s::{S3Error, S3Request, S3Result, s3_error};
use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::Arc;

/// Who asks, and the values of the condition keys a policy may test about the request.
pub struct Caller {
    /// The authenticated user; `None` when anonymous.
    pub user: Option<Arc<UserInfo>>,
    /// Condition keys (in [`normal_key`] form) and their values.
    keys: BTreeMap<String, Vec<String>>,
}

impl Caller {
    /// The requester's uid; `None` when anonymous.
    pub fn uid(&self) -> Option<&str> {
        self.user.as_ref().map(|u| u.uid.as_str())
    }
}

/// The headers whose values policies test as `s3:<name>`.
const HEADER_KEYS: [&str; 14] = [
    "x-amz-acl",
    "x-amz-grant-read",
    "x-amz-grant-write",
    "x-amz-grant-read-acp",
    "x-amz-grant-write-acp",
    "x-amz-grant-full-control",
    "x-amz-server-side-encryption",
    "x-amz-server-side-encryption-aws-kms-key-id",
    "x-amz-copy-source",
    "x-amz-metadata-directive",
    "x-amz-storage-class",
    "x-amz-content-sha256",
    "x-amz-object-ownership",
    "x-amz-website-redirect-location",
];

/// Headers policies test under another name.
const RENAMED_HEADERS: [(&str, &str); 3] = [
    ("x-amz-object-lock-mode", "s3:object-lock-mode"),
    ("x-amz-object-lock-retain-until-date", "s3:object-lock-retain-until-date"),
    ("x-amz-object-lock-legal-hold", "s3:object-lock-legal-hold"),
];

/// Query parameters policies test as `s3:<name>` (`versionId` as `s3:VersionId`).
const QUERY_KEYS: [&str; 4] = ["prefix", "delimiter", "max-keys", "versionid"];

/// The condition keys of a request.
fn condition_keys<I>(req: &S3Request<I>, user: Option<&UserInfo>) -> BTreeMap<String, Vec<String>> {
    let mut keys: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut add = |key: &str, value: &str| keys.entry(normal_key(key)).or_default().push(value.to_owned());
    let origin = req.extensions.get::<Origin>();
    if let Some(origin) = origin.filter(|o| !o.source_ip.is_empty()) {
        add("aws:SourceIp", &origin.source_ip);
    }
    add("aws:SecureTransport", if origin.is_some_and(|o| o.secure) { "true" } else { "false" });
    match user {
        Some(user) => {
            add("aws:username", &user.uid);
            add("aws:userid", &user.uid);
            add("aws:PrincipalType", "User");
        }
        None => add("aws:PrincipalType", "Anonymous"),
    }
    for (header, key) in [("referer", "aws:Referer"), ("user-agent", "aws:UserAgent")] {
        if let Some(value) = req.headers.get(header).and_then(|v| v.to_str().ok()) {
            add(key, value);
        }
    }
    for name in HEADER_KEYS {
        if let Some(value) = req.headers.get(name).and_then(|v| v.to_str().ok()) {
            add(&format!("s3:{name}"), value);
        }
    }
    for (name, key) in RENAMED_HEADERS {
        if let Some(value) = req.headers.get(name).and_then(|v| v.to_str().ok()) {
            add(key, value);
        }
    }
    if let Some(tagging) = req.headers.get("x-amz-tagging").and_then(|v| v.to_str().ok()) {
        for (k, v) in form_urlencoded::parse(tagging.as_bytes()) {
            add(&format!("s3:RequestObjectTag/{k}"), &v);
            add("s3:RequestObjectTagKeys", &k);
        }
    }
    for (name, value) in form_urlencoded::parse(req.uri.query().unwrap_or_default().as_bytes()) {
        let name = name.to_ascii_lowercase();
        if QUERY_KEYS.contains(&name.as_str()) {
            add(&format!("s3:{name}"), &value);
        }
    }
    keys
}

/// The request's keys, the object's tags, and the time.
struct Conditions<'a> {
    caller: &'a Caller,
    object: Option<&'a ObjectMeta>,
}

impl Context for Conditions<'_> {
    fn values(&self, key: &str) -> Option<Cow<'_, [String]>> {
        match key {
            "aws:currenttime" => {
                let now = time::OffsetDateTime::now_utc();
                let text = now.format(&time::format_description::well_known::Rfc3339).ok()?;
                Some(Cow::Owned(vec![text]))
            }
            "aws:epochtime" => Some(Cow::Owned(vec![time::OffsetDateTime::now_utc().unix_timestamp().to_string()])),
            _ => match key.strip_prefix("s3:existingobjecttag/") {
                Some(tag) => {
                    let tags = &self.object?.tags;
                    tags.iter().find(|(k, _)| k == tag).map(|(_, v)| Cow::Owned(vec![v.clone()]))
                }
                None => self.caller.keys.get(key).map(|v| Cow::Borrowed(v.as_slice())),
            },
        }
    }
}

/// The ACL-related headers of a request: a canned ACL or grants.
pub struct RequestedAcl<'a> {
    /// `x-amz-acl`.
    pub canned: Option<&'a str>,
    /// `x-amz-grant-*`, by permission.
    pub grants: [(AclPermission, Option<&'a str>); 5],
}

/// The [`RequestedAcl`] of a generated input with the usual fields (objects have no
/// `grant_write`: pass `None` for it).
macro_rules! requested_acl {
    ($input:expr, $write:expr) => {
        $crate::s3::access::RequestedAcl {
            canned: $input.acl.as_ref().map(|a| a.as_str()),
            grants: [
                ($crate::access::acl::Permission::Read, $input.grant_read.as_deref()),
                ($crate::access::acl::Permission::Write, $write),
                ($crate::access::acl::Permission::ReadAcp, $input.grant_read_acp.as_deref()),
                ($crate::access::acl::Permission::WriteAcp, $input.grant_write_acp.as_deref()),
                ($crate::access::acl::Permission::FullControl, $input.grant_full_control.as_deref()),
            ],
        }
    };
}
pub(super) use requested_acl;

/// An S3 input that names a bucket (each generated input type has its own `bucket` field).
pub(super) trait BucketInput {
    /// The bucket's name.
    fn bucket(&self) -> &str;
}

/// Implements [`BucketInput`] for input types with a `bucket` field.
macro_rules! bucket_inputs {
    ($($input:ident),* $(,)?) => {
        $(impl BucketInput for $input {
            fn bucket(&self) -> &str {
                &self.bucket
            }
        })*
    };
}

bucket_inputs!(
    DeleteBucketCorsInput,
    DeleteBucketEncryptionInput,
    DeleteBucketInput,
    DeleteBucketLifecycleInput,
    DeleteBucketOwnershipControlsInput,
    DeleteBucketPolicyInput,
    DeleteBucketTaggingInput,
    DeletePublicAccessBlockInput,
    GetBucketAclInput,
    GetBucketCorsInput,
    GetBucketEncryptionInput,
    GetBucketLifecycleConfigurationInput,
    GetBucketLocationInput,
    GetBucketOwnershipControlsInput,
    GetBucketPolicyInput,
    GetBucketPolicyStatusInput,
    GetBucketTaggingInput,
    GetBucketVersioningInput,
    GetObjectLockConfigurationInput,
    GetPublicAccessBlockInput,
    HeadBucketInput,
    ListMultipartUploadsInput,
    ListObjectVersionsInput,
    ListObjectsInput,
    ListObjectsV2Input,
    PutBucketAclInput,
    PutBucketCorsInput,
    PutBucketEncryptionInput,
    PutBucketLifecycleConfigurationInput,
    PutBucketOwnershipControlsInput,
    PutBucketPolicyInput,
    PutBucketTaggingInput,
    PutBucketVersioningInput,
    PutObjectLockConfigurationInput,
    PutPublicAccessBlockInput,
);

impl ShoalS3 {
    /// Who asks: the authenticated user (suspended users refused), and the request's
    /// condition keys.
    pub(super) async fn caller<I>(&self, req: &S3Request<I>) -> S3Result<Caller> {
        if let Some(SwiftCaller(user)) = req.extensions.get() {
            // The Swift front checked the token, the subuser and the suspension.
            let keys = condition_keys(req, Some(user));
            return Ok(Caller { user: Some(user.clone()), keys });
        }
        let user = match &req.credentials {
            None => None,
            Some(credentials) => {
                match self.meta.user_by_access_key(&credentials.access_key).await.map_err(rados_error)? {
                    Some(u) if u.suspended => return Err(s3_error!(AccessDenied, "the user is suspended")),
                    Some(u) => Some(u),
                    None => return Err(s3_error!(InvalidAccessKeyId)),
                }
            }
        };
        let keys = condition_keys(req, user.as_deref());
        Ok(Caller { user, keys })
    }

    /// Whether `caller` may do `action` in `bucket` (on `key`, whose `object` is given once
    /// it was read).
    pub(super) fn permits(
        bucket: &BucketInfo,
        caller: &Caller,
        action: Action,
        key: Option<&str>,
        object: Option<&ObjectMeta>,
    ) -> bool {
        let context = Conditions { caller, object };
        let object_rules = object.map(|m| ObjectRules { key: key.unwrap_or_default(), owner: &m.owner, acl: &m.acl });
        allowed(&bucket.rules(), &Ask { who: caller.uid(), action, key, object: object_rules, context: &context })
    }

    /// Opens a request on the bucket it names: who calls, and the bucket if the caller may
    /// do `action` on it. Every bucket operation starts here.
    pub(super) async fn open_as_caller<I: BucketInput>(
        &self,
        req: &S3Request<I>,
        action: Action,
    ) -> S3Result<(Caller, Arc<BucketInfo>)> {
        let caller = self.caller(req).await?;
        let bucket = self.bucket_for(req.input.bucket(), &caller, action, None).await?;
        Ok((caller, bucket))
    }

    /// [`Self::open_as_caller`] for operations that need only the bucket.
    pub(super) async fn open<I: BucketInput>(&self, req: &S3Request<I>, action: Action) -> S3Result<Arc<BucketInfo>> {
        Ok(self.open_as_caller(req, action).await?.1)
    }

    /// The bucket `name`, if `caller` may do `action` on it (or on `key` in it).
    pub(super) async fn bucket_for(
        &self,
        name: &str,
        caller: &Caller,
        action: Action,
        key: Option<&str>,
    ) -> S3Result<Arc<BucketInfo>> {
        let bucket = self.named_bucket(name).await?;
        match Self::permits(&bucket, caller, action, key, None) {
            true => Ok(bucket),
            false => Err(s3_error!(AccessDenied)),
        }
    }

    /// Who owns a new object `caller` writes into `bucket`, and its ACL, as the bucket's
    /// ownership control and public access block decide.
    pub(super) async fn new_object_acl(
        &self,
        bucket: &BucketInfo,
        caller: &Caller,
        requested: RequestedAcl<'_>,
    ) -> S3Result<(String, Acl)> {
        let writer = caller.uid().unwrap_or(&bucket.owner).to_owned();
        let full_control_to_bucket = requested.canned == Some("bucket-owner-full-control");
        let ownership = bucket.ownership.unwrap_or_default();
        let asked = requested.canned.is_some() || requested.grants.iter().any(|(_, g)| g.is_some());
        let owner = match ownership {
            Ownership::BucketOwnerEnforced if asked && !full_control_to_bucket => {
                return Err(acls_disabled());
            }
            Ownership::BucketOwnerEnforced => bucket.owner.clone(),
            Ownership::BucketOwnerPreferred if full_control_to_bucket => bucket.owner.clone(),
            _ => writer,
        };
        let acl = self.requested_acl(requested, None, &owner, &bucket.owner).await?;
        let acl = acl.unwrap_or_else(|| Acl::private(&owner));
        if acl.is_public() && bucket.public_access_block.is_some_and(|b| b.block_public_acls) {
            return Err(s3_error!(AccessDenied, "the bucket's public access block refuses public ACLs"));
        }
        Ok((owner, acl))
    }

    /// The ACL a request sets (canned, grant headers or an AccessControlPolicy body, one
    /// of them), with grantees by email resolved to users; `None` when it sets none.
    pub(super) async fn requested_acl(
        &self,
        requested: RequestedAcl<'_>,
        body: Option<AccessControlPolicy>,
        owner: &str,
        bucket_owner: &str,
    ) -> S3Result<Option<Acl>> {
        let headers = Acl::from_headers(&requested.grants).map_err(|e| s3_error!(InvalidArgument, "{e}"))?;
        let acl = match (requested.canned, headers, body) {
            (None, None, None) => return Ok(None),
            (Some(name), None, None) => Acl::canned(name, owner, bucket_owner)
                .ok_or_else(|| s3_error!(InvalidArgument, "unknown canned ACL '{name}'"))?,
            (None, Some(acl), None) => acl,
            (None, None, Some(policy)) => acl_of_policy(policy)?,
            _ => {
                return Err(s3_error!(
                    InvalidRequest,
                    "a request sets an ACL by x-amz-acl, by x-amz-grant-* headers or by a body: only one"
                ));
            }
        };
        let mut grants = Vec::with_capacity(acl.grants.len());
        for mut grant in acl.grants {
            match &grant.grantee {
                AclGrantee::User(uid) => {
                    if self.meta.user(uid).await.map_err(rados_error)?.is_none() {
                        return Err(s3_error!(InvalidArgument, "Invalid id: no user '{uid}'"));
                    }
                }
                AclGrantee::Email(email) => {
                    let uid = self.user_by_email(email).await?.ok_or_else(|| {
                        s3_error!(
                            UnresolvableGrantByEmailAddress,
                            "The email address you provided does not match any account on record."
                        )
                    })?;
                    grant.grantee = AclGrantee::User(uid);
                }
                AclGrantee::Group(_) => {}
            }
            grants.push(grant);
        }
        Ok(Some(Acl { grants }))
    }

    /// The uid of the user with `email`.
    async fn user_by_email(&self, email: &str) -> S3Result<Option<String>> {
        for uid in self.meta.list_users().await.map_err(rados_error)? {
            let user = self.meta.user(&uid).await.map_err(rados_error)?;
            if user.is_some_and(|u| !u.email.is_empty() && u.email.eq_ignore_ascii_case(email)) {
                return Ok(Some(uid));
            }
        }
        Ok(None)
    }

    /// An ACL as GetBucketAcl and GetObjectAcl show it, with display names.
    pub(super) async fn shown_grants(&self, acl: &Acl) -> Grants {
        let mut owners = self.owners();
        let mut shown = Vec::with_capacity(acl.grants.len());
        for grant in &acl.grants {
            let grantee = match &grant.grantee {
                AclGrantee::User(uid) | AclGrantee::Email(uid) => {
                    let owner = owners.get(uid).await;
                    Grantee {
                        id: owner.id,
                        display_name: owner.display_name,
                        type_: Type::from_static(Type::CANONICAL_USER),
                        email_address: None,
                        uri: None,
                    }
                }
                AclGrantee::Group(group) => Grantee {
                    id: None,
                    display_name: None,
                    type_: Type::from_static(Type::GROUP),
                    email_address: None,
                    uri: Some(group.uri().to_owned()),
                },
            };
            shown.push(s3s::dto::Grant {
                grantee: Some(grantee),
                permission: Some(Permission::from(grant.permission.name().to_owned())),
            });
        }
        shown
    }

    /// PutBucketAcl.
    pub(super) async fn set_bucket_acl(&self, bucket: &BucketInfo, input: PutBucketAclInput) -> S3Result<()> {
        let requested = requested_acl!(input, input.grant_write.as_deref());
        let acl = self.requested_acl(requested, input.access_control_policy, &bucket.owner, &bucket.owner).await?;
        let acl = acl.ok_or_else(|| s3_error!(MissingSecurityHeader, "the request sets no ACL"))?;
        if bucket.ownership == Some(Ownership::BucketOwnerEnforced) && !only_owner(&acl, &bucket.owner) {
            return Err(acls_disabled());
        }
        if acl.is_public() && bucket.public_access_block.is_some_and(|b| b.block_public_acls) {
            return Err(s3_error!(AccessDenied, "the bucket's public access block refuses public ACLs"));
        }
        self.change_bucket(bucket, |b| b.acl = acl.clone()).await
    }

    /// The ACL PutObjectAcl sets on an object of `bucket` owned by `owner`.
    pub(super) async fn object_acl_to_set(
        &self,
        bucket: &BucketInfo,
        owner: &str,
        input: &mut PutObjectAclInput,
    ) -> S3Result<Acl> {
        let body = input.access_control_policy.take();
        let requested = requested_acl!(input, None);
        let acl = self.requested_acl(requested, body, owner, &bucket.owner).await?;
        let acl = acl.ok_or_else(|| s3_error!(MissingSecurityHeader, "the request sets no ACL"))?;
        if bucket.ownership == Some(Ownership::BucketOwnerEnforced) && !only_owner(&acl, &bucket.owner) {
            return Err(acls_disabled());
        }
        if acl.is_public() && bucket.public_access_block.is_some_and(|b| b.block_public_acls) {
            return Err(s3_error!(AccessDenied, "the bucket's public access block refuses public ACLs"));
        }
        Ok(acl)
    }

    /// PutBucketPolicy: a policy that parses, names existing users and, under a public
    /// access block that blocks public policies, is not public.
    pub(super) async fn set_policy(&self, bucket: &BucketInfo, text: &str) -> S3Result<()> {
        let policy = Policy::parse(text, &bucket.name).map_err(|reason| s3_error!(MalformedPolicy, "{reason}"))?;
        for uid in policy.named_users() {
            if self.meta.user(uid).await.map_err(rados_error)?.is_none() {
                return Err(s3_error!(MalformedPolicy, "Invalid principal in policy: no user '{uid}'"));
            }
        }
        if policy.is_public() && bucket.public_access_block.is_some_and(|b| b.block_public_policy) {
            return Err(s3_error!(AccessDenied, "the bucket's public access block refuses public policies"));
        }
        self.change_bucket(bucket, |b| b.policy = Some(policy.clone())).await
    }

    /// PutBucketOwnershipControls.
    pub(super) async fn set_ownership(&self, bucket: &BucketInfo, controls: OwnershipControls) -> S3Result<()> {
        let [rule] = controls.rules.as_slice() else {
            return Err(s3_error!(MalformedXML, "OwnershipControls takes exactly one rule"));
        };
        let name = rule.object_ownership.as_str();
        let ownership =
            Ownership::named(name).ok_or_else(|| s3_error!(MalformedXML, "unknown ObjectOwnership '{name}'"))?;
        if ownership == Ownership::BucketOwnerEnforced && !only_owner(&bucket.acl, &bucket.owner) {
            return Err(s3_error!(
                InvalidBucketAclWithObjectOwnership,
                "Bucket cannot have ACLs set with ObjectOwnership's BucketOwnerEnforced setting"
            ));
        }
        self.change_bucket(bucket, |b| b.ownership = Some(ownership)).await
    }

    /// PutPublicAccessBlock.
    pub(super) async fn set_public_access_block(
        &self,
        bucket: &BucketInfo,
        config: PublicAccessBlockConfiguration,
    ) -> S3Result<()> {
        let block = PublicAccessBlock {
            block_public_acls: config.block_public_acls.unwrap_or(false),
            ignore_public_acls: config.ignore_public_acls.unwrap_or(false),
            block_public_policy: config.block_public_policy.unwrap_or(false),
            restrict_public_buckets: config.restrict_public_buckets.unwrap_or(false),
        };
        self.change_bucket(bucket, |b| b.public_access_block = Some(block)).await
    }
}

/// The public access block of a bucket as S3 shows it; 404 when it has none.
pub(super) fn shown_public_access_block(bucket: &BucketInfo) -> S3Result<PublicAccessBlockConfiguration> {
    let block = bucket.public_access_block.ok_or_else(|| {
        custom_error(
            "NoSuchPublicAccessBlockConfiguration",
            http::StatusCode::NOT_FOUND,
            "The public access block configuration was not found",
        )
    })?;
    Ok(PublicAccessBlockConfiguration {
        block_public_acls: Some(block.block_public_acls),
        ignore_public_acls: Some(block.ignore_public_acls),
        block_public_policy: Some(block.block_public_policy),
        restrict_public_buckets: Some(block.restrict_public_buckets),
    })
}

/// The ownership controls of a bucket as S3 shows them; 404 when it has none.
pub(super) fn shown_ownership(bucket: &BucketInfo) -> S3Result<OwnershipControls> {
    let ownership = bucket
        .ownership
        .ok_or_else(|| s3_error!(OwnershipControlsNotFoundError, "The bucket ownership controls were not found"))?;
    Ok(OwnershipControls {
        rules: vec![OwnershipControlsRule { object_ownership: ObjectOwnership::from(ownership.name().to_owned()) }],
    })
}

fn acls_disabled() -> S3Error {
    s3_error!(AccessControlListNotSupported, "The bucket does not allow ACLs")
}

/// Whether an ACL grants nothing to anyone but `owner`.
pub(super) fn only_owner(acl: &Acl, owner: &str) -> bool {
    acl.grants.iter().all(|g| g.grantee == AclGrantee::User(owner.to_owned()))
}

/// The ACL of an AccessControlPolicy body.
pub fn acl_of_policy(policy: AccessControlPolicy) -> S3Result<Acl> {
    let malformed = |what: &str| s3_error!(MalformedACLError, "The XML you provided was not well-formed: {what}");
    let mut grants = Vec::new();
    for grant in policy.grants.unwrap_or_default() {
        let grantee = grant.grantee.ok_or_else(|| malformed("a Grant has no Grantee"))?;
        let permission = grant.permission.ok_or_else(|| malformed("a Grant has no Permission"))?;
        let permission = AclPermission::named(permission.as_str())
            .ok_or_else(|| malformed(&format!("unknown permission '{}'", permission.as_str())))?;
        let grantee = match grantee.type_.as_str() {
            Type::CANONICAL_USER => AclGrantee::User(
                grantee.id.filter(|i| !i.is_empty()).ok_or_else(|| malformed("a CanonicalUser has no ID"))?,
            ),
            Type::AMAZON_CUSTOMER_BY_EMAIL => AclGrantee::Email(
                grantee
                    .email_address
                    .filter(|e| !e.is_empty())
                    .ok_or_else(|| malformed("an AmazonCustomerByEmail grantee has no EmailAddress"))?,
            ),
            Type::GROUP => {
                let uri = grantee.uri.ok_or_else(|| malformed("a Group grantee has no URI"))?;
                AclGrantee::Group(Group::of_uri(&uri).ok_or_else(|| malformed(&format!("unknown group '{uri}'")))?)
            }
            other => return Err(malformed(&format!("unknown grantee type '{other}'"))),
        };
        grants.push(crate::access::acl::Grant { grantee, permission });
    }
    Ok(Acl { grants })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(xml: &str) -> S3Result<Acl> {
        let mut de = s3s::xml::Deserializer::new(xml.as_bytes());
        let policy: AccessControlPolicy =
            s3s::xml::Deserialize::deserialize(&mut de).map_err(|e| s3_error!(MalformedACLError, "{e:?}"))?;
        acl_of_policy(policy)
    }

    #[test]
    fn access_control_policies_become_grants() {
        let xml = r#"<AccessControlPolicy xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Owner><ID>o</ID></Owner><AccessControlList>
            <Grant><Grantee xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" xsi:type="CanonicalUser"><ID>bob</ID></Grantee><Permission>WRITE_ACP</Permission></Grant>
            <Grant><Grantee xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" xsi:type="AmazonCustomerByEmail"><EmailAddress>c@example.com</EmailAddress></Grantee><Permission>READ</Permission></Grant>
            <Grant><Grantee xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" xsi:type="Group"><URI>http://acs.amazonaws.com/groups/global/AuthenticatedUsers</URI></Grantee><Permission>READ</Permission></Grant>
            </AccessControlList></AccessControlPolicy>"#;
        let acl = parse(xml).unwrap();
        let grantees: Vec<_> = acl.grants.iter().map(|g| (g.grantee.clone(), g.permission)).collect();
        assert_eq!(
            grantees,
            [
                (AclGrantee::User("bob".into()), AclPermission::WriteAcp),
                (AclGrantee::Email("c@example.com".into()), AclPermission::Read),
                (AclGrantee::Group(Group::AuthenticatedUsers), AclPermission::Read),
            ]
        );
        let bad_permission = xml.replace("WRITE_ACP", "WRITE_EVERYTHING");
        assert_eq!(parse(&bad_permission).unwrap_err().code().as_str(), "MalformedACLError");
        let bad_group = xml.replace("global/AuthenticatedUsers", "global/Friends");
        assert_eq!(parse(&bad_group).unwrap_err().code().as_str(), "MalformedACLError");
    }

    proptest::proptest! {
        #[test]
        fn any_acl_document_is_parsed_or_refused_without_panic(
            kind in "CanonicalUser|AmazonCustomerByEmail|Group|[A-Za-z]{0,8}",
            inner in "(<ID>[^<&]{0,8}</ID>|<EmailAddress>[^<&]{0,8}</EmailAddress>|<URI>[^<&]{0,50}</URI>){0,2}",
            permission in "READ|WRITE|READ_ACP|WRITE_ACP|FULL_CONTROL|[A-Z_]{0,10}",
            noise in "\\PC{0,40}",
        ) {
            let xml = format!(
                r#"<AccessControlPolicy><AccessControlList><Grant><Grantee xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" xsi:type="{kind}">{inner}</Grantee><Permission>{permission}</Permission></Grant>{noise}</AccessControlList></AccessControlPolicy>"#
            );
            let _ = parse(&xml);
            let _ = parse(&noise);
        }
    }
}
