//! Large objects, read as the concatenation of their segments (with `Range` over the whole):
//! - dynamic (DLO): an object with `X-Object-Manifest: <container>/<prefix>`, whose
//!   segments are the container's objects with that prefix, in name order, when read;
//! - static (SLO): `PUT ?multipart-manifest=put` with a JSON list of segments (`path`,
//!   optional `etag` and `size_bytes`), each checked when the manifest is stored; the
//!   manifest object holds Swift's stored form (`name`, `hash`, `bytes`, `content_type`,
//!   `last_modified`) and comes back with `?multipart-manifest=get`.
//!
//! The ETag of either is the MD5 of its segments' ETags, quoted, as Swift's.

use super::account::Outcome;
use super::object::{Found, META, OBJECT_MANIFEST, answer, created, formatted};
use super::{Call, Need, Swift, bad_request, limits, refused, text, unavailable, updated_meta};
use crate::meta::UserInfo;
use crate::request::StoredHeaders;
use crate::s3::{
    SLO_ETAG, SLO_SIZE, STATIC_LARGE_OBJECT, Segment, StoredSegment, pieces, segment_path, stored_segments,
};
use bytes::Bytes;
use futures::{StreamExt, TryStreamExt};
use http::{HeaderValue, Response, StatusCode};
use http_body_util::BodyExt;
use md5::{Digest, Md5};
use s3s::Body;
use s3s::dto::{GetObjectInput, HeadObjectInput, PutObjectInput, StreamingBlob};
use serde::Deserialize;
use shoal_objclass::bucket_index::ListItem;
use std::sync::Arc;

/// A segment as the client lists it in a manifest it PUTs.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct GivenSegment {
    path: String,
    #[serde(default)]
    etag: Option<String>,
    #[serde(default)]
    size_bytes: Option<u64>,
}

/// The ETag of a large object: the MD5 of its segments' ETags, hex.
fn large_etag(segments: &[Segment]) -> String {
    let mut md5 = Md5::new();
    for segment in segments {
        md5.update(segment.etag.as_bytes());
    }
    crate::sigv4::hex(&md5.finalize())
}

/// Parses a manifest a client PUTs: 400 (the message) when it is not a non-empty JSON
/// list of segments, or has too many.
fn parse_manifest(bytes: &[u8]) -> Result<Vec<GivenSegment>, String> {
    let segments: Vec<GivenSegment> =
        serde_json::from_slice(bytes).map_err(|e| format!("Manifest must be valid JSON: {e}"))?;
    match segments.len() {
        0 => Err("Manifest must list at least one segment".into()),
        n if n > limits::MAX_MANIFEST_SEGMENTS => {
            Err(format!("Too many segments: {n}, at most {}", limits::MAX_MANIFEST_SEGMENTS))
        }
        _ => Ok(segments),
    }
}

/// The segments of a stored manifest (what GET found of a static large object).
pub(super) async fn stored_manifest(found: Found) -> Result<Vec<Segment>, Response<Body>> {
    let body = found.body.unwrap_or_else(Body::empty);
    let bytes = http_body_util::Limited::new(body, limits::MAX_MANIFEST_SIZE + 1)
        .collect()
        .await
        .map_err(|_| {
            text(StatusCode::INTERNAL_SERVER_ERROR, "500 Internal Server Error: the manifest could not be read")
        })?
        .to_bytes();
    stored_segments(&bytes).ok_or_else(|| {
        text(StatusCode::INTERNAL_SERVER_ERROR, "500 Internal Server Error: the stored manifest is damaged")
    })
}

impl Swift {
    /// DELETE with `?multipart-manifest=delete`: a static large object's segments, then
    /// its manifest, answered as a bulk delete; any other object is deleted alone.
    pub(super) async fn delete_slo(&self, call: &Call<'_>, container: &str, key: &str) -> Response<Body> {
        let found = match self.found(call, container, key, false).await {
            Ok(found) => found,
            Err(response) => return response,
        };
        if !found.headers.contains_key(STATIC_LARGE_OBJECT) {
            return self.delete_object(call, container, key).await;
        }
        let segments = match stored_manifest(found).await {
            Ok(segments) => segments,
            Err(response) => return response,
        };
        let mut outcome = Outcome::default();
        for segment in segments {
            let response = self.delete_object(call, &segment.container, &segment.object).await;
            outcome.count(&format!("/{}/{}", segment.container, segment.object), response.status());
        }
        let response = self.delete_object(call, container, key).await;
        outcome.count(&format!("/{container}/{key}"), response.status());
        outcome.answer(call)
    }

