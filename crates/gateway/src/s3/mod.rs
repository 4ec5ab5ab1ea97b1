//! The S3 operations: s3s parses, authenticates and routes each request; these methods
//! check permissions and act on the object layer through [`Meta`] and [`Objects`].
//! Handler families with logic of their own live in submodules.

mod access;
mod encryption;
mod lifecycle;
mod lock;
mod versions;

use crate::access::acl::Acl;
use crate::access::{Action, Ownership};
use crate::checksum;
use crate::config::GatewayConfig;
use crate::cors::CorsRule;
use crate::crypt::{Protection, Sealed, Sealer};
use crate::layout;
use crate::meta::{BucketInfo, Meta, UserInfo, Versioning};
use crate::multipart::{CompleteError, UploadInfo};
use crate::notifications::{Done, Operation, Origin, Pending};
use crate::objects::{ObjectMeta, Objects, StreamError, WriteTerms, new_tag, now_ns, order_of};
use crate::sigv4::hex;
use access::{Caller, requested_acl};
use bytes::Bytes;
use encryption::{customer_headers, requested_encryption, show_encryption};
use futures::StreamExt;
use lock::{requested_lock, shown_lock};
use s3s::dto::*;
use s3s::{S3, S3Error, S3Request, S3Response, S3Result, s3_error};
use shoal_client::IoCtx;
use shoal_objclass::bucket_index::{Condition, ListItem, version_id_of};
use shoal_types::{Errno, RadosError};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, UNIX_EPOCH};
pub use versions::Remover;
use versions::{Deleted, Found, shown_version};

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
    /// Buckets with lifecycle configurations.
    pub lifecycle: crate::lifecycle::Registry,
    /// Master keys of SSE-S3 and SSE-KMS (none without a key file).
    pub keyring: Option<crate::crypt::Keyring>,
    /// Options.
    pub config: GatewayConfig,
}

/// Turns an object-layer failure into the S3 error a client should see.
pub fn rados_error(e: RadosError) -> S3Error {
    match e.errno {
        Errno::TimedOut | Errno::NotConnected | Errno::ConnectionRefused | Errno::Again => {
            s3_error!(ServiceUnavailable, "{e}")
        }
        Errno::FileTooBig | Errno::TooBig => s3_error!(EntityTooLarge, "{e}"),
        Errno::AccessDenied => s3_error!(AccessDenied, "{}", e.message),
        _ => {
            tracing::error!(error = %e, "object layer error");
            s3_error!(InternalError, "{e}")
        }
    }
}

impl From<StreamError> for S3Error {
    fn from(e: StreamError) -> S3Error {
        stream_error(e)
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

fn owner_of(uid: &str, display_name: Option<&str>) -> Owner {
    Owner { id: Some(uid.to_owned()), display_name: Some(display_name.unwrap_or(uid).to_owned()) }
}

/// The initiator of an upload: its owner.
fn initiator(owner: &Owner) -> Initiator {
    Initiator { id: owner.id.clone(), display_name: owner.display_name.clone() }
}

/// Owners as listings show them, each user record read once per listing.
struct Owners<'a> {
    s3: &'a ShoalS3,
    known: std::collections::HashMap<String, Owner>,
}

impl Owners<'_> {
    /// The owner `uid` with its display name (the uid if the user is gone).
    async fn get(&mut self, uid: &str) -> Owner {
        if let Some(owner) = self.known.get(uid) {
            return owner.clone();
        }
        let user = self.s3.meta.user(uid).await.ok().flatten();
        let owner = owner_of(uid, user.as_ref().map(|u| u.display_name.as_str()));
        self.known.insert(uid.to_owned(), owner.clone());
        owner
    }
}

/// Parses `k1=v1&k2=v2` (the `x-amz-tagging` header).
fn parse_tagging(header: &str) -> S3Result<Vec<(String, String)>> {
    let tags: Vec<(String, String)> =
        form_urlencoded::parse(header.as_bytes()).map(|(k, v)| (k.into_owned(), v.into_owned())).collect();
    check_tags(&tags, 10)?;
    Ok(tags)
}

