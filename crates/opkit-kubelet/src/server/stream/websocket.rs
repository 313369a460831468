//! kube's WebSocket channel protocols (`channel.k8s.io` and its versions `v2`…`v5`, as
//! `wsstream` serves them): every binary message starts with the channel number (0 stdin,
//! 1 stdout, 2 stderr, 3 error, 4 resize); `v5.channel.k8s.io` adds the close signal, a
//! message on channel 255 whose byte names the channel the client will no longer write
//! (stdin's EOF). The `base64.` variants send text messages instead: the channel as an
//! ASCII digit, then the data in base64. The framing of WebSocket itself is
//! tokio-tungstenite's.

use std::collections::HashMap;
use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use bytes::{BufMut, Bytes, BytesMut};
use futures::{SinkExt, StreamExt};
use http::{HeaderMap, Response, StatusCode, header};
use hyper::upgrade::Upgraded;
use hyper_util::rt::TokioIo;
use tokio::sync::mpsc;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::handshake::derive_accept_key;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::{CloseFrame, Role};
use tokio_tungstenite::tungstenite::{Message, Utf8Bytes};
use tokio_util::sync::CancellationToken;

use super::{Body, Closed, Refusal, comma_separated_values};

/// The channel of a v5 close signal.
const CLOSE_CHANNEL: u8 = 255;
/// Incoming messages buffered per channel before the connection stops reading.
const CHANNEL_BUFFER: usize = 16;
/// How long a closing connection waits for the client's close before dropping the socket.
const CLOSE_GRACE: Duration = Duration::from_secs(5);

/// A negotiated WebSocket upgrade.
pub(crate) struct Handshake {
    /// The subprotocol chosen (`""` when the client named none).
    pub(crate) protocol: String,
    accept: String,
}

impl Handshake {
    /// Checks the WebSocket request headers and picks the first subprotocol the client lists
    /// that `supported` has (kube's `wsstream` handshake). A failure is the answer to send.
    pub(crate) fn negotiate(headers: &HeaderMap, supported: &[&str]) -> Result<Handshake, Refusal> {
        if headers.get(header::SEC_WEBSOCKET_VERSION).and_then(|v| v.to_str().ok()) != Some("13") {
            return Err(Refusal::bad_request("unable to upgrade connection: websocket version 13 is required")
                .with_header(header::SEC_WEBSOCKET_VERSION, "13"));
        }
        let Some(key) = headers.get(header::SEC_WEBSOCKET_KEY) else {
            return Err(Refusal::bad_request("unable to upgrade connection: Sec-WebSocket-Key is required"));
        };
        let requested = comma_separated_values(headers, header::SEC_WEBSOCKET_PROTOCOL.as_str());
        let chosen = if requested.is_empty() {
            supported.iter().find(|p| p.is_empty()).map(|p| (*p).to_owned())
        } else {
            requested.iter().find(|p| supported.contains(&p.as_str())).cloned()
        };
        let Some(protocol) = chosen else {
            let offered: Vec<&str> = supported.iter().copied().filter(|p| !p.is_empty()).collect();
            return Err(Refusal::forbidden(format!(
                "unable to upgrade connection: requested protocol(s) are not supported: [{}]; supports [{}]",
                requested.join(" "),
                offered.join(" ")
            )));
        };
        Ok(Handshake { protocol, accept: derive_accept_key(key.as_bytes()) })
    }

    /// The `101 Switching Protocols` answer.
    pub(crate) fn switching_protocols(&self) -> Response<Body> {
        let mut response = Response::new(Body::default());
        *response.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
        let headers = response.headers_mut();
        headers.insert(header::CONNECTION, header::HeaderValue::from_static("Upgrade"));
        headers.insert(header::UPGRADE, header::HeaderValue::from_static("websocket"));
        if let Ok(accept) = header::HeaderValue::from_str(&self.accept) {
            headers.insert(header::SEC_WEBSOCKET_ACCEPT, accept);
        }
        if !self.protocol.is_empty()
            && let Ok(protocol) = header::HeaderValue::from_str(&self.protocol)
        {
            headers.insert(header::SEC_WEBSOCKET_PROTOCOL, protocol);
        }
        response
    }
}

/// Whether a channel protocol sends binary messages or base64 text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Encoding {
    Binary,
    Base64,
}

/// Writes one channel of a connection.
#[derive(Clone)]
pub(crate) struct ChannelWriter {
    channel: u8,
    encoding: Encoding,
    out: mpsc::Sender<Message>,
}

