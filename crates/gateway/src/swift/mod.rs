//! The Swift API beside S3 on the same gateway, a container being an S3 bucket. So far:
//! - TempAuth-style v1 authentication: `GET /auth/v1.0` (or `/auth`) with `X-Auth-User:
//!   <uid>:<subuser>` and `X-Auth-Key` answers a storage URL and a token that every gateway
//!   of the cluster accepts ([`token`]);
//! - under `/<rgw_swift_url_prefix>/v1`, the account: HEAD (counts) and GET (the container
//!   listing, plain or JSON, with `marker`, `end_marker`, `prefix`, `limit`, `reverse`);
//!   containers: PUT, HEAD and DELETE; objects: PUT (chunked too, `ETag` checked,
//!   `X-Object-Meta-*`), GET and HEAD (`Range`), DELETE. Container and object operations run
//!   as the S3 operations of [`ShoalS3`] on behalf of the token's user, so S3's access rules,
//!   versioning, encryption and notifications apply alike. The subuser's access level is
//!   checked first. Container listings, POST, COPY, large objects, ACLs and temp URLs answer
//!   501 until they are built.

pub mod token;

use crate::config::GatewayConfig;
use crate::meta::{Meta, SubuserAccess, UserInfo};
use crate::s3::ShoalS3;
use http::{HeaderMap, HeaderValue, Method, Request, Response, StatusCode};
use s3s::dto::{
    CreateBucketInput, DeleteBucketInput, DeleteObjectInput, GetObjectInput, HeadBucketInput, HeadObjectInput,
    PutObjectInput, StreamingBlob,
};
use s3s::{Body, S3, S3Request};
use std::sync::Arc;

/// Most entries one listing returns (Swift's `container_listing_limit`).
const LISTING_LIMIT: usize = 10_000;

/// The Swift front: v1 auth and the storage API.
pub struct Swift {
    s3: Arc<ShoalS3>,
}

/// Who a storage request authenticated as.
struct Identity {
    user: Arc<UserInfo>,
    access: SubuserAccess,
}

impl Identity {
    /// Whether the subuser's access allows `method`: reads (GET, HEAD) need read access,
    /// anything else write access.
    fn may(&self, method: &Method) -> bool {
        let reads = matches!(*method, Method::GET | Method::HEAD);
        match self.access {
            SubuserAccess::Read => reads,
            SubuserAccess::Write => !reads,
            SubuserAccess::ReadWrite | SubuserAccess::Full => true,
        }
    }
}

impl Swift {
    /// The front over the gateway's S3 service state.
    pub fn new(s3: Arc<ShoalS3>) -> Swift {
        Swift { s3 }
    }

    /// Whether a request is Swift's: the auth entry point, or under the storage prefix.
    pub fn handles(&self, method: &Method, path: &str) -> bool {
        is_auth(method, path) || storage_path(&self.s3.config.swift_url_prefix, path).is_some()
    }

    /// Answers a Swift request (`secure`: it came over TLS).
    pub async fn handle(&self, req: Request<Body>, secure: bool) -> Response<Body> {
        let (parts, body) = req.into_parts();
        let req = &Request::from_parts(parts, ());
        let now = crate::objects::now_ns() / 1_000_000_000;
        let (meta, config) = (&self.s3.meta, &self.s3.config);
        if is_auth(req.method(), req.uri().path()) {
            return authenticate(meta, config, req.headers(), secure, now).await;
        }
        let Some(rest) = storage_path(&config.swift_url_prefix, req.uri().path()) else {
            return text(StatusCode::NOT_FOUND, "404 Not Found");
        };
        let identity = match self.identify(req.headers(), now).await {
            Ok(identity) => identity,
            Err(response) => return response,
        };
        if !identity.may(req.method()) {
            return text(StatusCode::FORBIDDEN, "403 Forbidden: the subuser's access does not allow this");
        }
        let path = percent_encoding::percent_decode_str(rest).decode_utf8_lossy();
        let (container, object) = path.split_once('/').unwrap_or((&path, ""));
        let mut response = match (container, object, req.method().clone()) {
            ("", _, Method::HEAD) => self.account(&identity, None).await,
            ("", _, Method::GET) => self.account(&identity, Some(req.uri().query().unwrap_or_default())).await,
            ("", _, _) => text(StatusCode::METHOD_NOT_ALLOWED, "405 Method Not Allowed"),
            (name, "", Method::PUT) => self.create_container(&identity, req, name).await,
            (name, "", Method::HEAD) => self.container(&identity, req, name).await,
            (name, "", Method::DELETE) => self.delete_container(&identity, req, name).await,
            (_, "", _) => text(StatusCode::NOT_IMPLEMENTED, "501 Not Implemented: container listings come next"),
            (bucket, key, Method::PUT) => self.put_object(&identity, req, bucket, key, body).await,
            (bucket, key, method @ (Method::GET | Method::HEAD)) => {
                self.get_object(&identity, req, bucket, key, method == Method::HEAD).await
            }
            (bucket, key, Method::DELETE) => self.delete_object(&identity, req, bucket, key).await,
            _ => text(StatusCode::NOT_IMPLEMENTED, "501 Not Implemented: this object operation comes next"),
        };
        if let Ok(value) = HeaderValue::from_str(&format!("{now}.00000")) {
            response.headers_mut().insert("x-timestamp", value);
        }
        response
    }

