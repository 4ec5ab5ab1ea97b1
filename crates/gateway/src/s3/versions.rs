//! Versions as S3 shows them: finding the version a request names and listing versions.

use super::access::Caller;
use super::common::{CopyConditions, ShoalS3, check_conditions, etag, timestamp, url_encode};
use crate::access::Action;
use crate::error::rados_error;
use crate::meta::{BucketInfo, Versioning};
use crate::objects::{Found, Lookup, Resume};
use s3s::dto::*;
use s3s::{S3Error, S3Result, s3_error};
use shoal_objclass::bucket_index::{IndexEntry, VersionItem};

/// The version id S3 shows for a version of a bucket: none if it was never versioned.
pub fn shown_version(bucket: &BucketInfo, version: Option<&str>) -> Option<String> {
    (bucket.versioning != Versioning::Off).then(|| version.unwrap_or("null").to_owned())
}

/// The answer to a read that names a delete marker: 404 NoSuchKey for the current
/// version, 405 MethodNotAllowed for a version id, with the marker's headers.
fn delete_marker_error(marker: &IndexEntry, by_version: bool) -> S3Error {
    let mut error = if by_version {
        s3_error!(MethodNotAllowed, "the version is a delete marker")
    } else {
        s3_error!(NoSuchKey, "the current version is a delete marker")
    };
    let mut headers = http::HeaderMap::new();
    headers.insert("x-amz-delete-marker", http::HeaderValue::from_static("true"));
    if let Ok(id) = http::HeaderValue::from_str(marker.version_id()) {
        headers.insert("x-amz-version-id", id);
    }
    error.set_headers(headers);
    error
}

fn not_found(version_id: Option<&str>) -> S3Error {
    match version_id {
        Some(_) => s3_error!(NoSuchVersion),
        None => s3_error!(NoSuchKey),
    }
}

impl ShoalS3 {
    /// The version of `key` a request names (`version_id`; `None`: the current one), if
    /// `caller` may do `action` on it (its version form, such as GetObjectVersion, when a
    /// version is named).
    pub(super) async fn readable_object(
        &self,
        bucket: &str,
        key: &str,
        version_id: Option<&str>,
        caller: &Caller,
        action: Action,
    ) -> S3Result<Found> {
        let action = action.of_version(version_id.is_some());
        let bucket = self.named_bucket(bucket).await?;
        // Only someone who may list the bucket learns what is not there.
        let hidden = |e: S3Error| match Self::permits(&bucket, caller, Action::ListBucket, None, None) {
            true => e,
            false => s3_error!(AccessDenied),
        };
        let found = match self.objects.locate(bucket.clone(), key, version_id).await.map_err(rados_error)? {
            Lookup::Found(found) => found,
            Lookup::DeleteMarker(marker) => return Err(hidden(delete_marker_error(&marker, version_id.is_some()))),
            Lookup::Missing => return Err(hidden(not_found(version_id))),
        };
        match Self::permits(&bucket, caller, action, Some(key), Some(&found.meta)) {
            true => Ok(*found),
            false => Err(s3_error!(AccessDenied)),
        }
    }

    /// One ListObjectVersions page.
    pub(super) async fn list_versions_page(
        &self,
        bucket: &BucketInfo,
        input: &ListObjectVersionsInput,
    ) -> S3Result<ListObjectVersionsOutput> {
        let url = super::common::url_encoding(input.encoding_type.as_ref())?;
        let max_keys = input.max_keys.unwrap_or(1000);
        if max_keys < 0 {
            return Err(s3_error!(InvalidArgument, "max-keys must not be negative"));
        }
        if input.version_id_marker.is_some() && input.key_marker.is_none() {
            return Err(s3_error!(InvalidArgument, "a version-id-marker needs a key-marker"));
        }
        let (prefix, delimiter) =
            (input.prefix.clone().unwrap_or_default(), input.delimiter.clone().unwrap_or_default());
        let resume: Resume =
            (input.key_marker.clone().unwrap_or_default(), input.version_id_marker.clone().filter(|v| !v.is_empty()));
        let max = (max_keys as usize).min(1000);
        let (items, truncated) = match max {
            0 => (Vec::new(), false),
            _ => self.objects.list_versions(bucket, &prefix, &delimiter, resume, max).await.map_err(rados_error)?,
        };
        let encode = |s: &str| if url { url_encode(s) } else { s.to_owned() };
        let mut owners = self.owners();
        let (mut versions, mut markers, mut prefixes) = (Vec::new(), Vec::new(), Vec::new());
        for item in &items {
            match item {
                VersionItem::Version { key, entry, latest } => {
                    let owner = Some(owners.get(&entry.owner).await);
                    let (key, version_id) = (Some(encode(key)), Some(entry.version_id().to_owned()));
                    let last_modified = Some(timestamp(entry.mtime_ns));
                    if entry.delete_marker {
                        markers.push(DeleteMarkerEntry {
                            is_latest: Some(*latest),
                            key,
                            last_modified,
                            owner,
                            version_id,
                        });
                    } else {
                        versions.push(ObjectVersion {
                            e_tag: Some(etag(&entry.etag)),
                            is_latest: Some(*latest),
                            key,
                            last_modified,
                            owner,
                            size: Some(entry.size as i64),
                            storage_class: Some(ObjectVersionStorageClass::from(entry.storage_class.clone())),
                            version_id,
                            ..Default::default()
                        });
                    }
                }
                VersionItem::Prefix(p) => prefixes.push(CommonPrefix { prefix: Some(encode(p)) }),
            }
        }
        let next = items.last().filter(|_| truncated).map(crate::objects::Listed::resume);
        let encode_opt = |s: Option<String>| s.map(|s| encode(&s));
        Ok(ListObjectVersionsOutput {
            name: Some(bucket.name.clone()),
            prefix: encode_opt(input.prefix.clone()),
            delimiter: encode_opt(input.delimiter.clone()),
            key_marker: Some(encode_opt(input.key_marker.clone()).unwrap_or_default()),
            version_id_marker: Some(input.version_id_marker.clone().unwrap_or_default()),
            next_key_marker: next.as_ref().map(|(k, _)| encode(k)),
            next_version_id_marker: next.and_then(|(_, v)| v),
            max_keys: Some(max_keys),
            is_truncated: Some(truncated),
            versions: Some(versions),
            delete_markers: Some(markers),
            common_prefixes: Some(prefixes),
            encoding_type: input.encoding_type.clone(),
            ..Default::default()
        })
    }

    /// The source of a copy, readable by the requester and meeting the copy conditions.
    pub(super) async fn copy_source(
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
}
