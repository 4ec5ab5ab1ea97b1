//! What the S3 operations share: the [`ShoalS3`] front over the gateway's [`Service`],
//! conversions between stored records and S3's types, and the parsing of request headers.

use crate::access::acl::Acl;
use crate::error::{custom_error, rados_error};
use crate::head::ObjectMeta;
use crate::meta::BucketInfo;
use crate::multipart::UploadInfo;
use crate::request::{Origin, StoredHeaders, SwiftCaller};
use crate::service::Service;
use s3s::dto::*;
use s3s::{S3Response, S3Result, s3_error};
use shoal_objclass::bucket_index::Condition;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, UNIX_EPOCH};
/// The gateway's implementation of the S3 API: a front over the gateway's [`Service`],
/// which it derefs to.
#[derive(Clone)]
pub struct ShoalS3 {
    /// The operations below the protocol.
    pub service: Arc<Service>,
}

/// What an S3 operation answers.
pub(super) type Answer<T> = S3Result<S3Response<T>>;

impl std::ops::Deref for ShoalS3 {
    type Target = Service;

    fn deref(&self) -> &Service {
        &self.service
    }
}

pub(super) fn timestamp(ns: u64) -> Timestamp {
    Timestamp::from(UNIX_EPOCH + Duration::from_nanos(ns))
}

pub(super) fn seconds(ts: &Timestamp) -> i64 {
    time::OffsetDateTime::from(ts.clone()).unix_timestamp()
}

pub(super) fn etag(value: &str) -> ETag {
    ETag::Strong(value.to_owned())
}

pub(super) fn owner_of(uid: &str, display_name: Option<&str>) -> Owner {
    Owner { id: Some(uid.to_owned()), display_name: Some(display_name.unwrap_or(uid).to_owned()) }
}

/// The initiator of an upload: its owner.
pub(super) fn initiator(owner: &Owner) -> Initiator {
    Initiator { id: owner.id.clone(), display_name: owner.display_name.clone() }
}

/// Owners as listings show them, each user record read once per listing.
pub(super) struct Owners<'a> {
    s3: &'a ShoalS3,
    known: std::collections::HashMap<String, Owner>,
}

