//! Plain-HTTP probe and metrics endpoints: `GET /healthz` and `/readyz` (with
//! controller-runtime's aggregated output, `?verbose`, `?exclude=` and per-check
//! sub-paths) and `GET /metrics` (Prometheus text exposition).

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use http::{HeaderValue, Method, Request, Response, StatusCode, header};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::service::service_fn;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::metrics::Metrics;

/// A readiness or liveness check.
pub type Check = std::sync::Arc<dyn Fn() -> Result<(), String> + Send + Sync>;

/// Content type of the Prometheus text format 0.0.4.
pub const PROMETHEUS_TEXT: &str = "text/plain; version=0.0.4; charset=utf-8";
/// Content type of the OpenMetrics 1.0 text format.
pub const OPENMETRICS_TEXT: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

const TEXT_PLAIN: &str = "text/plain; charset=utf-8";

type Handler = Arc<dyn Fn(&Request<Incoming>) -> Response<Full<Bytes>> + Send + Sync>;

/// Serves GET /healthz and /readyz (200 "ok" when every check passes, else 500 listing
/// failures, `?verbose` lists each check) at `addr`. Returns the bound address (port 0
/// allowed) once listening.
///
/// Like controller-runtime, `/healthz/<name>` runs a single check, `?exclude=<name>`
/// skips a check, and an endpoint without checks reports a built-in `ping` check.
pub async fn serve_probes(
    addr: SocketAddr,
    healthz: Vec<(String, Check)>,
    readyz: Vec<(String, Check)>,
    shutdown: CancellationToken,
) -> std::io::Result<SocketAddr> {
    let healthz = Arc::new(sorted(healthz));
    let readyz = Arc::new(sorted(readyz));
    let handler: Handler = Arc::new(move |req| {
        let path = req.uri().path();
        let query = req.uri().query().unwrap_or("");
        if let Some(rest) = strip_endpoint(path, "/healthz") {
            probe(&healthz, rest, query)
        } else if let Some(rest) = strip_endpoint(path, "/readyz") {
            probe(&readyz, rest, query)
        } else {
            not_found()
        }
    });
    serve(addr, handler, shutdown).await
}

/// Serves GET /metrics (text/plain; version=0.0.4) from `metrics` at `addr`.
///
/// A scraper that accepts `application/openmetrics-text` gets OpenMetrics instead.
pub async fn serve_metrics(
    addr: SocketAddr,
    metrics: Metrics,
    shutdown: CancellationToken,
) -> std::io::Result<SocketAddr> {
    let handler: Handler = Arc::new(move |req| metrics_response(req, &metrics));
    serve(addr, handler, shutdown).await
}

/// The answer of the metrics endpoint to `req`: the exposition on `GET /metrics`
/// (OpenMetrics when the scraper accepts it), else 404 or 405.
pub(crate) fn metrics_response<B>(req: &Request<B>, metrics: &Metrics) -> Response<Full<Bytes>> {
    if req.uri().path() != "/metrics" {
        return not_found();
    }
    if req.method() != Method::GET && req.method() != Method::HEAD {
        return text(StatusCode::METHOD_NOT_ALLOWED, "method not allowed\n".to_string());
    }
    let openmetrics = req
        .headers()
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| v.contains("application/openmetrics-text"));
    let (body, content_type) = if openmetrics {
        (metrics.encode_openmetrics(), OPENMETRICS_TEXT)
    } else {
        (metrics.encode(), PROMETHEUS_TEXT)
    };
    let mut resp = Response::new(Full::new(Bytes::from(body)));
    resp.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    resp
}

fn sorted(mut checks: Vec<(String, Check)>) -> Vec<(String, Check)> {
    checks.sort_by(|a, b| a.0.cmp(&b.0));
    checks
}

/// `Some(rest)` when `path` is `endpoint` or below it; `rest` is the part after it
/// without leading/trailing slashes.
fn strip_endpoint<'a>(path: &'a str, endpoint: &str) -> Option<&'a str> {
    let rest = path.strip_prefix(endpoint)?;
    if rest.is_empty() {
        return Some("");
    }
    rest.strip_prefix('/').map(|r| r.trim_matches('/'))
}

/// One probe endpoint: the aggregate at `rest == ""`, else the check named `rest`.
fn probe(checks: &[(String, Check)], rest: &str, query: &str) -> Response<Full<Bytes>> {
    if rest.is_empty() {
        return aggregate(checks, query);
    }
    if checks.is_empty() && rest == "ping" {
        return text(StatusCode::OK, "ok".to_string());
    }
    match checks.iter().find(|(name, _)| name == rest) {
        Some((_, check)) => match check() {
            Ok(()) => text(StatusCode::OK, "ok".to_string()),
            Err(e) => text(StatusCode::INTERNAL_SERVER_ERROR, format!("internal server error: {e}\n")),
        },
        None => not_found(),
    }
}

