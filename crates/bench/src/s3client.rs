//! A small S3 client for the benchmark: HTTP/1.1 with keep-alive (hyper), over TLS
//! (rustls) for an `https://` endpoint, AWS Signature V4 in headers, path-style addressing.

use bytes::Bytes;
use http::{HeaderMap, Method, Request, StatusCode, Uri};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use shoal_gateway::sigv4::{sha256_hex, signature, string_to_sign, uri_encode};
use shoal_types::{Errno, Result, err};

/// An S3 endpoint and the credentials to sign with.
#[derive(Clone)]
pub struct S3Client {
    http: Client<hyper_rustls::HttpsConnector<HttpConnector>, Full<Bytes>>,
    host: String,
    base: String,
    access_key: String,
    secret_key: String,
    region: String,
    service: &'static str,
}

/// A response: status, headers and the whole body.
pub struct S3Response {
    /// HTTP status.
    pub status: StatusCode,
    /// Response headers.
    pub headers: HeaderMap,
    /// Body bytes.
    pub body: Bytes,
}

/// `(YYYYMMDD, YYYYMMDDTHHMMSSZ)` for seconds since the Unix epoch (UTC).
pub fn amz_dates(unix_secs: u64) -> (String, String) {
    let (days, rem) = (unix_secs / 86_400, unix_secs % 86_400);
    let (year, month, day) = shoal_node::rados_cmd::civil_date(days);
    let date = format!("{year:04}{month:02}{day:02}");
    let stamp = format!("{date}T{:02}{:02}{:02}Z", rem / 3600, rem % 3600 / 60, rem % 60);
    (date, stamp)
}

/// TLS settings trusting the certificate authority in `ca` (none without one: plain HTTP only).
fn tls_config(ca: Option<&std::path::Path>) -> Result<rustls::ClientConfig> {
    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    if let Some(ca) = ca {
        let bad = |e: &dyn std::fmt::Display| err::invalid(format!("{}: {e}", ca.display()));
        for cert in CertificateDer::pem_file_iter(ca).map_err(|e| bad(&e))? {
            roots.add(cert.map_err(|e| bad(&e))?).map_err(|e| bad(&e))?;
        }
    }
    let provider = std::sync::Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    Ok(rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| err::invalid(e.to_string()))?
        .with_root_certificates(roots)
        .with_no_client_auth())
}

/// How long an idle connection stays in the pool.
const POOL_IDLE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

impl S3Client {
    /// A client of `endpoint` (`http://host:port`).
    pub fn new(endpoint: &str, access_key: &str, secret_key: &str) -> Result<S3Client> {
        S3Client::connect(endpoint, access_key, secret_key, None)
    }

    /// A client of `endpoint` (`http://host:port`, or `https://host:port` trusting the
    /// certificate authority in the PEM file `ca`).
    pub fn connect(
        endpoint: &str,
        access_key: &str,
        secret_key: &str,
        ca: Option<&std::path::Path>,
    ) -> Result<S3Client> {
        let uri: Uri = endpoint.parse().map_err(|e| err::invalid(format!("bad endpoint '{endpoint}': {e}")))?;
        let scheme = match (uri.scheme_str(), ca) {
            (Some("http"), _) => "http",
            (Some("https"), Some(_)) => "https",
            (Some("https"), None) => {
                return Err(err::invalid("an https endpoint needs the CA that signed its certificate (--ca FILE)"));
            }
            _ => {
                return Err(err::invalid(format!(
                    "endpoint '{endpoint}' must be http://HOST:PORT or https://HOST:PORT"
                )));
            }
        };
        let host = uri.authority().ok_or_else(|| err::invalid("the endpoint has no host"))?.to_string();
        let mut connector = HttpConnector::new();
        connector.set_nodelay(true);
        connector.enforce_http(false);
        let connector = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(tls_config(ca)?)
            .https_or_http()
            .enable_http1()
            .wrap_connector(connector);
        Ok(S3Client {
            // Idle connections are dropped well before a gateway closes them
            // (`rgw_header_read_timeout`, 30 s): reusing one it is closing would fail the request.
            http: Client::builder(TokioExecutor::new())
                .pool_max_idle_per_host(1024)
                .pool_idle_timeout(POOL_IDLE_TIMEOUT)
                .pool_timer(hyper_util::rt::TokioTimer::new())
                .build(connector),
            base: format!("{scheme}://{host}"),
            host,
            access_key: access_key.to_owned(),
            secret_key: secret_key.to_owned(),
            region: "us-east-1".to_owned(),
            service: "s3",
        })
    }

    /// The same credentials against the endpoint on another port of this host.
    pub fn at_port(&self, port: u16) -> S3Client {
        let host = match self.host.rsplit_once(':') {
            Some((name, _)) => format!("{name}:{port}"),
            None => format!("{}:{port}", self.host),
        };
        let scheme = self.base.split_once("://").map_or("http", |(scheme, _)| scheme);
        S3Client { base: format!("{scheme}://{host}"), host, ..self.clone() }
    }

    /// The same client signing for another SigV4 service (`sns` for the topic API).
    pub fn for_service(&self, service: &'static str) -> S3Client {
        S3Client { service, ..self.clone() }
    }

    /// Sends a signed request for `path` (`/bucket/key`, unencoded) with `query` pairs.
    pub async fn send(&self, method: Method, path: &str, query: &[(&str, &str)], body: Bytes) -> Result<S3Response> {
        self.send_with(method, path, query, &[], body).await
    }

