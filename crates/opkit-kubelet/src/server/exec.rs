//! The kubelet's `exec` endpoint (`/exec/{namespace}/{pod}/{container}`): runs a command in
//! a real pod's container — inside a contained container's namespaces and root, as its
//! user with its capabilities; else in its environment, working directory and network
//! namespace — and
//! streams stdin, stdout, stderr and terminal resizes over the protocol kubectl chose —
//! WebSocket channels (`v5.channel.k8s.io` … `channel.k8s.io`, kubectl 1.30+) or SPDY/3.1
//! (`v4.channel.k8s.io` … `channel.k8s.io`, kubectl 1.27–1.29) — then reports the exit
//! status on the error stream as kube does, so kubectl exits with the command's code.
//!
//! The `attach` endpoint (`/attach/{namespace}/{pod}/{container}`) speaks the same
//! protocols to the container's own process instead of a new one, as the CRI runtimes'
//! attach does: its output from then on (what its log gets), and its stdin when the
//! container has one (`stdin: true`; with `stdinOnce` the first client's end of input
//! closes it). It ends when the container's process does, reported as `Success`.

use std::os::fd::{AsFd, OwnedFd};
use std::path::PathBuf;
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Status, StatusCause, StatusDetails};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::stream::spdy::{self, IncomingStream, Session};
use super::stream::websocket::{ChannelConnection, Handshake};
use super::stream::{
    OutputSink, Refusal, go_error_text, internal_error_status, is_websocket_request, query_flag, query_pairs,
};
use crate::runtime::container::JoinPlan;
use crate::runtime::pod::Attachment;

/// The remote-command protocols spoken over SPDY (v5 is v4 there: its close signal is a
/// WebSocket feature), in the kubelet's order.
const SPDY_PROTOCOLS: [&str; 5] =
    ["v5.channel.k8s.io", "v4.channel.k8s.io", "v3.channel.k8s.io", "v2.channel.k8s.io", "channel.k8s.io"];
/// The WebSocket subprotocols served (`""`: the client named none, plain `channel.k8s.io`).
const WEBSOCKET_PROTOCOLS: [&str; 8] = [
    "v5.channel.k8s.io",
    "v4.channel.k8s.io",
    "v3.channel.k8s.io",
    "v2.channel.k8s.io",
    "channel.k8s.io",
    "v4.base64.channel.k8s.io",
    "base64.channel.k8s.io",
    "",
];
/// How long the client has to open its SPDY streams.
const STREAM_CREATION_TIMEOUT: Duration = Duration::from_secs(30);
/// The `PATH` a container gets when its image sets none (containerd's default).
const DEFAULT_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
/// Channel numbers (WebSocket) of the streams.
const STDIN: u8 = 0;
const STDOUT: u8 = 1;
const STDERR: u8 = 2;
const ERROR: u8 = 3;
const RESIZE: u8 = 4;

/// Where a command runs: the container's process environment.
#[derive(Debug, Clone, Default)]
pub struct ExecTarget {
    /// The container's environment variables (`PATH` defaults to containerd's when absent).
    pub env: Vec<(String, String)>,
    /// The container's working directory.
    pub working_dir: PathBuf,
    /// The pod's network namespace (`/proc/<pid>/ns/net`); `None` on the host network.
    pub netns: Option<PathBuf>,
}

/// The streams and mode an exec asked for (query `command`, `stdin`, `stdout`, `stderr`,
/// `tty`).
#[derive(Debug, Clone)]
struct ExecOptions {
    command: Vec<String>,
    stdin: bool,
    stdout: bool,
    stderr: bool,
    tty: bool,
}