/// Checks a tag set of at most `most` tags (10 for objects, 50 for buckets).
fn check_tags(tags: &[(String, String)], most: usize) -> S3Result<()> {
    if tags.len() > most {
        return Err(s3_error!(InvalidTag, "at most {most} tags are allowed"));
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

/// Whether a listing's keys are URL-encoded (`encoding-type=url`, the only other value).
fn url_encoding(encoding: Option<&EncodingType>) -> S3Result<bool> {
    match encoding.map(|e| e.as_str()) {
        None => Ok(false),
        Some(EncodingType::URL) => Ok(true),
        Some(_) => Err(s3_error!(InvalidArgument, "encoding-type must be 'url'")),
    }
}

/// Tags as (key, value) pairs.
fn tag_pairs(set: TagSet) -> Vec<(String, String)> {
    set.into_iter().map(|t| (t.key.unwrap_or_default(), t.value.unwrap_or_default())).collect()
}

/// Tags as S3 lists them.
fn tag_set(tags: &[(String, String)]) -> TagSet {
    tags.iter().map(|(k, v)| Tag { key: Some(k.clone()), value: Some(v.clone()) }).collect()
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

/// What a write's data must match: its Content-MD5 and the additional checksum asked for
/// (a value in a header, or in the aws-chunked trailer).
#[derive(Default)]
struct Integrity {
    content_md5: Option<String>,
    checksum: Option<checksum::Requested>,
    trailers: Option<s3s::TrailingHeaders>,
}

impl Integrity {
    /// The integrity terms of a request with `content_md5`.
    fn of<I>(req: &mut S3Request<I>, content_md5: Option<String>) -> S3Result<Integrity> {
        let checksum = checksum::requested(&req.headers).map_err(|e| s3_error!(InvalidRequest, "{e}"))?;
        Ok(Integrity { content_md5, checksum, trailers: req.trailing_headers.take() })
    }

    /// `body`, feeding the checksum asked for (returned) as it streams.
    fn watch<S, E>(&self, body: S) -> (impl futures::Stream<Item = Result<Bytes, E>> + Unpin, Option<checksum::Running>)
    where
        S: futures::Stream<Item = Result<Bytes, E>> + Unpin,
    {
        let running = self.checksum.as_ref().map(|c| checksum::Running::new(c.algorithm));
        let feed = running.clone();
        let body = body.map(move |item| {
            if let (Some(running), Ok(bytes)) = (&feed, &item) {
                running.update(bytes);
            }
            item
        });
        (body, running)
    }

    /// Checks the data's MD5 and checksum against what the request sent; the checksum to
    /// store.
    fn verify(&self, md5: &[u8], running: Option<&checksum::Running>) -> S3Result<Option<checksum::Stored>> {
        if let Some(expected) = &self.content_md5 {
            use base64::Engine;
            let digest = base64::engine::general_purpose::STANDARD.decode(expected).ok().filter(|d| d.len() == 16);
            match digest {
                None => return Err(s3_error!(InvalidDigest, "Content-MD5 is not a base64 MD5")),
                Some(d) if d != md5 => return Err(s3_error!(BadDigest)),
                Some(_) => {}
            }
        }
        let (Some(requested), Some(running)) = (&self.checksum, running) else { return Ok(None) };
        let algorithm = requested.algorithm;
        let computed = running.finish();
        let from_trailer = || {
            let trailers = self.trailers.as_ref()?;
            trailers.read(|h| h.get(algorithm.header()).and_then(|v| v.to_str().ok()).map(str::to_owned)).flatten()
        };
        match requested.value.clone().or_else(from_trailer) {
            Some(sent) if sent.trim() != computed => Err(s3_error!(
                BadDigest,
                "The {} you specified did not match the calculated checksum.",
                algorithm.name()
            )),
            _ => Ok(Some(checksum::Stored { algorithm, value: computed, parts: None })),
        }
    }
}

/// Sets the `checksum_*` fields of an output from a stored checksum, when asked for with
/// `x-amz-checksum-mode: ENABLED`.
macro_rules! show_checksum {
    ($out:expr, $stored:expr, $mode:expr) => {{
        show_checksum!($out, $stored, $mode, part);
        if let Some(stored) =
            $stored.filter(|_| $mode.as_ref().is_some_and(|m: &ChecksumMode| m.as_str() == ChecksumMode::ENABLED))
        {
            let stored: &checksum::Stored = stored;
            let kind = if stored.parts.is_some() { ChecksumType::COMPOSITE } else { ChecksumType::FULL_OBJECT };
            $out.checksum_type = Some(ChecksumType::from_static(kind));
        }
    }};
    // A part's output, which has no checksum type.
    ($out:expr, $stored:expr, $mode:expr, part) => {{
        let enabled = $mode.as_ref().is_some_and(|m: &ChecksumMode| m.as_str() == ChecksumMode::ENABLED);
        if let (true, Some(stored)) = (enabled, $stored) {
            let stored: &checksum::Stored = stored;
            let value = Some(stored.shown());
            match stored.algorithm {
                checksum::Algorithm::Crc32 => $out.checksum_crc32 = value,
                checksum::Algorithm::Crc32c => $out.checksum_crc32c = value,
                checksum::Algorithm::Crc64Nvme => $out.checksum_crc64nvme = value,
                checksum::Algorithm::Sha1 => $out.checksum_sha1 = value,
                checksum::Algorithm::Sha256 => $out.checksum_sha256 = value,
            }
        }
    }};
}

/// The headers a new object takes from its request.
struct NewObject {
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
    /// The new object's metadata. A Swift request (`extensions` holding its caller) has
    /// had its metadata checked against Swift's limits, and may bring headers to store.
    fn into_meta(self, owner: &str, acl: Acl, extensions: &http::Extensions) -> S3Result<ObjectMeta> {
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
        let swift = extensions.get::<crate::swift::SwiftCaller>().is_some();
        if !swift && user_meta.iter().map(|(k, v)| k.len() + v.len()).sum::<usize>() > 2048 {
            return Err(s3_error!(MetadataTooLarge, "user metadata exceeds 2 KiB"));
        }
        if let Some(crate::swift::StoredHeaders(stored)) = extensions.get() {
            headers.extend(stored.clone());
        }
        Ok(ObjectMeta {
            owner: owner.to_owned(),
            acl,
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

/// Adds to a GET or HEAD answer the `x-` headers stored with the object (Swift's
/// `X-Delete-At`, `X-Object-Manifest`, `X-Static-Large-Object`).
fn with_stored_headers<T>(mut response: S3Response<T>, meta: &ObjectMeta) -> S3Response<T> {
    for (name, value) in meta.headers.iter().filter(|(name, _)| name.starts_with("x-")) {
        if let (Ok(name), Ok(value)) =
            (http::HeaderName::from_bytes(name.as_bytes()), http::HeaderValue::from_str(value))
        {
            response.headers.insert(name, value);
        }
    }
    response
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

/// The bytes of part `number` (from 1) of an object: a multipart object's part, or the
/// whole of any other object as its part 1 (`None` for an empty one); 416
/// InvalidPartNumber beyond.
fn part_range(meta: &ObjectMeta, number: i32) -> S3Result<Option<std::ops::Range<u64>>> {
    let parts: Vec<u64> = match meta.parts {
        Some(_) => meta.segment_sizes().collect(),
        None => vec![meta.size],
    };
    let Some(index) = usize::try_from(number).ok().filter(|&n| (1..=parts.len()).contains(&n)).map(|n| n - 1) else {
        let message = format!("the object has {} parts", parts.len());
        return Err(access::custom_error("InvalidPartNumber", http::StatusCode::RANGE_NOT_SATISFIABLE, &message));
    };
    let start: u64 = parts[..index].iter().sum();
    Ok((parts[index] > 0).then(|| start..start + parts[index]))
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

/// The condition of a conditional write: `If-None-Match: *` (create only) or
/// `If-Match: ETAG` (replace only that object).
fn write_condition(
    if_match: Option<&ETagCondition>,
    if_none_match: Option<&ETagCondition>,
) -> S3Result<Option<Condition>> {
    match (if_match, if_none_match) {
        (None, None) => Ok(None),
        (None, Some(c)) if c.is_any() => Ok(Some(Condition::Absent)),
        (None, Some(_)) => Err(s3_error!(NotImplemented, "If-None-Match on writes takes only '*'")),
        (Some(c), None) => match c.as_etag() {
            Some(etag) => Ok(Some(Condition::ETag(etag.value().to_owned()))),
            None => Err(s3_error!(NotImplemented, "If-Match on writes takes an ETag")),
        },
        (Some(_), Some(_)) => Err(s3_error!(InvalidRequest, "a write takes If-Match or If-None-Match, not both")),
    }
}

/// The request's origin as the front recorded it.
fn origin_of(extensions: &http::Extensions) -> Origin {
    extensions.get::<Origin>().cloned().unwrap_or_default()
}

/// What a written object tells its events.
impl ShoalS3 {
    /// Applies `change` to a copy of the bucket record and stores it if that changed it.
    async fn change_bucket(&self, bucket: &BucketInfo, change: impl FnOnce(&mut BucketInfo)) -> S3Result<()> {
        let mut updated = bucket.clone();
        change(&mut updated);
        if updated != *bucket {
            self.meta.update_bucket(&updated).await.map_err(rados_error)?;
        }
        Ok(())
    }

    async fn named_bucket(&self, name: &str) -> S3Result<Arc<BucketInfo>> {
        self.meta.bucket(name).await.map_err(rados_error)?.ok_or_else(|| s3_error!(NoSuchBucket))
    }

    /// Writes the head and links the index entry with the persistent `events` if the
    /// condition of `terms` holds (else 412 PreconditionFailed, the data discarded), then
    /// forgets the writer's GC intent.
    #[allow(clippy::too_many_arguments)]
    async fn commit(
        &self,
        bucket: &BucketInfo,
        key: &str,
        meta: &mut ObjectMeta,
        data: Bytes,
        intent: Option<String>,
        events: &Pending,
        terms: WriteTerms,
    ) -> S3Result<()> {
        let objects = &self.objects;
        let installed = objects.install(bucket, key, meta, data, events, terms).await;
        let refused = matches!(&installed, Err(e) if e.errno == Errno::Canceled);
        match installed {
            Ok(true) => {}
            Ok(false) => objects.discard(bucket, key, meta).await.map_err(rados_error)?,
            Err(_) if refused => {
                let head = Objects::head_of(bucket, key, &meta.order, Objects::own_heads(bucket));
                objects.gc.retire_now(&head, &meta.tail).await.map_err(rados_error)?;
            }
            Err(e) => return Err(rados_error(e)),
        }
        if let Some(intent) = intent {
            objects.gc.forget(&intent).await.map_err(rados_error)?;
        }
        match refused {
            true => Err(s3_error!(PreconditionFailed, "the object does not meet the write's If-Match / If-None-Match")),
            false => Ok(()),
        }
    }

    /// Streams `body` into a new object `key` with `meta` (size, etag and order filled in),
    /// sealed under `protection` if given, logging the persistent `events`.
    #[allow(clippy::too_many_arguments)]
    async fn store_object<S, E>(
        &self,
        bucket: &BucketInfo,
        key: &str,
        mut meta: ObjectMeta,
        body: S,
        protection: Option<Protection>,
        integrity: &Integrity,
        tag: &str,
        events: &Pending,
        terms: WriteTerms,
    ) -> S3Result<ObjectMeta>
    where
        S: futures::Stream<Item = Result<Bytes, E>> + Unpin,
        E: std::fmt::Display,
    {
        // A bucket that was ever versioned gives the write a head of its own, named by its tag.
        let (head, index_ref) = match Objects::own_heads(bucket) {
            true => (layout::version_head(&bucket.id, key, tag), Some(Objects::index_ref(bucket, key))),
            false => (layout::head_object(&bucket.id, key), None),
        };
        let prefix = layout::tail_prefix(&bucket.id, key, tag);
        let (body, running) = integrity.watch(body);
        let sealer = protection.as_ref().map(|p| Sealer::new(p.key.clone()));
        let written =
            self.objects.write_data(body, &head, index_ref, &prefix, true, sealer).await.map_err(stream_error)?;
        meta.sealed = protection.map(|p| Sealed { salts: written.salt.into_iter().collect(), ..p.sealed });
        match integrity.verify(&written.md5, running.as_ref()) {
            Ok(checksum) => meta.checksum = checksum.or(meta.checksum),
            Err(e) => {
                let garbage: Vec<_> = written.segment.into_iter().collect();
                self.objects.gc.retire_now(&head, &garbage).await.map_err(rados_error)?;
                return Err(e);
            }
        }
        meta.size = written.size;
        meta.etag = hex(&written.md5);
        meta.mtime_ns = self.objects.clock.now_ns();
        meta.order = order_of(meta.mtime_ns, tag);
        let versioned = bucket.versioning == Versioning::Enabled;
        meta.version = versioned.then(|| version_id_of(&meta.order)).transpose().map_err(rados_error)?;
        meta.tail = written.segment.into_iter().collect();
        meta.parts = None;
        let data = written.inline.unwrap_or_default();
        self.commit(bucket, key, &mut meta, data, written.intent, events, terms).await?;
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

    /// Owners by uid, with their display names looked up once.
    fn owners(&self) -> Owners<'_> {
        Owners { s3: self, known: Default::default() }
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
        let mut owners = self.owners();
        for item in items {
            match item {
                ListItem::Entry(key, entry) => {
                    let owner = match with_owner {
                        true => Some(owners.get(&entry.owner).await),
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
        caller: &Caller,
        conditions: CopyConditions<'_>,
    ) -> S3Result<(String, Found)> {
        let CopySource::Bucket { bucket, key, version_id } = source else {
            return Err(s3_error!(NotImplemented, "access point copy sources are not supported"));
        };
        let found = self.readable_object(bucket, key, version_id.as_deref(), caller, Action::GetObject).await?;
        let CopyConditions { if_match, if_none_match, if_modified_since, if_unmodified_since } = conditions;
        check_conditions(&found.meta, if_match, if_none_match, if_modified_since, if_unmodified_since, true)?;
        Ok((key.to_string(), found))
    }

    /// Fails with NoSuchUpload unless the upload exists.
    async fn require_upload(&self, bucket: &BucketInfo, key: &str, upload_id: &str) -> S3Result<UploadInfo> {
        match self.objects.upload(&self.uploads, bucket, key, upload_id).await.map_err(rados_error)? {
            Some(upload) => Ok(upload),
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

/// A CORS rule of a PutBucketCors body.
fn cors_rule(rule: CORSRule) -> CorsRule {
    CorsRule {
        id: rule.id,
        allowed_origins: rule.allowed_origins,
        allowed_methods: rule.allowed_methods,
        allowed_headers: rule.allowed_headers.unwrap_or_default(),
        expose_headers: rule.expose_headers.unwrap_or_default(),
        max_age_seconds: rule.max_age_seconds,
    }
}

/// A CORS rule as GetBucketCors shows it.
fn shown_cors_rule(rule: CorsRule) -> CORSRule {
    CORSRule {
        id: rule.id,
        allowed_origins: rule.allowed_origins,
        allowed_methods: rule.allowed_methods,
        allowed_headers: (!rule.allowed_headers.is_empty()).then_some(rule.allowed_headers),
        expose_headers: (!rule.expose_headers.is_empty()).then_some(rule.expose_headers),
        max_age_seconds: rule.max_age_seconds,
    }
}

#[async_trait::async_trait]
impl S3 for ShoalS3 {
    async fn list_buckets(&self, req: S3Request<ListBucketsInput>) -> S3Result<S3Response<ListBucketsOutput>> {
        let caller = self.caller(&req).await?;
        let who = caller.user.clone().ok_or_else(|| s3_error!(AccessDenied))?;
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
        let caller = self.caller(&req).await?;
        let who = caller.user.clone().ok_or_else(|| s3_error!(AccessDenied))?;
        let input = req.input;
        let requested = requested_acl!(input, input.grant_write.as_deref());
        let acl =
            self.requested_acl(requested, None, &who.uid, &who.uid).await?.unwrap_or_else(|| Acl::private(&who.uid));
        let ownership = match &input.object_ownership {
            Some(name) => Some(
                Ownership::named(name.as_str())
                    .ok_or_else(|| s3_error!(InvalidArgument, "unknown x-amz-object-ownership '{}'", name.as_str()))?,
            ),
            None => None,
        };
        if ownership == Some(Ownership::BucketOwnerEnforced) && !access::only_owner(&acl, &who.uid) {
            return Err(s3_error!(
                InvalidBucketAclWithObjectOwnership,
                "Bucket cannot have ACLs set with ObjectOwnership's BucketOwnerEnforced setting"
            ));
        }
        // Object lock turns versioning on, for good.
        let lock_enabled = input.object_lock_enabled_for_bucket == Some(true);
        if let Some(existing) = self.meta.bucket(&input.bucket).await.map_err(rados_error)? {
            // As AWS in us-east-1 and RGW by default: creating a bucket you own again
            // succeeds and changes nothing.
            return match existing.owner == who.uid {
                true => Ok(S3Response::new(CreateBucketOutput { location: Some(format!("/{}", input.bucket)) })),
                false => Err(s3_error!(BucketAlreadyExists)),
            };
        }
        let info = BucketInfo {
            name: input.bucket.clone(),
            id: new_tag(),
            owner: who.uid.clone(),
            created_ns: now_ns(),
            num_shards: self.config.bucket_index_shards.max(1),
            acl,
            notifications: Vec::new(),
            versioning: if lock_enabled { Versioning::Enabled } else { Versioning::Off },
            tags: Vec::new(),
            object_lock: lock_enabled.then(crate::meta::LockConfig::default),
            lifecycle: Vec::new(),
            policy: None,
            public_access_block: None,
            ownership,
            cors: Vec::new(),
            encryption: None,
            // A Swift PUT brings the container's metadata and ACLs.
            swift: req.extensions.get::<crate::meta::SwiftContainer>().cloned().unwrap_or_default(),
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
        let caller = self.caller(&req).await?;
        self.bucket_for(&req.input.bucket, &caller, Action::ListBucket, None).await?;
        Ok(S3Response::new(HeadBucketOutput::default()))
    }

    async fn delete_bucket(&self, req: S3Request<DeleteBucketInput>) -> S3Result<S3Response<DeleteBucketOutput>> {
        let caller = self.caller(&req).await?;
        let bucket = self.bucket_for(&req.input.bucket, &caller, Action::DeleteBucket, None).await?;
        let stats = self.objects.bucket_stats(&bucket).await.map_err(rados_error)?;
        if !stats.is_empty() {
            return Err(s3_error!(BucketNotEmpty));
        }
        self.remove_bucket(&bucket).await.map_err(rados_error)?;
        Ok(S3Response::new(DeleteBucketOutput::default()))
    }

    async fn get_bucket_location(
        &self,
        req: S3Request<GetBucketLocationInput>,
    ) -> S3Result<S3Response<GetBucketLocationOutput>> {
        let caller = self.caller(&req).await?;
        self.bucket_for(&req.input.bucket, &caller, Action::GetBucketLocation, None).await?;
        let zonegroup = self.config.notify.zonegroup.clone();
        Ok(S3Response::new(GetBucketLocationOutput {
            location_constraint: Some(BucketLocationConstraint::from(zonegroup)),
        }))
    }

    async fn get_bucket_versioning(
        &self,
        req: S3Request<GetBucketVersioningInput>,
    ) -> S3Result<S3Response<GetBucketVersioningOutput>> {
        let caller = self.caller(&req).await?;
        let bucket = self.bucket_for(&req.input.bucket, &caller, Action::GetBucketVersioning, None).await?;
        let status = match bucket.versioning {
            Versioning::Off => None,
            Versioning::Enabled => Some(BucketVersioningStatus::ENABLED),
            Versioning::Suspended => Some(BucketVersioningStatus::SUSPENDED),
        };
        Ok(S3Response::new(GetBucketVersioningOutput {
            status: status.map(BucketVersioningStatus::from_static),
            mfa_delete: None,
        }))
    }

    async fn put_bucket_versioning(
        &self,
        req: S3Request<PutBucketVersioningInput>,
    ) -> S3Result<S3Response<PutBucketVersioningOutput>> {
        let caller = self.caller(&req).await?;
        let input = req.input;
        let bucket = self.bucket_for(&input.bucket, &caller, Action::PutBucketVersioning, None).await?;
        let config = input.versioning_configuration;
        if config.mfa_delete.as_ref().is_some_and(|m| m.as_str() == MFADelete::ENABLED) {
            return Err(s3_error!(NotImplemented, "MFA delete is not supported"));
        }
        let versioning = match config.status.as_ref().map(|s| s.as_str()) {
            Some(BucketVersioningStatus::ENABLED) => Versioning::Enabled,
            Some(BucketVersioningStatus::SUSPENDED) => Versioning::Suspended,
            _ => return Err(s3_error!(MalformedXML, "Status must be Enabled or Suspended")),
        };
        if versioning == Versioning::Suspended && bucket.object_lock.is_some() {
            return Err(s3_error!(InvalidBucketState, "versioning cannot be suspended on a bucket with object lock"));
        }
        self.change_bucket(&bucket, |b| b.versioning = versioning).await?;
        Ok(S3Response::new(PutBucketVersioningOutput::default()))
    }

    async fn put_bucket_lifecycle_configuration(
        &self,
        req: S3Request<PutBucketLifecycleConfigurationInput>,
    ) -> S3Result<S3Response<PutBucketLifecycleConfigurationOutput>> {
        let caller = self.caller(&req).await?;
        let bucket = self.bucket_for(&req.input.bucket, &caller, Action::PutLifecycleConfiguration, None).await?;
        self.put_lifecycle(&bucket, req.input.lifecycle_configuration).await?;
        Ok(S3Response::new(PutBucketLifecycleConfigurationOutput::default()))
    }

    async fn get_bucket_lifecycle_configuration(
        &self,
        req: S3Request<GetBucketLifecycleConfigurationInput>,
    ) -> S3Result<S3Response<GetBucketLifecycleConfigurationOutput>> {
        let caller = self.caller(&req).await?;
        let bucket = self.bucket_for(&req.input.bucket, &caller, Action::GetLifecycleConfiguration, None).await?;
        let rules = Self::lifecycle_rules(&bucket)?;
        Ok(S3Response::new(GetBucketLifecycleConfigurationOutput { rules: Some(rules), ..Default::default() }))
    }

    async fn delete_bucket_lifecycle(
        &self,
        req: S3Request<DeleteBucketLifecycleInput>,
    ) -> S3Result<S3Response<DeleteBucketLifecycleOutput>> {
        let caller = self.caller(&req).await?;
        let bucket = self.bucket_for(&req.input.bucket, &caller, Action::PutLifecycleConfiguration, None).await?;
        self.delete_lifecycle(&bucket).await?;
        Ok(S3Response::new(DeleteBucketLifecycleOutput::default()))
    }

    async fn put_object_lock_configuration(
        &self,
        req: S3Request<PutObjectLockConfigurationInput>,
    ) -> S3Result<S3Response<PutObjectLockConfigurationOutput>> {
        let caller = self.caller(&req).await?;
        let bucket =
            self.bucket_for(&req.input.bucket, &caller, Action::PutBucketObjectLockConfiguration, None).await?;
        self.put_lock_configuration(&bucket, req.input.object_lock_configuration).await?;
        Ok(S3Response::new(PutObjectLockConfigurationOutput::default()))
    }

    async fn get_object_lock_configuration(
        &self,
        req: S3Request<GetObjectLockConfigurationInput>,
    ) -> S3Result<S3Response<GetObjectLockConfigurationOutput>> {
        let caller = self.caller(&req).await?;
        let bucket =
            self.bucket_for(&req.input.bucket, &caller, Action::GetBucketObjectLockConfiguration, None).await?;
        let config = Self::lock_configuration(&bucket)?;
        Ok(S3Response::new(GetObjectLockConfigurationOutput { object_lock_configuration: Some(config) }))
    }

    async fn get_object_retention(
        &self,
        req: S3Request<GetObjectRetentionInput>,
    ) -> S3Result<S3Response<GetObjectRetentionOutput>> {
        let caller = self.caller(&req).await?;
        let input = req.input;
        let lock = self
            .version_lock(&input.bucket, &input.key, input.version_id.as_deref(), &caller, Action::GetObjectRetention)
            .await?;
        let (mode, retain_until_date, _) = shown_lock(&lock);
        if mode.is_none() {
            return Err(s3_error!(NoSuchObjectLockConfiguration, "the version has no retention"));
        }
        Ok(S3Response::new(GetObjectRetentionOutput {
            retention: Some(ObjectLockRetention {
                mode: mode.map(|m| ObjectLockRetentionMode::from(m.as_str().to_owned())),
                retain_until_date,
            }),
        }))
    }

    async fn put_object_retention(
        &self,
        req: S3Request<PutObjectRetentionInput>,
    ) -> S3Result<S3Response<PutObjectRetentionOutput>> {
        let caller = self.caller(&req).await?;
        let input = req.input;
        let retention = Self::requested_retention(input.retention)?;
        let (bucket, key, version) = (&input.bucket, &input.key, input.version_id.as_deref());
        let bypass = input.bypass_governance_retention;
        self.change_lock(bucket, key, version, &caller, Action::PutObjectRetention, Some(retention), None, bypass)
            .await?;
        Ok(S3Response::new(PutObjectRetentionOutput::default()))
    }

    async fn get_object_legal_hold(
        &self,
        req: S3Request<GetObjectLegalHoldInput>,
    ) -> S3Result<S3Response<GetObjectLegalHoldOutput>> {
        let caller = self.caller(&req).await?;
        let input = req.input;
        let lock = self
            .version_lock(&input.bucket, &input.key, input.version_id.as_deref(), &caller, Action::GetObjectLegalHold)
            .await?;
        let status = if lock.legal_hold { ObjectLockLegalHoldStatus::ON } else { ObjectLockLegalHoldStatus::OFF };
        Ok(S3Response::new(GetObjectLegalHoldOutput {
            legal_hold: Some(ObjectLockLegalHold { status: Some(ObjectLockLegalHoldStatus::from_static(status)) }),
        }))
    }

    async fn put_object_legal_hold(
        &self,
        req: S3Request<PutObjectLegalHoldInput>,
    ) -> S3Result<S3Response<PutObjectLegalHoldOutput>> {
        let caller = self.caller(&req).await?;
        let input = req.input;
        let hold = match input.legal_hold.and_then(|h| h.status).as_ref().map(|s| s.as_str()) {
            Some(ObjectLockLegalHoldStatus::ON) => true,
            Some(ObjectLockLegalHoldStatus::OFF) => false,
            _ => return Err(s3_error!(MalformedXML, "LegalHold Status must be ON or OFF")),
        };
        let (bucket, key, version) = (&input.bucket, &input.key, input.version_id.as_deref());
        self.change_lock(bucket, key, version, &caller, Action::PutObjectLegalHold, None, Some(hold), None).await?;
        Ok(S3Response::new(PutObjectLegalHoldOutput::default()))
    }

    async fn list_object_versions(
        &self,
        req: S3Request<ListObjectVersionsInput>,
    ) -> S3Result<S3Response<ListObjectVersionsOutput>> {
        let caller = self.caller(&req).await?;
        let bucket = self.bucket_for(&req.input.bucket, &caller, Action::ListBucketVersions, None).await?;
        Ok(S3Response::new(self.list_versions_page(&bucket, &req.input).await?))
    }

    async fn get_bucket_acl(&self, req: S3Request<GetBucketAclInput>) -> S3Result<S3Response<GetBucketAclOutput>> {
        let caller = self.caller(&req).await?;
        let bucket = self.bucket_for(&req.input.bucket, &caller, Action::GetBucketAcl, None).await?;
        Ok(S3Response::new(GetBucketAclOutput {
            grants: Some(self.shown_grants(&bucket.acl).await),
            owner: Some(self.owners().get(&bucket.owner).await),
        }))
    }

    async fn put_bucket_acl(&self, req: S3Request<PutBucketAclInput>) -> S3Result<S3Response<PutBucketAclOutput>> {
        let caller = self.caller(&req).await?;
        let bucket = self.bucket_for(&req.input.bucket, &caller, Action::PutBucketAcl, None).await?;
        self.set_bucket_acl(&bucket, req.input).await?;
        Ok(S3Response::new(PutBucketAclOutput::default()))
    }

    async fn put_bucket_policy(
        &self,
        req: S3Request<PutBucketPolicyInput>,
    ) -> S3Result<S3Response<PutBucketPolicyOutput>> {
        let caller = self.caller(&req).await?;
        let bucket = self.bucket_for(&req.input.bucket, &caller, Action::PutBucketPolicy, None).await?;
        self.set_policy(&bucket, &req.input.policy).await?;
        Ok(S3Response::new(PutBucketPolicyOutput::default()))
    }

    async fn get_bucket_policy(
        &self,
        req: S3Request<GetBucketPolicyInput>,
    ) -> S3Result<S3Response<GetBucketPolicyOutput>> {
        let caller = self.caller(&req).await?;
        let bucket = self.bucket_for(&req.input.bucket, &caller, Action::GetBucketPolicy, None).await?;
        let policy =
            bucket.policy.as_ref().ok_or_else(|| s3_error!(NoSuchBucketPolicy, "The bucket policy does not exist"))?;
        Ok(S3Response::new(GetBucketPolicyOutput { policy: Some(policy.text().to_owned()) }))
    }

    async fn delete_bucket_policy(
        &self,
        req: S3Request<DeleteBucketPolicyInput>,
    ) -> S3Result<S3Response<DeleteBucketPolicyOutput>> {
        let caller = self.caller(&req).await?;
        let bucket = self.bucket_for(&req.input.bucket, &caller, Action::DeleteBucketPolicy, None).await?;
        self.change_bucket(&bucket, |b| b.policy = None).await?;
        Ok(S3Response::new(DeleteBucketPolicyOutput::default()))
    }

    async fn get_bucket_policy_status(
        &self,
        req: S3Request<GetBucketPolicyStatusInput>,
    ) -> S3Result<S3Response<GetBucketPolicyStatusOutput>> {
        let caller = self.caller(&req).await?;
        let bucket = self.bucket_for(&req.input.bucket, &caller, Action::GetBucketPolicyStatus, None).await?;
        let policy =
            bucket.policy.as_ref().ok_or_else(|| s3_error!(NoSuchBucketPolicy, "The bucket policy does not exist"))?;
        Ok(S3Response::new(GetBucketPolicyStatusOutput {
            policy_status: Some(PolicyStatus { is_public: Some(policy.is_public()) }),
        }))
    }

    async fn put_bucket_ownership_controls(
        &self,
        req: S3Request<PutBucketOwnershipControlsInput>,
    ) -> S3Result<S3Response<PutBucketOwnershipControlsOutput>> {
        let caller = self.caller(&req).await?;
        let bucket = self.bucket_for(&req.input.bucket, &caller, Action::PutBucketOwnershipControls, None).await?;
        self.set_ownership(&bucket, req.input.ownership_controls).await?;
        Ok(S3Response::new(PutBucketOwnershipControlsOutput::default()))
    }

    async fn get_bucket_ownership_controls(
        &self,
        req: S3Request<GetBucketOwnershipControlsInput>,
    ) -> S3Result<S3Response<GetBucketOwnershipControlsOutput>> {
        let caller = self.caller(&req).await?;
        let bucket = self.bucket_for(&req.input.bucket, &caller, Action::GetBucketOwnershipControls, None).await?;
        Ok(S3Response::new(GetBucketOwnershipControlsOutput {
            ownership_controls: Some(access::shown_ownership(&bucket)?),
        }))
    }

    async fn delete_bucket_ownership_controls(
        &self,
        req: S3Request<DeleteBucketOwnershipControlsInput>,
    ) -> S3Result<S3Response<DeleteBucketOwnershipControlsOutput>> {
        let caller = self.caller(&req).await?;
        let bucket = self.bucket_for(&req.input.bucket, &caller, Action::PutBucketOwnershipControls, None).await?;
        self.change_bucket(&bucket, |b| b.ownership = None).await?;
        Ok(S3Response::new(DeleteBucketOwnershipControlsOutput::default()))
    }

    async fn put_bucket_cors(&self, req: S3Request<PutBucketCorsInput>) -> S3Result<S3Response<PutBucketCorsOutput>> {
        let caller = self.caller(&req).await?;
        let bucket = self.bucket_for(&req.input.bucket, &caller, Action::PutBucketCORS, None).await?;
        let rules: Vec<CorsRule> = req.input.cors_configuration.cors_rules.into_iter().map(cors_rule).collect();
        crate::cors::validate(&rules).map_err(|e| s3_error!(InvalidRequest, "{e}"))?;
        self.change_bucket(&bucket, |b| b.cors = rules).await?;
        Ok(S3Response::new(PutBucketCorsOutput::default()))
    }

    async fn put_bucket_encryption(
        &self,
        req: S3Request<PutBucketEncryptionInput>,
    ) -> S3Result<S3Response<PutBucketEncryptionOutput>> {
        self.put_encryption(req).await
    }

    async fn get_bucket_encryption(
        &self,
        req: S3Request<GetBucketEncryptionInput>,
    ) -> S3Result<S3Response<GetBucketEncryptionOutput>> {
        self.get_encryption(req).await
    }

    async fn delete_bucket_encryption(
        &self,
        req: S3Request<DeleteBucketEncryptionInput>,
    ) -> S3Result<S3Response<DeleteBucketEncryptionOutput>> {
        self.delete_encryption(req).await
    }

    async fn get_bucket_cors(&self, req: S3Request<GetBucketCorsInput>) -> S3Result<S3Response<GetBucketCorsOutput>> {
        let caller = self.caller(&req).await?;
        let bucket = self.bucket_for(&req.input.bucket, &caller, Action::GetBucketCORS, None).await?;
        if bucket.cors.is_empty() {
            return Err(s3_error!(NoSuchCORSConfiguration, "The CORS configuration does not exist"));
        }
        let rules = bucket.cors.iter().cloned().map(shown_cors_rule).collect();
        Ok(S3Response::new(GetBucketCorsOutput { cors_rules: Some(rules) }))
    }

    async fn delete_bucket_cors(
        &self,
        req: S3Request<DeleteBucketCorsInput>,
    ) -> S3Result<S3Response<DeleteBucketCorsOutput>> {
        let caller = self.caller(&req).await?;
        let bucket = self.bucket_for(&req.input.bucket, &caller, Action::PutBucketCORS, None).await?;
        self.change_bucket(&bucket, |b| b.cors = Vec::new()).await?;
        Ok(S3Response::new(DeleteBucketCorsOutput::default()))
    }

    async fn put_public_access_block(
        &self,
        req: S3Request<PutPublicAccessBlockInput>,
    ) -> S3Result<S3Response<PutPublicAccessBlockOutput>> {
        let caller = self.caller(&req).await?;
        let bucket = self.bucket_for(&req.input.bucket, &caller, Action::PutBucketPublicAccessBlock, None).await?;
        self.set_public_access_block(&bucket, req.input.public_access_block_configuration).await?;
        Ok(S3Response::new(PutPublicAccessBlockOutput::default()))
    }

    async fn get_public_access_block(
        &self,
        req: S3Request<GetPublicAccessBlockInput>,
    ) -> S3Result<S3Response<GetPublicAccessBlockOutput>> {
        let caller = self.caller(&req).await?;
        let bucket = self.bucket_for(&req.input.bucket, &caller, Action::GetBucketPublicAccessBlock, None).await?;
        let config = access::shown_public_access_block(&bucket)?;
        Ok(S3Response::new(GetPublicAccessBlockOutput { public_access_block_configuration: Some(config) }))
    }

    async fn delete_public_access_block(
        &self,
        req: S3Request<DeletePublicAccessBlockInput>,
    ) -> S3Result<S3Response<DeletePublicAccessBlockOutput>> {
        let caller = self.caller(&req).await?;
        let bucket = self.bucket_for(&req.input.bucket, &caller, Action::PutBucketPublicAccessBlock, None).await?;
        self.change_bucket(&bucket, |b| b.public_access_block = None).await?;
        Ok(S3Response::new(DeletePublicAccessBlockOutput::default()))
    }

    async fn list_objects(&self, req: S3Request<ListObjectsInput>) -> S3Result<S3Response<ListObjectsOutput>> {
        let caller = self.caller(&req).await?;
        let input = req.input;
        let bucket = self.bucket_for(&input.bucket, &caller, Action::ListBucket, None).await?;
        let url = url_encoding(input.encoding_type.as_ref())?;
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
        let caller = self.caller(&req).await?;
        let input = req.input;
        let bucket = self.bucket_for(&input.bucket, &caller, Action::ListBucket, None).await?;
        let url = url_encoding(input.encoding_type.as_ref())?;
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

    async fn put_object(&self, mut req: S3Request<PutObjectInput>) -> S3Result<S3Response<PutObjectOutput>> {
        let caller = self.caller(&req).await?;
        let content_md5 = req.input.content_md5.take();
        let integrity = Integrity::of(&mut req, content_md5)?;
        let input = req.input;
        let bucket = self.bucket_for(&input.bucket, &caller, Action::PutObject, Some(&input.key)).await?;
        let (owner, acl) = self.new_object_acl(&bucket, &caller, requested_acl!(input, None)).await?;
        let meta = new_object!(input).into_meta(&owner, acl, &req.extensions)?;
        if input.content_length.is_some_and(|l| l as u64 > self.config.max_put_size) {
            return Err(s3_error!(EntityTooLarge));
        }
        let origin = origin_of(&req.extensions);
        let customer = self.customer_key(customer_headers!(input), origin.secure)?;
        let protection = self.protection(&bucket, requested_encryption!(input, customer.as_ref()))?;
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
        let terms = WriteTerms {
            condition: write_condition(input.if_match.as_ref(), input.if_none_match.as_ref())?,
            lock: requested_lock(
                &bucket,
                input.object_lock_mode.as_ref(),
                input.object_lock_retain_until_date.as_ref(),
                input.object_lock_legal_hold_status.as_ref(),
                now_ns(),
            )?,
            fresh: true,
        };
        let work = async |events: &Pending| {
            let (meta, terms) = (meta.clone(), terms.clone());
            self.store_object(&bucket, &input.key, meta, body, protection.clone(), &integrity, &tag, events, terms)
                .await
        };
        let meta = self.with_events(&op, &origin, &caller.user, work, Done::of).await?;
        if input.content_length.is_some_and(|l| l as u64 != meta.size) {
            tracing::warn!(key = %input.key, "body length differs from Content-Length");
        }
        let mut out = PutObjectOutput {
            e_tag: Some(etag(&meta.etag)),
            version_id: shown_version(&bucket, meta.version.as_deref()),
            ..Default::default()
        };
        show_checksum!(out, meta.checksum.as_ref(), Some(ChecksumMode::from_static(ChecksumMode::ENABLED)));
        show_encryption!(out, meta.sealed.as_ref(), customer.as_ref());
        Ok(S3Response::new(out))
    }

    async fn get_object(&self, req: S3Request<GetObjectInput>) -> S3Result<S3Response<GetObjectOutput>> {
        let caller = self.caller(&req).await?;
        let customer = self.customer_key(customer_headers!(req.input), origin_of(&req.extensions).secure)?;
        let input = req.input;
        let Found { meta, inline, version_id, lock, .. } = self
            .readable_object(&input.bucket, &input.key, input.version_id.as_deref(), &caller, Action::GetObject)
            .await?;
        let data_key = self.data_key(meta.sealed.as_ref(), customer.as_ref())?;
        check_conditions(
            &meta,
            input.if_match.as_ref(),
            input.if_none_match.as_ref(),
            input.if_modified_since.as_ref(),
            input.if_unmodified_since.as_ref(),
            false,
        )?;
        let range = match (&input.range, input.part_number) {
            (Some(_), Some(_)) => {
                return Err(s3_error!(InvalidRequest, "a GET takes a Range or a partNumber, not both"));
            }
            (Some(r), None) => Some(r.check(meta.size)?),
            (None, Some(n)) => part_range(&meta, n)?,
            (None, None) => None,
        };
        let span = range.clone().unwrap_or(0..meta.size);
        let stream = self.objects.read_range(&meta, inline, span.clone(), data_key);
        let mut out = GetObjectOutput {
            body: Some(StreamingBlob::wrap(crate::objects::detach(stream))),
            content_length: Some((span.end - span.start) as i64),
            content_range: range.map(|r| format!("bytes {}-{}/{}", r.start, r.end.saturating_sub(1), meta.size)),
            tag_count: (!meta.tags.is_empty()).then_some(meta.tags.len() as i32),
            version_id,
            ..Default::default()
        };
        (out.object_lock_mode, out.object_lock_retain_until_date, out.object_lock_legal_hold_status) =
            shown_lock(&lock);
        describe_object!(out, &meta);
        if out.content_range.is_none() {
            show_checksum!(out, meta.checksum.as_ref(), input.checksum_mode);
        }
        show_encryption!(out, meta.sealed.as_ref(), customer.as_ref());
        Ok(with_stored_headers(S3Response::new(out), &meta))
    }

    async fn head_object(&self, req: S3Request<HeadObjectInput>) -> S3Result<S3Response<HeadObjectOutput>> {
        let caller = self.caller(&req).await?;
        let customer = self.customer_key(customer_headers!(req.input), origin_of(&req.extensions).secure)?;
        let input = req.input;
        let Found { meta, version_id, lock, .. } = self
            .readable_object(&input.bucket, &input.key, input.version_id.as_deref(), &caller, Action::GetObject)
            .await?;
        // An SSE-C object is described only to the holder of its key.
        self.data_key(meta.sealed.as_ref(), customer.as_ref())?;
        check_conditions(
            &meta,
            input.if_match.as_ref(),
            input.if_none_match.as_ref(),
            input.if_modified_since.as_ref(),
            input.if_unmodified_since.as_ref(),
            false,
        )?;
        let part = match input.part_number {
            Some(n) => part_range(&meta, n)?,
            None => None,
        };
        let mut out = HeadObjectOutput {
            content_length: Some(part.as_ref().map_or(meta.size, |r| r.end - r.start) as i64),
            content_range: part.map(|r| format!("bytes {}-{}/{}", r.start, r.end - 1, meta.size)),
            version_id,
            ..Default::default()
        };
        (out.object_lock_mode, out.object_lock_retain_until_date, out.object_lock_legal_hold_status) =
            shown_lock(&lock);
        describe_object!(out, &meta);
        if out.content_range.is_none() {
            show_checksum!(out, meta.checksum.as_ref(), input.checksum_mode);
        }
        show_encryption!(out, meta.sealed.as_ref(), customer.as_ref());
        Ok(with_stored_headers(S3Response::new(out), &meta))
    }

    async fn delete_object(&self, req: S3Request<DeleteObjectInput>) -> S3Result<S3Response<DeleteObjectOutput>> {
        let caller = self.caller(&req).await?;
        let input = req.input;
        let bucket = self
            .bucket_for(
                &input.bucket,
                &caller,
                Action::DeleteObject.of_version(input.version_id.is_some()),
                Some(&input.key),
            )
            .await?;
        let origin = origin_of(&req.extensions);
        let bypass = Self::bypass(&bucket, &caller, &input.key, input.bypass_governance_retention);
        let remover = Remover::User { bypass };
        let version = input.version_id.as_deref();
        let deleted = self.delete_key(&bucket, &input.key, version, remover, &origin, &caller.user).await?;
        Ok(S3Response::new(DeleteObjectOutput {
            delete_marker: deleted.delete_marker.then_some(true),
            version_id: deleted.version_id,
            ..Default::default()
        }))
    }

    async fn delete_objects(&self, req: S3Request<DeleteObjectsInput>) -> S3Result<S3Response<DeleteObjectsOutput>> {
        let caller = self.caller(&req).await?;
        let input = req.input;
        let bucket = self.named_bucket(&input.bucket).await?;
        if input.delete.objects.len() > 1000 {
            return Err(s3_error!(MalformedXML, "at most 1000 keys per request"));
        }
        let quiet = input.delete.quiet == Some(true);
        let bypass_asked = input.bypass_governance_retention;
        let (mut deleted, mut errors) = (Vec::new(), Vec::new());
        let origin = origin_of(&req.extensions);
        let results = futures::stream::iter(input.delete.objects)
            .map(|object| {
                let (bucket, origin, caller) = (bucket.clone(), &origin, &caller);
                async move {
                    let version = object.version_id.as_deref();
                    let action = Action::DeleteObject.of_version(version.is_some());
                    if !Self::permits(&bucket, caller, action, Some(&object.key), None) {
                        return (object, Err(s3_error!(AccessDenied)));
                    }
                    let remover = Remover::User { bypass: Self::bypass(&bucket, caller, &object.key, bypass_asked) };
                    let result = self.delete_key(&bucket, &object.key, version, remover, origin, &caller.user).await;
                    (object, result)
                }
            })
            .buffered(16)
            .collect::<Vec<_>>()
            .await;
        for (object, result) in results {
            match result {
                Ok(_) if quiet => {}
                Ok(Deleted { version_id, delete_marker }) => {
                    // A marker this request created is named as such; a removed version by its id.
                    let created_marker = delete_marker && object.version_id.is_none();
                    deleted.push(DeletedObject {
                        key: Some(object.key),
                        delete_marker: delete_marker.then_some(true),
                        delete_marker_version_id: version_id.clone().filter(|_| created_marker),
                        version_id: object.version_id.or(version_id.filter(|_| !created_marker)),
                    })
                }
                Err(e) => errors.push(Error {
                    key: Some(object.key),
                    code: Some(e.code().as_str().to_owned()),
                    message: e.message().map(str::to_owned),
                    version_id: object.version_id,
                }),
            }
        }
        Ok(S3Response::new(DeleteObjectsOutput { deleted: Some(deleted), errors: Some(errors), ..Default::default() }))
    }

    async fn copy_object(&self, req: S3Request<CopyObjectInput>) -> S3Result<S3Response<CopyObjectOutput>> {
        let caller = self.caller(&req).await?;
        let origin = origin_of(&req.extensions);
        let input = req.input;
        let (src_key, source) = self.copy_source(&input.copy_source, &caller, copy_conditions!(input)).await?;
        let Found { bucket: src_bucket, meta: src_meta, inline, version_id: src_version, .. } = source;
        let src_customer = self.customer_key(customer_headers!(input, copy_source), origin.secure)?;
        let src_key_data = self.data_key(src_meta.sealed.as_ref(), src_customer.as_ref())?;
        let bucket = self.bucket_for(&input.bucket, &caller, Action::PutObject, Some(&input.key)).await?;
        let (owner, acl) = self.new_object_acl(&bucket, &caller, requested_acl!(input, None)).await?;
        let customer = self.customer_key(customer_headers!(input), origin.secure)?;
        let requested = requested_encryption!(input, customer.as_ref());
        let changes_encryption = requested.algorithm.is_some() || requested.customer.is_some();
        let protection = self.protection(&bucket, requested)?;
        let replace = match input.metadata_directive.as_ref().map(|d| d.as_str()) {
            None | Some(MetadataDirective::COPY) => false,
            Some(MetadataDirective::REPLACE) => true,
            Some(other) => return Err(s3_error!(InvalidArgument, "unknown metadata directive '{other}'")),
        };
        if !replace && !changes_encryption && src_bucket.id == bucket.id && src_key == input.key {
            return Err(s3_error!(
                InvalidRequest,
                "This copy request is illegal because it is trying to copy an object to itself without changing the object's metadata."
            ));
        }
        // The bytes are the source's, so its checksum still holds and is kept, with either
        // directive, as S3 does; `x-amz-checksum-algorithm` asks for a new one.
        let meta = if replace {
            ObjectMeta {
                checksum: src_meta.checksum.clone(),
                ..new_object!(input).into_meta(&owner, acl, &req.extensions)?
            }
        } else {
            ObjectMeta { owner: owner.clone(), acl, ..src_meta.clone() }
        };
        let data = self.objects.read_range(&src_meta, inline, 0..src_meta.size, src_key_data);
        let lock = requested_lock(
            &bucket,
            input.object_lock_mode.as_ref(),
            input.object_lock_retain_until_date.as_ref(),
            input.object_lock_legal_hold_status.as_ref(),
            now_ns(),
        )?;
        let terms = WriteTerms { condition: None, lock, fresh: true };
        let tag = new_tag();
        let op = Operation {
            bucket: &bucket,
            key: &input.key,
            event: "ObjectCreated:Copy",
            tag: &tag,
            metadata: &meta.user_meta,
            tags: &meta.tags,
        };
        let recomputed = input.checksum_algorithm.as_ref().map(|a| checksum::Requested::computed(a.as_str()));
        let recomputed = recomputed.transpose().map_err(|e| s3_error!(InvalidRequest, "{e}"))?;
        let work = async |events: &Pending| {
            let integrity = Integrity { checksum: recomputed.clone(), ..Integrity::default() };
            self.store_object(
                &bucket,
                &input.key,
                meta.clone(),
                Box::pin(data),
                protection.clone(),
                &integrity,
                &tag,
                events,
                terms.clone(),
            )
            .await
        };
        let meta = self.with_events(&op, &origin, &caller.user, work, Done::of).await?;
        let mut result = CopyObjectResult {
            e_tag: Some(etag(&meta.etag)),
            last_modified: Some(timestamp(meta.mtime_ns)),
            ..Default::default()
        };
        show_checksum!(result, meta.checksum.as_ref(), Some(ChecksumMode::from_static(ChecksumMode::ENABLED)));
        let mut out = CopyObjectOutput {
            copy_object_result: Some(result),
            copy_source_version_id: src_version,
            version_id: shown_version(&bucket, meta.version.as_deref()),
            ..Default::default()
        };
        show_encryption!(out, meta.sealed.as_ref(), customer.as_ref());
        Ok(S3Response::new(out))
    }

    async fn get_object_attributes(
        &self,
        req: S3Request<GetObjectAttributesInput>,
    ) -> S3Result<S3Response<GetObjectAttributesOutput>> {
        let caller = self.caller(&req).await?;
        let customer = self.customer_key(customer_headers!(req.input), origin_of(&req.extensions).secure)?;
        let input = req.input;
        let Found { meta, version_id, .. } = self
            .readable_object(
                &input.bucket,
                &input.key,
                input.version_id.as_deref(),
                &caller,
                Action::GetObjectAttributes,
            )
            .await?;
        self.data_key(meta.sealed.as_ref(), customer.as_ref())?;
        // One header, its values separated by commas (s3s keeps them as one).
        let wanted =
            |name: &str| input.object_attributes.iter().flat_map(|a| a.as_str().split(',')).any(|a| a.trim() == name);
        let object_parts = match meta.parts {
            Some(count) if wanted(ObjectAttributes::OBJECT_PARTS) => {
                let marker = input.part_number_marker.unwrap_or(0).max(0) as usize;
                let max = input.max_parts.unwrap_or(1000).clamp(0, 1000) as usize;
                let numbered = meta.segment_sizes().enumerate().map(|(i, size)| (i + 1, size)).skip(marker);
                let page: Vec<ObjectPart> = numbered
                    .clone()
                    .take(max)
                    .map(|(n, size)| ObjectPart {
                        part_number: Some(n as i32),
                        size: Some(size as i64),
                        ..Default::default()
                    })
                    .collect();
                let truncated = numbered.count() > page.len();
                Some(GetObjectAttributesParts {
                    total_parts_count: Some(count as i32),
                    part_number_marker: input.part_number_marker,
                    next_part_number_marker: page.last().and_then(|p| p.part_number).filter(|_| truncated),
                    max_parts: Some(max as i32),
                    is_truncated: Some(truncated),
                    parts: Some(page),
                })
            }
            _ => None,
        };
        let checksum = meta.checksum.as_ref().filter(|_| wanted(ObjectAttributes::CHECKSUM)).map(|stored| {
            let mut shown = Checksum::default();
            show_checksum!(shown, Some(stored), Some(ChecksumMode::from_static(ChecksumMode::ENABLED)));
            shown
        });
        Ok(S3Response::new(GetObjectAttributesOutput {
            checksum,
            e_tag: wanted(ObjectAttributes::ETAG).then(|| etag(&meta.etag)),
            object_size: wanted(ObjectAttributes::OBJECT_SIZE).then_some(meta.size as i64),
            storage_class: wanted(ObjectAttributes::STORAGE_CLASS)
                .then(|| StorageClass::from_static(StorageClass::STANDARD)),
            object_parts,
            last_modified: Some(timestamp(meta.mtime_ns)),
            version_id,
            ..Default::default()
        }))
    }

    async fn get_object_acl(&self, req: S3Request<GetObjectAclInput>) -> S3Result<S3Response<GetObjectAclOutput>> {
        let caller = self.caller(&req).await?;
        let input = req.input;
        let action = Action::GetObjectAcl;
        let Found { bucket, meta, .. } =
            self.readable_object(&input.bucket, &input.key, input.version_id.as_deref(), &caller, action).await?;
        // While ACLs are off the bucket owner owns every object, with full control.
        let rules = bucket.rules();
        let owner = rules.object_owner(&meta.owner);
        let acl = if rules.acls_disabled() { Acl::private(owner) } else { meta.acl.clone() };
        Ok(S3Response::new(GetObjectAclOutput {
            grants: Some(self.shown_grants(&acl).await),
            owner: Some(self.owners().get(owner).await),
            ..Default::default()
        }))
    }

    async fn put_object_acl(&self, req: S3Request<PutObjectAclInput>) -> S3Result<S3Response<PutObjectAclOutput>> {
        let caller = self.caller(&req).await?;
        let mut input = req.input;
        let action = Action::PutObjectAcl;
        let version = input.version_id.clone();
        let Found { bucket, head, mut meta, .. } =
            self.readable_object(&input.bucket, &input.key, version.as_deref(), &caller, action).await?;
        meta.acl = self.object_acl_to_set(&bucket, &meta.owner, &mut input).await?;
        self.rewrite_meta(&head, &meta).await?;
        Ok(S3Response::new(PutObjectAclOutput::default()))
    }

    async fn get_object_tagging(
        &self,
        req: S3Request<GetObjectTaggingInput>,
    ) -> S3Result<S3Response<GetObjectTaggingOutput>> {
        let caller = self.caller(&req).await?;
        let input = req.input;
        let Found { meta, version_id, .. } = self
            .readable_object(&input.bucket, &input.key, input.version_id.as_deref(), &caller, Action::GetObjectTagging)
            .await?;
        Ok(S3Response::new(GetObjectTaggingOutput { tag_set: tag_set(&meta.tags), version_id }))
    }

    async fn put_bucket_tagging(
        &self,
        req: S3Request<PutBucketTaggingInput>,
    ) -> S3Result<S3Response<PutBucketTaggingOutput>> {
        let caller = self.caller(&req).await?;
        let input = req.input;
        let bucket = self.bucket_for(&input.bucket, &caller, Action::PutBucketTagging, None).await?;
        let tags = tag_pairs(input.tagging.tag_set);
        check_tags(&tags, 50)?;
        self.meta.update_bucket(&BucketInfo { tags, ..(*bucket).clone() }).await.map_err(rados_error)?;
        Ok(S3Response::new(PutBucketTaggingOutput::default()))
    }

    async fn get_bucket_tagging(
        &self,
        req: S3Request<GetBucketTaggingInput>,
    ) -> S3Result<S3Response<GetBucketTaggingOutput>> {
        let caller = self.caller(&req).await?;
        let bucket = self.bucket_for(&req.input.bucket, &caller, Action::GetBucketTagging, None).await?;
        if bucket.tags.is_empty() {
            return Err(s3_error!(NoSuchTagSet));
        }
        Ok(S3Response::new(GetBucketTaggingOutput { tag_set: tag_set(&bucket.tags) }))
    }

    async fn delete_bucket_tagging(
        &self,
        req: S3Request<DeleteBucketTaggingInput>,
    ) -> S3Result<S3Response<DeleteBucketTaggingOutput>> {
        let caller = self.caller(&req).await?;
        let bucket = self.bucket_for(&req.input.bucket, &caller, Action::PutBucketTagging, None).await?;
        self.change_bucket(&bucket, |b| b.tags.clear()).await?;
        Ok(S3Response::new(DeleteBucketTaggingOutput::default()))
    }

    async fn put_object_tagging(
        &self,
        req: S3Request<PutObjectTaggingInput>,
    ) -> S3Result<S3Response<PutObjectTaggingOutput>> {
        let caller = self.caller(&req).await?;
        let input = req.input;
        let tags = tag_pairs(input.tagging.tag_set);
        check_tags(&tags, 10)?;
        let version = input.version_id.as_deref();
        let version_id = self
            .change_object_meta(&input.bucket, &input.key, version, &caller, Action::PutObjectTagging, |m| {
                m.tags = tags
            })
            .await?;
        Ok(S3Response::new(PutObjectTaggingOutput { version_id }))
    }

    async fn delete_object_tagging(
        &self,
        req: S3Request<DeleteObjectTaggingInput>,
    ) -> S3Result<S3Response<DeleteObjectTaggingOutput>> {
        let caller = self.caller(&req).await?;
        let input = req.input;
        let version = input.version_id.as_deref();
        let version_id = self
            .change_object_meta(&input.bucket, &input.key, version, &caller, Action::DeleteObjectTagging, |m| {
                m.tags.clear()
            })
            .await?;
        Ok(S3Response::new(DeleteObjectTaggingOutput { version_id }))
    }

    async fn create_multipart_upload(
        &self,
        req: S3Request<CreateMultipartUploadInput>,
    ) -> S3Result<S3Response<CreateMultipartUploadOutput>> {
        let caller = self.caller(&req).await?;
        let input = req.input;
        let bucket = self.bucket_for(&input.bucket, &caller, Action::PutObject, Some(&input.key)).await?;
        let (owner, acl) = self.new_object_acl(&bucket, &caller, requested_acl!(input, None)).await?;
        let lock = requested_lock(
            &bucket,
            input.object_lock_mode.as_ref(),
            input.object_lock_retain_until_date.as_ref(),
            input.object_lock_legal_hold_status.as_ref(),
            now_ns(),
        )?;
        let customer = self.customer_key(customer_headers!(input), origin_of(&req.extensions).secure)?;
        let protection = self.protection(&bucket, requested_encryption!(input, customer.as_ref()))?;
        let meta = ObjectMeta {
            sealed: protection.map(|p| p.sealed),
            ..new_object!(input).into_meta(&owner, acl, &req.extensions)?
        };
        let sealed = meta.sealed.clone();
        let upload_id =
            self.objects.create_upload(&self.uploads, &bucket, &input.key, meta, lock).await.map_err(rados_error)?;
        let mut out = CreateMultipartUploadOutput {
            bucket: Some(input.bucket),
            key: Some(input.key),
            upload_id: Some(upload_id),
            ..Default::default()
        };
        show_encryption!(out, sealed.as_ref(), customer.as_ref());
        Ok(S3Response::new(out))
    }

    async fn upload_part(&self, mut req: S3Request<UploadPartInput>) -> S3Result<S3Response<UploadPartOutput>> {
        let caller = self.caller(&req).await?;
        let content_md5 = req.input.content_md5.take();
        let integrity = Integrity::of(&mut req, content_md5)?;
        let input = req.input;
        let bucket = self.bucket_for(&input.bucket, &caller, Action::PutObject, Some(&input.key)).await?;
        let number = Self::validate_part_number(input.part_number)?;
        let upload = self.require_upload(&bucket, &input.key, &input.upload_id).await?;
        let customer = self.customer_key(customer_headers!(input), origin_of(&req.extensions).secure)?;
        let sealer = self.data_key(upload.meta.sealed.as_ref(), customer.as_ref())?.map(Sealer::new);
        let body = input.body.map(|b| b.boxed()).unwrap_or_else(|| futures::stream::empty().boxed());
        let (body, running) = integrity.watch(body);
        let check = |written: &crate::objects::Written| integrity.verify(&written.md5, running.as_ref());
        let part = self
            .objects
            .upload_part(&self.uploads, &bucket, &input.key, &input.upload_id, number, body, sealer, check)
            .await?;
        let mut out = UploadPartOutput { e_tag: Some(etag(&part.etag)), ..Default::default() };
        show_checksum!(out, part.checksum.as_ref(), Some(ChecksumMode::from_static(ChecksumMode::ENABLED)), part);
        show_encryption!(out, upload.meta.sealed.as_ref(), customer.as_ref());
        Ok(S3Response::new(out))
    }

    async fn upload_part_copy(
        &self,
        req: S3Request<UploadPartCopyInput>,
    ) -> S3Result<S3Response<UploadPartCopyOutput>> {
        let caller = self.caller(&req).await?;
        let secure = origin_of(&req.extensions).secure;
        let input = req.input;
        let (_, Found { meta: src_meta, inline, .. }) =
            self.copy_source(&input.copy_source, &caller, copy_conditions!(input)).await?;
        let src_customer = self.customer_key(customer_headers!(input, copy_source), secure)?;
        let src_key_data = self.data_key(src_meta.sealed.as_ref(), src_customer.as_ref())?;
        let bucket = self.bucket_for(&input.bucket, &caller, Action::PutObject, Some(&input.key)).await?;
        let number = Self::validate_part_number(input.part_number)?;
        let upload = self.require_upload(&bucket, &input.key, &input.upload_id).await?;
        let customer = self.customer_key(customer_headers!(input), secure)?;
        let sealer = self.data_key(upload.meta.sealed.as_ref(), customer.as_ref())?.map(Sealer::new);
        let span = match &input.copy_source_range {
            None => 0..src_meta.size,
            Some(r) => copy_range(r, src_meta.size)
                .ok_or_else(|| s3_error!(InvalidRange, "bad x-amz-copy-source-range '{r}'"))?,
        };
        let data = self.objects.read_range(&src_meta, inline, span, src_key_data);
        let unchecked = |_: &crate::objects::Written| Ok::<_, S3Error>(None);
        let part = self
            .objects
            .upload_part(&self.uploads, &bucket, &input.key, &input.upload_id, number, data, sealer, unchecked)
            .await?;
        let mut out = UploadPartCopyOutput {
            copy_part_result: Some(CopyPartResult {
                e_tag: Some(etag(&part.etag)),
                last_modified: Some(timestamp(part.mtime_ns)),
                ..Default::default()
            }),
            ..Default::default()
        };
        show_encryption!(out, upload.meta.sealed.as_ref(), customer.as_ref());
        Ok(S3Response::new(out))
    }

    async fn list_parts(&self, req: S3Request<ListPartsInput>) -> S3Result<S3Response<ListPartsOutput>> {
        let caller = self.caller(&req).await?;
        let input = req.input;
        let bucket =
            self.bucket_for(&input.bucket, &caller, Action::ListMultipartUploadParts, Some(&input.key)).await?;
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
            .map(|p| {
                let mut part = Part {
                    part_number: Some(p.number as i32),
                    size: Some(p.size as i64),
                    e_tag: Some(etag(&p.etag)),
                    last_modified: Some(timestamp(p.mtime_ns)),
                    ..Default::default()
                };
                show_checksum!(part, p.checksum.as_ref(), Some(ChecksumMode::from_static(ChecksumMode::ENABLED)), part);
                part
            })
            .collect();
        let next = page.last().and_then(|p| p.part_number).filter(|_| truncated);
        let owner = self.owners().get(&upload.meta.owner).await;
        Ok(S3Response::new(ListPartsOutput {
            bucket: Some(input.bucket),
            key: Some(input.key),
            upload_id: Some(input.upload_id),
            initiator: Some(initiator(&owner)),
            owner: Some(owner),
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
        let caller = self.caller(&req).await?;
        let input = req.input;
        let bucket = self.bucket_for(&input.bucket, &caller, Action::ListBucketMultipartUploads, None).await?;
        let max = input.max_uploads.unwrap_or(1000).clamp(0, 1000) as usize;
        let after = match (&input.key_marker, &input.upload_id_marker) {
            (Some(k), Some(u)) => layout::upload_key(k, u) + "\u{1}",
            (Some(k), None) => format!("{k}\u{1}"),
            _ => String::new(),
        };
        let prefix = input.prefix.clone().unwrap_or_default();
        let (page, truncated) =
            self.objects.list_uploads(&self.uploads, &bucket, &after, &prefix, max).await.map_err(rados_error)?;
        let mut owners = self.owners();
        let mut uploads: Vec<MultipartUpload> = Vec::with_capacity(page.len());
        for u in &page {
            let owner = owners.get(&u.meta.owner).await;
            uploads.push(MultipartUpload {
                key: Some(u.key.clone()),
                upload_id: Some(u.upload_id.clone()),
                initiated: Some(timestamp(u.initiated_ns)),
                initiator: Some(initiator(&owner)),
                owner: Some(owner),
                storage_class: Some(StorageClass::from_static(StorageClass::STANDARD)),
                ..Default::default()
            });
        }
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
        let caller = self.caller(&req).await?;
        let input = req.input;
        let bucket = self.bucket_for(&input.bucket, &caller, Action::PutObject, Some(&input.key)).await?;
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
        let condition = write_condition(input.if_match.as_ref(), input.if_none_match.as_ref())?;
        let work = async |events: &Pending| {
            let completed = self.objects.complete_upload(
                &self.uploads,
                &bucket,
                &input.key,
                &input.upload_id,
                &listed,
                &tag,
                events,
                condition.clone(),
            );
            completed.await.map_err(|e| match e {
                CompleteError::NoSuchUpload => s3_error!(NoSuchUpload),
                CompleteError::InvalidPart(n) => s3_error!(InvalidPart, "part {n} is missing or its ETag differs"),
                CompleteError::InvalidPartOrder => s3_error!(InvalidPartOrder),
                CompleteError::OtherParts => s3_error!(NoSuchUpload, "the upload was completed with other parts"),
                CompleteError::EntityTooSmall(n) => s3_error!(EntityTooSmall, "part {n} is smaller than 5 MiB"),
                CompleteError::Rados(e) if e.errno == Errno::Canceled => {
                    s3_error!(PreconditionFailed, "the object does not meet the completion's If-Match / If-None-Match")
                }
                CompleteError::Rados(e) => rados_error(e),
            })
        };
        let meta = self.with_events(&op, &origin_of(&req.extensions), &caller.user, work, Done::of).await?;
        let mut out = CompleteMultipartUploadOutput {
            bucket: Some(input.bucket.clone()),
            key: Some(input.key.clone()),
            e_tag: Some(etag(&meta.etag)),
            location: Some(format!("/{}/{}", input.bucket, input.key)),
            version_id: shown_version(&bucket, meta.version.as_deref()),
            ..Default::default()
        };
        show_encryption!(out, meta.sealed.as_ref());
        Ok(S3Response::new(out))
    }

    async fn abort_multipart_upload(
        &self,
        req: S3Request<AbortMultipartUploadInput>,
    ) -> S3Result<S3Response<AbortMultipartUploadOutput>> {
        let caller = self.caller(&req).await?;
        let input = req.input;
        let bucket = self.bucket_for(&input.bucket, &caller, Action::AbortMultipartUpload, Some(&input.key)).await?;
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
        self.lifecycle.unregister(&bucket.name).await?;
        self.objects.remove_index(bucket).await?;
        publisher.logs.unregister(&logs).await?;
        crate::meta::remove_ignoring_missing(&self.uploads, &bucket.id).await
    }

    /// Changes the metadata of an object's version in place (ACL, tags) if `caller` may
    /// do `action` on it. Returns the version id to show.
    async fn change_object_meta(
        &self,
        bucket: &str,
        key: &str,
        version_id: Option<&str>,
        caller: &Caller,
        action: Action,
        change: impl FnOnce(&mut ObjectMeta),
    ) -> S3Result<Option<String>> {
        let Found { head, mut meta, version_id, .. } =
            self.readable_object(bucket, key, version_id, caller, action).await?;
        change(&mut meta);
        self.rewrite_meta(&head, &meta).await?;
        Ok(version_id)
    }

    /// Replaces the metadata of the version whose head is `head`, unless the version
    /// changed since it was read.
    async fn rewrite_meta(&self, head: &str, meta: &ObjectMeta) -> S3Result<()> {
        match self.objects.update_meta(head, meta).await {
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
        /// POST form policies (parsed by s3s from the network before anything is
        /// authorized) are read or refused, never a panic.
        #[test]
        fn any_post_policy_is_read_or_refused_without_panic(
            expiration in "20[0-9]{2}-[01][0-9]-[0-3][0-9]T[0-2][0-9]:[0-5][0-9]:[0-5][0-9](\\.[0-9]{1,3})?Z|\\PC{0,20}",
            condition in r#"\["(eq|starts-with|content-length-range|[a-z]{0,6})", ?("\$[a-zA-Z-]{0,12}"|[0-9]{1,20}|-1), ?("[^"\\]{0,10}"|[0-9]{1,20}|-1)\]|\{"[a-z_-]{0,12}": ?"[^"\\]{0,10}"\}|\PC{0,20}"#,
            noise in "\\PC{0,40}",
        ) {
            let json = format!(r#"{{"expiration": "{expiration}", "conditions": [{condition}]}}"#);
            if let Ok(policy) = s3s::post_policy::PostPolicy::from_json(&json) {
                let _ = policy.content_length_range();
            }
            let _ = s3s::post_policy::PostPolicy::from_json(&noise);
            use base64::Engine;
            let _ = s3s::post_policy::PostPolicy::from_base64(&base64::engine::general_purpose::STANDARD.encode(&json));
            let _ = s3s::post_policy::PostPolicy::from_base64(&noise);
        }

        /// Header parsers fed arbitrary text answer Ok or Err, never panic.
        #[test]
        fn header_parsers_never_panic(text in ".{0,64}", size in 0u64..1000) {
            let _ = parse_tagging(&text);
            let _ = copy_range(&text, size);
            let _ = url_encode(&text);
        }
    }
}