    /// Signs a request for `path` (`/bucket/key`, unencoded) with `query` pairs and a body
    /// whose SHA-256 is `payload_hash`: returns the path-and-query to send and the headers
    /// (host, x-amz-date, x-amz-content-sha256, authorization).
    pub fn sign(
        &self,
        method: &Method,
        path: &str,
        query: &[(&str, &str)],
        payload_hash: &str,
    ) -> (String, Vec<(&'static str, String)>) {
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
        let (date, stamp) = amz_dates(now);
        let canonical_uri = uri_encode(path, true);
        let mut pairs: Vec<(String, String)> =
            query.iter().map(|(k, v)| (uri_encode(k, false), uri_encode(v, false))).collect();
        pairs.sort();
        let canonical_query = pairs.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join("&");
        let signed_headers = "host;x-amz-content-sha256;x-amz-date";
        let canonical = format!(
            "{method}\n{canonical_uri}\n{canonical_query}\nhost:{}\nx-amz-content-sha256:{payload_hash}\nx-amz-date:{stamp}\n\n{signed_headers}\n{payload_hash}",
            self.host
        );
        let scope = format!("{date}/{}/{}/aws4_request", self.region, self.service);
        let to_sign = string_to_sign(&stamp, &scope, &canonical);
        let signature = signature(&self.secret_key, &date, &self.region, self.service, &to_sign);
        let authorization = format!(
            "AWS4-HMAC-SHA256 Credential={}/{scope}, SignedHeaders={signed_headers}, Signature={signature}",
            self.access_key
        );
        let target =
            if canonical_query.is_empty() { canonical_uri } else { format!("{canonical_uri}?{canonical_query}") };
        let headers = vec![
            ("host", self.host.clone()),
            ("x-amz-date", stamp),
            ("x-amz-content-sha256", payload_hash.to_owned()),
            ("authorization", authorization),
        ];
        (target, headers)
    }

    /// Like [`S3Client::send`] with extra (unsigned) headers.
    pub async fn send_with(
        &self,
        method: Method,
        path: &str,
        query: &[(&str, &str)],
        headers: &[(&str, String)],
        body: Bytes,
    ) -> Result<S3Response> {
        let idempotent = method == Method::GET || method == Method::HEAD;
        match self.send_once(method.clone(), path, query, headers, body.clone()).await {
            // A pooled connection the server closed as the request went out (a restarted
            // gateway, an idle timeout): a read is sent again once, as SDKs do.
            Err(e) if idempotent && e.errno == Errno::NotConnected => {
                self.send_once(method, path, query, headers, body).await
            }
            result => result,
        }
    }

    async fn send_once(
        &self,
        method: Method,
        path: &str,
        query: &[(&str, &str)],
        headers: &[(&str, String)],
        body: Bytes,
    ) -> Result<S3Response> {
        let what = format!("{method} {path}");
        let (target, signed) = self.sign(&method, path, query, &sha256_hex(&body));
        let mut request = Request::builder().method(method).uri(format!("{}{target}", self.base));
        for (name, value) in headers.iter().chain(signed.iter()) {
            request = request.header(*name, value);
        }
        let request = request.body(Full::new(body)).map_err(|e| err::invalid(format!("building the request: {e}")))?;
        let response =
            self.http.request(request).await.map_err(|e| err::not_connected(format!("{what}: {}", causes(&e))))?;
        let (parts, body) = response.into_parts();
        let body =
            body.collect().await.map_err(|e| err::not_connected(format!("{what}: reading the response: {e}")))?;
        Ok(S3Response { status: parts.status, headers: parts.headers, body: body.to_bytes() })
    }

    /// Like [`S3Client::send`], failing on a non-2xx status with the S3 error code (EAGAIN
    /// for 503).
    pub async fn expect_ok(
        &self,
        method: Method,
        path: &str,
        query: &[(&str, &str)],
        body: Bytes,
    ) -> Result<S3Response> {
        self.expect_ok_with(method, path, query, &[], body).await
    }

    /// Like [`S3Client::expect_ok`] with extra (unsigned) headers.
    pub async fn expect_ok_with(
        &self,
        method: Method,
        path: &str,
        query: &[(&str, &str)],
        headers: &[(&str, String)],
        body: Bytes,
    ) -> Result<S3Response> {
        let response = self.send_with(method.clone(), path, query, headers, body).await?;
        if response.status.is_success() {
            return Ok(response);
        }
        let text = String::from_utf8_lossy(&response.body);
        let code = text.split("<Code>").nth(1).and_then(|r| r.split("</Code>").next()).unwrap_or("?");
        let message = format!("{method} {path}: HTTP {} {code}", response.status.as_u16());
        // 503 (SlowDown, ServiceUnavailable) asks the client to come back later.
        Err(if response.status == StatusCode::SERVICE_UNAVAILABLE { err::again(message) } else { err::io(message) })
    }
}

/// An error and its causes, `outer: inner: innermost`.
fn causes(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        text = format!("{text}: {cause}");
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_and_encoding() {
        assert_eq!(amz_dates(0), ("19700101".into(), "19700101T000000Z".into()));
        assert_eq!(amz_dates(951_782_400).0, "20000229", "leap day");
        assert_eq!(amz_dates(1_700_000_000).1, "20231114T221320Z");
        assert_eq!(uri_encode("a b/c+d", true), "a%20b/c%2Bd");
        assert_eq!(uri_encode("a/b", false), "a%2Fb");
    }
}
