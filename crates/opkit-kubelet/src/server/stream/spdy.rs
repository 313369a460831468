//! The server side of SPDY/3.1 sessions, as kube's `httpstream/spdy` (moby/spdystream)
//! speaks them: kubectl uses SPDY for every port-forward and, before 1.30, for exec.
//!
//! SPDY was superseded by HTTP/2 and no maintained crate implements it, so the subset kube
//! needs is written here: the frame layout (SYN_STREAM, SYN_REPLY, RST_STREAM, SETTINGS,
//! PING, GOAWAY, HEADERS, WINDOW_UPDATE and data frames), header blocks compressed with one
//! zlib stream per direction primed with SPDY/3's dictionary, and the session: the client
//! opens streams, the handler replies (or resets) each and reads and writes its data. As
//! spdystream does, flow-control windows are neither enforced nor advertised (the peer
//! ignores WINDOW_UPDATE); backpressure comes from TCP, since a stream's incoming data is
//! handed over through a bounded channel.

use std::collections::HashMap;
use std::sync::LazyLock;
use std::time::Duration;

use bytes::Bytes;
use flate2::{Compress, Compression, Decompress, FlushCompress, FlushDecompress};
use http::{HeaderMap, Response, StatusCode, header};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::{Body, Closed, Refusal, comma_separated_values, header_has_token};

/// The `Upgrade` token of SPDY/3.1.
pub(crate) const SPDY_31: &str = "SPDY/3.1";

/// The header naming the stream protocols a client speaks (and, answered, the one chosen).
const PROTOCOL_VERSION_HEADER: &str = "X-Stream-Protocol-Version";
/// The header listing the protocols the server accepts, when none matched.
const ACCEPTED_PROTOCOLS_HEADER: &str = "x-accepted-stream-protocol-versions";

/// The only protocol version of control frames.
const VERSION: u16 = 3;
/// Control frame types.
const SYN_STREAM: u16 = 1;
const SYN_REPLY: u16 = 2;
const RST_STREAM: u16 = 3;
const SETTINGS: u16 = 4;
const PING: u16 = 6;
const GOAWAY: u16 = 7;
const HEADERS: u16 = 8;
const WINDOW_UPDATE: u16 = 9;
/// The FIN flag of data frames and SYN_STREAM / SYN_REPLY / HEADERS.
const FLAG_FIN: u8 = 0x01;
/// RST_STREAM status codes.
const RST_PROTOCOL_ERROR: u32 = 1;
/// The RST_STREAM status spdystream's `Stream.Reset` sends.
pub(crate) const RST_CANCEL: u32 = 5;
/// GOAWAY status codes.
const GOAWAY_OK: u32 = 0;
const GOAWAY_PROTOCOL_ERROR: u32 = 1;

/// The largest frame payload accepted (SPDY's length field allows 16 MiB; kubectl writes at
/// most 32 KiB at a time).
const MAX_FRAME_LEN: usize = 1 << 20;
/// The largest decompressed header block accepted.
const MAX_HEADER_BLOCK: usize = 64 << 10;
/// The largest data frame written.
const MAX_DATA_CHUNK: usize = 32 << 10;
/// Incoming data frames buffered per stream before the session stops reading.
const STREAM_BUFFER: usize = 16;
/// How long a closed session waits for the client to hang up before dropping the socket.
const CLOSE_GRACE: Duration = Duration::from_secs(5);

