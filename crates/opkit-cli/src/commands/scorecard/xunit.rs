//! operator-sdk's xunit report of scorecard's tests (`opkit scorecard -o xunit`).

use opkit_olm_bundle::scorecard::{State, Test, TestResult};

/// The results as operator-sdk's xunit report: `<testsuites name="scorecard">` with a
/// `<testsuite>` per suite (in the order suites first appear) holding its `<testcase>`s;
/// a failed test carries a `<failure>`, a test that could not run an `<error>`, each
/// with the test's errors as message and text.
pub(super) fn to_xunit(tests: &[Test]) -> String {
    use opkit_kuttl::xml_escape as esc;
    let results: Vec<(&TestResult, &str)> =
        tests.iter().flat_map(|t| t.results.iter().map(move |r| (r, t.spec.suite()))).collect();
    let mut suites: Vec<&str> = Vec::new();
    for (_, suite) in &results {
        if !suites.contains(suite) {
            suites.push(suite);
        }
    }
    let mut xml = String::from("<testsuites name=\"scorecard\">\n");
    for suite in suites {
        let cases: Vec<&TestResult> = results.iter().filter(|(_, s)| *s == suite).map(|(r, _)| *r).collect();
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
