//! The `opkit` command: parses the command line and runs it (see the `opkit_cli` library);
//! a failure is printed as `error: ...`, or as JSON with `-o json`; logs go to stderr at
//! `OPKIT_LOG`, else `RUST_LOG`, else the command's default level (debug for opkit's crates
//! with `--verbose`).

use clap::Parser;
use opkit_cli::{OutputFormat, json_requested, print_error};

fn main() -> std::process::ExitCode {
    // Run as `kubectl-kudo` (a kubectl plugin), `kubectl kudo ARGS` is `opkit kudo ARGS`.
    let argv = opkit_cli::kubectl_kudo_args(std::env::args_os());
    let args = match opkit_cli::Cli::try_parse_from(argv) {
        Ok(args) => args,
        // `--help` and `--version` are not failures; text errors keep clap's layout.
        Err(e) if e.use_stderr() && json_requested(std::env::args_os()) => {
            // clap's message and tips, without the usage line and the pointer to --help.
            let rendered = e.render().to_string();
            let message: Vec<&str> = rendered
                .trim()
                .trim_start_matches("error: ")
                .split("\n\n")
                .map(str::trim)
                .filter(|part| !part.starts_with("Usage:") && !part.starts_with("For more information"))
                .collect();
            print_error(OutputFormat::Json, "usage", &message.join("\n"));
            return std::process::ExitCode::from(u8::try_from(e.exit_code()).unwrap_or(2));
        }
        Err(e) => e.exit(),
    };
    end_by_sigpipe_when_stdout_closes();
    // OPKIT_LOG, else RUST_LOG (as kube-rs operators read it), else the command's default
    // (with `--verbose`, debug for opkit's crates);
    // colours only on a terminal.
    let filter = tracing_subscriber::EnvFilter::try_from_env("OPKIT_LOG")
        .or_else(|_| tracing_subscriber::EnvFilter::try_from_default_env())
        .unwrap_or_else(|_| args.default_log_level().into());
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_writer(std::io::stderr)
        .init();
    let format = args.output;
    match opkit_cli::run(args) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(opkit_cli::CliError::Reported { code }) => std::process::ExitCode::from(code),
        Err(e) => {
            print_error(format, e.kind(), &e.to_string());
            std::process::ExitCode::from(e.exit_code())
        }
    }
}

/// `opkit ... | head`: the reader going away ends opkit by SIGPIPE, quietly, as it ends
/// kubectl. This is Go's rule: a write to a closed stdout or stderr raises SIGPIPE, while
/// a closed socket or pipe anywhere else is that write's error (EPIPE; Rust ignores
/// SIGPIPE). Restoring SIGPIPE for the whole process instead killed commands whose
/// in-process servers wrote to a connection the peer had closed (TLS's close_notify goes
/// out with `writev`, which has no `MSG_NOSIGNAL`), as `opkit test` was. Rust reports a
/// closed stdout as a panic of the print; the panic hook turns it into the signal.
fn end_by_sigpipe_when_stdout_closes() {
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let message = info.payload_as_str().unwrap_or_default();
        // std's prints say "failed printing to stdout: Broken pipe", clap_complete's
        // "failed to write completion file: ... BrokenPipe".
        if message.contains("Broken pipe") || message.contains("BrokenPipe") {
            use std::io::Write;
            // With SIGPIPE's default action back, a write to the closed stream raises it
            // and the process ends by it (a stream still open just gets a newline).
            sigpipe::reset();
            let _ = std::io::stdout().write_all(b"\n").and_then(|()| std::io::stdout().flush());
            let _ = std::io::stderr().write_all(b"\n");
        }
        default_hook(info);
    }));
}
