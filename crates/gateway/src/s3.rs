//! The S3 operations: s3s parses, authenticates and routes each request; these methods
//! check permissions and act on the object layer through [`Meta`] and [`Objects`].

use crate::config::GatewayConfig;
use crate::layout;
use crate::meta::{BucketInfo, CannedAcl, Meta, UserInfo};
use crate::multipart::{CompleteError, hex};
use crate::notifications::{Done, Operation, Origin, Pending};
use crate::objects::{ObjectMeta, Objects, StreamError, new_tag, now_ns, order_of, read_meta};
use bytes::Bytes;
use futures::StreamExt;
use s3s::auth::Credentials;
use s3s::dto::*;
use s3s::{S3, S3Error, S3Request, S3Response, S3Result, s3_error};
use shoal_client::IoCtx;
use shoal_objclass::bucket_index::ListItem;
use shoal_types::{Errno, RadosError};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, UNIX_EPOCH};

/// The gateway's implementation of the S3 API.
#[derive(Clone)]
pub struct ShoalS3 {
    /// Users and buckets.
    pub meta: Arc<Meta>,
    /// The data path.
    pub objects: Arc<Objects>,
    /// The metadata pool in the uploads namespace.
    pub uploads: IoCtx,
    /// Bucket notifications.
    pub notifier: Arc<crate::notifications::Notifier>,
    /// Options.
    pub config: GatewayConfig,
}

/// Turns an object-layer failure into the S3 error a client should see.
pub fn rados_error(e: RadosError) -> S3Error {
    match e.errno {
        Errno::TimedOut | Errno::NotConnected | Errno::Again => s3_error!(ServiceUnavailable, "{e}"),
        Errno::FileTooBig | Errno::TooBig => s3_error!(EntityTooLarge, "{e}"),
        _ => {
            tracing::error!(error = %e, "object layer error");
            s3_error!(InternalError, "{e}")
        }
    }
}

fn stream_error(e: StreamError) -> S3Error {
    match e {
        // s3s does not export its aws-chunked error type: recognise a bad chunk signature by its text.
        StreamError::Body(msg) if msg.contains("SignatureMismatch") => {
            s3_error!(SignatureDoesNotMatch, "a chunk signature of the aws-chunked body does not match")
        }
        StreamError::Body(msg) => s3_error!(IncompleteBody, "reading the request body failed: {msg}"),
        StreamError::TooLarge => s3_error!(EntityTooLarge, "the object exceeds the largest allowed size"),
        StreamError::Rados(e) if e.errno == Errno::NotFound => s3_error!(NoSuchUpload),
        StreamError::Rados(e) => rados_error(e),
    }
}

/// Longest a bucket removal waits for the bucket's logged events to be moved to their queues.
const LOG_DRAIN_WAIT: Duration = Duration::from_secs(10);

fn timestamp(ns: u64) -> Timestamp {
    Timestamp::from(UNIX_EPOCH + Duration::from_nanos(ns))
}

fn seconds(ts: &Timestamp) -> i64 {
    time::OffsetDateTime::from(ts.clone()).unix_timestamp()
}

fn etag(value: &str) -> ETag {
    ETag::Strong(value.to_owned())
}

fn parse_acl(acl: Option<&str>) -> S3Result<CannedAcl> {
    match acl {
        None => Ok(CannedAcl::Private),
        Some(name) => {
            CannedAcl::parse(name).ok_or_else(|| s3_error!(InvalidArgument, "unsupported canned ACL '{name}'"))
        }
    }
}

fn owner_of(uid: &str, display_name: Option<&str>) -> Owner {
    Owner { id: Some(uid.to_owned()), display_name: Some(display_name.unwrap_or(uid).to_owned()) }
}

/// Parses `k1=v1&k2=v2` (the `x-amz-tagging` header).
fn parse_tagging(header: &str) -> S3Result<Vec<(String, String)>> {
    let tags: Vec<(String, String)> =
        form_urlencoded::parse(header.as_bytes()).map(|(k, v)| (k.into_owned(), v.into_owned())).collect();
    check_tags(&tags)?;
    Ok(tags)
}

fn check_tags(tags: &[(String, String)]) -> S3Result<()> {
    if tags.len() > 10 {
        return Err(s3_error!(InvalidTag, "an object can have at most 10 tags"));
    }
    for (k, v) in tags {
        if k.is_empty() || k.chars().count() > 128 || v.chars().count() > 256 {
            return Err(s3_error!(InvalidTag, "tag keys are 1..=128 characters and values up to 256"));
        }
    }
    let mut keys: Vec<&String> = tags.iter().map(|(k, _)| k).collect();
    keys.sort();
    keys.dedup();
    if keys.len() != tags.len() {
        return Err(s3_error!(InvalidTag, "tag keys must be unique"));
    }
    Ok(())
}

/// URL-encodes a key for `encoding-type=url` listings (everything but unreserved characters and `/`).
fn url_encode(s: &str) -> String {
    const KEEP: &percent_encoding::AsciiSet =
        &percent_encoding::NON_ALPHANUMERIC.remove(b'-').remove(b'_').remove(b'.').remove(b'~').remove(b'/');
    percent_encoding::utf8_percent_encode(s, KEEP).to_string()
}

/// What one listing page asks for.
struct ListPage<'a> {
    prefix: &'a str,
    delimiter: &'a str,
    after: &'a str,
    max_keys: i32,
    url: bool,
    with_owner: bool,
}

/// Parses `x-amz-copy-source-range` (`bytes=FIRST-LAST`, both inclusive, within `size`).
fn copy_range(header: &str, size: u64) -> Option<std::ops::Range<u64>> {
    let (first, last) = header.strip_prefix("bytes=")?.split_once('-')?;
    let (first, last) = (first.parse::<u64>().ok()?, last.parse::<u64>().ok()?);
    (first <= last && last < size).then(|| first..last + 1)
}

/// The headers a new object takes from its request.
struct NewObject {
    acl: Option<ObjectCannedACL>,
    content_type: Option<String>,
    cache_control: Option<String>,
    content_disposition: Option<String>,
    content_encoding: Option<String>,
    content_language: Option<String>,
    expires: Option<Timestamp>,
    metadata: Option<Metadata>,
    tagging: Option<String>,
}

impl NewObject {
    fn into_meta(self, owner: &str) -> S3Result<ObjectMeta> {
        let mut headers = BTreeMap::new();
        let encoding = self.content_encoding.map(|e| {
            e.split(',').map(str::trim).filter(|p| !p.eq_ignore_ascii_case("aws-chunked")).collect::<Vec<_>>().join(",")
        });
        for (name, value) in [
            ("cache-control", self.cache_control),
            ("content-disposition", self.content_disposition),
            ("content-encoding", encoding.filter(|e| !e.is_empty())),
            ("content-language", self.content_language),
            ("expires", self.expires.map(|t| seconds(&t).to_string())),
        ] {
            if let Some(value) = value {
                headers.insert(name.to_owned(), value);
            }
        }
        let user_meta: BTreeMap<String, String> = self.metadata.unwrap_or_default().into_iter().collect();
        if user_meta.iter().map(|(k, v)| k.len() + v.len()).sum::<usize>() > 2048 {
            return Err(s3_error!(MetadataTooLarge, "user metadata exceeds 2 KiB"));
        }
        Ok(ObjectMeta {
            owner: owner.to_owned(),
            acl: parse_acl(self.acl.as_ref().map(|a| a.as_str()))?,
            content_type: self.content_type,
            headers,
            user_meta,
            tags: self.tagging.as_deref().map(parse_tagging).transpose()?.unwrap_or_default(),
            ..ObjectMeta::default()
        })
    }
}