    /// The user and access of the request's token (`X-Auth-Token`, or `X-Storage-Token`):
    /// 401 when it is missing, bad or expired, or its subuser or user is gone or suspended.
    async fn identify(&self, headers: &HeaderMap, now: u64) -> Result<Identity, Response<Body>> {
        let unauthorized = |why: &str| text(StatusCode::UNAUTHORIZED, &format!("401 Unauthorized: {why}"));
        let presented = ["x-auth-token", "x-storage-token"].iter().find_map(|h| headers.get(*h)?.to_str().ok());
        let Some(presented) = presented else { return Err(unauthorized("no X-Auth-Token")) };
        let meta = &self.s3.meta;
        let key = meta.swift_token_key().await.map_err(unavailable)?;
        let (subuser, _) = token::verify(&key, presented, now).map_err(|refused| match refused {
            token::Refused::Invalid => unauthorized("the token is not valid"),
            token::Refused::Expired => unauthorized("the token expired"),
        })?;
        let uid = subuser.split_once(':').map_or("", |(uid, _)| uid);
        let user = meta.user(uid).await.map_err(unavailable)?.ok_or_else(|| unauthorized("no such user"))?;
        let access = user.subuser(&subuser).map(|s| s.permissions).ok_or_else(|| unauthorized("no such subuser"))?;
        if user.suspended {
            return Err(unauthorized("UserSuspended"));
        }
        Ok(Identity { user, access })
    }

    /// The account: its counts (HEAD, `listing` None), or also its containers (GET, with
    /// the query of the listing).
    async fn account(&self, identity: &Identity, listing: Option<&str>) -> Response<Body> {
        let query = match listing.map(ListingQuery::parse).transpose() {
            Ok(query) => query,
            Err((status, message)) => return text(status, &message),
        };
        let (meta, objects) = (&self.s3.meta, &self.s3.objects);
        let names = match meta.user_buckets(&identity.user.uid).await {
            Ok(names) => names,
            Err(e) => return unavailable(e),
        };
        let mut containers = Vec::new();
        let (mut total_objects, mut total_bytes) = (0, 0);
        for name in names {
            let bucket = match meta.bucket(&name).await {
                Ok(Some(bucket)) => bucket,
                Ok(None) => continue, // removed meanwhile
                Err(e) => return unavailable(e),
            };
            let stats = match objects.bucket_stats(&bucket).await {
                Ok(stats) => stats,
                Err(e) => return unavailable(e),
            };
            total_objects += stats.entries;
            total_bytes += stats.bytes;
            containers.push((name, stats.entries, stats.bytes, bucket.created_ns));
        }
        let counts = [
            ("x-account-container-count", containers.len() as u64),
            ("x-account-object-count", total_objects),
            ("x-account-bytes-used", total_bytes),
        ];
        let mut response = match query {
            None => text(StatusCode::NO_CONTENT, ""),
            Some(query) => {
                let listed = query.select(containers.into_iter().map(|c| (c.0.clone(), c)).collect());
                match query.format {
                    _ if listed.is_empty() && query.format == Format::Plain => text(StatusCode::NO_CONTENT, ""),
                    Format::Plain => text(
                        StatusCode::OK,
                        listed.iter().map(|c| c.0.as_str()).collect::<Vec<_>>().join("\n").as_str(),
                    ),
                    Format::Json => {
                        let entries: Vec<serde_json::Value> = listed
                            .iter()
                            .map(|(name, count, bytes, created_ns)| {
                                serde_json::json!({"name": name, "count": count, "bytes": bytes, "last_modified": swift_time(*created_ns)})
                            })
                            .collect();
                        json(&serde_json::Value::Array(entries))
                    }
                }
            }
        };
        for (name, value) in counts {
            response.headers_mut().insert(name, HeaderValue::from(value));
        }
        response
    }
}

