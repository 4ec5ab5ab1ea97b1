//! Objects: PUT (chunked too, `ETag` checked, `X-Object-Meta-*`, `X-Delete-At`/`-After`,
//! `X-Object-Manifest`, `X-Copy-From`), GET and HEAD (`Range`, conditions, large
//! objects), POST (metadata), COPY, DELETE. An object whose `X-Delete-At` has passed
//! reads as absent and is removed then (unless rewritten meanwhile).

use super::{Call, Need, Requester, Swift, bad_request, refused, tempurl, text, updated_meta};
use crate::meta::UserInfo;
use crate::objexp::DELETE_AT;
use crate::request::StoredHeaders;
use crate::s3::{SLO_ETAG, SLO_SIZE, STATIC_LARGE_OBJECT};
use http::{HeaderMap, HeaderValue, Method, Response, StatusCode};
use s3s::Body;
use s3s::dto::{
    CopyObjectInput, CopySource, DeleteObjectInput, ETagCondition, GetObjectInput, HeadObjectInput, MetadataDirective,
    PutObjectInput, StreamingBlob, Timestamp, TimestampFormat,
};
use std::collections::BTreeMap;
use std::sync::Arc;

/// The prefix of object metadata headers.
pub(super) const META: &str = "x-object-meta-";
/// Stored headers: a dynamic large object's `<container>/<prefix>`.
pub(super) const OBJECT_MANIFEST: &str = "x-object-manifest";

/// What a GET or HEAD found, before large objects are assembled.
pub(super) struct Found {
    pub headers: HeaderMap,
    pub status: StatusCode,
    pub body: Option<Body>,
    pub user: Arc<UserInfo>,
}

impl Swift {
    /// A request on an object.
    pub(super) async fn object(&self, call: &Call<'_>, container: &str, key: &str, body: Body) -> Response<Body> {
        let manifest = call.query("multipart-manifest");
        match call.req.method().clone() {
            Method::PUT if call.req.headers().contains_key("x-copy-from") => {
                match copy_path(call.header("x-copy-from").unwrap_or_default()) {
                    Ok((from_container, from_key)) => {
                        self.copy(call, (&from_container, &from_key), (container, key)).await
                    }
                    Err(response) => response,
                }
            }
            Method::PUT if manifest.as_deref() == Some("put") => self.put_slo(call, container, key, body).await,
            Method::PUT => self.put_object(call, container, key, body).await,
            method if method.as_str() == "COPY" => match copy_path(call.header("destination").unwrap_or_default()) {
                Ok((to_container, to_key)) => self.copy(call, (container, key), (&to_container, &to_key)).await,
                Err(response) => response,
            },
            method @ (Method::GET | Method::HEAD) => {
                let head = method == Method::HEAD;
                match self.found(call, container, key, head).await {
                    Ok(found) if manifest.as_deref() == Some("get") => answer(found),
                    Ok(found) => self.assemble(call, found, head).await,
                    Err(response) => response,
                }
            }
            Method::POST => self.post_object(call, container, key).await,
            Method::DELETE if manifest.as_deref() == Some("delete") => self.delete_slo(call, container, key).await,
            Method::DELETE => self.delete_object(call, container, key).await,
            _ => text(StatusCode::METHOD_NOT_ALLOWED, "405 Method Not Allowed"),
        }
    }

    /// The user an object request acts as: for a request without a token that carries a
    /// temp URL, the container's owner if the signature holds (else 401); otherwise as
    /// [`Swift::acting`] says.
    pub(super) async fn object_actor(
        &self,
        call: &Call<'_>,
        container: &str,
        need: Need,
    ) -> Result<Arc<UserInfo>, Response<Body>> {
        if !matches!(call.requester, Requester::Anonymous) || call.query("temp_url_sig").is_none() {
            return self.acting(call, container, need).await.map(|(user, _)| user);
        }
        let bucket = self.bucket(container).await.map_err(|_| unauthorized_temp_url())?;
        let owner = self.owner_of(&bucket).await?;
        let keys: Vec<&str> = ["temp-url-key", "temp-url-key-2"]
            .iter()
            .flat_map(|k| [owner.account_meta.get(*k), bucket.swift.meta.get(*k)])
            .flatten()
            .map(String::as_str)
            .collect();
        let method = call.req.method().as_str();
        let query = call.req.uri().query().unwrap_or_default();
        match tempurl::verify(method, call.req.uri().path(), query, &keys, call.now) {
            Ok(()) => Ok(owner),
            Err(tempurl::Refused::Expired) => {
                Err(text(StatusCode::UNAUTHORIZED, "401 Unauthorized: the temp URL expired"))
            }
            Err(_) => Err(unauthorized_temp_url()),
        }
    }