/// The [`NewObject`] of a PutObject, CopyObject or CreateMultipartUpload input (the same
/// fields in three generated types).
macro_rules! new_object {
    ($input:expr) => {
        NewObject {
            acl: $input.acl,
            content_type: $input.content_type,
            cache_control: $input.cache_control,
            content_disposition: $input.content_disposition,
            content_encoding: $input.content_encoding,
            content_language: $input.content_language,
            expires: $input.expires,
            metadata: $input.metadata,
            tagging: $input.tagging,
        }
    };
}

/// The `x-amz-copy-source-if-*` conditions of a copy.
struct CopyConditions<'a> {
    if_match: Option<&'a ETagCondition>,
    if_none_match: Option<&'a ETagCondition>,
    if_modified_since: Option<&'a Timestamp>,
    if_unmodified_since: Option<&'a Timestamp>,
}

/// The [`CopyConditions`] of a CopyObject or UploadPartCopy input.
macro_rules! copy_conditions {
    ($input:expr) => {
        CopyConditions {
            if_match: $input.copy_source_if_match.as_ref(),
            if_none_match: $input.copy_source_if_none_match.as_ref(),
            if_modified_since: $input.copy_source_if_modified_since.as_ref(),
            if_unmodified_since: $input.copy_source_if_unmodified_since.as_ref(),
        }
    };
}

/// Sets the standard response fields of GET and HEAD from an object's metadata.
macro_rules! describe_object {
    ($out:expr, $meta:expr) => {{
        let meta: &ObjectMeta = $meta;
        $out.e_tag = Some(etag(&meta.etag));
        $out.last_modified = Some(timestamp(meta.mtime_ns));
        $out.content_type = meta.content_type.clone();
        $out.cache_control = meta.headers.get("cache-control").cloned();
        $out.content_disposition = meta.headers.get("content-disposition").cloned();
        $out.content_encoding = meta.headers.get("content-encoding").cloned();
        $out.content_language = meta.headers.get("content-language").cloned();
        $out.expires = meta
            .headers
            .get("expires")
            .and_then(|s| s.parse::<u64>().ok())
            .map(|secs| timestamp(secs.saturating_mul(1_000_000_000)));
        $out.metadata = (!meta.user_meta.is_empty()).then(|| meta.user_meta.clone().into_iter().collect());
        $out.parts_count = meta.parts.map(|p| p as i32);
        $out.accept_ranges = Some("bytes".into());
        $out.storage_class = Some(StorageClass::from_static(StorageClass::STANDARD));
    }};
}

/// Preconditions of GET/HEAD (and, with `copy`, of a copy source, where every failure is 412).
fn check_conditions(
    meta: &ObjectMeta,
    if_match: Option<&ETagCondition>,
    if_none_match: Option<&ETagCondition>,
    if_modified_since: Option<&Timestamp>,
    if_unmodified_since: Option<&Timestamp>,
    copy: bool,
) -> S3Result<()> {
    let matches = |c: &ETagCondition| c.is_any() || c.as_etag().is_some_and(|e| e.value() == meta.etag);
    let mtime = (meta.mtime_ns / 1_000_000_000) as i64;
    let not_modified = || if copy { s3_error!(PreconditionFailed) } else { s3_error!(NotModified) };
    if let Some(c) = if_match {
        if !matches(c) {
            return Err(s3_error!(PreconditionFailed, "If-Match does not match"));
        }
    } else if let Some(t) = if_unmodified_since
        && mtime > seconds(t)
    {
        return Err(s3_error!(PreconditionFailed, "modified since the If-Unmodified-Since time"));
    }
    if let Some(c) = if_none_match {
        if matches(c) {
            return Err(not_modified());
        }
    } else if let Some(t) = if_modified_since
        && mtime <= seconds(t)
    {
        return Err(not_modified());
    }
    Ok(())
}

/// The request's origin as the front recorded it.
fn origin_of(extensions: &http::Extensions) -> Origin {
    extensions.get::<Origin>().cloned().unwrap_or_default()
}

/// What a written object tells its events.
impl ShoalS3 {
    /// The authenticated user (None for anonymous requests); suspended users are refused.
    async fn requester(&self, credentials: &Option<Credentials>) -> S3Result<Option<Arc<UserInfo>>> {
        let Some(credentials) = credentials else { return Ok(None) };
        let user = self.meta.user_by_access_key(&credentials.access_key).await.map_err(rados_error)?;
        match user {
            Some(u) if u.suspended => Err(s3_error!(AccessDenied, "the user is suspended")),
            Some(u) => Ok(Some(u)),
            None => Err(s3_error!(InvalidAccessKeyId)),
        }
    }

    async fn named_bucket(&self, name: &str) -> S3Result<Arc<BucketInfo>> {
        self.meta.bucket(name).await.map_err(rados_error)?.ok_or_else(|| s3_error!(NoSuchBucket))
    }

    /// A bucket the requester may list (read).
    async fn readable_bucket(&self, name: &str, who: &Option<Arc<UserInfo>>) -> S3Result<Arc<BucketInfo>> {
        let bucket = self.named_bucket(name).await?;
        let owner = who.as_ref().is_some_and(|u| u.uid == bucket.owner);
        if owner || bucket.acl.allows_read(who.is_some()) { Ok(bucket) } else { Err(s3_error!(AccessDenied)) }
    }

    /// A bucket the requester may write into; also returns who will own new objects.
    async fn writable_bucket(&self, name: &str, who: &Option<Arc<UserInfo>>) -> S3Result<(Arc<BucketInfo>, String)> {
        let bucket = self.named_bucket(name).await?;
        let owner = who.as_ref().is_some_and(|u| u.uid == bucket.owner);
        if owner || bucket.acl.allows_write() {
            let uid = who.as_ref().map_or_else(|| bucket.owner.clone(), |u| u.uid.clone());
            Ok((bucket, uid))
        } else {
            Err(s3_error!(AccessDenied))
        }
    }

    /// The bucket's owner.
    async fn owned_bucket(&self, name: &str, who: &Option<Arc<UserInfo>>) -> S3Result<Arc<BucketInfo>> {
        let bucket = self.named_bucket(name).await?;
        if who.as_ref().is_some_and(|u| u.uid == bucket.owner) { Ok(bucket) } else { Err(s3_error!(AccessDenied)) }
    }

    /// An object the requester may read: its head metadata and inline data.
    async fn readable_object(
        &self,
        bucket: &str,
        key: &str,
        who: &Option<Arc<UserInfo>>,
    ) -> S3Result<(Arc<BucketInfo>, ObjectMeta, Bytes)> {
        let bucket = self.named_bucket(bucket).await?;
        let Some((meta, inline)) = self.objects.read_head(&bucket, key).await.map_err(rados_error)? else {
            let listable = who.as_ref().is_some_and(|u| u.uid == bucket.owner) || bucket.acl.allows_read(who.is_some());
            return Err(if listable { s3_error!(NoSuchKey) } else { s3_error!(AccessDenied) });
        };
        let uid = who.as_ref().map(|u| u.uid.as_str());
        if uid == Some(bucket.owner.as_str()) || uid == Some(meta.owner.as_str()) || meta.acl.allows_read(who.is_some())
        {
            Ok((bucket, meta, inline))
        } else {
            Err(s3_error!(AccessDenied))
        }
    }