/// SPDY/3's header-compression dictionary (draft 3, section 2.6.10.1): length-prefixed
/// header names and common values, then a run of common strings.
static DICTIONARY: LazyLock<Vec<u8>> = LazyLock::new(|| {
    const NAMES: [&str; 65] = [
        "options",
        "head",
        "post",
        "put",
        "delete",
        "trace",
        "accept",
        "accept-charset",
        "accept-encoding",
        "accept-language",
        "accept-ranges",
        "age",
        "allow",
        "authorization",
        "cache-control",
        "connection",
        "content-base",
        "content-encoding",
        "content-language",
        "content-length",
        "content-location",
        "content-md5",
        "content-range",
        "content-type",
        "date",
        "etag",
        "expect",
        "expires",
        "from",
        "host",
        "if-match",
        "if-modified-since",
        "if-none-match",
        "if-range",
        "if-unmodified-since",
        "last-modified",
        "location",
        "max-forwards",
        "pragma",
        "proxy-authenticate",
        "proxy-authorization",
        "range",
        "referer",
        "retry-after",
        "server",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "user-agent",
        "vary",
        "via",
        "warning",
        "www-authenticate",
        "method",
        "get",
        "status",
        "200 OK",
        "version",
        "HTTP/1.1",
        "url",
        "public",
        "set-cookie",
        "keep-alive",
        "origin",
    ];
    const TAIL: &str = concat!(
        "100101201202205206300302303304305306307402405406407408409410411412413414415416417502504505",
        "203 Non-Authoritative Information204 No Content301 Moved Permanently400 Bad Request",
        "401 Unauthorized403 Forbidden404 Not Found500 Internal Server Error501 Not Implemented",
        "503 Service UnavailableJan Feb Mar Apr May Jun Jul Aug Sept Oct Nov Dec 00:00:00 ",
        "Mon, Tue, Wed, Thu, Fri, Sat, Sun, GMTchunked,text/html,image/png,image/jpg,image/gif,",
        "application/xml,application/xhtml+xml,text/plain,text/javascript,publicprivatemax-age=",
        "gzip,deflate,sdchcharset=utf-8charset=iso-8859-1,utf-,*,enq=0.",
    );
    let mut dict = Vec::with_capacity(1423);
    for name in NAMES {
        dict.extend_from_slice(&(name.len() as u32).to_be_bytes());
        dict.extend_from_slice(name.as_bytes());
    }
    dict.extend_from_slice(TAIL.as_bytes());
    dict
});

/// Why a session ended abnormally.
#[derive(Debug, thiserror::Error)]
enum ProtocolError {
    #[error("reading the connection: {0}")]
    Io(#[from] std::io::Error),
    #[error("frame of {0} bytes is too large")]
    FrameTooLarge(usize),
    #[error("malformed {0} frame")]
    Malformed(&'static str),
    #[error("unsupported SPDY version {0}")]
    Version(u16),
    #[error("header block: {0}")]
    HeaderBlock(String),
}

/// A stream the client opened with SYN_STREAM: its headers, its incoming data and the
/// writer for its outgoing half. It must be answered with [`StreamWriter::reply`] or
/// [`StreamWriter::reset`].
pub(crate) struct IncomingStream {
    /// The headers, names lower-cased as SPDY requires.
    headers: Vec<(String, String)>,
    /// The client's data, in order; ends at the client's FIN or RST_STREAM, or when the
    /// connection ends.
    pub(crate) data: mpsc::Receiver<Bytes>,
    /// The outgoing half.
    pub(crate) writer: StreamWriter,
}

impl IncomingStream {
    /// The first value of a header (names compare case-insensitively).
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }

    /// The stream's id.
    pub(crate) fn id(&self) -> u32 {
        self.writer.id
    }
}

/// What the writer task sends.
enum Outgoing {
    Reply { id: u32 },
    Data { id: u32, data: Bytes, fin: bool },
    Reset { id: u32, status: u32 },
    Ping { id: u32 },
    GoAway { last_id: u32, status: u32 },
}

/// The outgoing half of one stream.
#[derive(Clone)]
pub(crate) struct StreamWriter {
    id: u32,
    out: mpsc::Sender<Outgoing>,
}

impl StreamWriter {
    /// Accepts the stream (SYN_REPLY with no headers).
    pub(crate) async fn reply(&self) -> Result<(), Closed> {
        self.out.send(Outgoing::Reply { id: self.id }).await.map_err(|_| Closed)
    }