    /// PUT: 201 with its `etag`; 422 when the body's MD5 differs from the request's
    /// `ETag`. The body may come chunked.
    async fn put_object(&self, call: &Call<'_>, container: &str, key: &str, body: Body) -> Response<Body> {
        let user = match self.object_actor(call, container, Need::Write).await {
            Ok(user) => user,
            Err(response) => return response,
        };
        let (metadata, stored) =
            match (updated_meta(&BTreeMap::new(), call.req.headers(), META), stored_headers(call, None)) {
                (Ok(metadata), Ok(stored)) => (metadata, stored),
                (Err(response), _) | (_, Err(response)) => return response,
            };
        let content_md5 = match call.header("etag").map(|etag| hex_md5_as_base64(etag.trim_matches('"'))) {
            Some(Ok(md5)) => Some(md5),
            Some(Err(())) => {
                return text(StatusCode::UNPROCESSABLE_ENTITY, "422 Unprocessable Entity: the ETag is not an MD5");
            }
            None => None,
        };
        let input = PutObjectInput {
            bucket: container.to_owned(),
            key: key.to_owned(),
            body: Some(StreamingBlob::new(body)),
            content_length: call.header("content-length").and_then(|l| l.parse().ok()),
            content_type: call.header("content-type").map(str::to_owned),
            content_md5,
            metadata: Some(metadata.into_iter().collect()),
            ..Default::default()
        };
        let mut req = Self::on_behalf(&user, call.req, input);
        req.extensions.insert(StoredHeaders(stored));
        match self.s3.put_object(req).await {
            Ok(out) => created(out.output.e_tag.as_ref().map(|e| e.value())),
            Err(e) => refused(&e),
        }
    }

    /// An object as GET (or HEAD, `head_only`) reads it through S3, with the request's
    /// `Range` and conditions; 404 once its `X-Delete-At` has passed.
    pub(super) async fn found(
        &self,
        call: &Call<'_>,
        container: &str,
        key: &str,
        head_only: bool,
    ) -> Result<Found, Response<Body>> {
        let user = self.object_actor(call, container, Need::Read).await?;
        let range = match call.header("range").map(|r| s3s::dto::Range::parse(r).ok()) {
            Some(None) => return Err(text(StatusCode::RANGE_NOT_SATISFIABLE, "416 Requested Range Not Satisfiable")),
            Some(range) => range,
            None => None,
        };
        let read = |range| self.read(call, &user, container, key, head_only, range);
        let (headers, body, status) = match read(range).await {
            // The range was for a large object, not its (shorter) manifest: read the
            // manifest whole, the range goes to the segments.
            Ok(found) if range.is_some() && is_large(&found.0) => read(None).await,
            Err(e) if range.is_some() && *e.code() == s3s::S3ErrorCode::InvalidRange => match read(None).await {
                Ok(found) if is_large(&found.0) => Ok(found),
                _ => Err(e),
            },
            other => other,
        }
        .map_err(|e| refused(&e))?;
        self.unexpired(call, container, key, &headers)?;
        Ok(Found { headers, status, body, user })
    }

