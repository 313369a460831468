//! `helm template` conformance on fixture charts: each case renders a chart under
//! `tests/charts/` and compares the output byte for byte with what the real helm
//! (v3.17.1) printed for the same command, kept in `tests/expected/`.
//!
//! The charts exercise Go's template semantics (`gotemplate`), Sprig's and Helm's
//! functions, toYaml's quoting and folding and `.Files` (`sprig`), subcharts from
//! directories and a `.tgz`, aliases, conditions, tags, globals, import-values, a
//! library chart, hooks, CRDs and output order (`parent`), and Helm's error messages
//! (`errors`), and Go's integer types of values from each source (`types`).

use std::path::{Path, PathBuf};

use opkit_helm::TemplateOptions;

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests")
}

/// The options of `helm template rel CHART --namespace ns1 --kube-version 1.33.0`.
fn options() -> TemplateOptions {
    TemplateOptions {
        release_name: "rel".into(),
        namespace: "ns1".into(),
        kube_version: Some("1.33.0".into()),
        ..TemplateOptions::default()
    }
}

fn expected(name: &str) -> String {
    std::fs::read_to_string(dir().join("expected").join(name)).expect("expected output")
}

fn render(chart: &str, options: &TemplateOptions) -> Result<String, opkit_helm::HelmError> {
    opkit_helm::template(&dir().join("charts").join(chart), options)
}

/// Compares line by line first, so a failure names the first differing line.
fn assert_same(got: &str, want: &str) {
    for (i, (g, w)) in got.lines().zip(want.lines()).enumerate() {
        assert_eq!(g, w, "first difference at line {}", i + 1);
    }
    assert_eq!(got, want);
}

#[test]
fn go_template_semantics_match_helm() {
    assert_same(&render("gotemplate", &options()).expect("renders"), &expected("gotemplate.yaml"));
}

#[test]
fn sprig_and_helm_functions_match_helm() {
    let options = TemplateOptions { api_versions: vec!["monitoring.coreos.com/v1".into()], ..options() };
    assert_same(&render("sprig", &options).expect("renders"), &expected("sprig.yaml"));
}

#[test]
fn subcharts_hooks_and_order_match_helm() {
    assert_same(&render("parent", &options()).expect("renders"), &expected("parent.yaml"));
}

#[test]
fn values_files_and_set_flags_combine_as_helm_combines_them() {
    let override_values = std::fs::read_to_string(dir().join("charts/parent-override.yaml")).expect("values file");
    let options = TemplateOptions {
        values_files: vec![override_values],
        set: vec!["second.replicas=7,fromChild.kept=null".into()],
        set_string: vec!["child.image=007".into()],
        ..options()
    };
    assert_same(&render("parent", &options).expect("renders"), &expected("parent-override.yaml"));
}

#[test]
fn include_crds_and_skip_tests_match_helm() {
    let options = TemplateOptions { include_crds: true, skip_tests: true, ..options() };
    assert_same(&render("parent", &options).expect("renders"), &expected("parent-crds.yaml"));
}

#[test]
fn errors_carry_helms_messages() {
    for (set, file) in [
        ("failRequired=true", "errors-failRequired.txt"),
        ("failNil=true", "errors-failNil.txt"),
        ("failCall=true", "errors-failCall.txt"),
        ("port=abc", "errors-schema.txt"),
    ] {
        let options = TemplateOptions { set: vec![set.into()], ..options() };
        let err = render("errors", &options).expect_err(set);
        assert_eq!(err.to_string().trim_end(), expected(file).trim_end(), "--set {set}");
    }
}

#[test]
fn a_missing_chart_is_an_error_not_a_panic() {
    let err = render("no-such-chart", &options()).expect_err("no chart");
    assert!(matches!(err, opkit_helm::HelmError::Load(_)), "{err:?}");
}

