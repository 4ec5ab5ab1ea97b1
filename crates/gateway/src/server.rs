//! The HTTP front: connection limits and timeouts, admission (`rgw_max_concurrent_requests`
//! → 503 SlowDown), a bounded worker pool (`rgw_thread_pool_size`), request ids, header
//! limits, refusal of signature version 2 and of presigned URLs valid for more than a week,
//! and error bodies completed with `Resource` and `RequestId` (s3s leaves them out).

use crate::config::GatewayConfig;
use crate::cors;
use crate::request::Origin;
use crate::xml::xml_escape;
use bytes::Bytes;
use http::{HeaderValue, Request, Response, StatusCode};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use s3s::Body;
use s3s::service::S3Service;
use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use tokio::sync::Semaphore;

/// The pause after a failed accept (EMFILE and the like) before the next.
const ACCEPT_RETRY: std::time::Duration = std::time::Duration::from_millis(100);

/// The client's address and whether it speaks TLS, put in each request's extensions.
#[derive(Clone, Debug)]
struct Peer {
    ip: String,
    secure: bool,
}

/// Counters of the front end.
#[derive(Debug, Default)]
pub struct FrontStats {
    /// Requests answered.
    pub requests: AtomicU64,
    /// Requests refused with 503 SlowDown.
    pub throttled: AtomicU64,
    /// GET and HEAD requests answered (RGW's `get`).
    pub gets: AtomicU64,
    /// PUT, POST and COPY requests answered (RGW's `put`).
    pub puts: AtomicU64,
    /// DELETE requests answered.
    pub deletes: AtomicU64,
    /// Requests answered with a 5xx status (RGW's `failed_req`).
    pub failed: AtomicU64,
}

