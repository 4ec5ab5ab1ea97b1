//! Static large objects (Swift's SLO) in S3 terms: the stored manifest's form, shared with
//! the Swift front end, and S3 GETs of a manifest object, which answer with its segments
//! laid end to end as RGW does (the segments read with the caller's rights).

use super::access::Caller;
use super::common::ShoalS3;
use crate::access::Action;
use crate::head::ObjectMeta;
use bytes::Bytes;
use futures::stream::BoxStream;
use futures::{StreamExt, TryStreamExt};
use serde::{Deserialize, Serialize};
use shoal_types::err;
use std::ops::Range;
use std::sync::Arc;

/// Stored headers: the object is a static large object's manifest.
pub(crate) const STATIC_LARGE_OBJECT: &str = "x-static-large-object";
/// Stored headers kept for the gateway, never shown: a static large object's ETag and size.
pub(crate) const SLO_ETAG: &str = "x-slo-etag";
pub(crate) const SLO_SIZE: &str = "x-slo-size";

/// One segment of a large object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Segment {
    pub container: String,
    pub object: String,
    pub size: u64,
    pub etag: String,
}

/// A segment as the stored manifest holds it (Swift's stored form).
#[derive(Serialize, Deserialize)]
pub(crate) struct StoredSegment {
    pub name: String,
    pub hash: String,
    pub bytes: u64,
    #[serde(default)]
    pub content_type: String,
    #[serde(default)]
    pub last_modified: String,
}

/// The `(container, object)` of a segment path (`/container/object`).
pub(crate) fn segment_path(path: &str) -> Option<(&str, &str)> {
    let (container, object) = path.strip_prefix('/').unwrap_or(path).split_once('/')?;
    (!container.is_empty() && !object.is_empty()).then_some((container, object))
}

/// The segments a stored manifest lists; `None` if it is damaged.
pub(crate) fn stored_segments(manifest: &[u8]) -> Option<Vec<Segment>> {
    let stored: Vec<StoredSegment> = serde_json::from_slice(manifest).ok()?;
    stored
        .into_iter()
        .map(|s| {
            let (container, object) = segment_path(&s.name)?;
            Some(Segment { container: container.to_owned(), object: object.to_owned(), size: s.bytes, etag: s.hash })
        })
        .collect()
}

/// The segments `span` of the large object covers, each with the bytes of it to read.
pub(crate) fn pieces(segments: Vec<Segment>, span: Range<u64>) -> Vec<(Segment, Range<u64>)> {
    let mut out = Vec::new();
    let mut offset = 0;
    for segment in segments {
        let (start, end) = (offset, offset + segment.size);
        offset = end;
        if end <= span.start || start >= span.end {
            continue;
        }
        let part = span.start.max(start) - start..span.end.min(end) - start;
        out.push((segment, part));
    }
    out
}

/// What S3 shows of a static large object whose manifest has `meta`: the ETag and size
/// of the whole (`None` for any other object).
pub(super) fn large_whole(meta: &ObjectMeta) -> Option<ObjectMeta> {
    let (etag, size) = (meta.headers.get(SLO_ETAG)?, meta.headers.get(SLO_SIZE)?.parse().ok()?);
    meta.headers.contains_key(STATIC_LARGE_OBJECT).then(|| ObjectMeta {
        etag: etag.clone(),
        size,
        checksum: None,
        ..meta.clone()
    })
}

/// The segments of a static large object of `size` bytes whose stored manifest
/// `manifest` streams.
pub(super) async fn manifest_segments(
    manifest: BoxStream<'static, shoal_types::Result<Bytes>>,
    size: u64,
) -> s3s::S3Result<Vec<Segment>> {
    let bytes: Vec<Bytes> = manifest.try_collect().await.map_err(crate::error::rados_error)?;
    stored_segments(&bytes.concat())
        .filter(|segments| segments.iter().map(|s| s.size).sum::<u64>() == size)
        .ok_or_else(|| s3s::s3_error!(InternalError, "the stored manifest of a static large object is damaged"))
}

impl ShoalS3 {
    /// The bytes `span` of `segments` laid end to end, each segment read as `caller` when
    /// the previous one is done; one that changed size since the manifest was written
    /// ends the stream with an error.
    pub(super) fn segments_stream(
        &self,
        caller: Arc<Caller>,
        segments: Vec<Segment>,
        span: Range<u64>,
    ) -> BoxStream<'static, shoal_types::Result<Bytes>> {
        let s3 = self.clone();
        futures::stream::iter(pieces(segments, span))
            .then(move |(segment, part)| {
                let (s3, caller) = (s3.clone(), caller.clone());
                async move {
                    let name = format!("segment {}/{}", segment.container, segment.object);
                    let refused = |e: s3s::S3Error| err::io(format!("{name}: {}", e.code().as_str()));
                    let found = s3
                        .readable_object(&segment.container, &segment.object, None, &caller, Action::GetObject)
                        .await
                        .map_err(refused)?;
                    if found.meta.size != segment.size {
                        return Err(err::io(format!("{name} changed since the manifest was written")));
                    }
                    let key = s3.data_key(found.meta.sealed.as_ref(), None).map_err(refused)?;
                    Ok(s3.objects.read_range(&found.meta, found.inline, part, key))
                }
            })
            .try_flatten()
            .boxed()
    }
}
