//! `/healthz`, `/livez` and `/readyz`, as kube-apiserver answers them: `ok`, the named
//! checks one per line with `?verbose` (`[+]ping ok`, `[-]etcd failed: reason withheld`,
//! …, `readyz check passed|failed`), `?exclude=<check>`, one check at
//! `/readyz/<check>`, and 500 while a check fails. The `etcd` check is the store's
//! backend: it fails while writes cannot be persisted (a full disk); `/livez` leaves it
//! out, so a server waiting for space is not restarted.

use http::{HeaderValue, Response, StatusCode};

use super::codec::{self, Body};
use super::route::parse_query;
use crate::error::{ApiError, ApiResult};
use crate::storage::Store;

/// One named health check.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Check {
    Ping,
    Log,
    Etcd,
}

impl Check {
    fn name(self) -> &'static str {
        match self {
            Check::Ping => "ping",
            Check::Log => "log",
            Check::Etcd => "etcd",
        }
    }

    fn run(self, store: &Store) -> Result<(), String> {
        match self {
            Check::Ping | Check::Log => Ok(()),
            Check::Etcd => store.health().map_err(|e| e.to_string()),
        }
    }
}

/// Answers a health path (`/readyz`, `/readyz/etcd`, `/livez?verbose`, …).
pub(super) fn answer(store: &Store, path: &str, query: Option<&str>) -> ApiResult<Response<Body>> {
    let mut segments = path.split('/').filter(|s| !s.is_empty());
    let endpoint = segments.next().unwrap_or_default();
    let checks: &[Check] = match endpoint {
        "livez" => &[Check::Ping, Check::Log],
        "healthz" | "readyz" => &[Check::Ping, Check::Log, Check::Etcd],
        _ => return Err(ApiError::no_route()),
    };
    let sub: Vec<&str> = segments.collect();
    if !sub.is_empty() {
        let wanted = sub.join("/");
        let Some(check) = checks.iter().find(|c| c.name() == wanted) else {
            return Err(ApiError::no_route());
        };
        return Ok(match check.run(store) {
            Ok(()) => text(StatusCode::OK, "ok".into()),
            Err(e) => text(StatusCode::INTERNAL_SERVER_ERROR, format!("internal server error: {e}\n")),
        });
    }
    let verbose = parse_query(query).contains_key("verbose");
    let excluded: Vec<&str> =
        query.unwrap_or_default().split('&').filter_map(|pair| pair.strip_prefix("exclude=")).collect();
    let mut out = String::new();
    let mut failed = false;
    for check in checks {
        if excluded.contains(&check.name()) {
            out.push_str(&format!("[+]{} excluded: ok\n", check.name()));
            continue;
        }
        match check.run(store) {
            Ok(()) => out.push_str(&format!("[+]{} ok\n", check.name())),
            Err(e) => {
                tracing::warn!(check = check.name(), endpoint, error = %e, "health check failed");
                failed = true;
                out.push_str(&format!("[-]{} failed: reason withheld\n", check.name()));
            }
        }
    }
    Ok(if failed {
        // kube answers every check when one fails, verbose or not.
        text(StatusCode::INTERNAL_SERVER_ERROR, format!("{out}{endpoint} check failed\n"))
    } else if verbose {
        text(StatusCode::OK, format!("{out}{endpoint} check passed\n"))
    } else {
        text(StatusCode::OK, "ok".into())
    })
}

fn text(status: StatusCode, body: String) -> Response<Body> {
    let mut r = codec::respond_bytes(body, "text/plain; charset=utf-8");
    *r.status_mut() = status;
    r.headers_mut().insert("x-content-type-options", HeaderValue::from_static("nosniff"));
    r
}