    /// Writes the head and links the index entry with the persistent `events`, then
    /// forgets the writer's GC intent.
    async fn commit(
        &self,
        bucket: &BucketInfo,
        key: &str,
        meta: &ObjectMeta,
        data: Bytes,
        intent: Option<String>,
        events: &Pending,
    ) -> S3Result<()> {
        let objects = &self.objects;
        let logged = events.logged(&Done::of(meta));
        if !objects.install(bucket, key, meta, data, logged).await.map_err(rados_error)? {
            let head = layout::head_object(&bucket.id, key);
            objects.gc.retire(&head, &meta.tail).await.map_err(rados_error)?;
        }
        if let Some(intent) = intent {
            objects.gc.forget(&intent).await.map_err(rados_error)?;
        }
        Ok(())
    }

    /// Streams `body` into a new object `key` with `meta` (size, etag and order filled in),
    /// logging the persistent `events`.
    #[allow(clippy::too_many_arguments)]
    async fn store_object<S, E>(
        &self,
        bucket: &BucketInfo,
        key: &str,
        mut meta: ObjectMeta,
        body: S,
        content_md5: Option<&str>,
        tag: &str,
        events: &Pending,
    ) -> S3Result<ObjectMeta>
    where
        S: futures::Stream<Item = Result<Bytes, E>> + Unpin,
        E: std::fmt::Display,
    {
        let head = layout::head_object(&bucket.id, key);
        let prefix = layout::tail_prefix(&bucket.id, key, tag);
        let written = self.objects.write_data(body, &head, &prefix, true).await.map_err(stream_error)?;
        if let Some(expected) = content_md5 {
            use base64::Engine;
            let digest = base64::engine::general_purpose::STANDARD
                .decode(expected)
                .ok()
                .filter(|d| d.len() == 16)
                .ok_or_else(|| s3_error!(InvalidDigest, "Content-MD5 is not a base64 MD5"));
            if digest.as_deref().map_or(true, |d| d != written.md5) {
                let garbage: Vec<_> = written.segment.into_iter().collect();
                self.objects.gc.retire_now(&head, &garbage).await.map_err(rados_error)?;
                return Err(digest.err().unwrap_or_else(|| s3_error!(BadDigest)));
            }
        }
        meta.size = written.size;
        meta.etag = hex(&written.md5);
        meta.mtime_ns = now_ns();
        meta.order = order_of(meta.mtime_ns, tag);
        meta.tail = written.segment.into_iter().collect();
        meta.parts = None;
        self.commit(bucket, key, &meta, written.inline.unwrap_or_default(), written.intent, events).await?;
        Ok(meta)
    }

    /// Admits the events of `op`, runs `work` (which logs the persistent ones in its
    /// bucket index change), then pushes the synchronous ones if it succeeded.
    async fn with_events<T>(
        &self,
        op: &Operation<'_>,
        origin: &Origin,
        who: &Option<Arc<UserInfo>>,
        work: impl AsyncFnOnce(&Pending) -> S3Result<T>,
        done: impl FnOnce(&T) -> Done,
    ) -> S3Result<T> {
        let pending = self.notifier.prepare(op, origin, who).await?;
        match work(&pending).await {
            Ok(value) => {
                self.notifier.finish(pending, Some(done(&value))).await;
                Ok(value)
            }
            Err(e) => {
                self.notifier.finish(pending, None).await;
                Err(e)
            }
        }
    }

    /// Deletes `key` (with its ObjectRemoved:Delete events).
    async fn delete_key(
        &self,
        bucket: &BucketInfo,
        key: &str,
        origin: &Origin,
        who: &Option<Arc<UserInfo>>,
    ) -> S3Result<()> {
        let tag = new_tag();
        let order_ns = now_ns();
        let order = order_of(order_ns, &tag);
        // Filters and events need the removed object's metadata: read it only if someone listens.
        let stored = match bucket.notifications.is_empty() {
            true => None,
            false => {
                let head = layout::head_object(&bucket.id, key);
                read_meta(self.objects.pools.data(), &head).await.map_err(rados_error)?
            }
        };
        let (metadata, tags) = stored.as_ref().map(|m| (m.user_meta.clone(), m.tags.clone())).unwrap_or_default();
        let op = Operation { bucket, key, event: "ObjectRemoved:Delete", tag: &tag, metadata: &metadata, tags: &tags };
        // The event reports the object as read before the removal.
        let done = || Done {
            size: stored.as_ref().map_or(0, |m| m.size),
            etag: stored.as_ref().map_or(String::new(), |m| m.etag.clone()),
            order_ns,
        };
        let work = async |events: &Pending| {
            self.objects.delete(bucket, key, &order, events.logged(&done())).await.map_err(rados_error)
        };
        self.with_events(&op, origin, who, work, |_| done()).await.map(|_| ())
    }

    async fn display_name(&self, uid: &str) -> Option<String> {
        self.meta.user(uid).await.ok().flatten().map(|u| u.display_name.clone())
    }

    /// One listing page in S3 terms: objects, common prefixes, truncation and the last name.
    async fn list_page(
        &self,
        bucket: &BucketInfo,
        page: ListPage<'_>,
    ) -> S3Result<(Vec<Object>, Vec<CommonPrefix>, bool, Option<String>)> {
        let ListPage { prefix, delimiter, after, max_keys, url, with_owner } = page;
        if max_keys < 0 {
            return Err(s3_error!(InvalidArgument, "max-keys must not be negative"));
        }
        let max = (max_keys as usize).min(1000);
        if max == 0 {
            return Ok((Vec::new(), Vec::new(), false, None));
        }
        let (items, truncated) = self.objects.list(bucket, prefix, delimiter, after, max).await.map_err(rados_error)?;
        let last = items.last().map(|i| i.name().to_owned());
        let encode = |s: &str| if url { url_encode(s) } else { s.to_owned() };
        let (mut contents, mut prefixes) = (Vec::new(), Vec::new());
        // Owners' display names, looked up once per page.
        let mut names: std::collections::HashMap<String, Option<String>> = Default::default();
        for item in items {
            match item {
                ListItem::Entry(key, entry) => {
                    let owner = match with_owner {
                        true => {
                            if !names.contains_key(&entry.owner) {
                                names.insert(entry.owner.clone(), self.display_name(&entry.owner).await);
                            }
                            Some(owner_of(&entry.owner, names[&entry.owner].as_deref()))
                        }
                        false => None,
                    };
                    contents.push(Object {
                        key: Some(encode(&key)),
                        size: Some(entry.size as i64),
                        e_tag: Some(etag(&entry.etag)),
                        last_modified: Some(timestamp(entry.mtime_ns)),
                        storage_class: Some(ObjectStorageClass::from(entry.storage_class)),
                        owner,
                        ..Default::default()
                    })
                }
                ListItem::Prefix(p) => prefixes.push(CommonPrefix { prefix: Some(encode(&p)) }),
            }
        }
        Ok((contents, prefixes, truncated, last))
    }