impl FrontStats {
    /// Counts one answered request.
    fn count(&self, method: &http::Method, status: StatusCode) {
        self.requests.fetch_add(1, Ordering::Relaxed);
        let by_method = match *method {
            http::Method::GET | http::Method::HEAD => Some(&self.gets),
            http::Method::PUT | http::Method::POST => Some(&self.puts),
            http::Method::DELETE => Some(&self.deletes),
            ref m if m.as_str() == "COPY" => Some(&self.puts),
            _ => None,
        };
        if let Some(counter) = by_method {
            counter.fetch_add(1, Ordering::Relaxed);
        }
        if status.is_server_error() {
            self.failed.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// Serves the S3 service and the Swift front over HTTP/1.1 with the gateway's limits.
pub struct Front {
    service: S3Service,
    routes: Arc<crate::sns::Routes>,
    swift: crate::swift::Swift,
    workers: Semaphore,
    admitted: AtomicUsize,
    max_admitted: usize,
    max_header_size: usize,
    allow_sigv2: bool,
    /// Largest body of an unsigned request read before authorization.
    anonymous_max_body: usize,
    /// A request body must arrive at `body_min_rate` bytes a second after this.
    body_rate_grace: std::time::Duration,
    body_min_rate: u64,
    hosts: VirtualHosts,
    /// One permit per connection served; accepting waits while none is left.
    connections: Arc<Semaphore>,
    header_read_timeout: std::time::Duration,
    request_timeout: std::time::Duration,
    next_id: AtomicU64,
    id_base: u64,
    /// Counters.
    pub stats: FrontStats,
}

fn xml_error(status: StatusCode, code: &str, message: &str, resource: &str, id: &str) -> Response<Body> {
    let body = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>{code}</Code><Message>{}</Message><Resource>{}</Resource><RequestId>{id}</RequestId></Error>",
        xml_escape(message),
        xml_escape(resource)
    );
    let mut response = Response::new(Body::from(body));
    *response.status_mut() = status;
    response.headers_mut().insert(http::header::CONTENT_TYPE, HeaderValue::from_static("application/xml"));
    response
}

/// Adds `Resource` and `RequestId` to an s3s error body.
async fn complete_error(response: Response<Body>, resource: &str, id: &str) -> Response<Body> {
    let (mut parts, body) = response.into_parts();
    let bytes = match body.collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(_) => Bytes::new(),
    };
    let text = String::from_utf8_lossy(&bytes);
    // s3s answers a form upload whose policy condition fails with 400 InvalidPolicyDocument; S3 with 403.
    let text = match parts.status == StatusCode::BAD_REQUEST && text.contains("<Message>Policy condition ") {
        true => {
            parts.status = StatusCode::FORBIDDEN;
            let text = text.replace("<Code>InvalidPolicyDocument</Code>", "<Code>AccessDenied</Code>");
            std::borrow::Cow::Owned(
                text.replace("<Message>Policy condition ", "<Message>Invalid according to Policy: Policy condition "),
            )
        }
        false => text,
    };
    let completed = match text.rfind("</Error>") {
        Some(at) if !text.contains("<RequestId>") => {
            // s3s leaves Message out when the error has none: S3 clients show it, so say what the code means.
            let message = match text.contains("<Message>") {
                true => String::new(),
                false => format!("<Message>{}</Message>", xml_escape(&default_message(parts.status, &text))),
            };
            format!(
                "{}{message}<Resource>{}</Resource><RequestId>{id}</RequestId></Error>",
                &text[..at],
                xml_escape(resource)
            )
        }
        _ => text.into_owned(),
    };
    parts.headers.remove(http::header::CONTENT_LENGTH);
    Response::from_parts(parts, Body::from(completed))
}

/// A readable message for an error body that has only a code.
fn default_message(status: StatusCode, body: &str) -> String {
    let code = body.split("<Code>").nth(1).and_then(|rest| rest.split("</Code>").next()).unwrap_or_default();
    match code {
        "NoSuchBucket" => "The specified bucket does not exist.".into(),
        "NoSuchKey" => "The specified key does not exist.".into(),
        "NoSuchUpload" => "The specified multipart upload does not exist.".into(),
        "AccessDenied" => "Access Denied".into(),
        "BucketNotEmpty" => "The bucket you tried to delete is not empty.".into(),
        "BucketAlreadyExists" => "The requested bucket name is not available.".into(),
        "BucketAlreadyOwnedByYou" => {
            "Your previous request to create the named bucket succeeded and you already own it.".into()
        }
        "InvalidBucketName" => "The specified bucket is not valid.".into(),
        "InvalidAccessKeyId" => "The AWS Access Key Id you provided does not exist in our records.".into(),
        "SignatureDoesNotMatch" => {
            "The request signature we calculated does not match the signature you provided.".into()
        }
        "PreconditionFailed" => "At least one of the preconditions you specified did not hold.".into(),
        "BadDigest" => "The Content-MD5 you specified did not match what we received.".into(),
        "InvalidPartOrder" => "The list of parts was not in ascending order.".into(),
        _ => format!("{code} ({})", status.canonical_reason().unwrap_or("error")),
    }
}

/// Longest validity of a presigned URL, as AWS allows: seven days.
const MAX_PRESIGNED_EXPIRES: u64 = 7 * 24 * 3600;

/// Why a request's authentication is refused before it is checked: signature version 2
/// when not allowed, a presigned URL valid for longer than seven days.
fn refused_authentication<B>(req: &Request<B>, allow_sigv2: bool) -> Option<(&'static str, &'static str)> {
    let query = req.uri().query().unwrap_or_default();
    let param =
        |name: &str| query.split('&').find_map(|pair| pair.split_once('=').filter(|(k, _)| *k == name).map(|(_, v)| v));
    let authorization = req.headers().get(http::header::AUTHORIZATION).and_then(|v| v.to_str().ok()).unwrap_or("");
    let sigv2 =
        authorization.starts_with("AWS ") || (param("AWSAccessKeyId").is_some() && param("Signature").is_some());
    if sigv2 && !allow_sigv2 {
        return Some((
            "InvalidRequest",
            "The authorization mechanism you have provided is not supported. Please use AWS4-HMAC-SHA256.",
        ));
    }
    match param("X-Amz-Expires").map(str::parse::<u64>) {
        Some(Ok(seconds)) if seconds > MAX_PRESIGNED_EXPIRES => Some((
            "AuthorizationQueryParametersError",
            "X-Amz-Expires must be less than a week (in seconds) that is 604800",
        )),
        _ => None,
    }
}

impl Front {
    /// A front for `service` (and the SNS topic API of `routes`) with `config`'s limits.
    pub fn new(
        service: S3Service,
        routes: Arc<crate::sns::Routes>,
        swift: crate::swift::Swift,
        config: &GatewayConfig,
    ) -> Arc<Front> {
        Arc::new(Front {
            service,
            routes,
            swift,
            workers: Semaphore::new(config.thread_pool_size.max(1)),
            admitted: AtomicUsize::new(0),
            max_admitted: config.max_concurrent_requests.max(1),
            max_header_size: config.max_header_size,
            allow_sigv2: config.allow_sigv2,
            anonymous_max_body: config.anonymous_max_body,
            body_rate_grace: config.body_rate_grace,
            body_min_rate: config.body_min_rate,
            hosts: VirtualHosts(config.dns_names.clone()),
            connections: Arc::new(Semaphore::new(config.max_connections.max(1))),
            header_read_timeout: config.header_read_timeout,
            request_timeout: config.request_timeout,
            next_id: AtomicU64::new(0),
            id_base: rand::random::<u64>() >> 16,
            stats: FrontStats::default(),
        })
    }

