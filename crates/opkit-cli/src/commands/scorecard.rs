//! `opkit scorecard DIR`: scorecard's basic and OLM tests, run in-process on a bundle
//! directory (`opkit_olm_bundle::scorecard`), printed in scorecard's text or JSON format.
//! A failed test makes the command exit 1, as scorecard does.

use opkit_olm_bundle::Bundle;
use opkit_olm_bundle::scorecard::{State, run_test, selected, to_json, to_text};
use opkit_olm_bundle::validate::Selector;
use serde_json::json;

use super::CliError;
use crate::cli::ScorecardArgs;
use crate::output::Output;

/// Runs the selected tests on the bundle.
pub(super) fn scorecard(args: ScorecardArgs, out: &mut Output) -> Result<(), CliError> {
    let selector = args
        .selector
        .as_deref()
        .map(Selector::parse)
        .transpose()
        .map_err(|e| CliError::Usage(format!("--selector: {e}")))?;
    let tests = selected(selector.as_ref());
    if args.list {
        let names: Vec<_> = tests.iter().map(|(name, suite)| json!({"name": name, "suite": suite})).collect();
        let text: Vec<String> = tests.iter().map(|(name, suite)| format!("{name}\t(suite={suite})")).collect();
        out.result(&text.join("\n"), json!({"tests": names}));
        return Ok(());
    }
    let bundle = Bundle::load(&args.dir)?;
    let results: Vec<_> = tests.iter().map(|(name, suite)| (run_test(&bundle, name), *suite)).collect();
    let failed = results.iter().any(|(r, _)| r.state != State::Pass);
    if out.json() {
        out.result("", to_json(&results));
    } else if results.is_empty() {
        out.result("0 tests selected", json!({}));
    } else {
        let text: String = results.iter().map(|(r, suite)| to_text(r, suite)).collect();
        out.result(text.trim_end(), json!({}));
    }
    if failed { Err(CliError::Reported { code: 1 }) } else { Ok(()) }
}