    /// The source of a copy, readable by the requester and meeting the copy conditions.
    async fn copy_source(
        &self,
        source: &CopySource,
        who: &Option<Arc<UserInfo>>,
        conditions: CopyConditions<'_>,
    ) -> S3Result<(Arc<BucketInfo>, String, ObjectMeta, Bytes)> {
        let CopySource::Bucket { bucket, key, version_id } = source else {
            return Err(s3_error!(NotImplemented, "access point copy sources are not supported"));
        };
        if version_id.as_deref().is_some_and(|v| v != "null") {
            return Err(s3_error!(NoSuchVersion, "versioning is not enabled"));
        }
        let (bucket, meta, inline) = self.readable_object(bucket, key, who).await?;
        let CopyConditions { if_match, if_none_match, if_modified_since, if_unmodified_since } = conditions;
        check_conditions(&meta, if_match, if_none_match, if_modified_since, if_unmodified_since, true)?;
        Ok((bucket, key.to_string(), meta, inline))
    }

    /// Fails with NoSuchUpload unless the upload exists.
    async fn require_upload(&self, bucket: &BucketInfo, key: &str, upload_id: &str) -> S3Result<()> {
        match self.objects.upload(&self.uploads, bucket, key, upload_id).await.map_err(rados_error)? {
            Some(_) => Ok(()),
            None => Err(s3_error!(NoSuchUpload)),
        }
    }

    fn validate_part_number(number: i32) -> S3Result<u32> {
        if (1..=10_000).contains(&number) {
            Ok(number as u32)
        } else {
            Err(s3_error!(InvalidArgument, "part number must be 1..=10000"))
        }
    }
}

fn acl_grants(owner: &str, acl: CannedAcl) -> Vec<Grant> {
    let canonical = |perm: &'static str| Grant {
        grantee: Some(Grantee {
            id: Some(owner.to_owned()),
            display_name: Some(owner.to_owned()),
            type_: Type::from_static(Type::CANONICAL_USER),
            email_address: None,
            uri: None,
        }),
        permission: Some(Permission::from_static(perm)),
    };
    let group = |uri: &str, perm: &'static str| Grant {
        grantee: Some(Grantee {
            id: None,
            display_name: None,
            type_: Type::from_static(Type::GROUP),
            email_address: None,
            uri: Some(uri.to_owned()),
        }),
        permission: Some(Permission::from_static(perm)),
    };
    const ALL_USERS: &str = "http://acs.amazonaws.com/groups/global/AllUsers";
    const AUTH_USERS: &str = "http://acs.amazonaws.com/groups/global/AuthenticatedUsers";
    let mut grants = vec![canonical(Permission::FULL_CONTROL)];
    match acl {
        CannedAcl::Private => {}
        CannedAcl::PublicRead => grants.push(group(ALL_USERS, Permission::READ)),
        CannedAcl::PublicReadWrite => {
            grants.push(group(ALL_USERS, Permission::READ));
            grants.push(group(ALL_USERS, Permission::WRITE));
        }
        CannedAcl::AuthenticatedRead => grants.push(group(AUTH_USERS, Permission::READ)),
    }
    grants
}

#[async_trait::async_trait]
impl S3 for ShoalS3 {
    async fn list_buckets(&self, req: S3Request<ListBucketsInput>) -> S3Result<S3Response<ListBucketsOutput>> {
        let who = self.requester(&req.credentials).await?.ok_or_else(|| s3_error!(AccessDenied))?;
        let mut buckets = Vec::new();
        for name in self.meta.user_buckets(&who.uid).await.map_err(rados_error)? {
            if let Some(b) = self.meta.bucket(&name).await.map_err(rados_error)? {
                buckets.push(Bucket {
                    name: Some(name),
                    creation_date: Some(timestamp(b.created_ns)),
                    bucket_region: None,
                });
            }
        }
        Ok(S3Response::new(ListBucketsOutput {
            buckets: Some(buckets),
            owner: Some(owner_of(&who.uid, Some(&who.display_name))),
            ..Default::default()
        }))
    }

    async fn create_bucket(&self, req: S3Request<CreateBucketInput>) -> S3Result<S3Response<CreateBucketOutput>> {
        let who = self.requester(&req.credentials).await?.ok_or_else(|| s3_error!(AccessDenied))?;
        let input = req.input;
        let acl = CannedAcl::parse(input.acl.as_ref().map_or("private", |a| a.as_str()))
            .ok_or_else(|| s3_error!(InvalidArgument, "unsupported canned ACL"))?;
        if let Some(existing) = self.meta.bucket(&input.bucket).await.map_err(rados_error)? {
            return Err(if existing.owner == who.uid {
                s3_error!(BucketAlreadyOwnedByYou)
            } else {
                s3_error!(BucketAlreadyExists)
            });
        }
        let info = BucketInfo {
            name: input.bucket.clone(),
            id: new_tag(),
            owner: who.uid.clone(),
            created_ns: now_ns(),
            num_shards: self.config.bucket_index_shards.max(1),
            acl,
            notifications: Vec::new(),
        };
        self.objects.init_index(&info).await.map_err(rados_error)?;
        if let Err(e) = self.meta.create_bucket(&info).await {
            let _ = self.objects.remove_index(&info).await;
            return Err(match e.errno {
                Errno::Exists => s3_error!(BucketAlreadyExists),
                _ => rados_error(e),
            });
        }
        Ok(S3Response::new(CreateBucketOutput { location: Some(format!("/{}", input.bucket)) }))
    }

    async fn head_bucket(&self, req: S3Request<HeadBucketInput>) -> S3Result<S3Response<HeadBucketOutput>> {
        let who = self.requester(&req.credentials).await?;
        self.readable_bucket(&req.input.bucket, &who).await?;
        Ok(S3Response::new(HeadBucketOutput::default()))
    }

    async fn delete_bucket(&self, req: S3Request<DeleteBucketInput>) -> S3Result<S3Response<DeleteBucketOutput>> {
        let who = self.requester(&req.credentials).await?;
        let bucket = self.owned_bucket(&req.input.bucket, &who).await?;
        let stats = self.objects.bucket_stats(&bucket).await.map_err(rados_error)?;
        if stats.entries > 0 {
            return Err(s3_error!(BucketNotEmpty));
        }
        self.remove_bucket(&bucket).await.map_err(rados_error)?;
        Ok(S3Response::new(DeleteBucketOutput::default()))
    }

    async fn get_bucket_location(
        &self,
        req: S3Request<GetBucketLocationInput>,
    ) -> S3Result<S3Response<GetBucketLocationOutput>> {
        let who = self.requester(&req.credentials).await?;
        self.readable_bucket(&req.input.bucket, &who).await?;
        Ok(S3Response::new(GetBucketLocationOutput::default()))
    }

    async fn get_bucket_versioning(
        &self,
        req: S3Request<GetBucketVersioningInput>,
    ) -> S3Result<S3Response<GetBucketVersioningOutput>> {
        let who = self.requester(&req.credentials).await?;
        self.readable_bucket(&req.input.bucket, &who).await?;
        Ok(S3Response::new(GetBucketVersioningOutput::default()))
    }

    async fn get_bucket_acl(&self, req: S3Request<GetBucketAclInput>) -> S3Result<S3Response<GetBucketAclOutput>> {
        let who = self.requester(&req.credentials).await?;
        let bucket = self.owned_bucket(&req.input.bucket, &who).await?;
        Ok(S3Response::new(GetBucketAclOutput {
            grants: Some(acl_grants(&bucket.owner, bucket.acl)),
            owner: Some(owner_of(&bucket.owner, None)),
        }))
    }