    /// Accepts connections forever, at most `rgw_max_connections` at once (shared by
    /// every listener), speaking TLS first when given an acceptor. Failing accepts (out
    /// of file descriptors, a connection reset before it was taken) are logged and
    /// retried after a pause: they end connections, never the gateway.
    pub async fn serve(
        self: Arc<Self>,
        listener: tokio::net::TcpListener,
        tls: Option<tokio_rustls::TlsAcceptor>,
    ) -> std::io::Result<()> {
        let mut last_warning: Option<std::time::Instant> = None;
        loop {
            let Ok(permit) = self.connections.clone().acquire_owned().await else { return Ok(()) };
            let (stream, peer) = match listener.accept().await {
                Ok(accepted) => accepted,
                Err(e) => {
                    if last_warning.is_none_or(|at| at.elapsed() >= std::time::Duration::from_secs(10)) {
                        tracing::warn!(error = %e, "accepting a connection failed; retrying");
                        last_warning = Some(std::time::Instant::now());
                    }
                    tokio::time::sleep(ACCEPT_RETRY).await;
                    continue;
                }
            };
            let _ = stream.set_nodelay(true);
            let front = self.clone();
            let tls = tls.clone();
            tokio::spawn(async move {
                let _permit = permit;
                let peer = Peer { ip: peer.ip().to_string(), secure: tls.is_some() };
                let stream = crate::stall::StallGuard::new(stream, front.request_timeout);
                match tls {
                    None => front.connection(stream, peer).await,
                    Some(acceptor) => {
                        // A handshake gets as long as a request header.
                        match tokio::time::timeout(front.header_read_timeout, acceptor.accept(stream)).await {
                            Ok(Ok(tls_stream)) => front.connection(tls_stream, peer).await,
                            Ok(Err(e)) => tracing::debug!(error = %e, "TLS handshake failed"),
                            Err(_) => tracing::debug!("TLS handshake timed out"),
                        }
                    }
                }
            });
        }
    }

    /// Serves HTTP/1.1 requests on one connection until it ends.
    async fn connection<IO>(self: Arc<Self>, io: IO, peer: Peer)
    where
        IO: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
    {
        let header_read_timeout = self.header_read_timeout;
        let service = hyper::service::service_fn(move |mut req: Request<Incoming>| {
            let front = self.clone();
            req.extensions_mut().insert(peer.clone());
            async move { Ok::<_, Infallible>(front.handle(req).await) }
        });
        let connection = hyper::server::conn::http1::Builder::new()
            .timer(hyper_util::rt::TokioTimer::new())
            .header_read_timeout(header_read_timeout)
            .max_buf_size(1 << 20)
            .serve_connection(hyper_util::rt::TokioIo::new(io), service);
        if let Err(e) = connection.await {
            tracing::debug!(error = %e, "connection ended with an error");
        }
    }