impl Owners<'_> {
    /// The owner `uid` with its display name (the uid if the user is gone).
    pub(super) async fn get(&mut self, uid: &str) -> Owner {
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
pub(super) fn parse_tagging(header: &str) -> S3Result<Vec<(String, String)>> {
    let tags: Vec<(String, String)> =
        form_urlencoded::parse(header.as_bytes()).map(|(k, v)| (k.into_owned(), v.into_owned())).collect();
    check_tags(&tags, 10)?;
    Ok(tags)
}

/// Checks a tag set of at most `most` tags (10 for objects, 50 for buckets).
pub(super) fn check_tags(tags: &[(String, String)], most: usize) -> S3Result<()> {
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
pub(super) fn url_encoding(encoding: Option<&EncodingType>) -> S3Result<bool> {
    match encoding.map(|e| e.as_str()) {
        None => Ok(false),
        Some(EncodingType::URL) => Ok(true),
        Some(_) => Err(s3_error!(InvalidArgument, "encoding-type must be 'url'")),
    }
}

/// Tags as (key, value) pairs.
pub(super) fn tag_pairs(set: TagSet) -> Vec<(String, String)> {
    set.into_iter().map(|t| (t.key.unwrap_or_default(), t.value.unwrap_or_default())).collect()
}

/// Tags as S3 lists them.
pub(super) fn tag_set(tags: &[(String, String)]) -> TagSet {
    tags.iter().map(|(k, v)| Tag { key: Some(k.clone()), value: Some(v.clone()) }).collect()
}

/// URL-encodes a key for `encoding-type=url` listings (everything but unreserved characters and `/`).
pub(super) fn url_encode(s: &str) -> String {
    const KEEP: &percent_encoding::AsciiSet =
        &percent_encoding::NON_ALPHANUMERIC.remove(b'-').remove(b'_').remove(b'.').remove(b'~').remove(b'/');
    percent_encoding::utf8_percent_encode(s, KEEP).to_string()
}

/// Parses `x-amz-copy-source-range` (`bytes=FIRST-LAST`, both inclusive, within `size`).
pub(super) fn copy_range(header: &str, size: u64) -> Option<std::ops::Range<u64>> {
    let (first, last) = header.strip_prefix("bytes=")?.split_once('-')?;
    let (first, last) = (first.parse::<u64>().ok()?, last.parse::<u64>().ok()?);
    (first <= last && last < size).then(|| first..last + 1)
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
pub(super) use show_checksum;

/// The headers a new object takes from its request.
pub(super) struct NewObject {
    pub(super) content_type: Option<String>,
    pub(super) cache_control: Option<String>,
    pub(super) content_disposition: Option<String>,
    pub(super) content_encoding: Option<String>,
    pub(super) content_language: Option<String>,
    pub(super) expires: Option<Timestamp>,
    pub(super) metadata: Option<Metadata>,
    pub(super) tagging: Option<String>,
}

impl NewObject {
    /// The new object's metadata. A Swift request (`extensions` holding its caller) has
    /// had its metadata checked against Swift's limits, and may bring headers to store.
    pub(super) fn into_meta(self, owner: &str, acl: Acl, extensions: &http::Extensions) -> S3Result<ObjectMeta> {
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
        let swift = extensions.get::<SwiftCaller>().is_some();
        if !swift && user_meta.iter().map(|(k, v)| k.len() + v.len()).sum::<usize>() > 2048 {
            return Err(s3_error!(MetadataTooLarge, "user metadata exceeds 2 KiB"));
        }
        if let Some(StoredHeaders(stored)) = extensions.get() {
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
pub(super) use new_object;

/// The `x-amz-copy-source-if-*` conditions of a copy.
pub(super) struct CopyConditions<'a> {
    pub(super) if_match: Option<&'a ETagCondition>,
    pub(super) if_none_match: Option<&'a ETagCondition>,
    pub(super) if_modified_since: Option<&'a Timestamp>,
    pub(super) if_unmodified_since: Option<&'a Timestamp>,
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
pub(super) use copy_conditions;

/// Adds to a GET or HEAD answer the `x-` headers stored with the object (Swift's
/// `X-Delete-At`, `X-Object-Manifest`, `X-Static-Large-Object`).
pub(super) fn with_stored_headers<T>(mut response: S3Response<T>, meta: &ObjectMeta) -> S3Response<T> {
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
pub(super) use describe_object;

/// The bytes of part `number` (from 1) of an object: a multipart object's part, or the
/// whole of any other object as its part 1 (`None` for an empty one); 416
/// InvalidPartNumber beyond.
pub(super) fn part_range(meta: &ObjectMeta, number: i32) -> S3Result<Option<std::ops::Range<u64>>> {
    let parts: Vec<u64> = match meta.parts {
        Some(_) => meta.segment_sizes().collect(),
        None => vec![meta.size],
    };
    let Some(index) = usize::try_from(number).ok().filter(|&n| (1..=parts.len()).contains(&n)).map(|n| n - 1) else {
        let message = format!("the object has {} parts", parts.len());
        return Err(custom_error("InvalidPartNumber", http::StatusCode::RANGE_NOT_SATISFIABLE, &message));
    };
    let start: u64 = parts[..index].iter().sum();
    Ok((parts[index] > 0).then(|| start..start + parts[index]))
}

/// Preconditions of GET/HEAD (and, with `copy`, of a copy source, where every failure is 412).
pub(super) fn check_conditions(
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
pub(super) fn write_condition(
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
pub(super) fn origin_of(extensions: &http::Extensions) -> Origin {
    extensions.get::<Origin>().cloned().unwrap_or_default()
}

impl ShoalS3 {
    /// Owners by uid, with their display names looked up once.
    pub(super) fn owners(&self) -> Owners<'_> {
        Owners { s3: self, known: Default::default() }
    }
    /// Fails with NoSuchUpload unless the upload exists.
    pub(super) async fn require_upload(&self, bucket: &BucketInfo, key: &str, upload_id: &str) -> S3Result<UploadInfo> {
        match self.objects.upload(&self.uploads, bucket, key, upload_id).await.map_err(rados_error)? {
            Some(upload) => Ok(upload),
            None => Err(s3_error!(NoSuchUpload)),
        }
    }

    pub(super) fn validate_part_number(number: i32) -> S3Result<u32> {
        if (1..=10_000).contains(&number) {
            Ok(number as u32)
        } else {
            Err(s3_error!(InvalidArgument, "part number must be 1..=10000"))
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
