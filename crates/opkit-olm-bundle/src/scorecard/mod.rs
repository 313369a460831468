//! operator-sdk's scorecard on a bundle: its configuration ([`Configuration`], from
//! `bundle/tests/scorecard/config.yaml` or the built-in default), its six built-in tests
//! run in-process ([`run_test`], where operator-sdk runs each in a pod of the
//! `scorecard-test` image; a custom test's image runs as a pod, which the CLI does), and
//! its `v1alpha3` results ([`TestResult`], [`Test`]) in scorecard's text and JSON
//! formats ([`to_text`], [`to_json`]).

mod builtin;
mod config;
mod report;

use serde::{Deserialize, Serialize};

pub use builtin::{TEST_IMAGE, TESTS, run_test};
pub use config::{Configuration, Stage, TestConfiguration};
pub use report::{to_json, to_text};

/// `pass`, `fail` or `error`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum State {
    /// The test passed.
    Pass,
    /// The test failed.
    Fail,
    /// The test could not run.
    Error,
}

/// One test's result (`v1alpha3.TestResult`), as a test image prints it too.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TestResult {
    /// The test's name.
    pub name: String,
    /// What the test logged.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub log: String,
    /// The outcome.
    pub state: State,
    /// Why it failed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<String>,
    /// What to improve.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub suggestions: Vec<String>,
}

impl TestResult {
    /// A passing result named `name`, with nothing logged.
    pub fn passed(name: &str) -> TestResult {
        TestResult {
            name: name.into(),
            log: String::new(),
            state: State::Pass,
            errors: Vec::new(),
            suggestions: Vec::new(),
        }
    }

    /// An `error` result: the test named `name` could not run, for `error`.
    pub fn error(name: &str, error: String) -> TestResult {
        let mut result = TestResult::passed(name);
        result.could_not_run(error);
        result
    }

    fn fail(&mut self, error: String) {
        self.errors.push(error);
        self.state = State::Fail;
    }

    /// Marks the test as one that could not run, for `error`.
    fn could_not_run(&mut self, error: String) {
        self.errors.push(error);
        self.state = State::Error;
    }
}

/// A test that ran (`v1alpha3.Test`): its configuration and the results it gave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Test {
    /// The test's configuration (image, entrypoint, labels).
    pub spec: TestConfiguration,
    /// Its results (a custom test may give several).
    pub results: Vec<TestResult>,
}

impl Test {
    /// Whether every result passed (a test with no result did not).
    pub fn passed(&self) -> bool {
        !self.results.is_empty() && self.results.iter().all(|r| r.state == State::Pass)
    }
}