impl ExecOptions {
    /// Reads the query as the kubelet does (`tty` drops `stderr`; one stream is required,
    /// and a command unless it is an attach).
    fn from_uri(uri: &http::Uri, attach: bool) -> Result<ExecOptions, Refusal> {
        let pairs = query_pairs(uri);
        let command: Vec<String> = pairs.iter().filter(|(k, _)| k == "command").map(|(_, v)| v.clone()).collect();
        let tty = query_flag(&pairs, "tty");
        let options = ExecOptions {
            stdin: query_flag(&pairs, "stdin"),
            stdout: query_flag(&pairs, "stdout"),
            stderr: query_flag(&pairs, "stderr") && !tty,
            tty,
            command,
        };
        if !options.stdin && !options.stdout && !options.stderr {
            return Err(Refusal::bad_request("you must specify at least 1 of stdin, stdout, stderr"));
        }
        if options.command.is_empty() && !attach {
            return Err(Refusal::bad_request("you must specify at least one command for the container"));
        }
        Ok(options)
    }
}

/// How the error stream carries the final status: a JSON `metav1.Status` (v4 and v5), or
/// only a failure's message as text (`channel.k8s.io`, v2, v3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum StatusFormat {
    Json,
    Text,
}

impl StatusFormat {
    fn of(protocol: &str) -> StatusFormat {
        if matches!(protocol, "v5.channel.k8s.io" | "v4.channel.k8s.io" | "v4.base64.channel.k8s.io") {
            StatusFormat::Json
        } else {
            StatusFormat::Text
        }
    }
}

/// Whether a SPDY protocol has the resize stream (v3 on; over WebSocket every protocol has
/// the resize channel).
fn supports_resize(protocol: &str) -> bool {
    matches!(protocol, "v5.channel.k8s.io" | "v4.channel.k8s.io" | "v3.channel.k8s.io")
}

/// The streams of one exec, whichever the transport.
struct ExecStreams {
    stdin: Option<mpsc::Receiver<Bytes>>,
    stdout: Option<OutputSink>,
    stderr: Option<OutputSink>,
    error: Option<OutputSink>,
    resize: Option<mpsc::Receiver<Bytes>>,
    /// Cancelled when the client hangs up.
    hung_up: CancellationToken,
}

/// Serves an exec request: answers `101 Switching Protocols` (the streams are then served
/// in the background until the command ends) or a `metav1.Status` failure — `400` for a
/// query or upgrade that is not an exec, `403` when no protocol is shared. The body is
/// [`http_body_util::Full`]: empty on success, the Status JSON on failure.
pub async fn serve(req: Request<Incoming>, target: ExecTarget) -> Response<http_body_util::Full<Bytes>> {
    serve_in(req, target, None).await
}

/// What a remote-command session runs: a new command, or an attach to the container's
/// running process.
enum Work {
    /// A command in `target`, inside the contained container `container` if given.
    Exec { target: ExecTarget, container: Option<JoinPlan> },
    /// The container's own process.
    Attach(Attachment),
}

/// Serves an exec request as [`serve`] does, inside the contained container `container`
/// (its namespaces, root, user and capabilities) when one is given.
pub(crate) async fn serve_in(
    req: Request<Incoming>,
    target: ExecTarget,
    container: Option<JoinPlan>,
) -> Response<http_body_util::Full<Bytes>> {
    serve_session(req, Work::Exec { target, container }).await
}

/// Serves an attach request to the running container instance `attachment` (see the
/// module's comment), with exec's protocols and answers.
pub(crate) async fn serve_attach(
    req: Request<Incoming>,
    attachment: Attachment,
) -> Response<http_body_util::Full<Bytes>> {
    serve_session(req, Work::Attach(attachment)).await
}