    /// Runs a request on a worker: SNS, Swift or S3.
    async fn dispatch(&self, req: Request<Body>) -> Result<Response<Body>, s3s::HttpError> {
        match self.workers.acquire().await {
            Ok(_permit) if crate::sns::is_sns(req.method(), req.uri(), req.headers()) => {
                Ok(self.routes.sns_request(req).await)
            }
            Ok(_permit) if self.swift.handles(req.method(), req.uri().path()) => {
                let secure = req.extensions().get::<Origin>().is_some_and(|o| o.secure);
                Ok(self.swift.handle(req, secure).await)
            }
            Ok(_permit) => self.service.call(req).await,
            Err(_) => Err(s3s::HttpError::new(Box::new(std::io::Error::other("worker pool closed")))),
        }
    }

    /// Handles one request.
    pub async fn handle(&self, mut req: Request<Incoming>) -> Response<Body> {
        let id = format!("tx{:012x}-{:08x}", self.id_base, self.next_id.fetch_add(1, Ordering::Relaxed));
        let resource = req.uri().path().to_owned();
        let (source_ip, secure) = req.extensions().get::<Peer>().map(|p| (p.ip.clone(), p.secure)).unwrap_or_default();
        req.extensions_mut().insert(Origin { request_id: id.clone(), source_ip, secure });
        let method = req.method().clone();
        let mut response = if method == http::Method::OPTIONS {
            self.preflight(&req, &resource, &id).await
        } else {
            // A browser's request names its page's origin: the bucket's CORS rules may let it see the answer.
            let cross_origin = header(&req, "origin").map(str::to_owned).zip(bucket_of(&req, &self.hosts));
            let has_body =
                content_length(&req).is_some_and(|n| n > 0) || req.headers().contains_key("transfer-encoding");
            let mut response = self.admit(req, &resource, &id).await;
            if has_body && (response.status().is_client_error() || response.status().is_server_error()) {
                // The body may be unread: a client that kept the connection could have it
                // taken for its next request (seen as a bare 400). Close instead.
                response.headers_mut().insert(http::header::CONNECTION, HeaderValue::from_static("close"));
            }
            if let Some((origin, bucket)) = cross_origin {
                self.allow_cross_origin(&bucket, &origin, method.as_str(), &mut response).await;
            }
            response
        };
        self.stats.count(&method, response.status());
        let headers = response.headers_mut();
        if let Ok(value) = HeaderValue::from_str(&id) {
            headers.insert("x-amz-request-id", value.clone());
            headers.insert("x-amz-id-2", value);
        }
        response
    }

    /// Answers a CORS preflight (OPTIONS) from the bucket's rules: 200 with the allowed
    /// origin, methods, headers and age, or 403 when no rule allows the request.
    async fn preflight<B>(&self, req: &Request<B>, resource: &str, id: &str) -> Response<Body> {
        let forbidden = |message: &str| xml_error(StatusCode::FORBIDDEN, "AccessForbidden", message, resource, id);
        let (Some(origin), Some(method)) = (header(req, "origin"), header(req, "access-control-request-method")) else {
            let message = "Insufficient information. Origin request header needed.";
            return xml_error(StatusCode::BAD_REQUEST, "BadRequest", message, resource, id);
        };
        let Some(name) = bucket_of(req, &self.hosts) else {
            return forbidden("CORSResponse: a preflight names a bucket.");
        };
        let bucket = match self.routes.meta.bucket(&name).await {
            Ok(Some(bucket)) => bucket,
            Ok(None) => {
                let message = "The specified bucket does not exist.";
                return xml_error(StatusCode::NOT_FOUND, "NoSuchBucket", message, resource, id);
            }
            Err(e) => {
                tracing::warn!(error = %e, "reading a bucket record for a preflight failed");
                let message = "Please retry.";
                return xml_error(StatusCode::SERVICE_UNAVAILABLE, "ServiceUnavailable", message, resource, id);
            }
        };
        if bucket.cors.is_empty() {
            return forbidden("CORSResponse: CORS is not enabled for this bucket.");
        }
        let headers = cors::requested_headers(header(req, "access-control-request-headers").unwrap_or_default());
        let request = cors::CorsRequest { origin, method, headers };
        let Some(rule) = cors::matching(&bucket.cors, &request) else {
            return forbidden(
                "CORSResponse: This CORS request is not allowed. This is usually because the evaluation of Origin, request method / Access-Control-Request-Method or Access-Control-Request-Headers are not whitelisted by the resource's CORS spec.",
            );
        };
        let mut response = Response::new(Body::empty());
        add_headers(&mut response, cors::response_headers(rule, &request, true));
        response
    }