impl Swift {
    /// An S3 request for `input` on behalf of the token's user.
    fn on_behalf<B, T>(identity: &Identity, req: &Request<B>, input: T) -> S3Request<T> {
        let mut extensions = http::Extensions::new();
        extensions.insert(SwiftCaller(identity.user.clone()));
        if let Some(origin) = req.extensions().get::<crate::notifications::Origin>() {
            extensions.insert(origin.clone());
        }
        S3Request {
            input,
            method: req.method().clone(),
            uri: req.uri().clone(),
            headers: HeaderMap::new(),
            extensions,
            credentials: None,
            region: None,
            service: None,
            trailing_headers: None,
        }
    }

    /// PUT of a container: 201 created, 202 when the user has it already, 409 when another
    /// user does.
    async fn create_container<B>(&self, identity: &Identity, req: &Request<B>, name: &str) -> Response<Body> {
        if let Err(message) = validate_container(name) {
            return text(StatusCode::BAD_REQUEST, &format!("400 Bad Request: {message}"));
        }
        match self.s3.meta.bucket(name).await {
            Ok(Some(bucket)) if bucket.owner == identity.user.uid => return text(StatusCode::ACCEPTED, ""),
            Ok(Some(_)) => return text(StatusCode::CONFLICT, "409 Conflict: the container belongs to another user"),
            Ok(None) => {}
            Err(e) => return unavailable(e),
        }
        let input = CreateBucketInput { bucket: name.to_owned(), ..Default::default() };
        match self.s3.create_bucket(Self::on_behalf(identity, req, input)).await {
            Ok(_) => text(StatusCode::CREATED, ""),
            Err(e) => refused(&e),
        }
    }

    /// HEAD of a container: 204 with its counts and creation time.
    async fn container<B>(&self, identity: &Identity, req: &Request<B>, name: &str) -> Response<Body> {
        let input = HeadBucketInput { bucket: name.to_owned(), ..Default::default() };
        if let Err(e) = self.s3.head_bucket(Self::on_behalf(identity, req, input)).await {
            return refused(&e);
        }
        let bucket = match self.s3.meta.bucket(name).await {
            Ok(Some(bucket)) => bucket,
            Ok(None) => return text(StatusCode::NOT_FOUND, "404 Not Found"),
            Err(e) => return unavailable(e),
        };
        let stats = match self.s3.objects.bucket_stats(&bucket).await {
            Ok(stats) => stats,
            Err(e) => return unavailable(e),
        };
        let mut response = text(StatusCode::NO_CONTENT, "");
        let headers = response.headers_mut();
        headers.insert("x-container-object-count", HeaderValue::from(stats.entries));
        headers.insert("x-container-bytes-used", HeaderValue::from(stats.bytes));
        response
    }

    /// DELETE of a container: 204, 404 when there is none, 409 when it holds objects.
    async fn delete_container<B>(&self, identity: &Identity, req: &Request<B>, name: &str) -> Response<Body> {
        let input = DeleteBucketInput { bucket: name.to_owned(), ..Default::default() };
        match self.s3.delete_bucket(Self::on_behalf(identity, req, input)).await {
            Ok(_) => text(StatusCode::NO_CONTENT, ""),
            Err(e) => refused(&e),
        }
    }
}