/// Negotiates the protocol of an exec or attach and serves its streams in the background.
async fn serve_session(mut req: Request<Incoming>, work: Work) -> Response<http_body_util::Full<Bytes>> {
    let options = match ExecOptions::from_uri(req.uri(), matches!(work, Work::Attach(_))) {
        Ok(options) => options,
        Err(refusal) => return refusal.into_response(),
    };
    let on_upgrade = hyper::upgrade::on(&mut req);
    if is_websocket_request(req.headers()) {
        let handshake = match Handshake::negotiate(req.headers(), &WEBSOCKET_PROTOCOLS) {
            Ok(handshake) => handshake,
            Err(refusal) => return refusal.into_response(),
        };
        let protocol = handshake.protocol.clone();
        tokio::spawn(async move {
            let Ok(upgraded) = on_upgrade.await else { return };
            let mut readable = vec![RESIZE];
            if options.stdin {
                readable.push(STDIN);
            }
            let mut conn = ChannelConnection::open(upgraded, &protocol, &readable).await;
            // An empty message on the lowest writable channel tells the client the streams are up.
            let first = if options.stdout {
                STDOUT
            } else if options.stderr {
                STDERR
            } else {
                ERROR
            };
            let _ = conn.writer(first).write(Bytes::new()).await;
            let streams = ExecStreams {
                stdin: conn.inputs.remove(&STDIN),
                stdout: options.stdout.then(|| OutputSink::WebSocket(conn.writer(STDOUT))),
                stderr: options.stderr.then(|| OutputSink::WebSocket(conn.writer(STDERR))),
                error: Some(OutputSink::WebSocket(conn.writer(ERROR))),
                resize: if options.tty { conn.inputs.remove(&RESIZE) } else { None },
                hung_up: conn.hung_up(),
            };
            // Channels nobody reads (resize without a terminal) are dropped, not buffered.
            conn.inputs.clear();
            run(streams, &options, &work, StatusFormat::of(&protocol)).await;
            conn.close().await;
        });
        return handshake.switching_protocols();
    }

    let protocol = match spdy::negotiate(req.headers(), &SPDY_PROTOCOLS) {
        Ok(protocol) => protocol,
        Err(refusal) => return refusal.into_response(),
    };
    let response = spdy::switching_protocols(&protocol);
    tokio::spawn(async move {
        let Ok(upgraded) = on_upgrade.await else { return };
        let mut session = Session::start(TokioIo::new(upgraded));
        let Some(streams) = accept_spdy_streams(&mut session, &options, &protocol).await else {
            session.close().await;
            return;
        };
        run(streams, &options, &work, StatusFormat::of(&protocol)).await;
        session.close().await;
    });
    response
}

/// Waits for the streams the options call for (error, stdin, stdout, stderr, and resize
/// with a tty on v3+), replying to each, as kube's `waitForStreams`. `None` when the client
/// hangs up or does not open them in time.
async fn accept_spdy_streams(session: &mut Session, options: &ExecOptions, protocol: &str) -> Option<ExecStreams> {
    let resize = options.tty && supports_resize(protocol);
    let expected = 1
        + usize::from(options.stdin)
        + usize::from(options.stdout)
        + usize::from(options.stderr)
        + usize::from(resize);
    let mut streams =
        ExecStreams { stdin: None, stdout: None, stderr: None, error: None, resize: None, hung_up: session.hung_up() };
    let deadline = tokio::time::Instant::now() + STREAM_CREATION_TIMEOUT;
    let mut received = 0;
    while received < expected {
        let stream: IncomingStream = match tokio::time::timeout_at(deadline, session.incoming.recv()).await {
            Ok(Some(stream)) => stream,
            Ok(None) => return None,
            Err(_) => {
                tracing::debug!("exec: timed out waiting for client to create streams");
                return None;
            }
        };
        let kind = stream.header("streamtype").unwrap_or_default().to_owned();
        let sink = OutputSink::Spdy(stream.writer.clone());
        match kind.as_str() {
            "error" => streams.error = Some(sink),
            "stdin" => streams.stdin = Some(stream.data),
            "stdout" => streams.stdout = Some(sink),
            "stderr" => streams.stderr = Some(sink),
            "resize" => streams.resize = Some(stream.data),
            other => {
                tracing::debug!(stream = other, "exec: unexpected stream type");
                continue;
            }
        }
        if stream.writer.reply().await.is_err() {
            return None;
        }
        received += 1;
    }
    Some(streams)
}

