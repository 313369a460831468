//! `GET /containerLogs/{ns}/{pod}/{container}`: a container's log as the kubelet serves
//! it — `follow` (streamed until the instance ends), `previous`, `tailLines`,
//! `sinceSeconds`, `sinceTime`, `timestamps` and `limitBytes`. A simulated pod's
//! containers printed nothing: their log is empty.

use bytes::Bytes;
use http::{Response, StatusCode};
use http_body_util::BodyExt;
use k8s_openapi::api::core::v1::Pod;
use kube::api::Api;
use tokio::sync::mpsc;

use super::{Handler, ResponseBody, full, status_response};
use crate::runtime::logs::{self, LogLine};
use crate::runtime::pod::ContainerRuntime;
use crate::runtime::status::{ContainerView, State};

/// `PodLogOptions` as the query gives them.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct LogOptions {
    /// `follow`.
    pub follow: bool,
    /// `previous`.
    pub previous: bool,
    /// `tailLines`.
    pub tail_lines: Option<usize>,
    /// `sinceSeconds` or `sinceTime`, as the earliest time shown.
    pub since: Option<jiff::Timestamp>,
    /// `timestamps`.
    pub timestamps: bool,
    /// `limitBytes`.
    pub limit_bytes: Option<usize>,
}

/// Go's `strconv.ParseBool`, which kube's query decoding uses.
fn parse_bool(name: &str, v: &str) -> Result<bool, String> {
    match v {
        "1" | "t" | "T" | "true" | "TRUE" | "True" | "" => Ok(true),
        "0" | "f" | "F" | "false" | "FALSE" | "False" => Ok(false),
        _ => Err(format!("{name}: Invalid value: {v:?}: strconv.ParseBool: parsing {v:?}: invalid syntax")),
    }
}

fn parse_int(name: &str, v: &str) -> Result<i64, String> {
    v.parse::<i64>()
        .map_err(|_| format!("{name}: Invalid value: {v:?}: strconv.ParseInt: parsing {v:?}: invalid syntax"))
}

impl LogOptions {
    /// Parses and validates the query as kube validates `PodLogOptions`.
    pub(crate) fn parse(query: &str, now: jiff::Timestamp) -> Result<LogOptions, String> {
        let mut o = LogOptions::default();
        let mut since_seconds = None;
        let mut since_time = None;
        for (k, v) in form_urlencoded(query) {
            match k.as_str() {
                "follow" => o.follow = parse_bool("follow", &v)?,
                "previous" => o.previous = parse_bool("previous", &v)?,
                "timestamps" => o.timestamps = parse_bool("timestamps", &v)?,
                "tailLines" => {
                    let n = parse_int("tailLines", &v)?;
                    if n < 0 {
                        return Err(format!("tailLines: Invalid value: {n}: must be greater than or equal to 0"));
                    }
                    o.tail_lines = Some(usize::try_from(n).unwrap_or(usize::MAX));
                }
                "limitBytes" => {
                    let n = parse_int("limitBytes", &v)?;
                    if n < 1 {
                        return Err(format!("limitBytes: Invalid value: {n}: must be greater than 0"));
                    }
                    o.limit_bytes = Some(usize::try_from(n).unwrap_or(usize::MAX));
                }
                "sinceSeconds" => {
                    let n = parse_int("sinceSeconds", &v)?;
                    if n < 1 {
                        return Err(format!("sinceSeconds: Invalid value: {n}: must be greater than 0"));
                    }
                    since_seconds = Some(n);
                }
                "sinceTime" => {
                    let t =
                        v.parse::<jiff::Timestamp>().map_err(|e| format!("sinceTime: Invalid value: {v:?}: {e}"))?;
                    since_time = Some(t);
                }
                _ => {}
            }
        }
        if since_seconds.is_some() && since_time.is_some() {
            return Err("sinceSeconds: Forbidden: at most one of `sinceTime` or `sinceSeconds` may be specified".into());
        }
        o.since =
            since_time.or_else(|| since_seconds.and_then(|s| now.checked_sub(jiff::SignedDuration::from_secs(s)).ok()));
        Ok(o)
    }

    /// Whether `line` is shown.
    fn shows(&self, line: &LogLine) -> bool {
        self.since.is_none_or(|s| line.time >= s)
    }

