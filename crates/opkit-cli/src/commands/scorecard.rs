//! `opkit scorecard DIR`: scorecard's basic and OLM tests, run in-process on a bundle
//! directory (`opkit_olm_bundle::scorecard`), printed in scorecard's text or JSON format
//! or as operator-sdk's xunit XML (`-o xunit`). A failed test makes the command exit 1,
//! as scorecard does.

use opkit_olm_bundle::Bundle;
use opkit_olm_bundle::scorecard::{State, TestResult, run_test, selected, to_json, to_text};
use opkit_olm_bundle::validate::Selector;
use serde_json::json;

use super::CliError;
use crate::cli::{OutputFormat, ScorecardArgs};
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
    tracing::debug!(dir = %args.dir.display(), csv = %bundle.csv.name(), "loaded the bundle");
    let results: Vec<_> = tests
        .iter()
        .map(|(name, suite)| {
            let result = run_test(&bundle, name);
            tracing::debug!(test = name, suite, state = ?result.state, "ran a scorecard test");
            (result, *suite)
        })
        .collect();
    let failed = results.iter().any(|(r, _)| r.state != State::Pass);
    if out.format() == OutputFormat::Xunit {
        out.result(&to_xunit(&results), json!({}));
    } else if out.json() {
        out.result("", to_json(&results));
    } else if results.is_empty() {
        out.result("0 tests selected", json!({}));
    } else {
        let text: String = results.iter().map(|(r, suite)| to_text(r, suite)).collect();
        out.result(text.trim_end(), json!({}));
    }
    if failed { Err(CliError::Reported { code: 1 }) } else { Ok(()) }
}

/// The results as operator-sdk's xunit report: `<testsuites name="scorecard">` with a
/// `<testsuite>` per suite (in the order suites first appear) holding its `<testcase>`s;
/// a failed test carries a `<failure>`, a test that could not run an `<error>`, each
/// with the test's errors as message and text.
fn to_xunit(results: &[(TestResult, &str)]) -> String {
    use opkit_kuttl::xml_escape as esc;
    let mut suites: Vec<&str> = Vec::new();
    for (_, suite) in results {
        if !suites.contains(suite) {
            suites.push(suite);
        }
    }
    let mut xml = String::from("<testsuites name=\"scorecard\">\n");
    for suite in suites {
        let cases: Vec<&TestResult> = results.iter().filter(|(_, s)| *s == suite).map(|(r, _)| r).collect();
        let count = |state: State| cases.iter().filter(|r| r.state == state).count();
        xml.push_str(&format!(
            "  <testsuite name=\"{}\" tests=\"{}\" failures=\"{}\" errors=\"{}\">\n",
            esc(suite),
            cases.len(),
            count(State::Fail),
            count(State::Error)
        ));
        for case in cases {
            let open = format!("    <testcase name=\"{}\" classname=\"{}\"", esc(&case.name), esc(suite));
            let element = match case.state {
                State::Pass => {
                    xml.push_str(&format!("{open}></testcase>\n"));
                    continue;
                }
                State::Fail => "failure",
                State::Error => "error",
            };
            let message = case.errors.join("; ");
            let mut text = case.errors.join("\n");
            if !case.log.is_empty() {
                text.push('\n');
                text.push_str(&case.log);
            }
            xml.push_str(&format!(
                "{open}>\n      <{element} message=\"{}\" type=\"\">{}</{element}>\n    </testcase>\n",
                esc(&message),
                esc(&text)
            ));
        }
        xml.push_str("  </testsuite>\n");
    }
    xml.push_str("</testsuites>");
    xml
}