/// Runs the command (or attaches) over the streams, then reports its status on the error
/// stream and ends every outgoing stream.
async fn run(mut streams: ExecStreams, options: &ExecOptions, work: &Work, format: StatusFormat) {
    let status = match work {
        Work::Exec { target, container } => execute(&mut streams, options, target, container.as_ref()).await,
        Work::Attach(attachment) => attach(&mut streams, attachment).await,
    };
    if let Some(error) = &streams.error {
        let payload = match format {
            StatusFormat::Json => serde_json::to_vec(&status).ok(),
            StatusFormat::Text if status.status.as_deref() != Some("Success") => {
                status.message.clone().map(String::into_bytes)
            }
            StatusFormat::Text => None,
        };
        if let Some(payload) = payload {
            let _ = error.write(Bytes::from(payload)).await;
        }
    }
    for sink in [&streams.stdout, &streams.stderr, &streams.error].into_iter().flatten() {
        sink.finish().await;
    }
}

/// The status kube reports for a finished command.
fn exit_status(command: &[String], status: ExitStatus) -> Status {
    use std::os::unix::process::ExitStatusExt;
    let code = status.code().or_else(|| status.signal().map(|s| 128 + s)).unwrap_or(-1);
    if code == 0 {
        return Status { status: Some("Success".to_owned()), ..Status::default() };
    }
    Status {
        status: Some("Failure".to_owned()),
        reason: Some("NonZeroExitCode".to_owned()),
        message: Some(format!(
            "command terminated with non-zero exit code: error executing command [{}], exit code {code}",
            command.join(" ")
        )),
        details: Some(StatusDetails {
            causes: Some(vec![StatusCause {
                reason: Some("ExitCode".to_owned()),
                message: Some(code.to_string()),
                ..StatusCause::default()
            }]),
            ..StatusDetails::default()
        }),
        ..Status::default()
    }
}

/// A pseudo-terminal for a `tty` exec: the controller side (kept) and the terminal the
/// command gets as stdin, stdout and stderr.
struct Pty {
    controller: OwnedFd,
    terminal: OwnedFd,
}

impl Pty {
    fn open() -> std::io::Result<Pty> {
        use rustix::pty::{OpenptFlags, grantpt, openpt, ptsname, unlockpt};
        let controller = openpt(OpenptFlags::RDWR | OpenptFlags::NOCTTY | OpenptFlags::CLOEXEC)?;
        grantpt(&controller)?;
        unlockpt(&controller)?;
        let name = ptsname(&controller, Vec::new())?;
        let terminal = rustix::fs::open(
            name.as_c_str(),
            rustix::fs::OFlags::RDWR | rustix::fs::OFlags::NOCTTY | rustix::fs::OFlags::CLOEXEC,
            rustix::fs::Mode::empty(),
        )?;
        Ok(Pty { controller, terminal })
    }
}

/// Builds the command for the target; it joins `namespaces` (the pod's network and, if
/// known, UTS namespace) and `pty` becomes its controlling terminal.
fn command_for(
    options: &ExecOptions,
    target: &ExecTarget,
    container: Option<&JoinPlan>,
    namespaces: Option<(OwnedFd, Option<OwnedFd>)>,
    pty: Option<&Pty>,
) -> std::io::Result<tokio::process::Command> {
    let mut command = tokio::process::Command::new(&options.command[0]);
    command.args(&options.command[1..]).env_clear().envs(target.env.iter().map(|(k, v)| (k, v)));
    if !target.env.iter().any(|(k, _)| k == "PATH") {
        command.env("PATH", DEFAULT_PATH);
    }
    command.kill_on_drop(true);
    // A contained command changes to its directory inside the container (`join`).
    if container.is_none() {
        command.current_dir(&target.working_dir);
    }
    let terminal = match pty {
        Some(pty) => {
            command
                .stdin(Stdio::from(pty.terminal.try_clone()?))
                .stdout(Stdio::from(pty.terminal.try_clone()?))
                .stderr(Stdio::from(pty.terminal.try_clone()?));
            Some(pty.terminal.try_clone()?)
        }
        None => {
            command
                .stdin(if options.stdin { Stdio::piped() } else { Stdio::null() })
                .stdout(if options.stdout { Stdio::piped() } else { Stdio::null() })
                .stderr(if options.stderr { Stdio::piped() } else { Stdio::null() });
            None
        }
    };
    // Joining comes first: the terminal's session is the joined process's.
    if let Some(plan) = container {
        join_container(&mut command, plan)?;
    }
    if namespaces.is_some() || terminal.is_some() {
        enter_sandbox(&mut command, namespaces, terminal);
    }
    Ok(command)
}

