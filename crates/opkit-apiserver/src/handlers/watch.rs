//! Watch responses: a chunked stream of newline-delimited JSON watch events, optionally
//! with each object rendered as a Table row.

use bytes::{BufMut, Bytes, BytesMut};
use http::Response;
use http_body_util::{BodyExt, StreamBody};
use hyper::body::Frame;
use tokio_stream::wrappers::ReceiverStream;

use super::codec::{self, Body, Output};
use crate::registry::{Target, WatchEvent, WatchPayload, WatchStream, now_unix};
use crate::table::{self, IncludeObject, TableContext};

fn encode(event: &WatchEvent, target: &Target, output: Output) -> Bytes {
    // `{"type":"MODIFIED","object":` and `}\n` around a stored object: sized once.
    let mut buf = BytesMut::with_capacity(match &event.payload {
        WatchPayload::Raw(b) => b.len() + 32,
        WatchPayload::Json(_) => 256,
    });
    buf.put_slice(b"{\"type\":\"");
    buf.put_slice(event.kind.as_bytes());
    buf.put_slice(b"\",\"object\":");
    let object_event = matches!(event.kind, "ADDED" | "MODIFIED" | "DELETED");
    let rendered = object_event && matches!(output, Output::Table | Output::Metadata);
    match (&event.payload, rendered) {
        (WatchPayload::Raw(b), false) => buf.put_slice(b),
        (WatchPayload::Json(v), false) => buf.put_slice(v.to_string().as_bytes()),
        (payload, true) => {
            let obj = match payload {
                WatchPayload::Raw(b) => match serde_json::from_slice(b) {
                    Ok(obj) => obj,
                    Err(_) => {
                        // A stored object that does not parse has no row: send it as stored.
                        buf.put_slice(b);
                        buf.put_slice(b"}\n");
                        return buf.freeze();
                    }
                },
                WatchPayload::Json(v) => v.clone(),
            };
            if output == Output::Metadata {
                buf.put_slice(table::partial_object_metadata(&obj).to_string().as_bytes());
                buf.put_slice(b"}\n");
                return buf.freeze();
            }
            let ctx = TableContext {
                include: IncludeObject::Metadata,
                now_unix_secs: now_unix(),
                resource_version: obj["metadata"]["resourceVersion"].as_str().unwrap_or_default(),
                continue_token: None,
            };
            let t = table::render(target.table_columns(), std::slice::from_ref(&obj), &ctx);
            buf.put_slice(&crate::json::to_vec(&t));
        }
    }
    buf.put_slice(b"}\n");
    buf.freeze()
}

/// How many encoded events of one watch wait for its connection at most.
const WATCH_EVENTS_AHEAD: usize = 8;

/// Streams `stream` to the client until it ends or the client goes away. While `lag`
/// (a test's lagging cache, see [`crate::perturbation`]) is not caught up, each event
/// waits for it.
pub(super) fn respond_watch(
    mut stream: WatchStream,
    target: Target,
    output: Output,
    mut lag: Option<tokio::sync::watch::Receiver<bool>>,
) -> Response<Body> {
    // A few events ahead of the connection, no more: a client that reads slowly (or never)
    // holds this, the connection's own buffers and the kernel's, not a backlog per watch.
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<Frame<Bytes>, std::convert::Infallible>>(WATCH_EVENTS_AHEAD);
    tokio::spawn(async move {
        loop {
            tokio::select! {
                ev = stream.next() => {
                    let Some(ev) = ev else { break };
                    if let Some(lag) = &mut lag {
                        let _ = lag.wait_for(|caught_up| *caught_up).await;
                    }
                    if tx.send(Ok(Frame::data(encode(&ev, &target, output)))).await.is_err() {
                        break;
                    }
                }
                _ = tx.closed() => break,
            }
        }
    });
    let body = StreamBody::new(ReceiverStream::new(rx)).boxed();
    codec::respond_stream(body, "application/json")
}