impl Swift {
    /// PUT of an object: 201 with its `etag`; 422 when the body's MD5 differs from the
    /// request's `ETag`. The body may come chunked.
    async fn put_object<B>(
        &self,
        identity: &Identity,
        req: &Request<B>,
        bucket: &str,
        key: &str,
        body: Body,
    ) -> Response<Body> {
        let headers = req.headers();
        let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
        let content_md5 = match header("etag").map(|etag| hex_md5_as_base64(etag.trim_matches('"'))) {
            Some(Ok(md5)) => Some(md5),
            Some(Err(())) => {
                return text(StatusCode::UNPROCESSABLE_ENTITY, "422 Unprocessable Entity: the ETag is not an MD5");
            }
            None => None,
        };
        let input = PutObjectInput {
            bucket: bucket.to_owned(),
            key: key.to_owned(),
            body: Some(StreamingBlob::new(body)),
            content_length: header("content-length").and_then(|l| l.parse().ok()),
            content_type: header("content-type").map(str::to_owned),
            content_md5,
            metadata: Some(object_meta(headers)),
            ..Default::default()
        };
        match self.s3.put_object(Self::on_behalf(identity, req, input)).await {
            Ok(out) => {
                let mut response = text(StatusCode::CREATED, "");
                if let Some(etag) = out.output.e_tag.and_then(|e| HeaderValue::from_str(e.value()).ok()) {
                    response.headers_mut().insert("etag", etag);
                }
                response
            }
            Err(e) if *e.code() == s3s::S3ErrorCode::BadDigest => {
                text(StatusCode::UNPROCESSABLE_ENTITY, "422 Unprocessable Entity: the body's MD5 is not its ETag")
            }
            Err(e) => refused(&e),
        }
    }

    /// GET (or HEAD, `head_only`) of an object, with `Range`: 200 or 206, its `etag`,
    /// `Content-Type` (`binary/octet-stream` when none was given, as RGW),
    /// `Last-Modified` and `X-Object-Meta-*`.
    async fn get_object<B>(
        &self,
        identity: &Identity,
        req: &Request<B>,
        bucket: &str,
        key: &str,
        head_only: bool,
    ) -> Response<Body> {
        let range =
            match req.headers().get("range").map(|r| r.to_str().ok().and_then(|r| s3s::dto::Range::parse(r).ok())) {
                Some(None) => return text(StatusCode::RANGE_NOT_SATISFIABLE, "416 Requested Range Not Satisfiable"),
                Some(range) => range,
                None => None,
            };
        let input = GetObjectInput { bucket: bucket.to_owned(), key: key.to_owned(), range, ..Default::default() };
        let out = match self.s3.get_object(Self::on_behalf(identity, req, input)).await {
            Ok(out) => out.output,
            Err(e) if *e.code() == s3s::S3ErrorCode::InvalidRange => {
                return text(StatusCode::RANGE_NOT_SATISFIABLE, "416 Requested Range Not Satisfiable");
            }
            Err(e) => return refused(&e),
        };
        let mut response = match (head_only, out.body) {
            (false, Some(body)) => Response::new(Body::from(s3s::stream::DynByteStream::from(body))),
            _ => Response::new(Body::empty()),
        };
        if out.content_range.is_some() {
            *response.status_mut() = StatusCode::PARTIAL_CONTENT;
        }
        let headers = response.headers_mut();
        let mut set = |name: &'static str, value: Option<String>| {
            if let Some(value) = value.and_then(|v| HeaderValue::from_str(&v).ok()) {
                headers.insert(name, value);
            }
        };
        set("content-length", out.content_length.map(|l| l.to_string()));
        set("content-range", out.content_range);
        set("content-type", Some(out.content_type.unwrap_or_else(|| "binary/octet-stream".into())));
        set("etag", out.e_tag.map(|e| e.value().to_owned()));
        set("accept-ranges", Some("bytes".into()));
        let mut http_date = Vec::new();
        if out.last_modified.is_some_and(|t| t.format(s3s::dto::TimestampFormat::HttpDate, &mut http_date).is_ok()) {
            set("last-modified", String::from_utf8(http_date).ok());
        }
        for (name, value) in out.metadata.unwrap_or_default() {
            if let (Ok(name), Ok(value)) = (
                http::HeaderName::from_bytes(format!("x-object-meta-{name}").as_bytes()),
                HeaderValue::from_str(&value),
            ) {
                headers.insert(name, value);
            }
        }
        response
    }

    /// DELETE of an object: 204, or 404 when there is none (unlike S3's 204).
    async fn delete_object<B>(&self, identity: &Identity, req: &Request<B>, bucket: &str, key: &str) -> Response<Body> {
        let head = HeadObjectInput { bucket: bucket.to_owned(), key: key.to_owned(), ..Default::default() };
        if let Err(e) = self.s3.head_object(Self::on_behalf(identity, req, head)).await {
            return refused(&e);
        }
        let input = DeleteObjectInput { bucket: bucket.to_owned(), key: key.to_owned(), ..Default::default() };
        match self.s3.delete_object(Self::on_behalf(identity, req, input)).await {
            Ok(_) => text(StatusCode::NO_CONTENT, ""),
            Err(e) => refused(&e),
        }
    }
}