    async fn put_bucket_acl(&self, req: S3Request<PutBucketAclInput>) -> S3Result<S3Response<PutBucketAclOutput>> {
        let who = self.requester(&req.credentials).await?;
        let bucket = self.owned_bucket(&req.input.bucket, &who).await?;
        let Some(acl) = req.input.acl else {
            return Err(s3_error!(NotImplemented, "only canned ACLs (x-amz-acl) are supported"));
        };
        let acl = CannedAcl::parse(acl.as_str()).ok_or_else(|| s3_error!(InvalidArgument, "unsupported canned ACL"))?;
        let updated = BucketInfo { acl, ..(*bucket).clone() };
        self.meta.update_bucket(&updated).await.map_err(rados_error)?;
        Ok(S3Response::new(PutBucketAclOutput::default()))
    }

    async fn list_objects(&self, req: S3Request<ListObjectsInput>) -> S3Result<S3Response<ListObjectsOutput>> {
        let who = self.requester(&req.credentials).await?;
        let input = req.input;
        let bucket = self.readable_bucket(&input.bucket, &who).await?;
        let url = input.encoding_type.as_ref().map(|e| e.as_str() == EncodingType::URL);
        if input.encoding_type.is_some() && url != Some(true) {
            return Err(s3_error!(InvalidArgument, "encoding-type must be 'url'"));
        }
        let url = url.unwrap_or(false);
        let (prefix, delimiter) =
            (input.prefix.clone().unwrap_or_default(), input.delimiter.clone().unwrap_or_default());
        let max_keys = input.max_keys.unwrap_or(1000);
        let marker = input.marker.clone().unwrap_or_default();
        let (contents, prefixes, truncated, last) = self
            .list_page(
                &bucket,
                ListPage { prefix: &prefix, delimiter: &delimiter, after: &marker, max_keys, url, with_owner: true },
            )
            .await?;
        let encode = |s: Option<String>| s.map(|s| if url { url_encode(&s) } else { s });
        Ok(S3Response::new(ListObjectsOutput {
            name: Some(input.bucket),
            prefix: encode(input.prefix),
            delimiter: encode(input.delimiter),
            marker: encode(input.marker).or(Some(String::new())),
            max_keys: Some(max_keys),
            is_truncated: Some(truncated),
            next_marker: encode(last.filter(|_| truncated)),
            contents: Some(contents),
            common_prefixes: Some(prefixes),
            encoding_type: input.encoding_type,
            ..Default::default()
        }))
    }

    async fn list_objects_v2(&self, req: S3Request<ListObjectsV2Input>) -> S3Result<S3Response<ListObjectsV2Output>> {
        use base64::Engine;
        let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
        let who = self.requester(&req.credentials).await?;
        let input = req.input;
        let bucket = self.readable_bucket(&input.bucket, &who).await?;
        let url = input.encoding_type.as_ref().map(|e| e.as_str() == EncodingType::URL);
        if input.encoding_type.is_some() && url != Some(true) {
            return Err(s3_error!(InvalidArgument, "encoding-type must be 'url'"));
        }
        let url = url.unwrap_or(false);
        let after = match &input.continuation_token {
            Some(token) => b64
                .decode(token)
                .ok()
                .and_then(|b| String::from_utf8(b).ok())
                .ok_or_else(|| s3_error!(InvalidArgument, "the continuation token is not valid"))?,
            None => input.start_after.clone().unwrap_or_default(),
        };
        let (prefix, delimiter) =
            (input.prefix.clone().unwrap_or_default(), input.delimiter.clone().unwrap_or_default());
        let max_keys = input.max_keys.unwrap_or(1000);
        let (contents, prefixes, truncated, last) = self
            .list_page(
                &bucket,
                ListPage {
                    prefix: &prefix,
                    delimiter: &delimiter,
                    after: &after,
                    max_keys,
                    url,
                    with_owner: input.fetch_owner == Some(true),
                },
            )
            .await?;
        let encode = |s: Option<String>| s.map(|s| if url { url_encode(&s) } else { s });
        Ok(S3Response::new(ListObjectsV2Output {
            name: Some(input.bucket),
            prefix: encode(input.prefix),
            delimiter: encode(input.delimiter),
            max_keys: Some(max_keys),
            key_count: Some((contents.len() + prefixes.len()) as i32),
            continuation_token: input.continuation_token,
            next_continuation_token: last.filter(|_| truncated).map(|l| b64.encode(l)),
            start_after: encode(input.start_after),
            is_truncated: Some(truncated),
            contents: Some(contents),
            common_prefixes: Some(prefixes),
            encoding_type: input.encoding_type,
            ..Default::default()
        }))
    }

    async fn put_object(&self, req: S3Request<PutObjectInput>) -> S3Result<S3Response<PutObjectOutput>> {
        let who = self.requester(&req.credentials).await?;
        let input = req.input;
        let (bucket, owner) = self.writable_bucket(&input.bucket, &who).await?;
        let meta = new_object!(input).into_meta(&owner)?;
        if input.content_length.is_some_and(|l| l as u64 > self.config.max_put_size) {
            return Err(s3_error!(EntityTooLarge));
        }
        let body = input.body.map(|b| b.boxed()).unwrap_or_else(|| futures::stream::empty().boxed());
        let tag = new_tag();
        let op = Operation {
            bucket: &bucket,
            key: &input.key,
            event: "ObjectCreated:Put",
            tag: &tag,
            metadata: &meta.user_meta,
            tags: &meta.tags,
        };
        let md5 = input.content_md5.as_deref();
        let work = async |events: &Pending| {
            self.store_object(&bucket, &input.key, meta.clone(), body, md5, &tag, events).await
        };
        let meta = self.with_events(&op, &origin_of(&req.extensions), &who, work, Done::of).await?;
        if input.content_length.is_some_and(|l| l as u64 != meta.size) {
            tracing::warn!(key = %input.key, "body length differs from Content-Length");
        }
        Ok(S3Response::new(PutObjectOutput { e_tag: Some(etag(&meta.etag)), ..Default::default() }))
    }

    async fn get_object(&self, req: S3Request<GetObjectInput>) -> S3Result<S3Response<GetObjectOutput>> {
        let who = self.requester(&req.credentials).await?;
        let input = req.input;
        if input.version_id.as_deref().is_some_and(|v| v != "null") {
            return Err(s3_error!(NoSuchVersion, "versioning is not enabled"));
        }
        let (_, meta, inline) = self.readable_object(&input.bucket, &input.key, &who).await?;
        check_conditions(
            &meta,
            input.if_match.as_ref(),
            input.if_none_match.as_ref(),
            input.if_modified_since.as_ref(),
            input.if_unmodified_since.as_ref(),
            false,
        )?;
        let range = match &input.range {
            Some(r) => Some(r.check(meta.size)?),
            None => None,
        };
        let span = range.clone().unwrap_or(0..meta.size);
        let stream = self.objects.read_range(&meta, inline, span.clone());
        let mut out = GetObjectOutput {
            body: Some(StreamingBlob::wrap(crate::objects::detach(stream))),
            content_length: Some((span.end - span.start) as i64),
            content_range: range.map(|r| format!("bytes {}-{}/{}", r.start, r.end.saturating_sub(1), meta.size)),
            tag_count: (!meta.tags.is_empty()).then_some(meta.tags.len() as i32),
            ..Default::default()
        };
        describe_object!(out, &meta);
        Ok(S3Response::new(out))
    }