    /// `PUT ?multipart-manifest=put`: checks every segment (it exists, is readable, not
    /// empty, and has the given ETag and size) and stores the manifest; 201 with the
    /// large object's ETag. 400 lists the segments that failed.
    pub(super) async fn put_slo(&self, call: &Call<'_>, container: &str, key: &str, body: Body) -> Response<Body> {
        let user = match self.object_actor(call, container, Need::Write).await {
            Ok(user) => user,
            Err(response) => return response,
        };
        let metadata = match updated_meta(&Default::default(), call.req.headers(), META) {
            Ok(metadata) => metadata,
            Err(response) => return response,
        };
        let bytes = match http_body_util::Limited::new(body, limits::MAX_MANIFEST_SIZE).collect().await {
            Ok(collected) => collected.to_bytes(),
            Err(_) => {
                return text(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    &format!("413 Request Entity Too Large: a manifest is at most {} bytes", limits::MAX_MANIFEST_SIZE),
                );
            }
        };
        let given = match parse_manifest(&bytes) {
            Ok(given) => given,
            Err(message) => return bad_request(&message),
        };
        let mut segments = Vec::new();
        let mut stored = Vec::new();
        let mut errors = Vec::new();
        for segment in &given {
            let Some((seg_container, seg_object)) = segment_path(&segment.path) else {
                errors.push(format!("{}, 400 Bad Request: not /container/object", segment.path));
                continue;
            };
            let reader = match self.object_actor(call, seg_container, Need::Read).await {
                Ok(reader) => reader,
                Err(response) => {
                    errors.push(format!("{}, {}", segment.path, response.status()));
                    continue;
                }
            };
            let input =
                HeadObjectInput { bucket: seg_container.to_owned(), key: seg_object.to_owned(), ..Default::default() };
            let head = match self.s3.head_object(Self::on_behalf(&reader, call.req, input)).await {
                Ok(head) => head,
                Err(e) => {
                    errors.push(format!("{}, {}", segment.path, refused(&e).status()));
                    continue;
                }
            };
            let size = head.output.content_length.unwrap_or(0) as u64;
            let etag = head.output.e_tag.as_ref().map(|e| e.value().to_owned()).unwrap_or_default();
            if super::object::is_large(&head.headers) {
                errors.push(format!("{}, a segment may not be a large object", segment.path));
            } else if size == 0 {
                errors.push(format!("{}, Too small; each segment must be at least 1 byte.", segment.path));
            } else if segment.etag.as_deref().is_some_and(|e| e.trim_matches('"') != etag) {
                errors.push(format!("{}, Etag Mismatch", segment.path));
            } else if segment.size_bytes.is_some_and(|s| s != size) {
                errors.push(format!("{}, Size Mismatch", segment.path));
            }
            stored.push(StoredSegment {
                name: format!("/{seg_container}/{seg_object}"),
                hash: etag.clone(),
                bytes: size,
                content_type: head.output.content_type.clone().unwrap_or_else(|| "binary/octet-stream".into()),
                last_modified: (head.output.last_modified.as_ref())
                    .and_then(|t| formatted(t, s3s::dto::TimestampFormat::DateTime))
                    .map(|t| t.trim_end_matches('Z').to_owned())
                    .unwrap_or_default(),
            });
            segments.push(Segment { container: seg_container.to_owned(), object: seg_object.to_owned(), size, etag });
        }
        if !errors.is_empty() {
            return bad_request(&format!("Errors:\n{}", errors.join("\n")));
        }
        let etag = large_etag(&segments);
        if call.header("etag").is_some_and(|e| e.trim_matches('"') != etag) {
            return text(StatusCode::UNPROCESSABLE_ENTITY, "422 Unprocessable Entity: the ETag is not the manifest's");
        }
        let total: u64 = segments.iter().map(|s| s.size).sum();
        let manifest = match serde_json::to_vec(&stored) {
            Ok(manifest) => Bytes::from(manifest),
            Err(_) => return text(StatusCode::INTERNAL_SERVER_ERROR, "500 Internal Server Error"),
        };
        let mut headers = match super::object::stored_headers(call, None) {
            Ok(headers) => headers,
            Err(response) => return response,
        };
        headers.insert(STATIC_LARGE_OBJECT.into(), "True".into());
        headers.insert(SLO_ETAG.into(), etag.clone());
        headers.insert(SLO_SIZE.into(), total.to_string());
        let input = PutObjectInput {
            bucket: container.to_owned(),
            key: key.to_owned(),
            content_length: Some(manifest.len() as i64),
            body: Some(StreamingBlob::from(Body::from(manifest))),
            content_type: call.header("content-type").map(str::to_owned),
            metadata: Some(metadata.into_iter().collect()),
            ..Default::default()
        };
        let mut req = Self::on_behalf(&user, call.req, input);
        req.extensions.insert(StoredHeaders(headers));
        match self.s3.put_object(req).await {
            Ok(_) => created(Some(&etag)),
            Err(e) => refused(&e),
        }
    }

