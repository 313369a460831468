//! Container logs in the CRI format the kubelet reads (`<RFC3339Nano> stdout|stderr F|P
//! <line>`), one file per container instance (`<pod dir>/logs/<container>/<n>.log`, `n`
//! the restart count), rotated at a size cap (kube's `containerLogMaxSize` 10Mi and
//! `containerLogMaxFiles` 5), and read back for `containerLogs`; what is written is also
//! broadcast as it is read ([`InstanceLog::output`]), for `attach`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWriteExt, BufReader};
use tokio::sync::{Mutex, broadcast, watch};

/// kube's `containerLogMaxSize` default (10Mi).
pub(crate) const MAX_LOG_SIZE: u64 = 10 * 1024 * 1024;
/// kube's `containerLogMaxFiles` default: the live file and four rotated ones.
pub(crate) const MAX_LOG_FILES: usize = 5;
/// How many chunks of output an attached client may fall behind before it misses some
/// (it then goes on with the newest, as a slow reader of a runtime's attach would).
const ATTACH_BACKLOG: usize = 256;
/// The longest line written as one entry; longer lines are split into partial (`P`)
/// entries, as the CRI runtimes do.
const MAX_ENTRY: usize = 16 * 1024;

/// A piece of a container's output as it was read: a line with its newline (or the last
/// bytes before the stream closed).
#[derive(Debug, Clone)]
pub(crate) struct OutputChunk {
    /// `stdout` or `stderr`.
    pub stream: &'static str,
    /// The bytes.
    pub bytes: Bytes,
}

/// Where one container's log files live, and how large they grow.
#[derive(Debug, Clone)]
pub(crate) struct LogDir {
    dir: PathBuf,
    max_size: u64,
    max_files: usize,
}

/// How far an instance's log has been written, for followers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct LogProgress {
    /// Entries written so far (it only grows).
    pub entries: u64,
    /// Whether the instance ended and nothing more will be written.
    pub ended: bool,
}

impl LogDir {
    /// The log directory `dir` of one container, with kube's default size cap.
    pub(crate) fn new(dir: PathBuf) -> LogDir {
        LogDir { dir, max_size: MAX_LOG_SIZE, max_files: MAX_LOG_FILES }
    }

    /// The same with another cap (bytes per file, files kept per instance).
    #[cfg(test)]
    pub(crate) fn with_limits(mut self, max_size: u64, max_files: usize) -> LogDir {
        self.max_size = max_size.max(1);
        self.max_files = max_files.max(1);
        self
    }

    /// The live file of instance `n`.
    pub(crate) fn live(&self, n: i32) -> PathBuf {
        self.dir.join(format!("{n}.log"))
    }

    fn rotated(&self, n: i32, k: usize) -> PathBuf {
        self.dir.join(format!("{n}.log.{k}"))
    }

    /// The files of instance `n`, oldest first (only those that exist).
    pub(crate) fn files(&self, n: i32) -> Vec<PathBuf> {
        let mut out: Vec<PathBuf> = (1..self.max_files).rev().map(|k| self.rotated(n, k)).collect();
        out.push(self.live(n));
        out.retain(|p| p.exists());
        out
    }

    /// Starts writing instance `n`: the returned writer appends the lines of the streams
    /// given to [`InstanceLog::copy`].
    pub(crate) async fn open(&self, n: i32) -> std::io::Result<InstanceLog> {
        tokio::fs::create_dir_all(&self.dir).await?;
        let path = self.live(n);
        let file = tokio::fs::OpenOptions::new().create(true).append(true).open(&path).await?;
        let size = file.metadata().await?.len();
        let (progress, _) = watch::channel(LogProgress::default());
        Ok(InstanceLog {
            inner: Arc::new(Mutex::new(Writer { file, size, entries: 0 })),
            dir: self.clone(),
            n,
            progress: Arc::new(progress),
            output: broadcast::channel(ATTACH_BACKLOG).0,
        })
    }

    /// Moves the live file of instance `n` to `.1` (and older ones one further up,
    /// dropping the oldest).
    async fn rotate(&self, n: i32) -> std::io::Result<()> {
        let last = self.max_files.saturating_sub(1);
        if last == 0 {
            return tokio::fs::remove_file(self.live(n)).await;
        }
        let _ = tokio::fs::remove_file(self.rotated(n, last)).await;
        for k in (1..last).rev() {
            let from = self.rotated(n, k);
            if from.exists() {
                tokio::fs::rename(&from, self.rotated(n, k + 1)).await?;
            }
        }
        tokio::fs::rename(self.live(n), self.rotated(n, 1)).await
    }
}

struct Writer {
    file: tokio::fs::File,
    size: u64,
    entries: u64,
}

/// The log of one running container instance.
#[derive(Clone)]
pub(crate) struct InstanceLog {
    inner: Arc<Mutex<Writer>>,
    dir: LogDir,
    n: i32,
    progress: Arc<watch::Sender<LogProgress>>,
    output: broadcast::Sender<OutputChunk>,
}

impl InstanceLog {
    /// The output as it is read from now on (for `attach`); the instance has ended when
    /// [`Self::subscribe`]'s progress says so, every chunk having been sent before.
    pub(crate) fn output(&self) -> broadcast::Sender<OutputChunk> {
        self.output.clone()
    }

    /// Follows the progress of this instance's log.
    pub(crate) fn subscribe(&self) -> watch::Receiver<LogProgress> {
        self.progress.subscribe()
    }

    /// Marks the log ended (the process exited and its pipes were drained).
    pub(crate) fn end(&self) {
        self.progress.send_modify(|p| p.ended = true);
    }

