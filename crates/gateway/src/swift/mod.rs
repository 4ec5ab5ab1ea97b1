//! The Swift API beside S3 on the same gateway, a container being an S3 bucket:
//! - TempAuth-style v1 authentication: `GET /auth/v1.0` (or `/auth`) with `X-Auth-User:
//!   <uid>:<subuser>` and `X-Auth-Key` answers a storage URL and a token that every gateway
//!   of the cluster accepts ([`token`]); `GET /info` the cluster's capabilities;
//! - under `/<rgw_swift_url_prefix>/v1`, the account ([`account`]), containers
//!   ([`container`]) and objects ([`object`]), large objects ([`large`]), bulk delete and
//!   temp URLs ([`tempurl`]).
//!
//! Container and object operations run as the S3 operations of [`ShoalS3`] on behalf of a
//! user, so S3's access rules, versioning, encryption and notifications apply alike. The
//! user is the token's, or the container's owner when a container ACL ([`acl`]) or a temp
//! URL lets the requester in. The subuser's access level is checked first.

// Errors here are answers (`Response`s), made once per request: boxing them buys nothing.
#![allow(clippy::result_large_err)]

mod account;
pub mod acl;
mod container;
mod large;
mod listing;
mod object;
pub mod tempurl;
pub mod token;

use crate::config::GatewayConfig;
use crate::meta::{BucketInfo, Meta, SubuserAccess, UserInfo};
use crate::request::{Origin, SwiftCaller};
use crate::s3::ShoalS3;
use http::{HeaderMap, HeaderValue, Method, Request, Response, StatusCode};
use s3s::{Body, S3Request};
use std::collections::BTreeMap;
use std::sync::Arc;

/// The Swift front: v1 auth and the storage API.
pub struct Swift {
    s3: Arc<ShoalS3>,
}

/// A user a storage request authenticated as.
struct Identity {
    user: Arc<UserInfo>,
    /// `<uid>:<name>`.
    subuser: String,
    access: SubuserAccess,
}

/// Who sends a storage request.
enum Requester {
    /// A token's user.
    User(Identity),
    /// No token: let in only by container ACLs naming referrers, or by a temp URL.
    Anonymous,
}

impl Requester {
    /// The token's user, if there was a token.
    fn identity(&self) -> Option<&Identity> {
        match self {
            Requester::User(identity) => Some(identity),
            Requester::Anonymous => None,
        }
    }
}

/// The user a request acts as, and the container's record when it was read on the way.
type Acting = (Arc<UserInfo>, Option<Arc<BucketInfo>>);

/// What a request does to a container, for its ACLs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Need {
    /// Reads an object or the container's metadata.
    Read,
    /// Lists the container.
    List,
    /// Writes or deletes an object.
    Write,
}

/// One storage request, parsed.
struct Call<'a> {
    req: &'a Request<()>,
    requester: Requester,
    /// Seconds since the epoch.
    now: u64,
}

impl Call<'_> {
    fn header(&self, name: &str) -> Option<&str> {
        self.req.headers().get(name).and_then(|v| v.to_str().ok())
    }

    /// The value of query parameter `name`, if given.
    fn query(&self, name: &str) -> Option<String> {
        let query = self.req.uri().query().unwrap_or_default();
        form_urlencoded::parse(query.as_bytes()).find(|(k, _)| k == name).map(|(_, v)| v.into_owned())
    }

    /// The request's referrer's host, for `.r:` ACLs.
    fn referrer_host(&self) -> Option<String> {
        let referrer = self.header("referer")?;
        let after_scheme = referrer.split_once("://").map_or(referrer, |(_, rest)| rest);
        let host = after_scheme.split(['/', '?', '#']).next()?;
        Some(host.rsplit_once('@').map_or(host, |(_, h)| h).split(':').next()?.to_ascii_lowercase())
    }
}

impl Swift {
    /// The front over the gateway's S3 service state.
    pub fn new(s3: Arc<ShoalS3>) -> Swift {
        Swift { s3 }
    }

    /// Whether a request is Swift's: the auth or info entry point, or under the storage prefix.
    pub fn handles(&self, method: &Method, path: &str) -> bool {
        is_auth(method, path) || is_info(method, path) || storage_path(&self.s3.config.swift_url_prefix, path).is_some()
    }