/// The `X-Object-Meta-*` headers as S3 user metadata (names lower-case, without the prefix).
fn object_meta(headers: &HeaderMap) -> s3s::dto::Metadata {
    headers
        .iter()
        .filter_map(|(name, value)| {
            let name = name.as_str().strip_prefix("x-object-meta-")?;
            Some((name.to_owned(), value.to_str().ok()?.to_owned()))
        })
        .collect()
}

/// A hex MD5 (Swift's `ETag`) as base64 (S3's `Content-MD5`).
fn hex_md5_as_base64(hex: &str) -> Result<String, ()> {
    use base64::Engine;
    if hex.len() != 32 {
        return Err(());
    }
    let bytes: Result<Vec<u8>, ()> =
        (0..16).map(|i| u8::from_str_radix(hex.get(2 * i..2 * i + 2).ok_or(())?, 16).map_err(|_| ())).collect();
    Ok(base64::engine::general_purpose::STANDARD.encode(bytes?))
}

/// The caller of an S3 operation run for a Swift request: the token's user.
#[derive(Clone, Debug)]
pub(crate) struct SwiftCaller(pub(crate) Arc<UserInfo>);

/// Container names as RGW takes them: 3 to 255 bytes, no `/`, not starting with `.`.
fn validate_container(name: &str) -> Result<(), String> {
    match name.len() {
        n if n > 255 => Err(format!("Container name length of {n} longer than 255")),
        n if n < 3 => Err(format!("container name '{name}' is shorter than 3 bytes")),
        _ if name.starts_with('.') || name.contains('/') => {
            Err(format!("container name '{name}' starts with '.' or holds '/'"))
        }
        _ => Ok(()),
    }
}

/// The Swift answer to an S3 operation's error.
fn refused(e: &s3s::S3Error) -> Response<Body> {
    use s3s::S3ErrorCode as Code;
    let status = match e.code() {
        Code::NoSuchBucket | Code::NoSuchKey => StatusCode::NOT_FOUND,
        Code::AccessDenied => StatusCode::FORBIDDEN,
        Code::BucketNotEmpty | Code::BucketAlreadyExists | Code::BucketAlreadyOwnedByYou => StatusCode::CONFLICT,
        _ => e.status_code().unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
    };
    let reason = status.canonical_reason().unwrap_or_default();
    text(status, &format!("{} {reason}: {}", status.as_u16(), e.message().unwrap_or(e.code().as_str())))
}

/// What follows `/<prefix>/v1` in `path` (`""` for the account), if the path is Swift's.
fn storage_path<'a>(prefix: &str, path: &'a str) -> Option<&'a str> {
    let rest = path.strip_prefix('/')?.strip_prefix(prefix.trim_matches('/'))?.strip_prefix("/v1")?;
    match rest {
        "" | "/" => Some(""),
        _ => rest.strip_prefix('/'),
    }
}

/// A listing's format (`format=`, default plain).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Format {
    Plain,
    Json,
}

/// The parameters of a listing.
#[derive(Debug)]
struct ListingQuery {
    format: Format,
    marker: Option<String>,
    end_marker: Option<String>,
    prefix: String,
    limit: usize,
    reverse: bool,
}