#[test]
fn endless_include_recursion_stops_at_helms_limit() {
    let chart = tempfile::tempdir().expect("temp dir");
    std::fs::write(chart.path().join("Chart.yaml"), "apiVersion: v2\nname: rec\nversion: 0.1.0\n").expect("Chart.yaml");
    std::fs::create_dir(chart.path().join("templates")).expect("templates/");
    std::fs::write(
        chart.path().join("templates/a.yaml"),
        "{{ define \"a\" }}{{ include \"a\" . }}{{ end }}x: {{ include \"a\" . }}\n",
    )
    .expect("template");
    let err = opkit_helm::template(chart.path(), &options()).expect_err("recursion");
    assert!(
        err.to_string().ends_with(
            "error calling include: rendering template has a nested reference name: a: unable to execute template"
        ),
        "{}",
        &err.to_string()[err.to_string().len().saturating_sub(200)..]
    );
}

#[test]
fn dependencies_missing_from_charts_are_helms_error() {
    let err = render("missingdep", &options()).expect_err("missing dependency");
    assert_eq!(
        err.to_string(),
        "An error occurred while checking for chart dependencies. You may need to run `helm dependency build` to fetch missing dependencies: found in Chart.yaml, but missing in charts/ directory: absent, absent"
    );
    // apiVersion v1 charts list them in requirements.yaml.
    let err = render("v1requirements", &options()).expect_err("missing dependency");
    assert!(err.to_string().ends_with("missing in charts/ directory: needed"), "{err}");
}

#[test]
fn capabilities_default_to_helms() {
    let options = TemplateOptions { release_name: "rel".into(), ..TemplateOptions::default() };
    assert_same(&render("capabilities", &options).expect("renders"), &expected("capabilities-default.yaml"));
}

#[test]
fn yaml_and_json_output_quote_escape_and_fold_as_helm() {
    assert_same(&render("yamlquoting", &options()).expect("renders"), &expected("yamlquoting.yaml"));
}

#[test]
fn sprig_edge_cases_match_helm() {
    assert_same(&render("sprigstrings", &options()).expect("renders"), &expected("sprigstrings.yaml"));
}

#[test]
fn values_files_full_of_comments_load() {
    assert_same(&render("comments", &options()).expect("renders"), &expected("comments.yaml"));
}

#[test]
fn an_upgrade_renders_its_revision_and_the_root_charts_notes() {
    let chart = opkit_helm::chart::load(&dir().join("charts/release")).expect("loads");
    let install = opkit_helm::render_release(chart.clone(), &options()).expect("renders");
    assert!(install.manifest.contains("  revision: \"1\"\n  isInstall: \"true\"\n  isUpgrade: \"false\"\n"));
    assert_eq!(install.notes, "rel is at revision 1.\n");
    let upgrade = TemplateOptions { revision: 3, is_upgrade: true, ..options() };
    let rendered = opkit_helm::render_release(chart, &upgrade).expect("renders");
    assert!(rendered.manifest.contains("  revision: \"3\"\n  isInstall: \"false\"\n  isUpgrade: \"true\"\n"));
    // Helm keeps only the root chart's notes, as rendered (no trimming).
    assert_eq!(rendered.notes, "rel is at revision 3. Upgraded.\n");
    assert!(!rendered.manifest.contains("subchart notes"));
}

#[test]
fn integer_types_are_helms() {
    // values.yaml, `-f` files, fromYaml and fromJson give float64; `--set` integers are
    // int64 (its floats stay strings); template literals, len, atoi and int are Go's int.
    let extra = std::fs::read_to_string(dir().join("charts/types-extra.yaml")).expect("values file");
    let options = TemplateOptions {
        values_files: vec![extra],
        set: vec!["set=3,setBig=10000000,setFloat=1.5,setList={1,2},neg=4".into()],
        set_string: vec!["setString=9".into()],
        ..options()
    };
    assert_same(&render("types", &options).expect("renders"), &expected("types.yaml"));
}
