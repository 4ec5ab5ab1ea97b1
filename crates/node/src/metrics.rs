//! Prometheus endpoints: each daemon (`shoal mon`, `shoal osd run`, `shoal gateway`,
//! `shoal server`) serves its registry at `/metrics` on `--metrics-port`: in the
//! OpenMetrics text format to scrapers that ask for it (Prometheus does), else in the
//! classic Prometheus text format (curl, `promtool check metrics`).

use prometheus_client::registry::Registry;
use shoal_types::{Result, err};
use std::sync::Arc;

/// The OpenMetrics text format's content type.
const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";
/// The classic Prometheus text format's content type.
const PROMETHEUS_TEXT: &str = "text/plain; version=0.0.4; charset=utf-8";

/// A registry whose metric names start with `shoal_`.
pub fn registry() -> Registry {
    Registry::with_prefix("shoal")
}

/// Serves `registry` on `host:port` (port 0: any free port) in the background; prints and
/// returns the URL to scrape.
pub async fn serve(host: &str, port: u16, registry: Registry) -> Result<String> {
    let addr = format!("{host}:{port}");
    let listener =
        tokio::net::TcpListener::bind(&addr).await.map_err(|e| err::io(format!("cannot listen on {addr}: {e}")))?;
    let local = listener.local_addr().map_err(|e| err::io(format!("metrics listener: {e}")))?;
    let url = format!("http://{local}/metrics");
    println!("metrics: {url}");
    let registry = Arc::new(registry);
    spawn_http(listener, move |request| {
        let accept = request.headers().get(http::header::ACCEPT).and_then(|v| v.to_str().ok());
        let response = render(&registry, accept.is_some_and(|a| a.contains("application/openmetrics-text")));
        async move { response }
    });
    Ok(url)
}

/// A response with its whole body.
pub type FullResponse = http::Response<http_body_util::Full<bytes::Bytes>>;

/// Serves HTTP/1.1 on `listener` in the background, answering every request with `handle`.
pub fn spawn_http<F, Fut>(listener: tokio::net::TcpListener, handle: F)
where
    F: Fn(http::Request<hyper::body::Incoming>) -> Fut + Clone + Send + Sync + 'static,
    Fut: std::future::Future<Output = FullResponse> + Send + 'static,
{
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else { return };
            let handle = handle.clone();
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |request| {
                    let response = handle(request);
                    async move { Ok::<_, std::convert::Infallible>(response.await) }
                });
                let io = hyper_util::rt::TokioIo::new(stream);
                let _ = hyper::server::conn::http1::Builder::new().serve_connection(io, service).await;
            });
        }
    });
}

/// The registry as a text response, OpenMetrics or classic (a 500 if a collector fails).
fn render(registry: &Registry, openmetrics: bool) -> FullResponse {
    let mut text = String::new();
    let (status, content_type, body) = match prometheus_client::encoding::text::encode(&mut text, registry) {
        Ok(()) if openmetrics => (http::StatusCode::OK, OPENMETRICS, text),
        Ok(()) => (http::StatusCode::OK, PROMETHEUS_TEXT, classic_text(&text)),
        Err(_) => {
            (http::StatusCode::INTERNAL_SERVER_ERROR, PROMETHEUS_TEXT, "encoding the metrics failed\n".to_owned())
        }
    };
    let mut response = http::Response::new(http_body_util::Full::new(bytes::Bytes::from(body)));
    *response.status_mut() = status;
    response.headers_mut().insert(http::header::CONTENT_TYPE, http::HeaderValue::from_static(content_type));
    response
}

/// OpenMetrics text as the classic Prometheus text format: a counter family `x` is named
/// after its samples, `x_total`; `# UNIT` and `# EOF` lines go (the format has neither).
fn classic_text(openmetrics: &str) -> String {
    let counters: std::collections::HashSet<&str> =
        openmetrics.lines().filter_map(|l| l.strip_prefix("# TYPE ")?.strip_suffix(" counter")).collect();
    let mut out = String::with_capacity(openmetrics.len() + 16 * counters.len());
    for line in openmetrics.lines() {
        if line.starts_with("# UNIT ") || line == "# EOF" {
            continue;
        }
        let header = ["# HELP ", "# TYPE "].into_iter().find_map(|p| Some((p, line.strip_prefix(p)?)));
        match header.and_then(|(p, rest)| Some((p, rest.split_once(' ')?))) {
            Some((prefix, (name, rest))) if counters.contains(name) => {
                out.push_str(&format!("{prefix}{name}_total {rest}"));
            }
            _ => out.push_str(line),
        }
        out.push('\n');
    }
    out
}

/// The host part of a `host:port` address.
pub fn host_of(addr: &str) -> &str {
    addr.rsplit_once(':').map_or(addr, |(host, _)| host)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_take_their_sample_names_in_the_classic_format() {
        let openmetrics = "# HELP shoal_osd_reads Reads.\n# TYPE shoal_osd_reads counter\n# UNIT shoal_osd_x seconds\n\
                           shoal_osd_reads_total{daemon=\"osd.0\"} 3\n# HELP g A gauge.\n# TYPE g gauge\ng 1\n# EOF\n";
        assert_eq!(
            classic_text(openmetrics),
            "# HELP shoal_osd_reads_total Reads.\n# TYPE shoal_osd_reads_total counter\n\
             shoal_osd_reads_total{daemon=\"osd.0\"} 3\n# HELP g A gauge.\n# TYPE g gauge\ng 1\n"
        );
    }
}
