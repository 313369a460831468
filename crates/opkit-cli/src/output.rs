//! How commands talk to the user: progress on stderr (a spinner on a terminal, plain
//! lines otherwise, nothing with `-o json`) and the result on stdout, as text or JSON.

use std::io::IsTerminal;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};

use crate::cli::OutputFormat;

/// The user's output channel for one command.
pub struct Output {
    format: OutputFormat,
    spinner: Option<ProgressBar>,
}

impl Output {
    /// Output in `format`.
    pub fn new(format: OutputFormat) -> Output {
        Output { format, spinner: None }
    }

    /// Whether results are JSON.
    pub fn json(&self) -> bool {
        self.format == OutputFormat::Json
    }

    /// Reports a finished step (`✓ installed ...`).
    pub fn step(&self, msg: &str) {
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
    pub fn warn(&self, msg: &str) {
        match &self.spinner {
            Some(s) => s.println(format!("warning: {msg}")),
            None => eprintln!("warning: {msg}"),
        }
    }

    /// Shows that something long is under way, until the next [`Output::done_waiting`].
    pub fn waiting(&mut self, msg: &str) {
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
    pub fn done_waiting(&mut self) {
        if let Some(s) = self.spinner.take() {
            s.finish_and_clear();
        }
    }

    /// Prints the result: `text` for people, `json` for programs.
    pub fn result(&mut self, text: &str, json: serde_json::Value) {
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
