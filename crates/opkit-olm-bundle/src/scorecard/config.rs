//! Scorecard's configuration (`scorecard.operatorframework.io/v1alpha3` `Configuration`):
//! stages run one after another, each a list of tests (an image, its entrypoint and
//! labels) whose tests may run in parallel, read from `bundle/tests/scorecard/config.yaml`
//! as `operator-sdk scorecard` reads it, or the default of the six built-in tests.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::builtin::{TEST_IMAGE, TESTS};
use crate::BundleError;
use crate::validate::Selector;

/// The repository of operator-sdk's own test image, whose tests run in-process.
const TEST_IMAGE_REPOSITORY: &str = "quay.io/operator-framework/scorecard-test";

/// A scorecard configuration.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Configuration {
    /// The stages, in order.
    #[serde(default)]
    pub stages: Vec<Stage>,
    /// The ServiceAccount the test pods run as (`--service-account` wins).
    #[serde(default)]
    pub serviceaccount: Option<String>,
}

/// One stage: tests that may run at once when `parallel`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Stage {
    /// Whether the stage's tests run in parallel.
    #[serde(default)]
    pub parallel: bool,
    /// Its tests.
    #[serde(default)]
    pub tests: Vec<TestConfiguration>,
}

/// One test: what runs and how it is selected.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TestConfiguration {
    /// The image the test runs in.
    pub image: String,
    /// The command the test runs.
    #[serde(default)]
    pub entrypoint: Vec<String>,
    /// Its labels (`suite`, `test`), which `--selector` matches.
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
}

impl Configuration {
    /// The configuration operator-sdk scaffolds: one parallel stage of the six built-in
    /// tests, labelled with their suite and `<name>-test`.
    pub fn builtin() -> Configuration {
        let tests = TESTS
            .iter()
            .map(|(name, suite)| TestConfiguration {
                image: TEST_IMAGE.into(),
                entrypoint: vec!["scorecard-test".into(), (*name).into()],
                labels: [("suite", suite.to_string()), ("test", format!("{name}-test"))]
                    .map(|(k, v)| (k.to_string(), v))
                    .into(),
            })
            .collect();
        Configuration { stages: vec![Stage { parallel: true, tests }], serviceaccount: None }
    }

    /// Reads the configuration at `path`.
    pub fn load(path: &Path) -> Result<Configuration, BundleError> {
        let text =
            std::fs::read_to_string(path).map_err(|source| BundleError::Io { path: path.to_path_buf(), source })?;
        let parse = |message: String| BundleError::Parse { path: path.to_path_buf(), message };
        let value = crate::yaml::first_document(&text).map_err(parse)?.unwrap_or_default();
        let kind = value.get("kind").and_then(serde_json::Value::as_str);
        if kind != Some("Configuration") {
            return Err(parse(format!("not a scorecard Configuration (kind {kind:?})")));
        }
        let config: Configuration = serde_json::from_value(value).map_err(|e| parse(e.to_string()))?;
        match config.stages.iter().flat_map(|s| &s.tests).find(|t| t.image.is_empty()) {
            Some(t) => Err(parse(format!("a test has no image (entrypoint {:?})", t.entrypoint))),
            None => Ok(config),
        }
    }

    /// The configuration keeping only the tests `selector` matches (all without one),
    /// and no stage left empty.
    pub fn selected(&self, selector: Option<&Selector>) -> Configuration {
        let stages = self
            .stages
            .iter()
            .map(|stage| Stage {
                parallel: stage.parallel,
                tests: stage.tests.iter().filter(|t| selector.is_none_or(|s| t.matches(s))).cloned().collect(),
            })
            .filter(|stage| !stage.tests.is_empty())
            .collect();
        Configuration { stages, serviceaccount: self.serviceaccount.clone() }
    }

    /// Every test, stage by stage.
    pub fn tests(&self) -> impl Iterator<Item = &TestConfiguration> {
        self.stages.iter().flat_map(|s| &s.tests)
    }
}

impl TestConfiguration {
    /// The built-in test this one is (`scorecard-test NAME` in operator-sdk's test
    /// image, any tag), which runs in-process; `None` for a custom test.
    pub fn builtin(&self) -> Option<&'static str> {
        let repository = self.image.rsplit_once(':').map_or(self.image.as_str(), |(repo, _)| repo);
        let [command, name] = self.entrypoint.as_slice() else { return None };
        (repository == TEST_IMAGE_REPOSITORY && command == "scorecard-test")
            .then(|| TESTS.iter().find(|(n, _)| n == name).map(|(n, _)| *n))
            .flatten()
    }

    /// Its `suite` label (empty when it has none).
    pub fn suite(&self) -> &str {
        self.labels.get("suite").map_or("", String::as_str)
    }

    /// Whether `selector` matches its labels.
    pub fn matches(&self, selector: &Selector) -> bool {
        let labels: Vec<(&str, &str)> = self.labels.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        selector.matches(&labels)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_scaffolded_configuration_reads_and_its_tests_are_the_builtin_ones() {
        let dir = tempfile::tempdir().expect("tmp");
        let path = dir.path().join("config.yaml");
        std::fs::write(
            &path,
            "apiVersion: scorecard.operatorframework.io/v1alpha3\nkind: Configuration\nmetadata:\n  name: config\n\
             stages:\n- parallel: true\n  tests:\n  - entrypoint: [scorecard-test, basic-check-spec]\n    \
             image: quay.io/operator-framework/scorecard-test:v1.39.0\n    labels: {suite: basic, test: basic-check-spec-test}\n\
             - tests:\n  - entrypoint: [custom-test, x]\n    image: example.com/custom:v1\n    labels: {suite: custom}\n",
        )
        .expect("write");
        let config = Configuration::load(&path).expect("load");
        assert_eq!(config.stages.len(), 2);
        assert!(config.stages[0].parallel && !config.stages[1].parallel);
        let tests: Vec<_> = config.tests().map(TestConfiguration::builtin).collect();
        assert_eq!(tests, [Some("basic-check-spec"), None]);
        let custom = Selector::parse("suite=custom").expect("selector");
        let selected = config.selected(Some(&custom));
        assert_eq!(selected.stages.len(), 1, "the emptied stage is dropped");
        assert_eq!(selected.tests().next().map(|t| t.image.as_str()), Some("example.com/custom:v1"));
    }

    #[test]
    fn other_documents_and_tests_without_an_image_are_refused() {
        let dir = tempfile::tempdir().expect("tmp");
        let path = dir.path().join("config.yaml");
        std::fs::write(&path, "kind: ConfigMap\n").expect("write");
        assert!(Configuration::load(&path).expect_err("a ConfigMap").to_string().contains("not a scorecard"));
        std::fs::write(&path, "kind: Configuration\nstages:\n- tests:\n  - entrypoint: [x]\n").expect("write");
        assert!(Configuration::load(&path).is_err());
        assert!(Configuration::load(&dir.path().join("missing.yaml")).is_err());
    }

    #[test]
    fn the_builtin_configuration_labels_every_test() {
        let config = Configuration::builtin();
        assert_eq!(config.tests().count(), TESTS.len());
        let olm = Selector::parse("suite=olm").expect("selector");
        assert_eq!(config.selected(Some(&olm)).tests().count(), 5);
        let one = Selector::parse("test=basic-check-spec-test").expect("selector");
        let names: Vec<_> = config.selected(Some(&one)).tests().filter_map(TestConfiguration::builtin).collect();
        assert_eq!(names, ["basic-check-spec"]);
    }
}
