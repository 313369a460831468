//! `opkit helm template`: a chart rendered by `opkit-helm`, printed as `helm template`
//! prints it.

use crate::cli::HelmTemplateArgs;
use crate::commands::CliError;
use crate::output::Output;

/// Renders the chart and prints the manifests (with `-o json`: `{"manifest": ...}`).
pub(super) fn template(args: HelmTemplateArgs, out: &mut Output) -> Result<(), CliError> {
    let mut values_files = Vec::with_capacity(args.values.len());
    for path in &args.values {
        let text = std::fs::read_to_string(path)
            .map_err(|e| CliError::Usage(format!("reading values file {}: {e}", path.display())))?;
        values_files.push(text);
    }
    let options = opkit_helm::TemplateOptions {
        release_name: args.name,
        namespace: args.namespace,
        kube_version: args.kube_version,
        api_versions: args.api_versions,
        values_files,
        set: args.set,
        set_string: args.set_string,
        include_crds: args.include_crds,
        skip_tests: args.skip_tests,
        // `helm template` renders revision 1 of an install.
        ..opkit_helm::TemplateOptions::default()
    };
    let manifest = opkit_helm::template(&args.chart, &options)?;
    if out.json() {
        out.result("", serde_json::json!({ "manifest": manifest }));
    } else {
        print!("{manifest}");
    }
    Ok(())
}