/// The aggregated result of every check, formatted like controller-runtime's healthz.
fn aggregate(checks: &[(String, Check)], query: &str) -> Response<Full<Bytes>> {
    let mut verbose = false;
    let mut excluded: Vec<String> = Vec::new();
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        match key {
            "verbose" => verbose = true,
            "exclude" => excluded.push(percent_decode(value)),
            _ => {}
        }
    }
    let mut lines = Vec::new();
    let mut failed = false;
    for (name, check) in checks {
        if let Some(i) = excluded.iter().position(|e| e == name) {
            excluded.remove(i);
            lines.push(format!("[+]{name} excluded: ok\n"));
            continue;
        }
        match check() {
            Ok(()) => lines.push(format!("[+]{name} ok\n")),
            Err(reason) => {
                tracing::info!(check = %name, error = %reason, "health check failed");
                failed = true;
                // The reason stays out of the public endpoint, as in controller-runtime.
                lines.push(format!("[-]{name} failed: reason withheld\n"));
            }
        }
    }
    if checks.is_empty() {
        lines.push("[+]ping ok\n".to_string());
    }
    let status = if failed { StatusCode::INTERNAL_SERVER_ERROR } else { StatusCode::OK };
    if !failed && !verbose {
        return text(status, "ok".to_string());
    }
    let mut body = lines.concat();
    if !excluded.is_empty() {
        let names: Vec<String> = excluded.iter().map(|e| format!("{e:?}")).collect();
        body.push_str(&format!("warn: some health checks cannot be excluded: no matches for {}\n", names.join(",")));
    }
    body.push_str(if failed { "healthz check failed\n" } else { "healthz check passed\n" });
    text(status, body)
}

/// Decodes `%XX` escapes and `+` in a query value; invalid escapes stay as they are.
fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).ok();
                match hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                    Some(b) => {
                        out.push(b);
                        i += 3;
                        continue;
                    }
                    None => out.push(b'%'),
                }
            }
            b'+' => out.push(b' '),
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// A plain-text answer (`text/plain; charset=utf-8`, `nosniff`), as Go's `http.Error` writes.
pub(crate) fn text(status: StatusCode, body: String) -> Response<Full<Bytes>> {
    let mut resp = Response::new(Full::new(Bytes::from(body)));
    *resp.status_mut() = status;
    resp.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static(TEXT_PLAIN));
    resp.headers_mut().insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    resp
}

fn not_found() -> Response<Full<Bytes>> {
    text(StatusCode::NOT_FOUND, "404 page not found\n".to_string())
}