    /// Adds the CORS headers of the bucket's first rule allowing `origin` and `method` to
    /// the answer of an actual request.
    async fn allow_cross_origin(&self, bucket: &str, origin: &str, method: &str, response: &mut Response<Body>) {
        let Ok(Some(bucket)) = self.routes.meta.bucket(bucket).await else { return };
        let request = cors::CorsRequest { origin, method, headers: Vec::new() };
        if let Some(rule) = cors::matching(&bucket.cors, &request) {
            add_headers(response, cors::response_headers(rule, &request, false));
        }
    }

    async fn admit(&self, req: Request<Incoming>, resource: &str, id: &str) -> Response<Body> {
        let header_bytes: usize = req.headers().iter().map(|(k, v)| k.as_str().len() + v.len() + 4).sum();
        if header_bytes > self.max_header_size {
            return xml_error(
                StatusCode::BAD_REQUEST,
                "RequestHeaderSectionTooLarge",
                "Your request header section exceeds the maximum allowed size.",
                resource,
                id,
            );
        }
        if let Some((code, message)) = refused_authentication(&req, self.allow_sigv2) {
            return xml_error(StatusCode::BAD_REQUEST, code, message, resource, id);
        }
        if self.admitted.fetch_add(1, Ordering::AcqRel) >= self.max_admitted {
            self.admitted.fetch_sub(1, Ordering::AcqRel);
            self.stats.throttled.fetch_add(1, Ordering::Relaxed);
            return xml_error(
                StatusCode::SERVICE_UNAVAILABLE,
                "SlowDown",
                "Please reduce your request rate.",
                resource,
                id,
            );
        }
        let capped = unsigned_and_buffered(&req).then_some(self.anonymous_max_body);
        if let Some(cap) = capped
            && content_length(&req).is_some_and(|length| length > cap as u64)
        {
            self.admitted.fetch_sub(1, Ordering::AcqRel);
            let message = format!("An unsigned request's body is at most {cap} bytes.");
            return xml_error(StatusCode::BAD_REQUEST, "MaxMessageLengthExceeded", &message, resource, id);
        }
        let (grace, min_rate) = (self.body_rate_grace, self.body_min_rate);
        let mut req = req;
        let form = match req.method() == http::Method::POST {
            true => header(&req, "content-type").and_then(crate::form::delimiter),
            false => None,
        };
        if form.is_some() {
            // The rewritten form may differ in length; s3s reads a form to its last delimiter.
            req.headers_mut().remove(http::header::CONTENT_LENGTH);
        }
        let req = req.map(|body| {
            let body = crate::stall::MinRate::new(body, grace, min_rate);
            match (capped, form) {
                (Some(cap), _) => Body::http_body_unsync(http_body_util::Limited::new(body, cap)),
                (None, Some(delimiter)) => Body::http_body_unsync(with_file_name(body, delimiter)),
                (None, None) => Body::http_body_unsync(body),
            }
        });
        let response = match frees_space(&req) {
            true => {
                // Boxed as a trait object: the compiler's Send check gives up on the nested type.
                let work: std::pin::Pin<Box<dyn Future<Output = _> + Send + '_>> =
                    Box::pin(shoal_client::freeing_space(self.dispatch(req)));
                work.await
            }
            false => self.dispatch(req).await,
        };
        self.admitted.fetch_sub(1, Ordering::AcqRel);
        match response {
            Ok(response) if response.status().is_client_error() || response.status().is_server_error() => {
                let xml = response
                    .headers()
                    .get(http::header::CONTENT_TYPE)
                    .is_some_and(|t| t.as_bytes().starts_with(b"application/xml"));
                if xml { complete_error(response, resource, id).await } else { response }
            }
            Ok(response) => response,
            Err(e) => {
                tracing::error!(error = ?e, "request failed");
                xml_error(StatusCode::INTERNAL_SERVER_ERROR, "InternalError", "internal error", resource, id)
            }
        }
    }
}

/// Whether a request deletes (DELETE, or S3's multi-object delete `POST ?delete`): its
/// writes go through when the cluster or a pool is full, so users can free space.
fn frees_space<B>(req: &Request<B>) -> bool {
    let multi_delete = || req.uri().query().unwrap_or_default().split('&').any(|p| p == "delete" || p == "delete=");
    req.method() == http::Method::DELETE || (req.method() == http::Method::POST && multi_delete())
}

/// Whether a request is unsigned (no Authorization header, no presigned signature, no
/// Swift token, which is checked before any body is read) and its body is read whole
/// before it is authorized: anything but an object's data (PUT, which is authorized
/// before its body is read) and a browser's form upload (whose signed policy s3s checks
/// as the form streams in).
fn unsigned_and_buffered<B>(req: &Request<B>) -> bool {
    let query = req.uri().query().unwrap_or_default();
    let headers = req.headers();
    let signed = headers.contains_key(http::header::AUTHORIZATION)
        || headers.contains_key("x-auth-token")
        || headers.contains_key("x-storage-token")
        || form_urlencoded::parse(query.as_bytes()).any(|(k, _)| k == "X-Amz-Signature" || k == "Signature");
    let form = header(req, "content-type").is_some_and(|t| t.starts_with("multipart/form-data"));
    !signed && !form && req.method() != http::Method::PUT
}

/// A form upload's `body` with `${filename}` in its key field replaced by the file's name
/// ([`crate::form`]): the fields before the file are held until the file's headers are in.
/// (Trailers, which forms do not have, are dropped while they are held.)
fn with_file_name<B>(body: B, delimiter: Vec<u8>) -> impl http_body::Body<Data = Bytes, Error = B::Error> + Send
where
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Send,
{
    use crate::form::{MAX_FIELDS, Scan, rewrite};
    use futures::StreamExt;
    let frames = Box::pin(http_body_util::BodyStream::new(body));
    let held = Some(bytes::BytesMut::new());
    let stream = futures::stream::unfold((frames, held, delimiter), |(mut frames, mut held, delimiter)| async move {
        loop {
            let Some(buffer) = held.as_mut() else {
                return frames.next().await.map(|frame| (frame, (frames, None, delimiter)));
            };
            match frames.next().await {
                Some(Ok(frame)) => {
                    if let Ok(data) = frame.into_data() {
                        buffer.extend_from_slice(&data);
                    }
                }
                Some(Err(e)) => return Some((Err(e), (frames, None, delimiter))),
                None => {
                    let rest = held.take().unwrap_or_default().freeze();
                    return Some((Ok(http_body::Frame::data(rest)), (frames, None, delimiter)));
                }
            }
            let out = match rewrite(buffer, &delimiter) {
                Scan::More if buffer.len() <= MAX_FIELDS => continue,
                Scan::Done(Some(rewritten)) => Bytes::from(rewritten),
                Scan::More | Scan::Done(None) => held.take().unwrap_or_default().freeze(),
            };
            return Some((Ok(http_body::Frame::data(out)), (frames, None, delimiter)));
        }
    });
    http_body_util::StreamBody::new(stream)
}

fn content_length<B>(req: &Request<B>) -> Option<u64> {
    header(req, "content-length").and_then(|v| v.parse().ok())
}

/// A request header's value, if it is text.
fn header<'r, B>(req: &'r Request<B>, name: &str) -> Option<&'r str> {
    req.headers().get(name).and_then(|v| v.to_str().ok())
}

