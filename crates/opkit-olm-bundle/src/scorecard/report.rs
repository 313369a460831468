//! Scorecard's output for tests that ran: its text (`v1alpha3.Test.MarshalText`) and its
//! JSON (`v1alpha3.TestList`).

use serde_json::{Value, json};

use super::{State, Test};

/// Scorecard's text for one test: its image, entrypoint and labels, then each result.
pub fn to_text(test: &Test) -> String {
    let mut s = String::new();
    s.push_str(&format!("{}\n", "-".repeat(80)));
    s.push_str(&format!("Image:      {}\n", test.spec.image));
    s.push_str(&format!("Entrypoint: [{}]\n", test.spec.entrypoint.join(" ")));
    s.push_str("Labels:\n");
    for (key, value) in &test.spec.labels {
        s.push_str(&format!("\t\"{key}\":\"{value}\"\n"));
    }
    s.push_str("Results:\n");
    for result in &test.results {
        s.push_str(&format!("\tName: {}\n", result.name));
        let state = match result.state {
            State::Pass => "pass",
            State::Fail => "fail",
            State::Error => "error",
        };
        s.push_str(&format!("\tState: {state}\n\n"));
        let mut section = |title: &str, lines: &mut dyn Iterator<Item = &str>| {
            let lines: Vec<&str> = lines.collect();
            if !lines.is_empty() {
                s.push_str(&format!("\t{title}:\n"));
                for line in lines {
                    s.push_str(&format!("\t\t{line}\n"));
                }
            }
        };
        section("Suggestions", &mut result.suggestions.iter().map(String::as_str));
        section("Errors", &mut result.errors.iter().map(String::as_str));
        section("Log", &mut result.log.lines());
    }
    s.push('\n');
    s
}

/// Scorecard's JSON for the tests that ran.
pub fn to_json(tests: &[Test]) -> Value {
    let items: Vec<Value> = tests
        .iter()
        .map(|test| {
            json!({
                "kind": "Test",
                "apiVersion": "scorecard.operatorframework.io/v1alpha3",
                "spec": test.spec,
                "status": {"results": test.results},
            })
        })
        .collect();
    json!({"kind": "TestList", "apiVersion": "scorecard.operatorframework.io/v1alpha3", "items": items})
}