    /// Copies `stream` (named `stdout` or `stderr`) line by line into the log until it
    /// closes.
    pub(crate) async fn copy(&self, stream: impl AsyncRead + Unpin, name: &'static str) {
        let mut reader = BufReader::new(stream);
        let mut line = Vec::new();
        loop {
            line.clear();
            match reader.read_until(b'\n', &mut line).await {
                Ok(0) => return,
                Ok(_) => {
                    // Nobody attached is no error.
                    let _ = self.output.send(OutputChunk { stream: name, bytes: Bytes::copy_from_slice(&line) });
                    if line.last() == Some(&b'\n') {
                        line.pop();
                    }
                    if let Err(e) = self.append(name, &line).await {
                        tracing::warn!(error = %e, "writing a container log failed");
                    }
                }
                Err(e) => {
                    tracing::debug!(error = %e, "reading a container's output failed");
                    return;
                }
            }
        }
    }

    /// Appends one line (split into partial entries when long).
    async fn append(&self, stream: &str, line: &[u8]) -> std::io::Result<()> {
        let mut w = self.inner.lock().await;
        let mut chunks: Vec<&[u8]> = line.chunks(MAX_ENTRY).collect();
        if chunks.is_empty() {
            chunks.push(&[]);
        }
        let last = chunks.len() - 1;
        for (i, chunk) in chunks.into_iter().enumerate() {
            let tag = if i == last { "F" } else { "P" };
            let mut entry = format!("{} {stream} {tag} ", jiff::Timestamp::now()).into_bytes();
            entry.extend_from_slice(chunk);
            entry.push(b'\n');
            if w.size > 0 && w.size + entry.len() as u64 > self.dir.max_size {
                w.file.flush().await?;
                self.dir.rotate(self.n).await?;
                w.file = tokio::fs::OpenOptions::new().create(true).append(true).open(self.dir.live(self.n)).await?;
                w.size = 0;
            }
            w.file.write_all(&entry).await?;
            w.size += entry.len() as u64;
            w.entries += 1;
        }
        w.file.flush().await?;
        let entries = w.entries;
        self.progress.send_modify(|p| p.entries = entries);
        Ok(())
    }
}

/// One log line read back: when, which stream, and its text (partial entries joined).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LogLine {
    /// When the runtime read it.
    pub time: jiff::Timestamp,
    /// The time as written (RFC 3339 with nanoseconds).
    pub time_text: String,
    /// `stdout` or `stderr`.
    pub stream: String,
    /// The line, without its newline.
    pub text: Vec<u8>,
}

/// Parses CRI log entries, joining partial ones; malformed entries are skipped, as the
/// kubelet's reader does.
pub(crate) fn parse(bytes: &[u8]) -> Vec<LogLine> {
    let mut out: Vec<LogLine> = Vec::new();
    let mut partial: Option<LogLine> = None;
    for entry in bytes.split(|b| *b == b'\n') {
        let mut parts = entry.splitn(4, |b| *b == b' ');
        let (Some(ts), Some(stream), Some(tag)) = (parts.next(), parts.next(), parts.next()) else { continue };
        let text = parts.next().unwrap_or_default();
        let Ok(time_text) = std::str::from_utf8(ts) else { continue };
        let Ok(time) = time_text.parse::<jiff::Timestamp>() else { continue };
        let stream = String::from_utf8_lossy(stream).into_owned();
        let line = match partial.take() {
            Some(mut p) => {
                p.text.extend_from_slice(text);
                p
            }
            None => LogLine { time, time_text: time_text.to_string(), stream, text: text.to_vec() },
        };
        if tag == b"P" {
            partial = Some(line);
        } else {
            out.push(line);
        }
    }
    out.extend(partial);
    out
}

/// Reads and parses the files of instance `n` of a container.
pub(crate) async fn read(dir: &LogDir, n: i32) -> std::io::Result<Vec<LogLine>> {
    let mut bytes = Vec::new();
    for f in dir.files(n) {
        match tokio::fs::read(&f).await {
            Ok(b) => bytes.extend(b),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
    }
    Ok(parse(&bytes))
}

/// The bytes of `path` from `offset` on (empty when the file is gone).
pub(crate) async fn read_from(path: &Path, offset: u64) -> std::io::Result<Vec<u8>> {
    use tokio::io::{AsyncReadExt, AsyncSeekExt};
    let mut f = match tokio::fs::File::open(path).await {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    f.seek(std::io::SeekFrom::Start(offset)).await?;
    let mut out = Vec::new();
    f.read_to_end(&mut out).await?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn writes_cri_entries_and_rotates() {
        let tmp = tempfile::tempdir().expect("temp dir");
        let dir = LogDir::new(tmp.path().join("c")).with_limits(200, 3);
        let log = dir.open(0).await.expect("open");
        let input: Vec<u8> = (0..20).flat_map(|i| format!("line {i}\n").into_bytes()).collect();
        log.copy(&input[..], "stdout").await;
        let lines = read(&dir, 0).await.expect("read");
        // Only what the kept files hold remains, the newest lines last.
        assert!(lines.len() < 20 && !lines.is_empty());
        assert_eq!(lines.last().map(|l| l.text.clone()), Some(b"line 19".to_vec()));
        assert_eq!(dir.files(0).len(), 3);
        assert_eq!(log.subscribe().borrow().entries, 20);
    }

    #[test]
    fn partial_entries_are_joined() {
        let raw = b"2024-01-01T00:00:00.5Z stdout P ab\n2024-01-01T00:00:00.6Z stdout F cd\nbad\n2024-01-01T00:00:01Z stderr F e f\n";
        let lines = parse(raw);
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[0].text, b"abcd");
        assert_eq!((lines[1].stream.as_str(), lines[1].text.as_slice()), ("stderr", &b"e f"[..]));
    }
}