/// The endpoint's host names (`rgw_dns_name`): a request to `<bucket>.<name>` addresses
/// the bucket; any other host (an address, an unknown name) is path style.
pub struct VirtualHosts(pub Vec<String>);

impl VirtualHosts {
    /// The bucket a `Host` header names, if it is `<bucket>.<name>[:port]`.
    pub fn bucket(&self, host: &str) -> Option<String> {
        let name = match host.rsplit_once(':') {
            Some((name, port)) if port.parse::<u16>().is_ok() => name,
            _ => host,
        };
        let name = name.to_ascii_lowercase();
        self.0.iter().find_map(|domain| {
            let bucket = name.strip_suffix(domain.as_str())?.strip_suffix('.')?;
            (!bucket.is_empty()).then(|| bucket.to_owned())
        })
    }
}

impl s3s::host::S3Host for VirtualHosts {
    fn parse_host_header<'a>(&'a self, host: &'a str) -> s3s::S3Result<s3s::host::VirtualHost<'a>> {
        let virtual_host = s3s::host::VirtualHost::new(host);
        Ok(match self.bucket(host) {
            Some(bucket) => virtual_host.with_bucket(bucket),
            None => virtual_host,
        })
    }
}

/// The bucket a request names: by its host (virtual-host style) or its path's first part.
fn bucket_of<B>(req: &Request<B>, hosts: &VirtualHosts) -> Option<String> {
    if let Some(bucket) = header(req, "host").and_then(|host| hosts.bucket(host)) {
        return Some(bucket);
    }
    req.uri().path().trim_start_matches('/').split('/').next().filter(|b| !b.is_empty()).map(str::to_owned)
}