    /// Answers a Swift request (`secure`: it came over TLS).
    pub async fn handle(&self, req: Request<Body>, secure: bool) -> Response<Body> {
        let (parts, body) = req.into_parts();
        let req = &Request::from_parts(parts, ());
        let now = crate::clock::now_ns() / 1_000_000_000;
        let mut response = self.route(req, body, secure, now).await;
        let headers = response.headers_mut();
        if let Ok(value) = HeaderValue::from_str(&format!("{now}.00000")) {
            headers.insert("x-timestamp", value);
        }
        if let Some(id) = req.extensions().get::<Origin>().and_then(|o| HeaderValue::from_str(&o.request_id).ok()) {
            headers.insert("x-trans-id", id.clone());
            headers.insert("x-openstack-request-id", id);
        }
        response
    }

    async fn route(&self, req: &Request<()>, body: Body, secure: bool, now: u64) -> Response<Body> {
        let (meta, config) = (&self.s3.meta, &self.s3.config);
        if is_auth(req.method(), req.uri().path()) {
            return authenticate(meta, config, req.headers(), secure, now).await;
        }
        if is_info(req.method(), req.uri().path()) {
            return info(config);
        }
        let Some(rest) = storage_path(&config.swift_url_prefix, req.uri().path()) else {
            return text(StatusCode::NOT_FOUND, "404 Not Found");
        };
        let requester = match self.identify(req.headers(), now).await {
            Ok(requester) => requester,
            Err(response) => return response,
        };
        if let Some(identity) = requester.identity()
            && !may(identity.access, req.method())
        {
            return text(StatusCode::FORBIDDEN, "403 Forbidden: the subuser's access does not allow this");
        }
        let path = match decode_path(rest) {
            Ok(path) => path,
            Err(message) => {
                return text(StatusCode::PRECONDITION_FAILED, &format!("412 Precondition Failed: {message}"));
            }
        };
        let (container, object) = path.split_once('/').unwrap_or((&path, ""));
        if let Err(message) = validate_object_name(object) {
            return text(StatusCode::BAD_REQUEST, &format!("400 Bad Request: {message}"));
        }
        let call = Call { req, requester, now };
        match (container, object) {
            ("", _) => self.account(&call, body).await,
            (container, "") => self.container(&call, container, body).await,
            (container, object) => self.object(&call, container, object, body).await,
        }
    }

    /// Who sends the request: the user of its token (`X-Auth-Token`, or `X-Storage-Token`),
    /// or anonymous without one; 401 when the token is bad or expired, or its subuser or
    /// user is gone or suspended.
    async fn identify(&self, headers: &HeaderMap, now: u64) -> Result<Requester, Response<Body>> {
        let unauthorized = |why: &str| text(StatusCode::UNAUTHORIZED, &format!("401 Unauthorized: {why}"));
        let presented = ["x-auth-token", "x-storage-token"].iter().find_map(|h| headers.get(*h)?.to_str().ok());
        let Some(presented) = presented else { return Ok(Requester::Anonymous) };
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
        Ok(Requester::User(Identity { user, subuser, access }))
    }

    /// The container's record: 404 when there is none.
    async fn bucket(&self, name: &str) -> Result<Arc<BucketInfo>, Response<Body>> {
        match self.s3.meta.bucket(name).await {
            Ok(Some(bucket)) => Ok(bucket),
            Ok(None) => Err(text(StatusCode::NOT_FOUND, "404 Not Found")),
            Err(e) => Err(unavailable(e)),
        }
    }

    /// The user a request on `container` acts as: the requester, or the container's owner
    /// when the container's ACL lets the requester in for `need`. A user the ACL does not
    /// name still acts as itself (S3's grants and policies may let it in); an anonymous
    /// requester gets 401, as from Swift. Also returns the container's record, if it read one.
    async fn acting(&self, call: &Call<'_>, container: &str, need: Need) -> Result<Acting, Response<Body>> {
        let bucket = match (self.bucket(container).await, call.requester.identity()) {
            (Ok(bucket), _) => bucket,
            // S3 answers the user with 404.
            (Err(_), Some(identity)) => return Ok((identity.user.clone(), None)),
            (Err(response), None) => return Err(response),
        };
        if let Some(identity) = call.requester.identity()
            && identity.user.uid == bucket.owner
        {
            return Ok((identity.user.clone(), Some(bucket)));
        }
        let who = acl::Who {
            user: call.requester.identity().map(|i| (i.user.uid.as_str(), i.subuser.as_str())),
            referrer: call.referrer_host(),
        };
        let list = match need {
            Need::Read | Need::List => bucket.swift.read_acl.as_deref(),
            Need::Write => bucket.swift.write_acl.as_deref(),
        };
        if list.is_some_and(|list| acl::allows(list, &who, need == Need::List)) {
            return Ok((self.owner_of(&bucket).await?, Some(bucket)));
        }
        match call.requester.identity() {
            Some(identity) => Ok((identity.user.clone(), Some(bucket))),
            None => Err(text(
                StatusCode::UNAUTHORIZED,
                "401 Unauthorized: no token, and the container's ACL does not let you in",
            )),
        }
    }

