//! The operator's log output, set up once in `main` as controller-runtime's zap logger
//! is: to stderr, filtered by `RUST_LOG` (default `info`), in colour only when stderr is
//! a terminal (so a redirected log or a CI capture has no escape codes).

use std::io::IsTerminal;

use tracing_subscriber::EnvFilter;

/// The filter used when `RUST_LOG` is unset or invalid.
pub const DEFAULT_FILTER: &str = "info";

/// Installs the process's log subscriber: human-readable lines on stderr, filtered by
/// `RUST_LOG` (default [`DEFAULT_FILTER`]), coloured only when stderr is a terminal.
/// Does nothing if a subscriber is already installed (e.g. by a test).
pub fn init() {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(DEFAULT_FILTER));
    let installed = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .try_init();
    // Err only means another subscriber was installed first; it keeps logging.
    drop(installed);
}