impl ListingQuery {
    /// Parses a listing's query string: 400 for a bad `limit` or `format`, 412 for a
    /// `limit` above 10,000 (as Swift).
    fn parse(query: &str) -> Result<ListingQuery, (StatusCode, String)> {
        let mut q = ListingQuery {
            format: Format::Plain,
            marker: None,
            end_marker: None,
            prefix: String::new(),
            limit: LISTING_LIMIT,
            reverse: false,
        };
        for (key, value) in form_urlencoded::parse(query.as_bytes()) {
            match &*key {
                "format" => {
                    q.format = match &*value {
                        "json" => Format::Json,
                        "plain" | "" => Format::Plain,
                        other => {
                            return Err((
                                StatusCode::BAD_REQUEST,
                                format!("400 Bad Request: format '{other}' is not plain or json"),
                            ));
                        }
                    }
                }
                "marker" => q.marker = Some(value.into_owned()),
                "end_marker" => q.end_marker = Some(value.into_owned()),
                "prefix" => q.prefix = value.into_owned(),
                "reverse" => q.reverse = matches!(&*value.to_ascii_lowercase(), "true" | "1" | "yes" | "on"),
                "limit" => {
                    q.limit = value.parse().map_err(|_| {
                        (StatusCode::BAD_REQUEST, format!("400 Bad Request: limit '{value}' is not a number"))
                    })?;
                    if q.limit > LISTING_LIMIT {
                        return Err((
                            StatusCode::PRECONDITION_FAILED,
                            format!("412 Precondition Failed: limit is at most {LISTING_LIMIT}"),
                        ));
                    }
                }
                _ => {}
            }
        }
        Ok(q)
    }

    /// The entries (by name, in name order) this listing returns.
    fn select<T>(&self, mut entries: Vec<(String, T)>) -> Vec<T> {
        entries.sort_by(|a, b| a.0.cmp(&b.0));
        if self.reverse {
            entries.reverse();
        }
        let after = |name: &str, bound: &str| if self.reverse { name < bound } else { name > bound };
        entries
            .into_iter()
            .filter(|(name, _)| name.starts_with(&self.prefix))
            .filter(|(name, _)| self.marker.as_deref().is_none_or(|m| after(name, m)))
            .filter(|(name, _)| self.end_marker.as_deref().is_none_or(|m| after(m, name)))
            .take(self.limit)
            .map(|(_, entry)| entry)
            .collect()
    }
}

/// A time as Swift's JSON listings give it: UTC, microseconds, no zone.
fn swift_time(ns: u64) -> String {
    match time::OffsetDateTime::from_unix_timestamp_nanos(i128::from(ns)) {
        Ok(t) => format!(
            "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:06}",
            t.year(),
            u8::from(t.month()),
            t.day(),
            t.hour(),
            t.minute(),
            t.second(),
            t.microsecond()
        ),
        Err(_) => String::new(),
    }
}

/// A JSON answer.
fn json(value: &serde_json::Value) -> Response<Body> {
    let mut response = Response::new(Body::from(value.to_string()));
    response
        .headers_mut()
        .insert(http::header::CONTENT_TYPE, HeaderValue::from_static("application/json; charset=utf-8"));
    response
}

/// 503 for a failure of the object layer (logged).
fn unavailable(e: shoal_types::RadosError) -> Response<Body> {
    tracing::warn!(error = %e, "a Swift request failed in the object layer");
    text(StatusCode::SERVICE_UNAVAILABLE, "503 Service Unavailable: please retry")
}

/// Whether a request is for the v1 auth entry point.
pub fn is_auth(method: &Method, path: &str) -> bool {
    (method == Method::GET || method == Method::HEAD)
        && matches!(path.trim_end_matches('/'), "/auth" | "/auth/v1.0" | "/auth/1.0")
}

/// A plain-text answer with `status`, as Swift's proxy gives its errors.
/// An empty `message` gives an empty body (as 201, 202 and 204 answers have).
fn text(status: StatusCode, message: &str) -> Response<Body> {
    let body = if message.is_empty() { Body::empty() } else { Body::from(format!("{message}\n")) };
    let mut response = Response::new(body);
    *response.status_mut() = status;
    response.headers_mut().insert(http::header::CONTENT_TYPE, HeaderValue::from_static("text/plain; charset=utf-8"));
    response
}