    async fn head_object(&self, req: S3Request<HeadObjectInput>) -> S3Result<S3Response<HeadObjectOutput>> {
        let who = self.requester(&req.credentials).await?;
        let input = req.input;
        let (_, meta, _) = self.readable_object(&input.bucket, &input.key, &who).await?;
        check_conditions(
            &meta,
            input.if_match.as_ref(),
            input.if_none_match.as_ref(),
            input.if_modified_since.as_ref(),
            input.if_unmodified_since.as_ref(),
            false,
        )?;
        let mut out = HeadObjectOutput { content_length: Some(meta.size as i64), ..Default::default() };
        describe_object!(out, &meta);
        Ok(S3Response::new(out))
    }

    async fn delete_object(&self, req: S3Request<DeleteObjectInput>) -> S3Result<S3Response<DeleteObjectOutput>> {
        let who = self.requester(&req.credentials).await?;
        let (bucket, _) = self.writable_bucket(&req.input.bucket, &who).await?;
        self.delete_key(&bucket, &req.input.key, &origin_of(&req.extensions), &who).await?;
        Ok(S3Response::new(DeleteObjectOutput::default()))
    }

    async fn delete_objects(&self, req: S3Request<DeleteObjectsInput>) -> S3Result<S3Response<DeleteObjectsOutput>> {
        let who = self.requester(&req.credentials).await?;
        let input = req.input;
        let (bucket, _) = self.writable_bucket(&input.bucket, &who).await?;
        if input.delete.objects.len() > 1000 {
            return Err(s3_error!(MalformedXML, "at most 1000 keys per request"));
        }
        let quiet = input.delete.quiet == Some(true);
        let (mut deleted, mut errors) = (Vec::new(), Vec::new());
        let origin = origin_of(&req.extensions);
        let results = futures::stream::iter(input.delete.objects)
            .map(|object| {
                let (bucket, origin, who) = (bucket.clone(), &origin, &who);
                async move {
                    let result = self.delete_key(&bucket, &object.key, origin, who).await;
                    (object.key, result)
                }
            })
            .buffered(16)
            .collect::<Vec<_>>()
            .await;
        for (key, result) in results {
            match result {
                Ok(_) if quiet => {}
                Ok(_) => deleted.push(DeletedObject { key: Some(key), ..Default::default() }),
                Err(e) => errors.push(Error {
                    key: Some(key),
                    code: Some(e.code().as_str().to_owned()),
                    message: e.message().map(str::to_owned),
                    version_id: None,
                }),
            }
        }
        Ok(S3Response::new(DeleteObjectsOutput { deleted: Some(deleted), errors: Some(errors), ..Default::default() }))
    }

    async fn copy_object(&self, req: S3Request<CopyObjectInput>) -> S3Result<S3Response<CopyObjectOutput>> {
        let who = self.requester(&req.credentials).await?;
        let input = req.input;
        let (src_bucket, src_key, src_meta, inline) =
            self.copy_source(&input.copy_source, &who, copy_conditions!(input)).await?;
        let (bucket, owner) = self.writable_bucket(&input.bucket, &who).await?;
        let replace = match input.metadata_directive.as_ref().map(|d| d.as_str()) {
            None | Some(MetadataDirective::COPY) => false,
            Some(MetadataDirective::REPLACE) => true,
            Some(other) => return Err(s3_error!(InvalidArgument, "unknown metadata directive '{other}'")),
        };
        if !replace && src_bucket.id == bucket.id && src_key == input.key {
            return Err(s3_error!(
                InvalidRequest,
                "This copy request is illegal because it is trying to copy an object to itself without changing the object's metadata."
            ));
        }
        let meta = if replace {
            new_object!(input).into_meta(&owner)?
        } else {
            ObjectMeta {
                owner: owner.clone(),
                acl: parse_acl(input.acl.as_ref().map(|a| a.as_str()))?,
                ..src_meta.clone()
            }
        };
        let data = self.objects.read_range(&src_meta, inline, 0..src_meta.size);
        let tag = new_tag();
        let op = Operation {
            bucket: &bucket,
            key: &input.key,
            event: "ObjectCreated:Copy",
            tag: &tag,
            metadata: &meta.user_meta,
            tags: &meta.tags,
        };
        let work = async |events: &Pending| {
            self.store_object(&bucket, &input.key, meta.clone(), Box::pin(data), None, &tag, events).await
        };
        let meta = self.with_events(&op, &origin_of(&req.extensions), &who, work, Done::of).await?;
        Ok(S3Response::new(CopyObjectOutput {
            copy_object_result: Some(CopyObjectResult {
                e_tag: Some(etag(&meta.etag)),
                last_modified: Some(timestamp(meta.mtime_ns)),
                ..Default::default()
            }),
            ..Default::default()
        }))
    }

    async fn get_object_acl(&self, req: S3Request<GetObjectAclInput>) -> S3Result<S3Response<GetObjectAclOutput>> {
        let who = self.requester(&req.credentials).await?;
        let (_, meta, _) = self.readable_object(&req.input.bucket, &req.input.key, &who).await?;
        Ok(S3Response::new(GetObjectAclOutput {
            grants: Some(acl_grants(&meta.owner, meta.acl)),
            owner: Some(owner_of(&meta.owner, None)),
            ..Default::default()
        }))
    }

    async fn put_object_acl(&self, req: S3Request<PutObjectAclInput>) -> S3Result<S3Response<PutObjectAclOutput>> {
        let who = self.requester(&req.credentials).await?;
        let input = req.input;
        let Some(acl) = input.acl else {
            return Err(s3_error!(NotImplemented, "only canned ACLs (x-amz-acl) are supported"));
        };
        let acl = parse_acl(Some(acl.as_str()))?;
        self.change_object_meta(&input.bucket, &input.key, &who, |m| m.acl = acl).await?;
        Ok(S3Response::new(PutObjectAclOutput::default()))
    }

    async fn get_object_tagging(
        &self,
        req: S3Request<GetObjectTaggingInput>,
    ) -> S3Result<S3Response<GetObjectTaggingOutput>> {
        let who = self.requester(&req.credentials).await?;
        let (_, meta, _) = self.readable_object(&req.input.bucket, &req.input.key, &who).await?;
        let tag_set = meta.tags.into_iter().map(|(k, v)| Tag { key: Some(k), value: Some(v) }).collect();
        Ok(S3Response::new(GetObjectTaggingOutput { tag_set, version_id: None }))
    }

    async fn put_object_tagging(
        &self,
        req: S3Request<PutObjectTaggingInput>,
    ) -> S3Result<S3Response<PutObjectTaggingOutput>> {
        let who = self.requester(&req.credentials).await?;
        let input = req.input;
        let tags: Vec<(String, String)> = input
            .tagging
            .tag_set
            .into_iter()
            .map(|t| (t.key.unwrap_or_default(), t.value.unwrap_or_default()))
            .collect();
        check_tags(&tags)?;
        self.change_object_meta(&input.bucket, &input.key, &who, |m| m.tags = tags).await?;
        Ok(S3Response::new(PutObjectTaggingOutput::default()))
    }