/// Makes the child join the contained container of `plan`.
#[cfg(target_os = "linux")]
fn join_container(command: &mut tokio::process::Command, plan: &JoinPlan) -> std::io::Result<()> {
    crate::runtime::container::join(command.as_std_mut(), plan).map_err(std::io::Error::other)
}

/// Containers are Linux's.
#[cfg(not(target_os = "linux"))]
fn join_container(_command: &mut tokio::process::Command, _plan: &JoinPlan) -> std::io::Result<()> {
    Err(std::io::Error::new(std::io::ErrorKind::Unsupported, "containers need Linux"))
}

/// Makes the child join the pod's network (and UTS) namespace and, with a terminal, start
/// a session whose controlling terminal it is — between fork and exec.
#[allow(unsafe_code)]
fn enter_sandbox(
    command: &mut tokio::process::Command,
    namespaces: Option<(OwnedFd, Option<OwnedFd>)>,
    terminal: Option<OwnedFd>,
) {
    let hook = move || -> std::io::Result<()> {
        if let Some((netns, uts)) = &namespaces {
            rustix::thread::move_into_link_name_space(netns.as_fd(), Some(rustix::thread::LinkNameSpaceType::Network))?;
            if let Some(uts) = uts {
                rustix::thread::move_into_link_name_space(
                    uts.as_fd(),
                    Some(rustix::thread::LinkNameSpaceType::HostNameAndNISDomainName),
                )?;
            }
        }
        if let Some(terminal) = &terminal {
            rustix::process::setsid()?;
            rustix::process::ioctl_tiocsctty(terminal)?;
        }
        Ok(())
    };
    // SAFETY: the hook runs in the forked child before exec and only makes raw system calls
    // (setns, setsid, ioctl) on descriptors it owns: nothing allocates or takes a lock.
    unsafe {
        command.pre_exec(hook);
    }
}

/// Why a command did not start, as Go's `exec` words it (`exec: "nope": executable file not
/// found in $PATH`).
fn start_error_text(program: &str, error: &std::io::Error) -> String {
    let cause = match error.kind() {
        std::io::ErrorKind::NotFound if !program.contains('/') => "executable file not found in $PATH".to_owned(),
        std::io::ErrorKind::NotFound => format!("stat {program}: no such file or directory"),
        _ => go_error_text(error),
    };
    format!("exec: {program:?}: {cause}")
}

/// Copies `from` to the sink until EOF (or an I/O error such as a closed terminal's EIO).
async fn pump_output<R: AsyncRead + Unpin>(mut from: R, sink: OutputSink) {
    let mut buf = vec![0u8; 32 << 10];
    loop {
        match from.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => {
                if sink.write(Bytes::copy_from_slice(&buf[..n])).await.is_err() {
                    return;
                }
            }
        }
    }
}

/// Copies the client's stdin to `to`, closing it at the client's EOF.
async fn pump_input<W: AsyncWrite + Unpin>(mut input: mpsc::Receiver<Bytes>, mut to: W) {
    while let Some(data) = input.recv().await {
        if to.write_all(&data).await.is_err() {
            return;
        }
    }
    let _ = to.shutdown().await;
}

/// A terminal size the client sends on the resize stream.
#[derive(serde::Deserialize)]
struct TerminalSize {
    #[serde(rename = "Width")]
    width: u16,
    #[serde(rename = "Height")]
    height: u16,
}