/// Answers a v1 auth request: 204 with `X-Storage-Url`, `X-Auth-Token` (also as
/// `X-Storage-Token`) and `X-Auth-Token-Expires`; 401 for an unknown subuser, a wrong key
/// or a suspended user (as RGW answers; TempAuth also says 401 for unknown users, where RGW
/// says 403). `secure`: the request came over TLS; `now`: seconds since the epoch.
pub async fn authenticate(
    meta: &Meta,
    config: &GatewayConfig,
    headers: &HeaderMap,
    secure: bool,
    now: u64,
) -> Response<Body> {
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok()).unwrap_or_default();
    let (subuser, key) = (header("x-auth-user"), header("x-auth-key"));
    let unauthorized = || text(StatusCode::UNAUTHORIZED, "401 Unauthorized: the user or key is not known here");
    let Some((uid, _)) = subuser.split_once(':') else { return unauthorized() };
    if key.is_empty() {
        return unauthorized();
    }
    let (user, token_key) = match (meta.user(uid).await, meta.swift_token_key().await) {
        (Ok(Some(user)), Ok(token_key)) => (user, token_key),
        (Ok(None), _) => return unauthorized(),
        (Err(e), _) | (_, Err(e)) => {
            tracing::warn!(error = %e, "reading a user or the Swift token key failed");
            return text(StatusCode::SERVICE_UNAVAILABLE, "503 Service Unavailable: please retry");
        }
    };
    let known = user.subuser(subuser).is_some()
        && user.swift_keys.iter().any(|k| {
            k.user == subuser
                && aws_lc_rs::constant_time::verify_slices_are_equal(k.secret_key.as_bytes(), key.as_bytes()).is_ok()
        });
    if !known {
        return unauthorized();
    }
    if user.suspended {
        return text(StatusCode::UNAUTHORIZED, "401 Unauthorized: UserSuspended");
    }
    let lifetime = config.swift_token_expiration.as_secs().max(1);
    let token = token::issue(&token_key, subuser, now.saturating_add(lifetime));
    let host = header("host");
    let host = if host.is_empty() { "localhost" } else { host };
    let scheme = if secure { "https" } else { "http" };
    let storage_url = format!("{scheme}://{host}/{}/v1", config.swift_url_prefix.trim_matches('/'));
    let mut response = Response::new(Body::empty());
    *response.status_mut() = StatusCode::NO_CONTENT;
    let answer = [
        ("x-storage-url", storage_url),
        ("x-auth-token", token.clone()),
        ("x-storage-token", token),
        ("x-auth-token-expires", lifetime.to_string()),
    ];
    for (name, value) in answer {
        if let Ok(value) = HeaderValue::from_str(&value) {
            response.headers_mut().insert(name, value);
        }
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn storage_paths_split_at_the_prefix_and_version() {
        assert_eq!(storage_path("swift", "/swift/v1"), Some(""));
        assert_eq!(storage_path("swift", "/swift/v1/"), Some(""));
        assert_eq!(storage_path("swift", "/swift/v1/c/o/with/slashes"), Some("c/o/with/slashes"));
        assert_eq!(storage_path("/swift/", "/swift/v1/c"), Some("c"));
        for other in ["/swift", "/swift/v2", "/swift/v10", "/bucket/v1", "/", "", "/swiftv1"] {
            assert_eq!(storage_path("swift", other), None, "{other}");
        }
    }

    #[test]
    fn listings_page_by_marker_end_marker_prefix_limit_and_reverse() {
        let names = ["b", "a", "c", "ab"].map(|n| (n.to_owned(), n));
        let select = |query: &str| ListingQuery::parse(query).unwrap().select(names.to_vec());
        assert_eq!(select(""), ["a", "ab", "b", "c"]);
        assert_eq!(select("marker=a&limit=2"), ["ab", "b"]);
        assert_eq!(select("end_marker=b"), ["a", "ab"]);
        assert_eq!(select("prefix=a&format=json"), ["a", "ab"]);
        assert_eq!(select("reverse=true&marker=c"), ["b", "ab", "a"]);
        assert_eq!(ListingQuery::parse("limit=10001").unwrap_err().0, StatusCode::PRECONDITION_FAILED);
        assert_eq!(ListingQuery::parse("limit=-1").unwrap_err().0, StatusCode::BAD_REQUEST);
        assert_eq!(ListingQuery::parse("format=xml2").unwrap_err().0, StatusCode::BAD_REQUEST);
        assert_eq!(swift_time(1_795_761_042_123_456_789), "2026-11-27T06:30:42.123456");
    }

    proptest! {
        #[test]
        fn any_query_or_path_parses_or_is_refused_without_panicking(query in ".{0,80}", path in "/?[a-z0-9/]{0,20}") {
            if let Ok(q) = ListingQuery::parse(&query) {
                prop_assert!(q.limit <= LISTING_LIMIT);
            }
            if let Some(rest) = storage_path("swift", &path) {
                prop_assert!(path.ends_with(rest) && path.starts_with("/swift/v1"));
            }
        }
    }
}