    /// One GET (or HEAD) through S3 as `user`, with the request's conditions: the Swift
    /// headers, the body, and 200 or 206.
    async fn read(
        &self,
        call: &Call<'_>,
        user: &Arc<UserInfo>,
        container: &str,
        key: &str,
        head_only: bool,
        range: Option<s3s::dto::Range>,
    ) -> s3s::S3Result<(HeaderMap, Option<Body>, StatusCode)> {
        let etag =
            |name: &str| call.header(name).and_then(|v| ETagCondition::parse_http_header(quoted(v).as_bytes()).ok());
        let date = |name: &str| call.header(name).and_then(|v| Timestamp::parse(TimestampFormat::HttpDate, v).ok());
        if head_only {
            let input = HeadObjectInput {
                bucket: container.to_owned(),
                key: key.to_owned(),
                if_match: etag("if-match"),
                if_none_match: etag("if-none-match"),
                if_modified_since: date("if-modified-since"),
                if_unmodified_since: date("if-unmodified-since"),
                ..Default::default()
            };
            let out = self.s3.head_object(Self::on_behalf(user, call.req, input)).await?;
            let (mut headers, o) = (out.headers, out.output);
            describe(&mut headers, o.content_length, None, o.content_type, o.e_tag, o.last_modified, o.metadata);
            return Ok((headers, None, StatusCode::OK));
        }
        let input = GetObjectInput {
            bucket: container.to_owned(),
            key: key.to_owned(),
            range,
            if_match: etag("if-match"),
            if_none_match: etag("if-none-match"),
            if_modified_since: date("if-modified-since"),
            if_unmodified_since: date("if-unmodified-since"),
            ..Default::default()
        };
        let out = self.s3.get_object(Self::on_behalf(user, call.req, input)).await?;
        let (mut headers, o) = (out.headers, out.output);
        let status = if o.content_range.is_some() { StatusCode::PARTIAL_CONTENT } else { StatusCode::OK };
        describe(&mut headers, o.content_length, o.content_range, o.content_type, o.e_tag, o.last_modified, o.metadata);
        let body = o.body.map(|b| Body::from(s3s::stream::DynByteStream::from(b)));
        Ok((headers, body, status))
    }

    /// 404 if the object whose Swift `headers` these are has expired (it is removed in
    /// the background then, unless it was rewritten meanwhile).
    fn unexpired(
        &self,
        call: &Call<'_>,
        container: &str,
        key: &str,
        headers: &HeaderMap,
    ) -> Result<(), Response<Body>> {
        let at = headers.get(DELETE_AT).and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
        if at.is_none_or(|at| at > call.now) {
            return Ok(());
        }
        let (service, container, key, now) = (self.s3.service.clone(), container.to_owned(), key.to_owned(), call.now);
        tokio::spawn(async move {
            if let Err(e) = service.expire(&container, &key, now).await {
                tracing::warn!(%container, %key, error = %e, "removing an expired Swift object failed");
            }
        });
        Err(text(StatusCode::NOT_FOUND, "404 Not Found"))
    }

    /// POST: replaces the object's metadata (`X-Object-Meta-*`, and `Content-Type` when
    /// given), sets or removes (`X-Remove-Delete-At`) its expiry; 202.
    async fn post_object(&self, call: &Call<'_>, container: &str, key: &str) -> Response<Body> {
        let user = match self.object_actor(call, container, Need::Write).await {
            Ok(user) => user,
            Err(response) => return response,
        };
        let input = HeadObjectInput { bucket: container.to_owned(), key: key.to_owned(), ..Default::default() };
        let current = match self.s3.head_object(Self::on_behalf(&user, call.req, input)).await {
            Ok(current) => current,
            Err(e) => return refused(&e),
        };
        let (metadata, stored) = match (
            updated_meta(&BTreeMap::new(), call.req.headers(), META),
            stored_headers(call, Some(&current.headers)),
        ) {
            (Ok(metadata), Ok(stored)) => (metadata, stored),
            (Err(response), _) | (_, Err(response)) => return response,
        };
        let content_type = call.header("content-type").map(str::to_owned).or(current.output.content_type);
        let response =
            self.rewrite((container, key), (container, key), &user, call, metadata, content_type, stored).await;
        match response {
            Ok(_) => text(StatusCode::ACCEPTED, ""),
            Err(response) => response,
        }
    }

