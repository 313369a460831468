//! `opkit bundle validate`: operator-sdk's bundle validation of a bundle directory (the
//! validators are `opkit_olm_bundle::validate`'s), with its text and JSON output and its
//! exit code (1 when an error is found).

use opkit_olm_bundle::Bundle;
use opkit_olm_bundle::validate::{OPTIONAL_VALIDATORS, Selector, ValidateOptions, validate as run_validators};
use serde_json::json;

use super::CliError;
use crate::cli::BundleValidateArgs;
use crate::output::Output;

/// Validates the bundle; prints the findings, then fails with exit code 1 if one is an error.
pub(super) fn validate(args: BundleValidateArgs, out: &mut Output) -> Result<(), CliError> {
    if args.list_optional {
        return list_optional(out);
    }
    let dir = args.dir.ok_or_else(|| CliError::Usage("an image tag or directory is a required argument".into()))?;
    let select_optional = args
        .select_optional
        .as_deref()
        .map(Selector::parse)
        .transpose()
        .map_err(|e| CliError::Usage(format!("--select-optional: {e}")))?;
    if let Some(selector) = &select_optional {
        let any = OPTIONAL_VALIDATORS.iter().any(|v| {
            let mut labels = vec![("name", v.name)];
            if let Some(suite) = v.suite {
                labels.push(("suite", suite));
            }
            selector.matches(&labels)
        });
        if !any {
            return Err(CliError::Usage(format!(
                "invalid command args: no validator selected with selector {:?}",
                args.select_optional.unwrap_or_default()
            )));
        }
    }
    let optional_values = args
        .optional_values
        .iter()
        .map(|kv| {
            kv.split_once('=')
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .ok_or_else(|| CliError::Usage(format!("--optional-values {kv:?}: expected KEY=VALUE")))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let bundle = Bundle::load(&dir)?;
    let report = run_validators(&bundle, &ValidateOptions { select_optional, optional_values });
    if out.json() {
        out.result("", report.to_json(&bundle.dir));
    } else {
        let mut text = report.to_text(&bundle.dir);
        if report.passed() {
            text.push_str("INFO[0000] All validation tests have completed successfully");
        }
        out.result(text.trim_end(), json!({}));
    }
    if report.passed() { Ok(()) } else { Err(CliError::Reported { code: 1 }) }
}

fn list_optional(out: &mut Output) -> Result<(), CliError> {
    let mut text = String::from("NAME                   LABELS                                         DESCRIPTION\n");
    let mut items = Vec::new();
    for v in OPTIONAL_VALIDATORS {
        let labels = match v.suite {
            Some(suite) => format!("name={},suite={suite}", v.name),
            None => format!("name={}", v.name),
        };
        text.push_str(&format!("{:<22} {:<46} {}\n", v.name, labels, v.description));
        items.push(json!({"name": v.name, "labels": labels, "description": v.description}));
    }
    out.result(text.trim_end(), json!({"validators": items}));
    Ok(())
}
