//! The run's log, printed as `kubectl kuttl test` prints it (Go's `testing` output):
//! `=== RUN` lines, each test's log lines `    logger.go:42: 15:04:05 | case/0-step | ...`,
//! its errors `    case.go:333: failed in step 0-step`, and the `--- PASS`/`--- FAIL`
//! summary. Each test case logs into its own buffer, printed when the case ends, so
//! cases running in parallel do not interleave.

use std::sync::{Arc, Mutex};

/// Where printed lines go (the CLI prints them on stdout).
pub type Sink = Arc<dyn Fn(&str) + Send + Sync>;

/// One line as Go's `t.Log` decorates it: four spaces, the call site, the message, and
/// continuation lines indented by eight spaces.
pub(crate) fn decorate(site: &str, message: &str) -> String {
    // Go's testing drops the empty line after a final newline.
    let message = message.strip_suffix('\n').unwrap_or(message);
    let mut lines = message.split('\n');
    let mut out = format!("    {site}: {}", lines.next().unwrap_or_default());
    for line in lines {
        out.push_str("\n        ");
        out.push_str(line);
    }
    out
}

/// A test case's log: lines with a `case/step` prefix and a timestamp.
#[derive(Clone)]
pub(crate) struct CaseLog {
    prefix: String,
    lines: Arc<Mutex<Vec<String>>>,
}

impl CaseLog {
    /// A log for the test case `name`.
    pub(crate) fn new(name: &str) -> CaseLog {
        CaseLog { prefix: name.to_string(), lines: Arc::new(Mutex::new(Vec::new())) }
    }

    /// The same log, with `/step` added to the prefix.
    pub(crate) fn with_prefix(&self, step: &str) -> CaseLog {
        CaseLog { prefix: format!("{}/{step}", self.prefix), lines: Arc::clone(&self.lines) }
    }

    /// Logs a message (kuttl's `Logger.Log`).
    pub(crate) fn log(&self, message: impl AsRef<str>) {
        let now = jiff::Zoned::now().strftime("%H:%M:%S").to_string();
        self.push(decorate("logger.go:42", &format!("{now} | {} | {}", self.prefix, message.as_ref())));
    }

    /// Records an error of the test (Go's `t.Error`), at kuttl's call site.
    pub(crate) fn error(&self, site: &str, message: impl AsRef<str>) {
        self.push(decorate(site, message.as_ref()));
    }

    fn push(&self, line: String) {
        if let Ok(mut lines) = self.lines.lock() {
            lines.push(line);
        }
    }

    /// Everything logged so far.
    pub(crate) fn text(&self) -> String {
        self.lines.lock().map(|l| l.join("\n")).unwrap_or_default()
    }

    /// How many lines were logged so far.
    pub(crate) fn len(&self) -> usize {
        self.lines.lock().map(|l| l.len()).unwrap_or_default()
    }

    /// The lines logged after the first `skip`.
    pub(crate) fn lines_after(&self, skip: usize) -> Vec<String> {
        self.lines.lock().map(|l| l.iter().skip(skip).cloned().collect()).unwrap_or_default()
    }
}
