//! How commands talk to the user: progress on stderr (a spinner on a terminal, plain
//! lines otherwise, nothing with `-o json`) and the result on stdout, as text or JSON.
//! Errors go to stderr, as `error: ...` or, with `-o json`, as one JSON document
//! ([`print_error`]).

use std::io::IsTerminal;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};

use crate::cli::OutputFormat;

/// The user's output channel for one command.
pub(crate) struct Output {
    format: OutputFormat,
    spinner: Option<ProgressBar>,
}

impl Output {
    /// Output in `format`.
    pub(crate) fn new(format: OutputFormat) -> Output {
        Output { format, spinner: None }
    }

    /// Whether results are JSON.
    pub(crate) fn json(&self) -> bool {
        self.format == OutputFormat::Json
    }

    /// The format results are printed in.
    pub(crate) fn format(&self) -> OutputFormat {
        self.format
    }

    /// Reports a finished step (`✓ installed ...`).
    pub(crate) fn step(&self, msg: &str) {
        if self.json() {
            return;
        }
        match &self.spinner {
            Some(s) => s.println(format!("✓ {msg}")),
            None => eprintln!("✓ {msg}"),
        }
    }

    /// Warns about something the user should fix (`warning: ...` on stderr, also with
    /// `-o json`, whose stdout stays the result alone).
    pub(crate) fn warn(&self, msg: &str) {
        match &self.spinner {
            Some(s) => s.println(format!("warning: {msg}")),
            None => eprintln!("warning: {msg}"),
        }
    }

    /// Shows that something long is under way, until the next [`Output::done_waiting`].
    pub(crate) fn waiting(&mut self, msg: &str) {
        if self.json() {
            return;
        }
        if !std::io::stderr().is_terminal() {
            eprintln!("… {msg}");
            return;
        }
        let spinner = self.spinner.get_or_insert_with(|| {
            let s = ProgressBar::new_spinner();
            s.set_style(
                ProgressStyle::with_template("{spinner} {msg} ({elapsed})")
                    .unwrap_or_else(|_| ProgressStyle::default_spinner()),
            );
            s.enable_steady_tick(Duration::from_millis(120));
            s
        });
        spinner.set_message(msg.to_string());
    }

    /// Stops the spinner.
    pub(crate) fn done_waiting(&mut self) {
        if let Some(s) = self.spinner.take() {
            s.finish_and_clear();
        }
    }

    /// Prints the result: `text` for people, `json` for programs.
    pub(crate) fn result(&mut self, text: &str, json: serde_json::Value) {
        self.done_waiting();
        if self.json() {
            println!("{json:#}");
        } else if !text.is_empty() {
            println!("{text}");
        }
    }
}

impl Drop for Output {
    fn drop(&mut self) {
        self.done_waiting();
    }
}

/// Prints a failure on stderr: `error: MESSAGE`, or with `-o json` one line
/// `{"error": {"kind": KIND, "message": MESSAGE}}` (KIND a stable name, e.g. `usage`,
/// `not-running`, `port-in-use`).
pub fn print_error(format: OutputFormat, kind: &str, message: &str) {
    match format {
        OutputFormat::Text | OutputFormat::Xunit => eprintln!("error: {message}"),
        OutputFormat::Json => eprintln!("{}", serde_json::json!({"error": {"kind": kind, "message": message}})),
    }
}

/// Whether the command line asks for `-o json` (`-o json`, `-ojson`, `-o=json`,
/// `--output json`, `--output=json` before any `--`), for errors found before the
/// command line is parsed.
pub fn json_requested<I, S>(args: I) -> bool
where
    I: IntoIterator<Item = S>,
    S: AsRef<std::ffi::OsStr>,
{
    let mut json = false;
    let mut value_next = false;
    for arg in args {
        let arg = arg.as_ref().to_string_lossy();
        if arg == "--" {
            break;
        }
        if value_next {
            json = arg == "json";
            value_next = false;
        } else if arg == "-o" || arg == "--output" {
            value_next = true;
        } else if let Some(value) =
            arg.strip_prefix("--output=").or_else(|| arg.strip_prefix("-o=")).or_else(|| arg.strip_prefix("-o"))
        {
            json = value == "json";
        }
    }
    json
}

#[cfg(test)]
mod tests {
    use super::json_requested;

    #[test]
    fn json_is_found_in_every_spelling_and_not_after_double_dash() {
        for args in [
            &["opkit", "-o", "json", "x"][..],
            &["opkit", "x", "--output=json"],
            &["opkit", "-ojson"],
            &["opkit", "--output", "json"],
            &["opkit", "-o=json"],
        ] {
            assert!(json_requested(args), "{args:?}");
        }
        for args in [
            &["opkit", "x"][..],
            &["opkit", "-o", "text"],
            &["opkit", "run", "--", "-o", "json"],
            &["opkit", "-o", "json", "-o", "text"],
        ] {
            assert!(!json_requested(args), "{args:?}");
        }
    }
}