    async fn delete_object_tagging(
        &self,
        req: S3Request<DeleteObjectTaggingInput>,
    ) -> S3Result<S3Response<DeleteObjectTaggingOutput>> {
        let who = self.requester(&req.credentials).await?;
        self.change_object_meta(&req.input.bucket, &req.input.key, &who, |m| m.tags.clear()).await?;
        Ok(S3Response::new(DeleteObjectTaggingOutput::default()))
    }

    async fn create_multipart_upload(
        &self,
        req: S3Request<CreateMultipartUploadInput>,
    ) -> S3Result<S3Response<CreateMultipartUploadOutput>> {
        let who = self.requester(&req.credentials).await?;
        let input = req.input;
        let (bucket, owner) = self.writable_bucket(&input.bucket, &who).await?;
        let meta = new_object!(input).into_meta(&owner)?;
        let upload_id =
            self.objects.create_upload(&self.uploads, &bucket, &input.key, meta).await.map_err(rados_error)?;
        Ok(S3Response::new(CreateMultipartUploadOutput {
            bucket: Some(input.bucket),
            key: Some(input.key),
            upload_id: Some(upload_id),
            ..Default::default()
        }))
    }

    async fn upload_part(&self, req: S3Request<UploadPartInput>) -> S3Result<S3Response<UploadPartOutput>> {
        let who = self.requester(&req.credentials).await?;
        let input = req.input;
        let (bucket, _) = self.writable_bucket(&input.bucket, &who).await?;
        let number = Self::validate_part_number(input.part_number)?;
        self.require_upload(&bucket, &input.key, &input.upload_id).await?;
        let body = input.body.map(|b| b.boxed()).unwrap_or_else(|| futures::stream::empty().boxed());
        let written = self
            .objects
            .upload_part(&self.uploads, &bucket, &input.key, &input.upload_id, number, body)
            .await
            .map_err(stream_error)?;
        if let Some(expected) = &input.content_md5 {
            use base64::Engine;
            if base64::engine::general_purpose::STANDARD.decode(expected).ok().as_deref() != Some(&written.md5[..]) {
                return Err(s3_error!(BadDigest));
            }
        }
        Ok(S3Response::new(UploadPartOutput { e_tag: Some(etag(&hex(&written.md5))), ..Default::default() }))
    }

    async fn upload_part_copy(
        &self,
        req: S3Request<UploadPartCopyInput>,
    ) -> S3Result<S3Response<UploadPartCopyOutput>> {
        let who = self.requester(&req.credentials).await?;
        let input = req.input;
        let (_, _, src_meta, inline) = self.copy_source(&input.copy_source, &who, copy_conditions!(input)).await?;
        let (bucket, _) = self.writable_bucket(&input.bucket, &who).await?;
        let number = Self::validate_part_number(input.part_number)?;
        self.require_upload(&bucket, &input.key, &input.upload_id).await?;
        let span = match &input.copy_source_range {
            None => 0..src_meta.size,
            Some(r) => copy_range(r, src_meta.size)
                .ok_or_else(|| s3_error!(InvalidRange, "bad x-amz-copy-source-range '{r}'"))?,
        };
        let data = self.objects.read_range(&src_meta, inline, span);
        let written = self
            .objects
            .upload_part(&self.uploads, &bucket, &input.key, &input.upload_id, number, Box::pin(data))
            .await
            .map_err(stream_error)?;
        Ok(S3Response::new(UploadPartCopyOutput {
            copy_part_result: Some(CopyPartResult {
                e_tag: Some(etag(&hex(&written.md5))),
                last_modified: Some(timestamp(now_ns())),
                ..Default::default()
            }),
            ..Default::default()
        }))
    }

    async fn list_parts(&self, req: S3Request<ListPartsInput>) -> S3Result<S3Response<ListPartsOutput>> {
        let who = self.requester(&req.credentials).await?;
        let input = req.input;
        let (bucket, _) = self.writable_bucket(&input.bucket, &who).await?;
        let Some(upload) =
            self.objects.upload(&self.uploads, &bucket, &input.key, &input.upload_id).await.map_err(rados_error)?
        else {
            return Err(s3_error!(NoSuchUpload));
        };
        let parts =
            self.objects.parts(&self.uploads, &bucket, &input.key, &input.upload_id).await.map_err(rados_error)?;
        let marker = input.part_number_marker.unwrap_or(0).max(0) as u32;
        let max = input.max_parts.unwrap_or(1000).clamp(0, 1000) as usize;
        let after: Vec<_> = parts.values().filter(|p| p.number > marker).collect();
        let truncated = after.len() > max;
        let page: Vec<Part> = after
            .iter()
            .take(max)
            .map(|p| Part {
                part_number: Some(p.number as i32),
                size: Some(p.size as i64),
                e_tag: Some(etag(&p.etag)),
                last_modified: Some(timestamp(p.mtime_ns)),
                ..Default::default()
            })
            .collect();
        let next = page.last().and_then(|p| p.part_number).filter(|_| truncated);
        Ok(S3Response::new(ListPartsOutput {
            bucket: Some(input.bucket),
            key: Some(input.key),
            upload_id: Some(input.upload_id),
            owner: Some(owner_of(&upload.meta.owner, None)),
            initiator: Some(Initiator { id: Some(upload.meta.owner.clone()), display_name: Some(upload.meta.owner) }),
            max_parts: Some(max as i32),
            part_number_marker: input.part_number_marker,
            next_part_number_marker: next,
            is_truncated: Some(truncated),
            parts: Some(page),
            ..Default::default()
        }))
    }

    async fn list_multipart_uploads(
        &self,
        req: S3Request<ListMultipartUploadsInput>,
    ) -> S3Result<S3Response<ListMultipartUploadsOutput>> {
        let who = self.requester(&req.credentials).await?;
        let input = req.input;
        let (bucket, _) = self.writable_bucket(&input.bucket, &who).await?;
        let max = input.max_uploads.unwrap_or(1000).clamp(0, 1000) as usize;
        let after = match (&input.key_marker, &input.upload_id_marker) {
            (Some(k), Some(u)) => layout::upload_key(k, u) + "\u{1}",
            (Some(k), None) => format!("{k}\u{1}"),
            _ => String::new(),
        };
        let prefix = input.prefix.clone().unwrap_or_default();
        let (page, truncated) =
            self.objects.list_uploads(&self.uploads, &bucket, &after, &prefix, max).await.map_err(rados_error)?;
        let uploads: Vec<MultipartUpload> = page
            .iter()
            .map(|u| MultipartUpload {
                key: Some(u.key.clone()),
                upload_id: Some(u.upload_id.clone()),
                initiated: Some(timestamp(u.initiated_ns)),
                owner: Some(owner_of(&u.meta.owner, None)),
                initiator: Some(Initiator { id: Some(u.meta.owner.clone()), display_name: Some(u.meta.owner.clone()) }),
                storage_class: Some(StorageClass::from_static(StorageClass::STANDARD)),
                ..Default::default()
            })
            .collect();
        let last = uploads.last().filter(|_| truncated);
        Ok(S3Response::new(ListMultipartUploadsOutput {
            bucket: Some(input.bucket),
            prefix: input.prefix,
            key_marker: input.key_marker,
            upload_id_marker: input.upload_id_marker,
            next_key_marker: last.and_then(|u| u.key.clone()),
            next_upload_id_marker: last.and_then(|u| u.upload_id.clone()),
            max_uploads: Some(max as i32),
            is_truncated: Some(truncated),
            uploads: Some(uploads),
            ..Default::default()
        }))
    }