/// Applies the client's terminal sizes (a stream of JSON objects) to the terminal.
async fn pump_resizes(mut input: mpsc::Receiver<Bytes>, controller: OwnedFd) {
    let mut pending = Vec::new();
    while let Some(data) = input.recv().await {
        pending.extend_from_slice(&data);
        let mut sizes = serde_json::Deserializer::from_slice(&pending).into_iter::<TerminalSize>();
        let mut consumed = 0;
        while let Some(Ok(size)) = sizes.next() {
            consumed = sizes.byte_offset();
            let winsize =
                rustix::termios::Winsize { ws_row: size.height, ws_col: size.width, ws_xpixel: 0, ws_ypixel: 0 };
            let _ = rustix::termios::tcsetwinsize(&controller, winsize);
        }
        pending.drain(..consumed);
        if pending.len() > 4096 {
            pending.clear();
        }
    }
}

/// Runs the command, wiring the streams to it, and returns the status to report.
async fn execute(
    streams: &mut ExecStreams,
    options: &ExecOptions,
    target: &ExecTarget,
    container: Option<&JoinPlan>,
) -> Status {
    let pty = if options.tty {
        match Pty::open() {
            Ok(pty) => Some(pty),
            Err(e) => return internal_error_status(&format!("error executing command in container: {e}")),
        }
    } else {
        None
    };
    let namespaces = match pod_namespaces(target, container) {
        Ok(namespaces) => namespaces,
        Err(message) => return internal_error_status(&message),
    };
    let mut command = match command_for(options, target, container, namespaces, pty.as_ref()) {
        Ok(command) => command,
        Err(e) => {
            return internal_error_status(&format!("error executing command in container: {}", go_error_text(&e)));
        }
    };
    let spawned = command.spawn();
    drop(command);
    let mut child = match spawned {
        Ok(child) => child,
        Err(e) => {
            return internal_error_status(&format!(
                "error executing command in container: failed to exec in container: failed to start exec: {}",
                start_error_text(&options.command[0], &e)
            ));
        }
    };
    let (mut pumps, mut outputs) = match wire_streams(streams, &mut child, pty) {
        Ok(tasks) => tasks,
        Err(message) => return internal_error_status(message),
    };
    let finished = async {
        let status = child.wait().await;
        while outputs.join_next().await.is_some() {}
        status
    };
    let status = tokio::select! {
        status = finished => status,
        () = streams.hung_up.cancelled() => {
            // The client is gone: nobody reads the output any more.
            pumps.abort_all();
            return internal_error_status("error executing command in container: the client hung up");
        }
    };
    pumps.abort_all();
    match status {
        Ok(status) => exit_status(&options.command, status),
        Err(e) => internal_error_status(&format!("error executing command in container: {e}")),
    }
}

/// The pod's network namespace and, next to it (`/proc/<pid>/ns/uts`), its UTS namespace
/// (or the error message to report),
/// so the command sees the pod's network and hostname as in a container; none for a
/// command joined to a container's process (it enters the container's own).
fn pod_namespaces(
    target: &ExecTarget,
    container: Option<&JoinPlan>,
) -> Result<Option<(OwnedFd, Option<OwnedFd>)>, String> {
    let netns = match target.netns.as_deref().filter(|_| container.is_none()).map(std::fs::File::open).transpose() {
        Ok(netns) => netns.map(OwnedFd::from),
        Err(e) => {
            let path = target.netns.as_deref().unwrap_or(std::path::Path::new("")).display();
            return Err(format!(
                "error executing command in container: opening the network namespace {path}: {}",
                go_error_text(&e)
            ));
        }
    };
    let uts = target
        .netns
        .as_deref()
        .filter(|_| container.is_none())
        .and_then(|net| net.parent())
        .and_then(|dir| std::fs::File::open(dir.join("uts")).ok())
        .map(OwnedFd::from);
    Ok(netns.map(|net| (net, uts)))
}

