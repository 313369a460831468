//! How a subcommand ends: its report printed as text or JSON (`-o`), saved as JSON
//! (`--save-json`), and its exit code. A benchmark that cannot run, or whose report cannot
//! be written, fails (1); a corpus run that cannot run exits 2, and fails (1) when its
//! report misses the floor it was given ([`Verdict`]).

use std::fmt::Display;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::ValueEnum;
use serde::Serialize;

/// Report format (`-o`).
#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum Output {
    /// The report's table.
    Text,
    /// The report as pretty JSON.
    Json,
}

/// The report flags of a benchmark: `-o` and `--save-json`.
#[derive(clap::Args)]
pub(crate) struct ReportArgs {
    /// Report format.
    #[arg(short = 'o', long = "output", value_enum, default_value = "text")]
    pub(crate) output: Output,
    /// Also write the JSON report to this file.
    #[arg(long)]
    pub(crate) save_json: Option<PathBuf>,
}

/// Prints `report` as text or JSON; false (and says why) if it could not be encoded.
fn print<R: Serialize>(command: &str, report: &R, output: Output, text: fn(&R) -> String) -> bool {
    match output {
        Output::Text => print!("{}", text(report)),
        Output::Json => match serde_json::to_string_pretty(report) {
            Ok(json) => println!("{json}"),
            Err(e) => {
                eprintln!("opkit-bench {command}: {e}");
                return false;
            }
        },
    }
    true
}

/// Prints `report` as `flags` ask, and saves the JSON to `--save-json` if given.
pub(crate) fn emit<R: Serialize>(command: &str, report: &R, flags: &ReportArgs, text: fn(&R) -> String) -> ExitCode {
    if let Some(path) = &flags.save_json {
        let written = serde_json::to_string_pretty(report)
            .map_err(std::io::Error::other)
            .and_then(|s| std::fs::write(path, s + "\n"));
        if let Err(e) = written {
            eprintln!("opkit-bench: writing {}: {e}", path.display());
            return ExitCode::FAILURE;
        }
    }
    if print(command, report, flags.output, text) { ExitCode::SUCCESS } else { ExitCode::FAILURE }
}

/// The end of benchmark `command`: its report [emitted](emit), or its error
/// (`opkit-bench COMMAND: ...`) and failure.
pub(crate) fn benchmark<R: Serialize, E: Display>(
    command: &str,
    result: Result<R, E>,
    flags: &ReportArgs,
    text: fn(&R) -> String,
) -> ExitCode {
    match result {
        Ok(report) => emit(command, &report, flags, text),
        Err(e) => {
            eprintln!("opkit-bench {command}: {e}");
            ExitCode::FAILURE
        }
    }
}

/// What a corpus run's report says of the run.
pub(crate) enum Verdict {
    /// The report reaches its floor.
    Passed,
    /// It does not; the message, if any, says by how much (else the report says why).
    Failed(Option<String>),
}

impl Verdict {
    /// Failed when `got` of `total` is under the floor `min`, if one was given; `what`
    /// says what was counted (`{got} of {total} {what}; at least {min} must`).
    pub(crate) fn at_least(got: usize, total: usize, min: Option<usize>, what: &str) -> Verdict {
        match min {
            Some(min) if got < min => Verdict::Failed(Some(format!("{got} of {total} {what}; at least {min} must"))),
            _ => Verdict::Passed,
        }
    }

    /// Passed when `ok`, else failed without a message.
    pub(crate) fn from_bool(ok: bool) -> Verdict {
        if ok { Verdict::Passed } else { Verdict::Failed(None) }
    }
}

/// The end of corpus run `command`: its report printed (a report that cannot be written
/// as JSON is said and the run goes on), then its [`Verdict`]; a run that could not be
/// made is its error (`opkit-bench COMMAND: ...`) and exit code 2.
pub(crate) fn corpus<R: Serialize, E: Display>(
    command: &str,
    result: Result<R, E>,
    output: Output,
    text: fn(&R) -> String,
    verdict: impl FnOnce(&R) -> Verdict,
) -> ExitCode {
    let report = match result {
        Ok(report) => report,
        Err(e) => {
            eprintln!("opkit-bench {command}: {e}");
            return ExitCode::from(2);
        }
    };
    print(command, &report, output, text);
    match verdict(&report) {
        Verdict::Passed => ExitCode::SUCCESS,
        Verdict::Failed(message) => {
            if let Some(message) = message {
                eprintln!("opkit-bench {command}: {message}");
            }
            ExitCode::FAILURE
        }
    }
}

/// This executable, which benchmarks start again as their server, manager or operator;
/// when it cannot be found, the message is said and the command fails.
pub(crate) fn own_exe() -> Result<PathBuf, ExitCode> {
    std::env::current_exe().map_err(|e| {
        eprintln!("opkit-bench: cannot find its own executable: {e}");
        ExitCode::FAILURE
    })
}