    /// `line` as served.
    fn format(&self, line: &LogLine) -> Vec<u8> {
        let mut out = Vec::with_capacity(line.text.len() + 40);
        if self.timestamps {
            out.extend_from_slice(line.time_text.as_bytes());
            out.push(b' ');
        }
        out.extend_from_slice(&line.text);
        out.push(b'\n');
        out
    }
}

/// Splits a query string into decoded pairs.
fn form_urlencoded(query: &str) -> Vec<(String, String)> {
    query
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (decode(k), decode(v))
        })
        .collect()
}

fn decode(s: &str) -> String {
    percent_encoding::percent_decode_str(&s.replace('+', " ")).decode_utf8_lossy().into_owned()
}

fn bad_request(msg: &str) -> Response<ResponseBody> {
    status_response(StatusCode::BAD_REQUEST, "BadRequest", msg)
}

fn text(bytes: Vec<u8>) -> Response<ResponseBody> {
    let mut res = Response::new(full(Bytes::from(bytes)));
    res.headers_mut().insert(http::header::CONTENT_TYPE, http::HeaderValue::from_static("text/plain"));
    res
}

/// Serves one `containerLogs` request.
pub(crate) async fn serve(h: &Handler, ns: &str, name: &str, container: &str, query: &str) -> Response<ResponseBody> {
    let opts = match LogOptions::parse(query, jiff::Timestamp::now()) {
        Ok(o) => o,
        Err(msg) => return bad_request(&msg),
    };
    let Some(pod) = h.runtime.as_ref().and_then(|rt| rt.pod(ns, name)) else {
        return simulated(h, ns, name, container, &opts).await;
    };
    let Some(rt) = pod.container(container) else {
        return bad_request(&format!("container {container} is not valid for pod {name}"));
    };
    let view = pod.view();
    let Some(cv) =
        view.containers.iter().chain(view.init.iter()).chain(view.ephemeral.iter()).find(|c| c.name == container)
    else {
        return bad_request(&format!("container {container} is not valid for pod {name}"));
    };
    let instance = match instance_to_read(&opts, cv, &rt, container, name) {
        Ok(n) => n,
        Err(msg) => return bad_request(&msg),
    };
    let lines = match logs::read(&rt.logs, instance).await {
        Ok(l) => l,
        Err(e) => {
            return status_response(StatusCode::INTERNAL_SERVER_ERROR, "InternalError", &format!("reading logs: {e}"));
        }
    };
    // What was read of the live file, for following it.
    let live = rt.logs.live(instance);
    let offset = tokio::fs::metadata(&live).await.map(|m| m.len()).unwrap_or(0);
    let mut shown: Vec<&LogLine> = lines.iter().filter(|l| opts.shows(l)).collect();
    if let Some(n) = opts.tail_lines {
        shown = shown.split_off(shown.len().saturating_sub(n));
    }
    let mut out: Vec<u8> = shown.iter().flat_map(|l| opts.format(l)).collect();
    let following = opts.follow
        && !opts.previous
        && rt.instance == Some(instance)
        && rt.progress.as_ref().is_some_and(|p| !p.borrow().ended);
    if let Some(limit) = opts.limit_bytes
        && out.len() >= limit
    {
        out.truncate(limit);
        return text(out);
    }
    let Some(progress) = rt.progress.filter(|_| following) else { return text(out) };
    let (tx, rx) = mpsc::channel::<Vec<u8>>(16);
    let remaining = opts.limit_bytes.map(|l| l - out.len());
    let first = out;
    tokio::spawn(async move {
        if !first.is_empty() && tx.send(first).await.is_err() {
            return;
        }
        follow(live, offset, progress, opts, remaining, tx).await;
    });
    let stream = futures::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|chunk| (Ok::<_, std::io::Error>(hyper::body::Frame::data(Bytes::from(chunk))), rx))
    });
    let mut res = Response::new(http_body_util::StreamBody::new(stream).boxed_unsync());
    res.headers_mut().insert(http::header::CONTENT_TYPE, http::HeaderValue::from_static("text/plain"));
    res
}