    /// COPY, or PUT with `X-Copy-From`: the source's data, metadata (with the request's
    /// `X-Object-Meta-*` over it, or only those with `X-Fresh-Metadata: true`) and type;
    /// 201 with `X-Copied-From`. A large object's manifest is copied as it is.
    async fn copy(&self, call: &Call<'_>, from: (&str, &str), to: (&str, &str)) -> Response<Body> {
        let source_user = match self.object_actor(call, from.0, Need::Read).await {
            Ok(user) => user,
            Err(response) => return response,
        };
        let user = match self.object_actor(call, to.0, Need::Write).await {
            Ok(user) => user,
            Err(response) => return response,
        };
        let input = HeadObjectInput { bucket: from.0.to_owned(), key: from.1.to_owned(), ..Default::default() };
        let source = match self.s3.head_object(Self::on_behalf(&source_user, call.req, input)).await {
            Ok(source) => source,
            Err(e) => return refused(&e),
        };
        let fresh = call.header("x-fresh-metadata").is_some_and(|v| v.eq_ignore_ascii_case("true"));
        let base: BTreeMap<String, String> = if fresh {
            BTreeMap::new()
        } else {
            source.output.metadata.clone().unwrap_or_default().into_iter().collect()
        };
        let mut kept = source.headers.clone();
        kept.remove(DELETE_AT);
        let (metadata, stored) =
            match (updated_meta(&base, call.req.headers(), META), stored_headers(call, Some(&kept))) {
                (Ok(metadata), Ok(stored)) => (metadata, stored),
                (Err(response), _) | (_, Err(response)) => return response,
            };
        let content_type = call.header("content-type").map(str::to_owned).or(source.output.content_type);
        match self.rewrite(from, to, &user, call, metadata, content_type, stored).await {
            Ok(etag) => {
                let mut response = created(etag.as_deref());
                let headers = response.headers_mut();
                if let Ok(value) = HeaderValue::from_str(&format!("{}/{}", from.0, from.1)) {
                    headers.insert("x-copied-from", value);
                }
                let modified =
                    source.output.last_modified.as_ref().and_then(|t| formatted(t, TimestampFormat::HttpDate));
                if let Some(value) = modified.and_then(|d| HeaderValue::from_str(&d).ok()) {
                    headers.insert("x-copied-from-last-modified", value);
                }
                response
            }
            Err(response) => response,
        }
    }

    /// Writes `to` from `from`'s data with new metadata, type and stored headers (S3's
    /// CopyObject with the REPLACE directive); returns the new ETag.
    #[allow(clippy::too_many_arguments)]
    async fn rewrite(
        &self,
        from: (&str, &str),
        to: (&str, &str),
        user: &Arc<UserInfo>,
        call: &Call<'_>,
        metadata: BTreeMap<String, String>,
        content_type: Option<String>,
        stored: BTreeMap<String, String>,
    ) -> Result<Option<String>, Response<Body>> {
        let input = CopyObjectInput::builder()
            .bucket(to.0.to_owned())
            .key(to.1.to_owned())
            .copy_source(CopySource::Bucket { bucket: from.0.into(), key: from.1.into(), version_id: None })
            .metadata_directive(Some(MetadataDirective::from_static(MetadataDirective::REPLACE)))
            .metadata(Some(metadata.into_iter().collect()))
            .content_type(content_type)
            .build()
            .map_err(|e| text(StatusCode::INTERNAL_SERVER_ERROR, &format!("500 Internal Server Error: {e}")))?;
        let mut req = Self::on_behalf(user, call.req, input);
        req.extensions.insert(StoredHeaders(stored));
        match self.s3.copy_object(req).await {
            Ok(out) => Ok(out.output.copy_object_result.and_then(|r| r.e_tag).map(|e| e.value().to_owned())),
            Err(e) => Err(refused(&e)),
        }
    }