    /// Sends data, in frames of at most 32 KiB.
    pub(crate) async fn write(&self, mut data: Bytes) -> Result<(), Closed> {
        while !data.is_empty() {
            let chunk = data.split_to(data.len().min(MAX_DATA_CHUNK));
            self.out.send(Outgoing::Data { id: self.id, data: chunk, fin: false }).await.map_err(|_| Closed)?;
        }
        Ok(())
    }

    /// Ends the outgoing half (an empty data frame with FIN), as spdystream's `Close`.
    pub(crate) async fn finish(&self) {
        let _ = self.out.send(Outgoing::Data { id: self.id, data: Bytes::new(), fin: true }).await;
    }

    /// Resets the stream (RST_STREAM with `status`).
    pub(crate) async fn reset(&self, status: u32) {
        let _ = self.out.send(Outgoing::Reset { id: self.id, status }).await;
    }
}

/// A SPDY/3.1 server session over an upgraded connection.
pub(crate) struct Session {
    /// Streams the client opens, in order; ends when the connection does.
    pub(crate) incoming: mpsc::Receiver<IncomingStream>,
    out: mpsc::Sender<Outgoing>,
    /// Cancelled when the connection's read side ends (the client hung up).
    hung_up: CancellationToken,
    /// The highest stream id the client opened.
    last_id: std::sync::Arc<std::sync::atomic::AtomicU32>,
    writer: tokio::task::JoinHandle<()>,
    reader: tokio::task::JoinHandle<()>,
}

impl Session {
    /// Starts serving the session on `io` (after the `101 Switching Protocols`).
    pub(crate) fn start<IO>(io: IO) -> Session
    where
        IO: AsyncRead + AsyncWrite + Send + 'static,
    {
        let (read, write) = tokio::io::split(io);
        let (out_tx, out_rx) = mpsc::channel(64);
        let (incoming_tx, incoming_rx) = mpsc::channel(16);
        let hung_up = CancellationToken::new();
        let last_id = std::sync::Arc::new(std::sync::atomic::AtomicU32::new(0));
        let writer = tokio::spawn(write_frames(write, out_rx));
        let reader = Reader {
            io: BufReader::new(read),
            inflate: Decompress::new(true),
            streams: HashMap::new(),
            incoming: incoming_tx,
            out: out_tx.clone(),
            last_id: last_id.clone(),
        };
        let token = hung_up.clone();
        let reader = tokio::spawn(async move {
            if let Err(error) = reader.run().await {
                tracing::debug!(%error, "SPDY session ended");
            }
            token.cancel();
        });
        Session { incoming: incoming_rx, out: out_tx, hung_up, last_id, writer, reader }
    }

    /// A token cancelled when the client hangs up.
    pub(crate) fn hung_up(&self) -> CancellationToken {
        self.hung_up.clone()
    }