    /// The answer for what GET or HEAD found: a large object's segments, concatenated
    /// (with `Range` over the whole), or the object as it is.
    pub(super) async fn assemble(&self, call: &Call<'_>, found: Found, head_only: bool) -> Response<Body> {
        let header = |name: &str| found.headers.get(name).and_then(|v| v.to_str().ok()).map(str::to_owned);
        let segments = if found.headers.contains_key(STATIC_LARGE_OBJECT) {
            match (head_only, header(SLO_ETAG), header(SLO_SIZE).and_then(|s| s.parse::<u64>().ok())) {
                // HEAD needs only the totals, kept beside the manifest.
                (true, Some(etag), Some(size)) => return large_head(found, &etag, size),
                _ => {
                    let Found { headers, user, .. } = &found;
                    let (headers, user) = (headers.clone(), user.clone());
                    match stored_manifest(found).await {
                        Ok(segments) => return self.serve(call, headers, user, segments, head_only),
                        Err(response) => return response,
                    }
                }
            }
        } else if let Some(manifest) = header(OBJECT_MANIFEST) {
            match self.dlo_segments(call, &manifest).await {
                Ok(segments) => segments,
                Err(response) => return response,
            }
        } else {
            return answer(found);
        };
        self.serve(call, found.headers, found.user, segments, head_only)
    }

    /// A dynamic large object's segments: the objects under its manifest's prefix.
    async fn dlo_segments(&self, call: &Call<'_>, manifest: &str) -> Result<Vec<Segment>, Response<Body>> {
        let (container, prefix) = manifest.split_once('/').unwrap_or((manifest, ""));
        let bucket = self.listable(call, container, Need::List).await?;
        let mut segments = Vec::new();
        let mut after = String::new();
        loop {
            let (items, more) = self.s3.objects.list(&bucket, prefix, "", &after, 1000).await.map_err(unavailable)?;
            after = items.last().map(|i| i.name().to_owned()).unwrap_or_default();
            for item in items {
                if let ListItem::Entry(object, entry) = item {
                    segments.push(Segment {
                        container: container.to_owned(),
                        object,
                        size: entry.size,
                        etag: entry.etag,
                    });
                }
            }
            if !more || after.is_empty() {
                return Ok(segments);
            }
        }
    }

    /// Serves segments as one object: 200 (or 206 for the request's `Range`) with the
    /// manifest's type and metadata, the large object's ETag and length.
    fn serve(
        &self,
        call: &Call<'_>,
        mut headers: http::HeaderMap,
        user: Arc<UserInfo>,
        segments: Vec<Segment>,
        head_only: bool,
    ) -> Response<Body> {
        let total: u64 = segments.iter().map(|s| s.size).sum();
        let etag = large_etag(&segments);
        let range = match call.header("range").map(s3s::dto::Range::parse) {
            None => None,
            Some(Ok(range)) if total > 0 => match range.check(total) {
                Ok(span) => Some(span),
                Err(_) => return text(StatusCode::RANGE_NOT_SATISFIABLE, "416 Requested Range Not Satisfiable"),
            },
            Some(_) => return text(StatusCode::RANGE_NOT_SATISFIABLE, "416 Requested Range Not Satisfiable"),
        };
        let span = range.clone().unwrap_or(0..total);
        headers.remove("content-range");
        for internal in [SLO_ETAG, SLO_SIZE] {
            headers.remove(internal);
        }
        let body = if head_only { Body::empty() } else { self.concatenate(call, user, segments, span.clone()) };
        let mut response = Response::new(body);
        if let Some(r) = &range
            && let Ok(value) = HeaderValue::from_str(&format!("bytes {}-{}/{total}", r.start, r.end.saturating_sub(1)))
        {
            headers.insert("content-range", value);
            *response.status_mut() = StatusCode::PARTIAL_CONTENT;
        }
        headers.insert("content-length", HeaderValue::from(span.end - span.start));
        if let Ok(value) = HeaderValue::from_str(&format!("\"{etag}\"")) {
            headers.insert("etag", value);
        }
        *response.headers_mut() = headers;
        response
    }