/// Binds `addr` and spawns opkit-serve's accept loop answering with `handler` until
/// `shutdown`; open connections then finish their current request and close.
async fn serve(addr: SocketAddr, handler: Handler, shutdown: CancellationToken) -> std::io::Result<SocketAddr> {
    let listener = TcpListener::bind(addr).await?;
    let local = listener.local_addr()?;
    let service = service_fn(move |req: Request<Incoming>| {
        let resp = handler(&req);
        async move { Ok::<_, Infallible>(resp) }
    });
    tokio::spawn(opkit_serve::Server::new(listener).serve(service, shutdown));
    Ok(local)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::Duration;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// A raw HTTP/1.1 GET; returns (status, head, body).
    async fn get(addr: SocketAddr, path: &str, accept: Option<&str>) -> (u16, String, String) {
        let mut s = tokio::net::TcpStream::connect(addr).await.expect("connect");
        let accept = accept.map(|a| format!("Accept: {a}\r\n")).unwrap_or_default();
        let req = format!("GET {path} HTTP/1.1\r\nHost: x\r\n{accept}Connection: close\r\n\r\n");
        s.write_all(req.as_bytes()).await.expect("write");
        let mut raw = String::new();
        s.read_to_string(&mut raw).await.expect("read");
        let (head, body) = raw.split_once("\r\n\r\n").expect("response head");
        let status = head.split(' ').nth(1).and_then(|c| c.parse().ok()).expect("status");
        (status, head.to_ascii_lowercase(), body.to_string())
    }

    fn flag_check(flag: &Arc<AtomicBool>) -> Check {
        let flag = flag.clone();
        Arc::new(move || if flag.load(Ordering::SeqCst) { Ok(()) } else { Err("cache not synced".to_string()) })
    }

    #[tokio::test]
    async fn readiness_fails_then_passes() {
        let ready = Arc::new(AtomicBool::new(false));
        let ping: Check = Arc::new(|| Ok(()));
        let shutdown = CancellationToken::new();
        let addr = serve_probes(
            "127.0.0.1:0".parse().expect("addr"),
            vec![("ping".into(), ping.clone())],
            vec![("informers".into(), flag_check(&ready)), ("ping".into(), ping)],
            shutdown.clone(),
        )
        .await
        .expect("serve");

        let (status, head, body) = get(addr, "/healthz", None).await;
        assert_eq!((status, body.as_str()), (200, "ok"));
        assert!(head.contains("content-type: text/plain; charset=utf-8"), "{head}");

        let (status, _, body) = get(addr, "/readyz", None).await;
        assert_eq!(status, 500);
        assert_eq!(body, "[-]informers failed: reason withheld\n[+]ping ok\nhealthz check failed\n");
        let (status, _, body) = get(addr, "/readyz/informers", None).await;
        assert_eq!((status, body.as_str()), (500, "internal server error: cache not synced\n"));
        let (status, _, body) = get(addr, "/readyz?exclude=informers", None).await;
        assert_eq!((status, body.as_str()), (200, "ok"));

        ready.store(true, Ordering::SeqCst);
        let (status, _, body) = get(addr, "/readyz", None).await;
        assert_eq!((status, body.as_str()), (200, "ok"));
        let (status, _, body) = get(addr, "/readyz?verbose", None).await;
        assert_eq!(status, 200);
        assert_eq!(body, "[+]informers ok\n[+]ping ok\nhealthz check passed\n");
        let (status, _, body) = get(addr, "/readyz/informers", None).await;
        assert_eq!((status, body.as_str()), (200, "ok"));
        let (status, _, _) = get(addr, "/readyz/nope", None).await;
        assert_eq!(status, 404);
        let (status, _, _) = get(addr, "/other", None).await;
        assert_eq!(status, 404);

        shutdown.cancel();
        // The listener closes once the accept loop sees the cancellation.
        tokio::time::timeout(Duration::from_secs(5), async {
            while tokio::net::TcpStream::connect(addr).await.is_ok() {
                tokio::task::yield_now().await;
            }
        })
        .await
        .expect("listener closed after shutdown");
    }

    #[tokio::test]
    async fn probes_without_checks_report_ping() {
        let shutdown = CancellationToken::new();
        let addr =
            serve_probes("127.0.0.1:0".parse().expect("addr"), vec![], vec![], shutdown.clone()).await.expect("serve");
        let (status, _, body) = get(addr, "/healthz?verbose", None).await;
        assert_eq!((status, body.as_str()), (200, "[+]ping ok\nhealthz check passed\n"));
        let (status, _, body) = get(addr, "/healthz/ping", None).await;
        assert_eq!((status, body.as_str()), (200, "ok"));
        shutdown.cancel();
    }

    #[tokio::test]
    async fn metrics_endpoint_serves_text_format() {
        let metrics = Metrics::new();
        let c = metrics.controller("c");
        c.reconcile_done("success", Duration::from_millis(1));
        let shutdown = CancellationToken::new();
        let addr = serve_metrics("127.0.0.1:0".parse().expect("addr"), metrics.clone(), shutdown.clone())
            .await
            .expect("serve");
        let (status, head, body) = get(addr, "/metrics", None).await;
        assert_eq!(status, 200);
        assert!(head.contains("content-type: text/plain; version=0.0.4; charset=utf-8"), "{head}");
        assert!(body.contains("controller_runtime_reconcile_total{controller=\"c\",result=\"success\"} 1\n"), "{body}");
        assert!(!body.contains("# EOF"));

        let (status, head, body) =
            get(addr, "/metrics", Some("application/openmetrics-text;version=1.0.0,text/plain;q=0.5")).await;
        assert_eq!(status, 200);
        assert!(head.contains("content-type: application/openmetrics-text"), "{head}");
        assert!(body.ends_with("# EOF\n"), "{body}");

        let (status, _, _) = get(addr, "/healthz", None).await;
        assert_eq!(status, 404);
        shutdown.cancel();
    }

    #[test]
    fn query_values_are_decoded() {
        assert_eq!(percent_decode("a%2Fb+c"), "a/b c");
        assert_eq!(percent_decode("bad%zz%4"), "bad%zz%4");
    }
}