    /// Ends the session as spdystream's `Close` does: GOAWAY, then the connection closes once
    /// everything queued is written and the client hangs up (or after a grace period).
    pub(crate) async fn close(self) {
        let last_id = self.last_id.load(std::sync::atomic::Ordering::Relaxed);
        let _ = self.out.send(Outgoing::GoAway { last_id, status: GOAWAY_OK }).await;
        drop(self.out);
        drop(self.incoming);
        let _ = tokio::time::timeout(CLOSE_GRACE, self.hung_up.cancelled()).await;
        self.writer.abort();
        self.reader.abort();
        self.hung_up.cancel();
    }
}

/// Checks a SPDY upgrade request and picks the first protocol of the client's
/// `X-Stream-Protocol-Version` list the server speaks (kube's `httpstream.Handshake`).
pub(crate) fn negotiate(headers: &HeaderMap, supported: &[&str]) -> Result<String, Refusal> {
    if !header_has_token(headers, header::CONNECTION, "upgrade") || !header_has_token(headers, header::UPGRADE, SPDY_31)
    {
        return Err(Refusal::bad_request("unable to upgrade: missing upgrade headers in request"));
    }
    let requested = comma_separated_values(headers, PROTOCOL_VERSION_HEADER);
    if requested.is_empty() {
        return Err(Refusal::bad_request(format!("unable to upgrade: {PROTOCOL_VERSION_HEADER} is required")));
    }
    if let Some(protocol) = requested.iter().find(|p| supported.contains(&p.as_str())) {
        return Ok(protocol.clone());
    }
    let mut refusal = Refusal::forbidden(format!(
        "unable to upgrade: unable to negotiate protocol: client supports [{}], server accepts [{}]",
        requested.join(" "),
        supported.join(" ")
    ));
    for protocol in supported {
        refusal = refusal.with_header(header::HeaderName::from_static(ACCEPTED_PROTOCOLS_HEADER), protocol);
    }
    Err(refusal)
}

/// The `101 Switching Protocols` answer to a SPDY upgrade.
pub(crate) fn switching_protocols(protocol: &str) -> Response<Body> {
    let mut response = Response::new(Body::default());
    *response.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
    let headers = response.headers_mut();
    headers.insert(header::CONNECTION, header::HeaderValue::from_static("Upgrade"));
    headers.insert(header::UPGRADE, header::HeaderValue::from_static(SPDY_31));
    if let Ok(value) = header::HeaderValue::from_str(protocol) {
        headers.insert(PROTOCOL_VERSION_HEADER, value);
    }
    response
}

/// Encodes one control frame.
fn control_frame(kind: u16, flags: u8, payload: &[u8]) -> Vec<u8> {
    let mut frame = Vec::with_capacity(8 + payload.len());
    frame.extend_from_slice(&(0x8000 | VERSION).to_be_bytes());
    frame.extend_from_slice(&kind.to_be_bytes());
    frame.push(flags);
    frame.extend_from_slice(&(payload.len() as u32).to_be_bytes()[1..]);
    frame.extend_from_slice(payload);
    frame
}

/// Encodes one data frame.
fn data_frame(id: u32, fin: bool, data: &[u8]) -> Vec<u8> {
    let mut frame = Vec::with_capacity(8 + data.len());
    frame.extend_from_slice(&(id & 0x7fff_ffff).to_be_bytes());
    frame.push(if fin { FLAG_FIN } else { 0 });
    frame.extend_from_slice(&(data.len() as u32).to_be_bytes()[1..]);
    frame.extend_from_slice(data);
    frame
}

/// The uncompressed header block of `headers`.
fn encode_header_block(headers: &[(&str, &str)]) -> Vec<u8> {
    let mut block = Vec::new();
    block.extend_from_slice(&(headers.len() as u32).to_be_bytes());
    for (name, value) in headers {
        block.extend_from_slice(&(name.len() as u32).to_be_bytes());
        block.extend_from_slice(name.as_bytes());
        block.extend_from_slice(&(value.len() as u32).to_be_bytes());
        block.extend_from_slice(value.as_bytes());
    }
    block
}

/// Parses an uncompressed header block; repeated values (NUL-separated) become one pair each.
fn decode_header_block(block: &[u8]) -> Result<Vec<(String, String)>, ProtocolError> {
    fn take<'a>(rest: &mut &'a [u8], n: usize) -> Result<&'a [u8], ProtocolError> {
        if rest.len() < n {
            return Err(ProtocolError::HeaderBlock("truncated".into()));
        }
        let (head, tail) = rest.split_at(n);
        *rest = tail;
        Ok(head)
    }
    fn take_u32(rest: &mut &[u8]) -> Result<usize, ProtocolError> {
        let b = take(rest, 4)?;
        Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]) as usize)
    }
    let mut rest = block;
    let count = take_u32(&mut rest)?;
    let mut headers = Vec::new();
    for _ in 0..count {
        let len = take_u32(&mut rest)?;
        let name = String::from_utf8_lossy(take(&mut rest, len)?).to_ascii_lowercase();
        let len = take_u32(&mut rest)?;
        let value = String::from_utf8_lossy(take(&mut rest, len)?).into_owned();
        for v in value.split('\0') {
            headers.push((name.clone(), v.to_owned()));
        }
    }
    Ok(headers)
}