/// Which instance's log a request reads: the current one, or with `previous` the one
/// before it (the last terminated instance, or the current one while it waits to
/// restart); an error message when there is none.
fn instance_to_read(
    opts: &LogOptions,
    cv: &ContainerView,
    rt: &ContainerRuntime,
    container: &str,
    name: &str,
) -> Result<i32, String> {
    if opts.previous {
        let waiting = matches!(cv.state, State::Waiting { .. });
        return match (&cv.last, rt.instance) {
            (Some(_), Some(n)) if waiting => Ok(n),
            (Some(_), Some(n)) if n > 0 => Ok(n - 1),
            _ => Err(format!("previous terminated container \"{container}\" in pod \"{name}\" not found")),
        };
    }
    rt.instance.ok_or_else(|| {
        let reason = match &cv.state {
            State::Waiting { reason, .. } => reason.clone(),
            _ => "ContainerCreating".into(),
        };
        format!("container \"{container}\" in pod \"{name}\" is waiting to start: {reason}")
    })
}

/// Streams what is appended to the live file from `offset` until the instance ends, the
/// limit is reached or the client goes away.
async fn follow(
    live: std::path::PathBuf,
    mut offset: u64,
    mut progress: tokio::sync::watch::Receiver<logs::LogProgress>,
    opts: LogOptions,
    mut remaining: Option<usize>,
    tx: mpsc::Sender<Vec<u8>>,
) {
    loop {
        let ended = progress.borrow_and_update().ended;
        if tokio::fs::metadata(&live).await.is_ok_and(|m| m.len() < offset) {
            // Rotated: the live file starts over.
            offset = 0;
        }
        let Ok(bytes) = logs::read_from(&live, offset).await else { return };
        // Only whole entries.
        let complete = bytes.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
        offset += complete as u64;
        let mut out: Vec<u8> =
            logs::parse(&bytes[..complete]).iter().filter(|l| opts.shows(l)).flat_map(|l| opts.format(l)).collect();
        if let Some(r) = remaining.as_mut() {
            if out.len() >= *r {
                out.truncate(*r);
                let _ = tx.send(out).await;
                return;
            }
            *r -= out.len();
        }
        if !out.is_empty() && tx.send(out).await.is_err() {
            return;
        }
        if ended {
            return;
        }
        tokio::select! {
            changed = progress.changed() => if changed.is_err() { return },
            () = tx.closed() => return,
        }
    }
}

/// A pod this kubelet simulates: its containers printed nothing.
async fn simulated(h: &Handler, ns: &str, name: &str, container: &str, opts: &LogOptions) -> Response<ResponseBody> {
    let api: Api<Pod> = Api::namespaced(h.client.clone(), ns);
    match api.get_opt(name).await {
        Ok(Some(pod)) => {
            let spec = pod.spec.unwrap_or_default();
            let known =
                spec.containers.iter().chain(spec.init_containers.iter().flatten()).any(|c| c.name == container)
                    || spec.ephemeral_containers.iter().flatten().any(|c| c.name == container);
            if !known {
                return bad_request(&format!("container {container} is not valid for pod {name}"));
            }
            if opts.previous {
                return bad_request(&format!(
                    "previous terminated container \"{container}\" in pod \"{name}\" not found"
                ));
            }
            text(Vec::new())
        }
        Ok(None) => status_response(StatusCode::NOT_FOUND, "NotFound", &format!("pod \"{name}\" does not exist")),
        Err(e) => status_response(StatusCode::INTERNAL_SERVER_ERROR, "InternalError", &e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_are_validated_as_kube() {
        let now = jiff::Timestamp::from_second(1000).unwrap_or(jiff::Timestamp::UNIX_EPOCH);
        let o = LogOptions::parse("follow=true&tailLines=2&timestamps=1&limitBytes=10&sinceSeconds=5", now);
        let o = o.unwrap_or_default();
        assert!(o.follow && o.timestamps);
        assert_eq!((o.tail_lines, o.limit_bytes), (Some(2), Some(10)));
        assert_eq!(o.since.map(|t| t.as_second()), Some(995));
        assert!(LogOptions::parse("tailLines=-1", now).is_err());
        assert!(LogOptions::parse("limitBytes=0", now).is_err());
        assert!(LogOptions::parse("sinceSeconds=1&sinceTime=2024-01-01T00:00:00Z", now).is_err());
        assert_eq!(decode("a%20b+c"), "a b c");
    }
}