    async fn complete_multipart_upload(
        &self,
        req: S3Request<CompleteMultipartUploadInput>,
    ) -> S3Result<S3Response<CompleteMultipartUploadOutput>> {
        let who = self.requester(&req.credentials).await?;
        let input = req.input;
        let (bucket, _) = self.writable_bucket(&input.bucket, &who).await?;
        let listed: Vec<(u32, String)> = input
            .multipart_upload
            .and_then(|m| m.parts)
            .ok_or_else(|| s3_error!(MalformedXML, "the request lists no parts"))?
            .into_iter()
            .map(|p| {
                let number = p.part_number.ok_or_else(|| s3_error!(MalformedXML, "a part has no PartNumber"))?;
                let tag = p.e_tag.ok_or_else(|| s3_error!(MalformedXML, "a part has no ETag"))?;
                Ok((Self::validate_part_number(number)?, tag.into_value()))
            })
            .collect::<S3Result<_>>()?;
        // The completed object's metadata comes from the upload record: read it only if someone listens.
        let initial = match bucket.notifications.is_empty() {
            true => None,
            false => {
                self.objects.upload(&self.uploads, &bucket, &input.key, &input.upload_id).await.map_err(rados_error)?
            }
        };
        let (metadata, tags) = initial.map(|u| (u.meta.user_meta, u.meta.tags)).unwrap_or_default();
        let tag = new_tag();
        let op = Operation {
            bucket: &bucket,
            key: &input.key,
            event: "ObjectCreated:CompleteMultipartUpload",
            tag: &tag,
            metadata: &metadata,
            tags: &tags,
        };
        let work = async |events: &Pending| {
            let completed = self.objects.complete_upload(
                &self.uploads,
                &bucket,
                &input.key,
                &input.upload_id,
                &listed,
                &tag,
                events,
            );
            completed.await.map_err(|e| match e {
                CompleteError::NoSuchUpload => s3_error!(NoSuchUpload),
                CompleteError::InvalidPart(n) => s3_error!(InvalidPart, "part {n} is missing or its ETag differs"),
                CompleteError::InvalidPartOrder => s3_error!(InvalidPartOrder),
                CompleteError::EntityTooSmall(n) => s3_error!(EntityTooSmall, "part {n} is smaller than 5 MiB"),
                CompleteError::Rados(e) => rados_error(e),
            })
        };
        let meta = self.with_events(&op, &origin_of(&req.extensions), &who, work, Done::of).await?;
        Ok(S3Response::new(CompleteMultipartUploadOutput {
            bucket: Some(input.bucket.clone()),
            key: Some(input.key.clone()),
            e_tag: Some(etag(&meta.etag)),
            location: Some(format!("/{}/{}", input.bucket, input.key)),
            ..Default::default()
        }))
    }

    async fn abort_multipart_upload(
        &self,
        req: S3Request<AbortMultipartUploadInput>,
    ) -> S3Result<S3Response<AbortMultipartUploadOutput>> {
        let who = self.requester(&req.credentials).await?;
        let input = req.input;
        let (bucket, _) = self.writable_bucket(&input.bucket, &who).await?;
        let found = self
            .objects
            .abort_upload(&self.uploads, &bucket, &input.key, &input.upload_id)
            .await
            .map_err(rados_error)?;
        if !found {
            return Err(s3_error!(NoSuchUpload));
        }
        Ok(S3Response::new(AbortMultipartUploadOutput::default()))
    }
}

impl ShoalS3 {
    /// Removes an (empty) bucket: aborts its uploads, waits for its logged events to reach
    /// their queues (EAGAIN if they do not within [`LOG_DRAIN_WAIT`]), then removes its
    /// record, index shards and upload object.
    pub async fn remove_bucket(&self, bucket: &BucketInfo) -> shoal_types::Result<()> {
        let (uploads, _) = self.objects.list_uploads(&self.uploads, bucket, "", "", usize::MAX).await?;
        for upload in uploads {
            self.objects.abort_upload(&self.uploads, bucket, &upload.key, &upload.upload_id).await?;
        }
        let logs = Objects::index_shards(bucket);
        let publisher = &self.notifier.publisher;
        let deadline = std::time::Instant::now() + LOG_DRAIN_WAIT;
        for log in &logs {
            while !publisher.logs.is_empty(log).await? {
                if std::time::Instant::now() > deadline {
                    return Err(shoal_types::err::again(format!(
                        "bucket {} still has notification events on their way to their queues; retry",
                        bucket.name
                    )));
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
        self.meta.remove_bucket(bucket).await?;
        self.objects.remove_index(bucket).await?;
        publisher.logs.unregister(&logs).await?;
        crate::meta::remove_ignoring_missing(&self.uploads, &bucket.id).await
    }

    /// Changes an object's metadata in place (ACL, tags); the object's owner or the
    /// bucket's owner only.
    async fn change_object_meta(
        &self,
        bucket: &str,
        key: &str,
        who: &Option<Arc<UserInfo>>,
        change: impl FnOnce(&mut ObjectMeta),
    ) -> S3Result<()> {
        let (bucket, mut meta, _) = self.readable_object(bucket, key, who).await?;
        let uid = who.as_ref().map(|u| u.uid.as_str());
        if uid != Some(bucket.owner.as_str()) && uid != Some(meta.owner.as_str()) {
            return Err(s3_error!(AccessDenied));
        }
        change(&mut meta);
        match self.objects.update_meta(&layout::head_object(&bucket.id, key), &meta).await {
            Ok(()) => Ok(()),
            Err(e) if e.errno == Errno::Canceled => {
                Err(s3_error!(OperationAborted, "the object changed meanwhile; try again"))
            }
            Err(e) => Err(rados_error(e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tagging_headers_parse_and_are_checked() {
        assert_eq!(parse_tagging("a=1&b=x%20y").unwrap(), vec![("a".into(), "1".into()), ("b".into(), "x y".into())]);
        assert!(parse_tagging("a=1&a=2").is_err(), "duplicate keys");
        assert!(parse_tagging("=v").is_err(), "empty key");
        let many: Vec<String> = (0..11).map(|i| format!("k{i}=v")).collect();
        assert!(parse_tagging(&many.join("&")).is_err(), "more than 10 tags");
    }

    #[test]
    fn copy_ranges_parse_within_the_source() {
        assert_eq!(copy_range("bytes=0-9", 10), Some(0..10));
        assert_eq!(copy_range("bytes=5-5", 10), Some(5..6));
        for bad in ["bytes=0-10", "bytes=5-4", "0-9", "bytes=-9", "bytes=a-b", "bytes=0-18446744073709551615"] {
            assert_eq!(copy_range(bad, 10), None, "{bad}");
        }
    }

    #[test]
    fn listing_keys_are_url_encoded() {
        assert_eq!(url_encode("a b/c+d&é"), "a%20b/c%2Bd%26%C3%A9");
    }

    proptest::proptest! {
        /// Header parsers fed arbitrary text answer Ok or Err, never panic.
        #[test]
        fn header_parsers_never_panic(text in ".{0,64}", size in 0u64..1000) {
            let _ = parse_tagging(&text);
            let _ = copy_range(&text, size);
            let _ = parse_acl(Some(&text));
            let _ = url_encode(&text);
        }
    }
}