    /// DELETE: 204, or 404 when there is none (unlike S3's 204).
    pub(super) async fn delete_object(&self, call: &Call<'_>, container: &str, key: &str) -> Response<Body> {
        let user = match self.object_actor(call, container, Need::Write).await {
            Ok(user) => user,
            Err(response) => return response,
        };
        let headers = match self.read(call, &user, container, key, true, None).await {
            Ok((headers, _, _)) => headers,
            Err(e) => return refused(&e),
        };
        if let Err(response) = self.unexpired(call, container, key, &headers) {
            return response;
        }
        let input = DeleteObjectInput { bucket: container.to_owned(), key: key.to_owned(), ..Default::default() };
        match self.s3.delete_object(Self::on_behalf(&user, call.req, input)).await {
            Ok(_) => text(StatusCode::NO_CONTENT, ""),
            Err(e) => refused(&e),
        }
    }
}

/// The headers to store with a write: those of `current` kept (for POST and COPY), then
/// the request's `X-Delete-At` / `X-Delete-After` (or `X-Remove-Delete-At`) and
/// `X-Object-Manifest`; 400 for a bad or passed time, or a manifest without a container.
pub(super) fn stored_headers(
    call: &Call<'_>,
    current: Option<&HeaderMap>,
) -> Result<BTreeMap<String, String>, Response<Body>> {
    let mut stored = BTreeMap::new();
    for name in [DELETE_AT, OBJECT_MANIFEST, STATIC_LARGE_OBJECT, SLO_ETAG, SLO_SIZE] {
        if let Some(value) = current.and_then(|c| c.get(name)?.to_str().ok()) {
            stored.insert(name.to_owned(), value.to_owned());
        }
    }
    let seconds = |name: &str| -> Result<Option<u64>, Response<Body>> {
        match call.header(name) {
            None => Ok(None),
            Some(v) => v.trim().parse().map(Some).map_err(|_| bad_request(&format!("Non-integer {name}"))),
        }
    };
    let delete_at = match (seconds("x-delete-at")?, seconds("x-delete-after")?) {
        (Some(at), _) => Some(at),
        (None, Some(after)) => Some(call.now.saturating_add(after)),
        (None, None) => None,
    };
    if let Some(at) = delete_at {
        if at <= call.now {
            return Err(bad_request("X-Delete-At in past"));
        }
        stored.insert(DELETE_AT.to_owned(), at.to_string());
    }
    if call.req.headers().contains_key("x-remove-delete-at") {
        stored.remove(DELETE_AT);
    }
    if let Some(manifest) = call.header(OBJECT_MANIFEST) {
        let manifest = percent_encoding::percent_decode_str(manifest).decode_utf8_lossy();
        match manifest.split_once('/') {
            Some((container, _)) if !container.is_empty() => {
                stored.insert(OBJECT_MANIFEST.to_owned(), manifest.into_owned())
            }
            _ => return Err(bad_request("X-Object-Manifest must be in the format container/prefix")),
        };
    }
    Ok(stored)
}

/// The `(container, object)` of an `X-Copy-From` or `Destination` header
/// (`[/]container/object`, URL-encoded): 412 when it names no object, as Swift.
fn copy_path(header: &str) -> Result<(String, String), Response<Body>> {
    let decoded = percent_encoding::percent_decode_str(header).decode_utf8_lossy();
    match decoded.trim_start_matches('/').split_once('/') {
        Some((container, object)) if !container.is_empty() && !object.is_empty() => {
            super::validate_object_name(object).map_err(|m| bad_request(&m))?;
            Ok((container.to_owned(), object.to_owned()))
        }
        _ => Err(text(
            StatusCode::PRECONDITION_FAILED,
            "412 Precondition Failed: the copy source or destination must be in the format container/object",
        )),
    }
}