fn add_headers(response: &mut Response<Body>, headers: Vec<(&'static str, String)>) {
    for (name, value) in headers {
        if let Ok(value) = HeaderValue::from_str(&value) {
            response.headers_mut().insert(name, value);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(uri: &str, authorization: Option<&str>) -> Request<()> {
        let mut builder = Request::builder().uri(uri);
        if let Some(a) = authorization {
            builder = builder.header(http::header::AUTHORIZATION, a);
        }
        builder.body(()).unwrap()
    }

    #[test]
    fn virtual_hosts_name_buckets_under_the_dns_names_only() {
        let hosts = VirtualHosts(vec!["s3.example.com".into(), "s3.test".into()]);
        for (host, bucket) in [
            ("photos.s3.example.com", Some("photos")),
            ("Photos.S3.Example.com:8080", Some("photos")),
            ("a.b.s3.test", Some("a.b")),
            ("s3.example.com", None),
            ("127.0.0.1:8080", None),
            ("xs3.test", None),
            (".s3.test", None),
        ] {
            assert_eq!(hosts.bucket(host).as_deref(), bucket, "{host}");
        }
    }

    #[test]
    fn signature_v2_and_week_long_presigned_urls_are_refused() {
        let v2_header = request("/b/k", Some("AWS AKID:c2lnbmF0dXJl"));
        let v2_url = request("/b/k?AWSAccessKeyId=AKID&Expires=1700000000&Signature=abc", None);
        let v4_header = request("/b/k", Some("AWS4-HMAC-SHA256 Credential=AKID/20261124/us-east-1/s3/aws4_request"));
        let week = request("/b/k?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Expires=604800", None);
        let longer = request("/b/k?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Expires=604801", None);
        assert_eq!(refused_authentication(&v2_header, false).map(|r| r.0), Some("InvalidRequest"));
        assert_eq!(refused_authentication(&v2_url, false).map(|r| r.0), Some("InvalidRequest"));
        assert_eq!(refused_authentication(&v2_header, true), None);
        assert_eq!(refused_authentication(&v2_url, true), None);
        assert_eq!(refused_authentication(&v4_header, false), None);
        assert_eq!(refused_authentication(&week, false), None);
        assert_eq!(refused_authentication(&longer, false).map(|r| r.0), Some("AuthorizationQueryParametersError"));
    }

    proptest::proptest! {
        #[test]
        fn any_query_and_authorization_are_judged_without_panic(query in ".{0,200}", auth in ".{0,100}") {
            let uri = format!("/b/k?{}", query.replace(|c: char| !c.is_ascii_graphic(), ""));
            if let Ok(uri) = uri.parse::<http::Uri>() {
                let mut req = Request::builder().uri(uri).body(()).unwrap();
                if let Ok(value) = HeaderValue::from_str(&auth) {
                    req.headers_mut().insert(http::header::AUTHORIZATION, value);
                }
                let _ = refused_authentication(&req, false);
            }
        }
    }
}