impl ChannelWriter {
    /// Sends `data` as one message on the channel (an empty message is allowed: kube sends
    /// one first to tell the client the streams are ready).
    pub(crate) async fn write(&self, data: Bytes) -> Result<(), Closed> {
        let message = match self.encoding {
            Encoding::Binary => {
                let mut frame = BytesMut::with_capacity(data.len() + 1);
                frame.put_u8(self.channel);
                frame.put_slice(&data);
                Message::Binary(frame.freeze())
            }
            Encoding::Base64 => {
                let digit = char::from(b'0'.wrapping_add(self.channel));
                Message::Text(format!("{digit}{}", BASE64.encode(&data)).into())
            }
        };
        self.out.send(message).await.map_err(|_| Closed)
    }
}

/// An open channel connection.
pub(crate) struct ChannelConnection {
    /// The incoming data of each channel the server reads; a channel's receiver ends at its
    /// v5 close signal or when the connection ends.
    pub(crate) inputs: HashMap<u8, mpsc::Receiver<Bytes>>,
    out: mpsc::Sender<Message>,
    encoding: Encoding,
    hung_up: CancellationToken,
    writer: tokio::task::JoinHandle<()>,
    reader: tokio::task::JoinHandle<()>,
}

impl ChannelConnection {
    /// Starts serving the upgraded connection with the negotiated `protocol`; `readable` are
    /// the channels the client may write.
    pub(crate) async fn open(upgraded: Upgraded, protocol: &str, readable: &[u8]) -> ChannelConnection {
        let close_signals = protocol == "v5.channel.k8s.io";
        let encoding = if protocol.ends_with("base64.channel.k8s.io") { Encoding::Base64 } else { Encoding::Binary };
        let socket = WebSocketStream::from_raw_socket(TokioIo::new(upgraded), Role::Server, None).await;
        let (mut sink, mut source) = socket.split();
        let (out_tx, mut out_rx) = mpsc::channel::<Message>(64);
        let writer = tokio::spawn(async move {
            while let Some(message) = out_rx.recv().await {
                let last = matches!(message, Message::Close(_));
                if sink.send(message).await.is_err() || last {
                    break;
                }
            }
            let _ = sink.close().await;
        });
        let mut senders = HashMap::new();
        let mut inputs = HashMap::new();
        for &channel in readable {
            let (tx, rx) = mpsc::channel(CHANNEL_BUFFER);
            senders.insert(channel, tx);
            inputs.insert(channel, rx);
        }
        let hung_up = CancellationToken::new();
        let token = hung_up.clone();
        let reader = tokio::spawn(async move {
            while let Some(Ok(message)) = source.next().await {
                let data = match message {
                    Message::Binary(data) => data,
                    Message::Text(text) => Bytes::from(text),
                    Message::Close(_) => break,
                    _ => continue,
                };
                let Some((&channel, payload)) = data.split_first() else { continue };
                let (channel, payload) = match encoding {
                    Encoding::Binary => (channel, data.slice(1..)),
                    Encoding::Base64 => match BASE64.decode(payload) {
                        Ok(decoded) => (channel.wrapping_sub(b'0'), Bytes::from(decoded)),
                        // As wsstream, a frame that does not decode is dropped.
                        Err(_) => continue,
                    },
                };
                if close_signals && channel == CLOSE_CHANNEL {
                    if let Some(&closed) = payload.first() {
                        senders.remove(&closed);
                    }
                    continue;
                }
                if let Some(tx) = senders.get(&channel)
                    && tx.send(payload).await.is_err()
                {
                    senders.remove(&channel);
                }
            }
            token.cancel();
        });
        ChannelConnection { inputs, out: out_tx, encoding, hung_up, writer, reader }
    }

    /// The writer of `channel`.
    pub(crate) fn writer(&self, channel: u8) -> ChannelWriter {
        ChannelWriter { channel, encoding: self.encoding, out: self.out.clone() }
    }

    /// A token cancelled when the client hangs up.
    pub(crate) fn hung_up(&self) -> CancellationToken {
        self.hung_up.clone()
    }

    /// Closes the connection normally once everything queued is sent, and waits (a little)
    /// for the client's close.
    pub(crate) async fn close(self) {
        let frame = CloseFrame { code: CloseCode::Normal, reason: Utf8Bytes::default() };
        let _ = self.out.send(Message::Close(Some(frame))).await;
        drop(self.out);
        let _ = tokio::time::timeout(CLOSE_GRACE, self.hung_up.cancelled()).await;
        self.writer.abort();
        self.reader.abort();
        self.hung_up.cancel();
    }
}