/// Sets the Swift headers of an object from S3's answer: `Content-Length`,
/// `Content-Range`, `Content-Type` (`binary/octet-stream` when none was stored, as RGW),
/// an unquoted `Etag`, `Last-Modified` and `X-Object-Meta-*`.
fn describe(
    headers: &mut HeaderMap,
    length: Option<i64>,
    range: Option<String>,
    content_type: Option<String>,
    etag: Option<s3s::dto::ETag>,
    modified: Option<Timestamp>,
    metadata: Option<s3s::dto::Metadata>,
) {
    let mut set = |name: &'static str, value: Option<String>| {
        if let Some(value) = value.and_then(|v| HeaderValue::from_str(&v).ok()) {
            headers.insert(name, value);
        }
    };
    set("content-length", length.map(|l| l.to_string()));
    set("content-range", range);
    set("content-type", Some(content_type.unwrap_or_else(|| "binary/octet-stream".into())));
    set("etag", etag.map(|e| e.value().to_owned()));
    set("accept-ranges", Some("bytes".into()));
    set("last-modified", modified.as_ref().and_then(|t| formatted(t, TimestampFormat::HttpDate)));
    super::show_meta(headers, META, &metadata.unwrap_or_default().into_iter().collect());
}

/// A time in one of S3's formats.
pub(super) fn formatted(time: &Timestamp, format: TimestampFormat) -> Option<String> {
    let mut out = Vec::new();
    time.format(format, &mut out).ok()?;
    String::from_utf8(out).ok()
}

/// The answer for what GET or HEAD found, as stored (a manifest as its own bytes).
pub(super) fn answer(found: Found) -> Response<Body> {
    let mut response = Response::new(found.body.unwrap_or_else(Body::empty));
    *response.status_mut() = found.status;
    *response.headers_mut() = found.headers;
    for internal in [SLO_ETAG, SLO_SIZE] {
        response.headers_mut().remove(internal);
    }
    response
}

/// Whether stored headers make an object a large object's manifest.
pub(super) fn is_large(headers: &HeaderMap) -> bool {
    headers.contains_key(STATIC_LARGE_OBJECT) || headers.contains_key(OBJECT_MANIFEST)
}

/// 201 with the new object's unquoted `Etag`.
pub(super) fn created(etag: Option<&str>) -> Response<Body> {
    let mut response = text(StatusCode::CREATED, "");
    if let Some(etag) = etag.and_then(|e| HeaderValue::from_str(e.trim_matches('"')).ok()) {
        response.headers_mut().insert("etag", etag);
    }
    response
}

/// 401 for a temp URL no key signed.
fn unauthorized_temp_url() -> Response<Body> {
    text(StatusCode::UNAUTHORIZED, "401 Unauthorized: Temp URL invalid")
}

/// An ETag as an HTTP header's quoted value (Swift clients often send it bare).
fn quoted(etag: &str) -> String {
    match etag.trim() {
        "*" => "*".into(),
        e if e.starts_with('"') => e.to_owned(),
        e => format!("\"{e}\""),
    }
}

/// A hex MD5 (Swift's `ETag`) as base64 (S3's `Content-MD5`).
fn hex_md5_as_base64(hex: &str) -> Result<String, ()> {
    use base64::Engine;
    match crate::sigv4::unhex(hex) {
        Some(bytes) if bytes.len() == 16 => Ok(base64::engine::general_purpose::STANDARD.encode(bytes)),
        _ => Err(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copy_paths_name_a_container_and_an_object() {
        assert_eq!(copy_path("/c/a/b").unwrap(), ("c".to_owned(), "a/b".to_owned()));
        assert_eq!(copy_path("c/%E2%82%AC").unwrap(), ("c".to_owned(), "€".to_owned()));
        for bad in ["", "/c", "c/", "//o"] {
            assert_eq!(copy_path(bad).unwrap_err().status(), StatusCode::PRECONDITION_FAILED, "{bad}");
        }
        assert_eq!(copy_path("c/../x").unwrap_err().status(), StatusCode::BAD_REQUEST);
        assert_eq!(quoted("abc"), "\"abc\"");
        assert_eq!(quoted("\"abc\""), "\"abc\"");
        assert_eq!(hex_md5_as_base64("d41d8cd98f00b204e9800998ecf8427e").unwrap(), "1B2M2Y8AsgTpgAmY7PhCfg==");
        assert!(hex_md5_as_base64("xyz").is_err());
    }
}