    /// The bytes `span` of the segments laid end to end, each read (as `user`) when the
    /// previous one is sent; a segment that changed size since it was listed ends the
    /// body with an error.
    fn concatenate(
        &self,
        call: &Call<'_>,
        user: Arc<UserInfo>,
        segments: Vec<Segment>,
        span: std::ops::Range<u64>,
    ) -> Body {
        let parts = pieces(segments, span);
        let s3 = self.s3.clone();
        let origin = call.req.extensions().get::<crate::request::Origin>().cloned();
        let stream = futures::stream::iter(parts)
            .then(move |(segment, part)| {
                let (s3, user, origin) = (s3.clone(), user.clone(), origin.clone());
                async move { read_segment(&s3, user, origin, segment, part).await }
            })
            .try_flatten();
        let frames = stream.map_ok(http_body::Frame::data);
        Body::http_body_unsync(http_body_util::StreamBody::new(frames))
    }
}

/// Reads bytes `part` of one segment.
async fn read_segment(
    s3: &crate::s3::ShoalS3,
    user: Arc<UserInfo>,
    origin: Option<crate::request::Origin>,
    segment: Segment,
    part: std::ops::Range<u64>,
) -> Result<s3s::stream::DynByteStream, s3s::StdError> {
    let whole = part.start == 0 && part.end == segment.size;
    let range = (!whole).then(|| s3s::dto::Range::Int { first: part.start, last: Some(part.end - 1) });
    let input =
        GetObjectInput { bucket: segment.container.clone(), key: segment.object.clone(), range, ..Default::default() };
    let mut req = http::Request::new(());
    if let Some(origin) = origin {
        req.extensions_mut().insert(origin);
    }
    let out = s3.get_object(Swift::on_behalf(&user, &req, input)).await.map_err(|e| {
        Box::new(std::io::Error::other(format!(
            "segment {}/{}: {}",
            segment.container,
            segment.object,
            e.code().as_str()
        ))) as s3s::StdError
    })?;
    if out.output.content_length != Some((part.end - part.start) as i64) {
        return Err(Box::new(std::io::Error::other(format!(
            "segment {}/{} changed since it was listed",
            segment.container, segment.object
        ))));
    }
    match out.output.body {
        Some(body) => Ok(s3s::stream::DynByteStream::from(body)),
        None => Err(Box::new(std::io::Error::other("a segment came without a body"))),
    }
}

/// HEAD of a static large object: its totals, kept beside the manifest.
fn large_head(found: Found, etag: &str, size: u64) -> Response<Body> {
    let mut response = answer(Found { body: None, ..found });
    let headers = response.headers_mut();
    headers.insert("content-length", HeaderValue::from(size));
    if let Ok(value) = HeaderValue::from_str(&format!("\"{etag}\"")) {
        headers.insert("etag", value);
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn manifests_are_parsed_and_refused_as_swift_does() {
        let given = parse_manifest(br#"[{"path": "/c/s1", "etag": "e", "size_bytes": 5}, {"path": "c/s2"}]"#).unwrap();
        assert_eq!(given.len(), 2);
        assert_eq!(segment_path(&given[0].path), Some(("c", "s1")));
        assert_eq!(segment_path(&given[1].path), Some(("c", "s2")));
        for bad in [&b"[]"[..], b"{}", b"not json", br#"[{"path": "/c/o", "extra": 1}]"#, br#"[{"etag": "e"}]"#] {
            assert!(parse_manifest(bad).is_err(), "{}", String::from_utf8_lossy(bad));
        }
        let many = format!("[{}]", vec![r#"{"path": "/c/o"}"#; 1001].join(","));
        assert!(parse_manifest(many.as_bytes()).is_err());
        for bad in ["/c", "c/", "//o", ""] {
            assert_eq!(segment_path(bad), None, "{bad}");
        }
    }

    #[test]
    fn the_etag_is_the_md5_of_the_segments_etags() {
        let segment = |etag: &str| Segment { container: "c".into(), object: "o".into(), size: 1, etag: etag.into() };
        // python3: hashlib.md5(b"ab").hexdigest()
        assert_eq!(large_etag(&[segment("a"), segment("b")]), "187ef4436122d1cc2f40dc2b92f0eba0");
    }

    proptest! {
        #[test]
        fn any_manifest_body_parses_or_is_refused_without_panicking(body in proptest::collection::vec(any::<u8>(), 0..200)) {
            if let Ok(segments) = parse_manifest(&body) {
                prop_assert!(!segments.is_empty() && segments.len() <= limits::MAX_MANIFEST_SEGMENTS);
            }
        }
    }
}