/// Compresses one header block onto the session's zlib stream (a sync flush per block).
fn compress_block(deflate: &mut Compress, block: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(block.len() + 64);
    let start = deflate.total_in();
    loop {
        let consumed = (deflate.total_in() - start) as usize;
        if deflate.compress_vec(&block[consumed..], &mut out, FlushCompress::Sync).is_err() {
            break;
        }
        if (deflate.total_in() - start) as usize == block.len() && out.len() < out.capacity() {
            break;
        }
        out.reserve(256);
    }
    out
}

/// Decompresses one header block from the session's zlib stream.
fn decompress_block(inflate: &mut Decompress, input: &[u8]) -> Result<Vec<u8>, ProtocolError> {
    let mut out = Vec::with_capacity(1024);
    let mut consumed = 0usize;
    loop {
        let before_in = inflate.total_in();
        let before_out = out.len();
        match inflate.decompress_vec(&input[consumed..], &mut out, FlushDecompress::Sync) {
            Ok(_) => {}
            Err(e) if e.needs_dictionary().is_some() => {
                inflate.set_dictionary(&DICTIONARY).map_err(|e| ProtocolError::HeaderBlock(e.to_string()))?;
            }
            Err(e) => return Err(ProtocolError::HeaderBlock(e.to_string())),
        }
        consumed += (inflate.total_in() - before_in) as usize;
        if consumed >= input.len() && out.len() < out.capacity() {
            return Ok(out);
        }
        if out.len() > MAX_HEADER_BLOCK {
            return Err(ProtocolError::HeaderBlock("too large".into()));
        }
        if out.len() == before_out && inflate.total_in() == before_in && out.len() < out.capacity() {
            return Err(ProtocolError::HeaderBlock("no progress".into()));
        }
        out.reserve(1024);
    }
}

/// The writer task: encodes queued frames onto the connection until GOAWAY or an error.
async fn write_frames<W: AsyncWrite>(write: W, mut out: mpsc::Receiver<Outgoing>) {
    let mut deflate = Compress::new(Compression::default(), true);
    if deflate.set_dictionary(&DICTIONARY).is_err() {
        return;
    }
    let mut write = std::pin::pin!(write);
    while let Some(item) = out.recv().await {
        let (frame, last) = match item {
            Outgoing::Reply { id } => {
                let mut payload = id.to_be_bytes().to_vec();
                payload.extend(compress_block(&mut deflate, &encode_header_block(&[])));
                (control_frame(SYN_REPLY, 0, &payload), false)
            }
            Outgoing::Data { id, data, fin } => (data_frame(id, fin, &data), false),
            Outgoing::Reset { id, status } => {
                let mut payload = id.to_be_bytes().to_vec();
                payload.extend_from_slice(&status.to_be_bytes());
                (control_frame(RST_STREAM, 0, &payload), false)
            }
            Outgoing::Ping { id } => (control_frame(PING, 0, &id.to_be_bytes()), false),
            Outgoing::GoAway { last_id, status } => {
                let mut payload = last_id.to_be_bytes().to_vec();
                payload.extend_from_slice(&status.to_be_bytes());
                (control_frame(GOAWAY, 0, &payload), true)
            }
        };
        if write.write_all(&frame).await.is_err() {
            return;
        }
        if out.is_empty() && write.flush().await.is_err() {
            return;
        }
        if last {
            let _ = write.flush().await;
            let _ = write.shutdown().await;
            return;
        }
    }
    let _ = write.flush().await;
}