/// Tasks that copy the client's streams to the command and back: `pumps` (stdin and
/// terminal resizes, aborted when the command ends) and `outputs` (stdout and stderr,
/// drained before the status is reported). With a terminal, only its controller side
/// stays here: the command holds the terminal.
fn wire_streams(
    streams: &mut ExecStreams,
    child: &mut tokio::process::Child,
    pty: Option<Pty>,
) -> Result<(tokio::task::JoinSet<()>, tokio::task::JoinSet<()>), &'static str> {
    let mut pumps = tokio::task::JoinSet::new();
    let mut outputs = tokio::task::JoinSet::new();
    if let Some(Pty { controller, terminal }) = pty {
        drop(terminal);
        let opened = (controller.try_clone(), controller.try_clone());
        let (Ok(reader), Ok(writer)) = opened else {
            return Err("error executing command in container: duplicating the terminal");
        };
        if let Some(sink) = streams.stdout.clone() {
            outputs.spawn(pump_output(tokio::fs::File::from_std(std::fs::File::from(reader)), sink));
        }
        if let Some(input) = streams.stdin.take() {
            pumps.spawn(pump_input(input, tokio::fs::File::from_std(std::fs::File::from(writer))));
        }
        if let Some(resizes) = streams.resize.take() {
            pumps.spawn(pump_resizes(resizes, controller));
        }
    } else {
        if let (Some(out), Some(sink)) = (child.stdout.take(), streams.stdout.clone()) {
            outputs.spawn(pump_output(out, sink));
        }
        if let (Some(err), Some(sink)) = (child.stderr.take(), streams.stderr.clone()) {
            outputs.spawn(pump_output(err, sink));
        }
        if let (Some(stdin), Some(input)) = (child.stdin.take(), streams.stdin.take()) {
            pumps.spawn(pump_input(input, stdin));
        }
    }
    Ok((pumps, outputs))
}

/// Joins the streams to the container's running process until it ends (or the client
/// hangs up): its output from now on to stdout and stderr, the client's stdin to its stdin.
async fn attach(streams: &mut ExecStreams, attachment: &Attachment) -> Status {
    use tokio::sync::broadcast::error::{RecvError, TryRecvError};
    let mut output = attachment.output.subscribe();
    let mut progress = attachment.progress.clone();
    let mut pumps = tokio::task::JoinSet::new();
    if let (Some(mut input), Some(stdin)) = (streams.stdin.take(), attachment.stdin.clone()) {
        let once = attachment.stdin_once;
        pumps.spawn(async move {
            while let Some(data) = input.recv().await {
                let mut pipe = stdin.lock().await;
                let Some(pipe) = pipe.as_mut() else { return };
                if pipe.write_all(&data).await.is_err() {
                    return;
                }
            }
            if once {
                // Dropping the pipe is the container's end of input.
                stdin.lock().await.take();
            }
        });
    }
    let sink_of = |chunk: &crate::runtime::logs::OutputChunk| {
        if chunk.stream == "stderr" { streams.stderr.clone() } else { streams.stdout.clone() }
    };
    let mut ended = progress.borrow().ended;
    while !ended {
        tokio::select! {
            chunk = output.recv() => match chunk {
                Ok(chunk) => {
                    if let Some(sink) = sink_of(&chunk)
                        && sink.write(chunk.bytes).await.is_err()
                    {
                        break;
                    }
                }
                Err(RecvError::Lagged(_)) => {}
                Err(RecvError::Closed) => ended = true,
            },
            changed = progress.changed() => ended = changed.is_err() || progress.borrow().ended,
            () = streams.hung_up.cancelled() => {
                pumps.abort_all();
                return internal_error_status("error attaching to container: the client hung up");
            }
        }
    }
    // The process ended: what it wrote last was sent before its log was marked ended.
    loop {
        match output.try_recv() {
            Ok(chunk) => {
                if let Some(sink) = sink_of(&chunk) {
                    let _ = sink.write(chunk.bytes).await;
                }
            }
            Err(TryRecvError::Lagged(_)) => {}
            Err(TryRecvError::Empty | TryRecvError::Closed) => break,
        }
    }
    pumps.abort_all();
    Status { status: Some("Success".to_owned()), ..Status::default() }
}
