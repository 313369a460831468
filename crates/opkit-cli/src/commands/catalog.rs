//! `opkit catalog render|validate`, as `opm render` and `opm validate`: a file-based
//! catalog rendered from bundle directories (package, channels from each CSV's
//! `replaces`/`skips`/`olm.skipRange`, bundles carrying their manifests), and a catalog
//! directory checked as opm checks it.

use opkit_olm::fbc::Catalog;
use opkit_olm_bundle::Bundle;
use serde_json::json;

use super::CliError;
use crate::cli::{CatalogRenderArgs, CatalogValidateArgs};
use crate::output::Output;

/// Prints the catalog of the bundle directories (opm's JSON stream; `-o json`: one array).
pub(super) fn render(args: CatalogRenderArgs, out: &mut Output) -> Result<(), CliError> {
    let bundles = args.bundles.iter().map(Bundle::load).collect::<Result<Vec<_>, _>>()?;
    let catalog = Catalog::from_bundles(&bundles)?;
    let problems = catalog.validate();
    if !problems.is_empty() {
        return Err(CliError::Usage(format!("the rendered catalog is not valid:\n  {}", problems.join("\n  "))));
    }
    let text = catalog.to_json_stream();
    out.result(text.trim_end(), json!(catalog.documents()));
    Ok(())
}

/// Validates a catalog directory; exits 1 with each problem when it is not valid.
pub(super) fn validate(args: CatalogValidateArgs, out: &mut Output) -> Result<(), CliError> {
    let catalog = Catalog::load_dir(&args.dir)?;
    let problems = catalog.validate();
    if problems.is_empty() {
        out.result(
            &format!(
                "{} is a valid catalog: {} package(s), {} channel(s), {} bundle(s)",
                args.dir.display(),
                catalog.packages.len(),
                catalog.channels.len(),
                catalog.bundles.len()
            ),
            json!({"valid": true, "packages": catalog.packages.len(), "channels": catalog.channels.len(), "bundles": catalog.bundles.len()}),
        );
        return Ok(());
    }
    Err(CliError::InvalidCatalog(problems))
}