/// The reader task's state.
struct Reader<R> {
    io: BufReader<R>,
    inflate: Decompress,
    /// The incoming halves of the open streams.
    streams: HashMap<u32, mpsc::Sender<Bytes>>,
    incoming: mpsc::Sender<IncomingStream>,
    out: mpsc::Sender<Outgoing>,
    last_id: std::sync::Arc<std::sync::atomic::AtomicU32>,
}

impl<R: AsyncRead + Unpin> Reader<R> {
    /// Reads frames until the connection ends.
    async fn run(mut self) -> Result<(), ProtocolError> {
        let result = self.read_frames().await;
        if let Err(ProtocolError::FrameTooLarge(_) | ProtocolError::Malformed(_) | ProtocolError::HeaderBlock(_)) =
            &result
        {
            let last_id = self.last_id.load(std::sync::atomic::Ordering::Relaxed);
            let _ = self.out.send(Outgoing::GoAway { last_id, status: GOAWAY_PROTOCOL_ERROR }).await;
        }
        match result {
            Err(ProtocolError::Io(e)) if e.kind() == std::io::ErrorKind::UnexpectedEof => Ok(()),
            other => other,
        }
    }

    async fn read_frames(&mut self) -> Result<(), ProtocolError> {
        let mut head = [0u8; 8];
        loop {
            self.io.read_exact(&mut head).await?;
            let flags = head[4];
            let len = u32::from_be_bytes([0, head[5], head[6], head[7]]) as usize;
            if len > MAX_FRAME_LEN {
                return Err(ProtocolError::FrameTooLarge(len));
            }
            let mut payload = vec![0u8; len];
            self.io.read_exact(&mut payload).await?;
            if head[0] & 0x80 == 0 {
                let id = u32::from_be_bytes([head[0], head[1], head[2], head[3]]);
                self.on_data(id, flags, payload).await;
                continue;
            }
            let version = u16::from_be_bytes([head[0] & 0x7f, head[1]]);
            if version != VERSION {
                return Err(ProtocolError::Version(version));
            }
            match u16::from_be_bytes([head[2], head[3]]) {
                SYN_STREAM => self.on_syn_stream(flags, &payload).await?,
                RST_STREAM => {
                    let id = read_u32(&payload, 0, "RST_STREAM")? & 0x7fff_ffff;
                    self.streams.remove(&id);
                }
                PING => {
                    let id = read_u32(&payload, 0, "PING")?;
                    // Pings the client starts have odd ids; even ones would answer ours.
                    if id % 2 == 1 {
                        let _ = self.out.send(Outgoing::Ping { id }).await;
                    }
                }
                GOAWAY => return Ok(()),
                HEADERS | SYN_REPLY => {
                    // Keeps the zlib stream in step; the headers themselves are not used.
                    if payload.len() < 4 {
                        return Err(ProtocolError::Malformed("HEADERS"));
                    }
                    decompress_block(&mut self.inflate, &payload[4..])?;
                    if flags & FLAG_FIN != 0 {
                        let id = read_u32(&payload, 0, "HEADERS")? & 0x7fff_ffff;
                        self.streams.remove(&id);
                    }
                }
                SETTINGS | WINDOW_UPDATE => {}
                _ => {}
            }
        }
    }

    async fn on_data(&mut self, id: u32, flags: u8, payload: Vec<u8>) {
        let id = id & 0x7fff_ffff;
        if let Some(stream) = self.streams.get(&id)
            && !payload.is_empty()
            && stream.send(Bytes::from(payload)).await.is_err()
        {
            // The handler no longer reads this stream: drop what comes.
            self.streams.remove(&id);
        }
        if flags & FLAG_FIN != 0 {
            self.streams.remove(&id);
        }
    }