    /// The container a HEAD or a listing reads, once the acting user may list it (S3's HEAD
    /// Bucket decides).
    async fn listable(&self, call: &Call<'_>, container: &str, need: Need) -> Result<Arc<BucketInfo>, Response<Body>> {
        let (user, bucket) = self.acting(call, container, need).await?;
        let input = s3s::dto::HeadBucketInput { bucket: container.to_owned(), ..Default::default() };
        self.s3.head_bucket(Self::on_behalf(&user, call.req, input)).await.map_err(|e| refused(&e))?;
        match bucket {
            Some(bucket) => Ok(bucket),
            None => self.bucket(container).await,
        }
    }

    /// The owner of a container.
    async fn owner_of(&self, bucket: &BucketInfo) -> Result<Arc<UserInfo>, Response<Body>> {
        match self.s3.meta.user(&bucket.owner).await {
            Ok(Some(owner)) => Ok(owner),
            Ok(None) => Err(text(StatusCode::NOT_FOUND, "404 Not Found: the container's owner is gone")),
            Err(e) => Err(unavailable(e)),
        }
    }

    /// An S3 request for `input` on behalf of `user`.
    fn on_behalf<T>(user: &Arc<UserInfo>, req: &Request<()>, input: T) -> S3Request<T> {
        let mut extensions = http::Extensions::new();
        extensions.insert(SwiftCaller(user.clone()));
        if let Some(origin) = req.extensions().get::<Origin>() {
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
}

/// Whether a subuser's access allows `method`: reads (GET, HEAD) need read access,
/// anything else write access.
fn may(access: SubuserAccess, method: &Method) -> bool {
    let reads = matches!(*method, Method::GET | Method::HEAD);
    match access {
        SubuserAccess::Read => reads,
        SubuserAccess::Write => !reads,
        SubuserAccess::ReadWrite | SubuserAccess::Full => true,
    }
}

/// Swift's limits on the metadata of one account, container or object.
pub mod limits {
    /// Most metadata items.
    pub const MAX_META_COUNT: usize = 90;
    /// Longest name, without its prefix.
    pub const MAX_META_NAME_LENGTH: usize = 128;
    /// Longest value.
    pub const MAX_META_VALUE_LENGTH: usize = 256;
    /// Most bytes of names and values together.
    pub const MAX_META_OVERALL_SIZE: usize = 4096;
    /// Longest object name, in bytes.
    pub const MAX_OBJECT_NAME_LENGTH: usize = 1024;
    /// Most entries one listing returns (`container_listing_limit`).
    pub const LISTING_LIMIT: usize = 10_000;
    /// Most segments of a static large object.
    pub const MAX_MANIFEST_SEGMENTS: usize = 1000;
    /// Largest static large object manifest, in bytes.
    pub const MAX_MANIFEST_SIZE: usize = 8 << 20;
    /// Most names one bulk delete takes.
    pub const MAX_DELETES_PER_REQUEST: usize = 10_000;
}

/// Metadata from `prefix` headers (names lower-case, without the prefix): each set on
/// `stored`, removed when its value is empty or it comes as `X-Remove-<...>-Meta-<name>`;
/// 400 when the result breaks Swift's limits.
fn updated_meta(
    stored: &BTreeMap<String, String>,
    headers: &HeaderMap,
    prefix: &str,
) -> Result<BTreeMap<String, String>, Response<Body>> {
    let mut meta = stored.clone();
    let remove_prefix = format!("x-remove-{}", &prefix["x-".len()..]);
    for (name, value) in headers {
        let value = value.to_str().map_err(|_| bad_request("metadata values must be text"))?;
        if let Some(name) = name.as_str().strip_prefix(prefix) {
            match value.trim() {
                "" => meta.remove(name),
                value => meta.insert(name.to_owned(), value.to_owned()),
            };
        } else if let Some(name) = name.as_str().strip_prefix(&remove_prefix) {
            meta.remove(name);
        }
    }
    check_meta(&meta, prefix)?;
    Ok(meta)
}

/// 400 when metadata breaks Swift's limits.
fn check_meta(meta: &BTreeMap<String, String>, prefix: &str) -> Result<(), Response<Body>> {
    use limits::*;
    if meta.len() > MAX_META_COUNT {
        return Err(bad_request(&format!("Too many metadata items; max {MAX_META_COUNT}")));
    }
    for (name, value) in meta {
        if name.is_empty() {
            return Err(bad_request("Metadata name cannot be empty"));
        }
        if name.len() > MAX_META_NAME_LENGTH {
            return Err(bad_request(&format!("Metadata name too long: {prefix}{name}")));
        }
        if value.len() > MAX_META_VALUE_LENGTH {
            return Err(bad_request(&format!("Metadata value longer than {MAX_META_VALUE_LENGTH}: {prefix}{name}")));
        }
    }
    if meta.iter().map(|(k, v)| k.len() + v.len()).sum::<usize>() > MAX_META_OVERALL_SIZE {
        return Err(bad_request(&format!("Total metadata too large; max {MAX_META_OVERALL_SIZE}")));
    }
    Ok(())
}

/// Sets `prefix` headers from metadata.
fn show_meta(headers: &mut HeaderMap, prefix: &str, meta: &BTreeMap<String, String>) {
    for (name, value) in meta {
        if let (Ok(name), Ok(value)) =
            (http::HeaderName::from_bytes(format!("{prefix}{name}").as_bytes()), HeaderValue::from_str(value))
        {
            headers.insert(name, value);
        }
    }
}

/// The path after the storage prefix, percent-decoded: 412 for bad UTF-8 or a NUL, as Swift.
fn decode_path(rest: &str) -> Result<String, &'static str> {
    let path = percent_encoding::percent_decode_str(rest).decode_utf8().map_err(|_| "Invalid UTF8 or contains NULL")?;
    if path.contains('\0') {
        return Err("Invalid UTF8 or contains NULL");
    }
    Ok(path.into_owned())
}

/// Object names Swift takes: at most 1024 bytes, no `.` or `..` segment (a path that
/// would climb out of its container).
fn validate_object_name(name: &str) -> Result<(), String> {
    if name.len() > limits::MAX_OBJECT_NAME_LENGTH {
        return Err(format!("Object name length of {} longer than {}", name.len(), limits::MAX_OBJECT_NAME_LENGTH));
    }
    if name.split('/').any(|segment| segment == "." || segment == "..") {
        return Err(format!("object name '{name}' holds a '.' or '..' segment"));
    }
    Ok(())
}

/// The Swift answer to an S3 operation's error.
fn refused(e: &s3s::S3Error) -> Response<Body> {
    use s3s::S3ErrorCode as Code;
    let status = match e.code() {
        Code::NoSuchBucket | Code::NoSuchKey => StatusCode::NOT_FOUND,
        Code::AccessDenied => StatusCode::FORBIDDEN,
        Code::BucketNotEmpty | Code::BucketAlreadyExists | Code::BucketAlreadyOwnedByYou => StatusCode::CONFLICT,
        Code::BadDigest => StatusCode::UNPROCESSABLE_ENTITY,
        Code::InvalidRange => StatusCode::RANGE_NOT_SATISFIABLE,
        Code::NotModified => StatusCode::NOT_MODIFIED,
        Code::EntityTooLarge => StatusCode::PAYLOAD_TOO_LARGE,
        _ => e.status_code().unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
    };
    if status == StatusCode::NOT_MODIFIED {
        return text(status, "");
    }
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

/// A JSON answer.
fn json(status: StatusCode, value: &serde_json::Value) -> Response<Body> {
    let mut response = Response::new(Body::from(value.to_string()));
    *response.status_mut() = status;
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

/// 400 with `message`.
fn bad_request(message: &str) -> Response<Body> {
    text(StatusCode::BAD_REQUEST, &format!("400 Bad Request: {message}"))
}

/// Whether a request is for the v1 auth entry point.
pub fn is_auth(method: &Method, path: &str) -> bool {
    (method == Method::GET || method == Method::HEAD)
        && matches!(path.trim_end_matches('/'), "/auth" | "/auth/v1.0" | "/auth/1.0")
}

/// Whether a request is for the capabilities (`GET /info`).
fn is_info(method: &Method, path: &str) -> bool {
    (method == Method::GET || method == Method::HEAD) && path == "/info"
}

/// The cluster's capabilities, as Swift's `/info` lists them (python-swiftclient reads
/// `bulk_delete` and `slo` from it).
fn info(config: &GatewayConfig) -> Response<Body> {
    use limits::*;
    let value = serde_json::json!({
        "swift": {
            "version": env!("CARGO_PKG_VERSION"),
            "max_file_size": config.max_put_size,
            "max_meta_count": MAX_META_COUNT,
            "max_meta_name_length": MAX_META_NAME_LENGTH,
            "max_meta_value_length": MAX_META_VALUE_LENGTH,
            "max_meta_overall_size": MAX_META_OVERALL_SIZE,
            "max_object_name_length": MAX_OBJECT_NAME_LENGTH,
            "container_listing_limit": LISTING_LIMIT,
            "account_listing_limit": LISTING_LIMIT,
            "max_container_name_length": 255,
            "strict_cors_mode": true,
            "policies": [{"name": "default-placement", "default": true}],
        },
        "tempurl": {
            "methods": ["GET", "HEAD", "PUT"],
            "allowed_digests": ["sha1", "sha256", "sha512"],
        },
        "slo": {
            "max_manifest_segments": MAX_MANIFEST_SEGMENTS,
            "max_manifest_size": MAX_MANIFEST_SIZE,
            "min_segment_size": 1,
        },
        "bulk_delete": {
            "max_deletes_per_request": MAX_DELETES_PER_REQUEST,
            "max_failed_deletes": MAX_DELETES_PER_REQUEST,
        },
        "account_quotas": {},
    });
    json(StatusCode::OK, &value)
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
        (Err(e), _) | (_, Err(e)) => return unavailable(e),
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
    fn names_that_climb_or_overflow_and_bad_paths_are_refused() {
        assert!(validate_object_name("a/b/c.txt").is_ok());
        assert!(validate_object_name("a..b/.c").is_ok());
        for bad in ["..", "a/../b", "./a", "a/.", "a/./b"] {
            assert!(validate_object_name(bad).is_err(), "{bad}");
        }
        assert!(validate_object_name(&"x".repeat(1025)).is_err());
        assert_eq!(decode_path("c/%E2%82%AC").unwrap(), "c/€");
        assert!(decode_path("c/%FF").is_err());
        assert!(decode_path("c/a%00b").is_err());
    }

    #[test]
    fn metadata_is_set_removed_and_held_to_swifts_limits() {
        let stored = BTreeMap::from([("a".to_owned(), "1".to_owned()), ("b".to_owned(), "2".to_owned())]);
        let mut headers = HeaderMap::new();
        headers.insert("x-container-meta-c", HeaderValue::from_static("3"));
        headers.insert("x-container-meta-a", HeaderValue::from_static(""));
        headers.insert("x-remove-container-meta-b", HeaderValue::from_static("x"));
        let meta = updated_meta(&stored, &headers, "x-container-meta-").unwrap();
        assert_eq!(meta, BTreeMap::from([("c".to_owned(), "3".to_owned())]));
        let status = |meta: BTreeMap<String, String>| check_meta(&meta, "x-object-meta-").err().map(|r| r.status());
        let many: BTreeMap<_, _> = (0..91).map(|i| (format!("k{i}"), "v".to_owned())).collect();
        assert_eq!(status(many), Some(StatusCode::BAD_REQUEST));
        assert_eq!(status(BTreeMap::from([("n".repeat(129), "v".into())])), Some(StatusCode::BAD_REQUEST));
        assert_eq!(status(BTreeMap::from([("n".into(), "v".repeat(257))])), Some(StatusCode::BAD_REQUEST));
        let big: BTreeMap<_, _> = (0..20).map(|i| (format!("k{i:03}"), "v".repeat(250))).collect();
        assert_eq!(status(big), Some(StatusCode::BAD_REQUEST), "5,060 bytes in all");
        let fits: BTreeMap<_, _> = (0..15).map(|i| (format!("k{i:03}"), "v".repeat(256))).collect();
        assert_eq!(status(fits), None);
    }

    proptest! {
        #[test]
        fn any_path_decodes_or_is_refused_without_panicking(path in "/?[a-z0-9/.%]{0,30}") {
            if let Some(rest) = storage_path("swift", &path) {
                prop_assert!(path.ends_with(rest) && path.starts_with("/swift/v1"));
                if let Ok(decoded) = decode_path(rest)
                    && validate_object_name(&decoded).is_ok()
                {
                    prop_assert!(!decoded.split('/').any(|s| s == ".."));
                }
            }
        }
    }
}