    async fn on_syn_stream(&mut self, flags: u8, payload: &[u8]) -> Result<(), ProtocolError> {
        if payload.len() < 10 {
            return Err(ProtocolError::Malformed("SYN_STREAM"));
        }
        let id = read_u32(payload, 0, "SYN_STREAM")? & 0x7fff_ffff;
        let block = decompress_block(&mut self.inflate, &payload[10..])?;
        let headers = decode_header_block(&block)?;
        // Client streams have odd, increasing ids.
        let last = self.last_id.load(std::sync::atomic::Ordering::Relaxed);
        if id % 2 == 0 || id <= last || self.streams.contains_key(&id) {
            let _ = self.out.send(Outgoing::Reset { id, status: RST_PROTOCOL_ERROR }).await;
            return Ok(());
        }
        self.last_id.store(id, std::sync::atomic::Ordering::Relaxed);
        let (data_tx, data_rx) = mpsc::channel(STREAM_BUFFER);
        if flags & FLAG_FIN == 0 {
            self.streams.insert(id, data_tx);
        }
        let stream = IncomingStream { headers, data: data_rx, writer: StreamWriter { id, out: self.out.clone() } };
        if let Err(refused) = self.incoming.send(stream).await {
            // Nobody accepts streams any more (the session is closing).
            refused.0.writer.reset(RST_CANCEL).await;
            self.streams.remove(&id);
        }
        Ok(())
    }
}

/// A big-endian u32 at `at` in a frame's payload.
fn read_u32(payload: &[u8], at: usize, frame: &'static str) -> Result<u32, ProtocolError> {
    payload.get(at..at + 4).map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]])).ok_or(ProtocolError::Malformed(frame))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The dictionary is the spec's 1423 bytes (its Adler-32, the dictionary id in every
    /// client's zlib header, is 0xe3c6a7c2).
    #[test]
    fn dictionary_matches_the_spec() {
        assert_eq!(DICTIONARY.len(), 1423);
        let mut deflate = Compress::new(Compression::default(), true);
        assert_eq!(deflate.set_dictionary(&DICTIONARY).ok(), Some(0xe3c6_a7c2));
    }

    /// Garbage from a client (random bytes, frames with bogus lengths, header blocks that are
    /// no zlib) ends its session; nothing panics.
    #[tokio::test]
    async fn garbage_ends_the_session() {
        use tokio::io::AsyncWriteExt;
        let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let mut inputs: Vec<Vec<u8>> = (0..200).map(|i| (0..(i * 7) % 300).map(|_| next() as u8).collect()).collect();
        // A SYN_STREAM whose header block is not zlib, and one claiming 16 MiB.
        inputs.push(control_frame(SYN_STREAM, 0, &[0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0xde, 0xad, 0xbe, 0xef]));
        inputs.push(vec![0x80, 0x03, 0x00, 0x01, 0x00, 0xff, 0xff, 0xff]);
        for input in inputs {
            let (mut client, server) = tokio::io::duplex(1 << 16);
            let session = Session::start(server);
            client.write_all(&input).await.ok();
            drop(client);
            tokio::time::timeout(Duration::from_secs(10), session.hung_up().cancelled())
                .await
                .expect("the session ends");
        }
    }

    /// Header blocks survive a round trip through two zlib streams primed with the
    /// dictionary, block after block (the streams carry state across frames).
    #[test]
    fn header_blocks_round_trip_across_frames() {
        let mut deflate = Compress::new(Compression::best(), true);
        deflate.set_dictionary(&DICTIONARY).ok();
        let mut inflate = Decompress::new(true);
        for port in ["8080", "9090"] {
            let block = encode_header_block(&[("streamtype", "data"), ("port", port), ("requestid", "0")]);
            let compressed = compress_block(&mut deflate, &block);
            let plain = decompress_block(&mut inflate, &compressed).expect("decompress");
            let headers = decode_header_block(&plain).expect("decode");
            assert_eq!(headers[1], ("port".to_owned(), port.to_owned()));
        }
    }
}
