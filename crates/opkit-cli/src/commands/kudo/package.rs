//! `opkit kudo package create|verify|list params`: packages on disk, no cluster.

use std::path::Path;

use opkit_kudo::Severity;
use serde_json::json;

use super::args::{KudoPackageCreateArgs, KudoPackageParamsArgs, KudoPackagePathArgs};
use crate::commands::CliError;
use crate::output::Output;

/// `package create`: `NAME-VERSION.tgz` (KUDO's name and layout), written atomically.
pub(super) fn create(args: KudoPackageCreateArgs, out: &mut Output) -> Result<(), CliError> {
    if !args.package.is_dir() {
        return Err(CliError::Usage(format!("{} is not a package directory", args.package.display())));
    }
    let pkg = opkit_kudo::load(&args.package)?;
    let bytes = opkit_kudo::write_tgz(&args.package)?;
    let target = args.destination.join(pkg.archive_name());
    if target.exists() && !args.overwrite {
        return Err(CliError::Usage(format!("{} already exists; pass --overwrite to replace it", target.display())));
    }
    write_atomic(&target, &bytes)?;
    out.result(&format!("Package created: {}", target.display()), json!({"package": target}));
    Ok(())
}

/// Writes `bytes` through a temporary file in the same directory, so a failure leaves
/// nothing half-written.
fn write_atomic(target: &Path, bytes: &[u8]) -> Result<(), CliError> {
    let dir = target.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let name = target.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let temp = dir.join(format!(".{name}.tmp-{}", std::process::id()));
    let written = std::fs::write(&temp, bytes).and_then(|()| std::fs::rename(&temp, target));
    if let Err(e) = written {
        let _ = std::fs::remove_file(&temp);
        return Err(CliError::Io(e));
    }
    Ok(())
}

/// `package verify`: KUDO's warnings and errors, each naming its file; errors fail.
pub(super) fn verify(args: KudoPackagePathArgs, out: &mut Output) -> Result<(), CliError> {
    let pkg = opkit_kudo::load(&args.package)?;
    let findings = opkit_kudo::verify(&pkg);
    let errors: Vec<_> = findings.iter().filter(|f| f.severity == Severity::Error).collect();
    let warnings: Vec<_> = findings.iter().filter(|f| f.severity == Severity::Warning).collect();
    let mut text = String::new();
    if !warnings.is_empty() {
        text.push_str("Warnings\n");
        for w in &warnings {
            text.push_str(&format!("{}: {}\n", w.file, w.message));
        }
    }
    if !errors.is_empty() {
        text.push_str("Errors\n");
        for e in &errors {
            text.push_str(&format!("{}: {}\n", e.file, e.message));
        }
    }
    if errors.is_empty() {
        text.push_str("package is valid");
        out.result(&text, json!({"valid": true, "findings": findings}));
        return Ok(());
    }
    if out.json() {
        out.result("", json!({"valid": false, "findings": findings}));
    } else {
        eprint!("{text}");
    }
    Err(CliError::Usage(format!("package {} is invalid: {} error(s)", args.package.display(), errors.len())))
}

/// `package list params`: KUDO's table.
pub(super) fn list_params(args: KudoPackageParamsArgs, out: &mut Output) -> Result<(), CliError> {
    let pkg = opkit_kudo::load(&args.package)?;
    let mut rows: Vec<Vec<String>> = Vec::new();
    let mut header = vec!["Name".to_string(), "Default".into(), "Required".into(), "Immutable".into()];
    if args.descriptions {
        header.push("Descriptions".into());
    }
    let mut json_rows = Vec::new();
    let mut params = pkg.params.parameters.clone();
    params.sort_by(|a, b| a.name.cmp(&b.name));
    for p in &params {
        let default = opkit_kudo::params::wrap(p, p.default.as_ref()).ok().flatten();
        let required = p.required.unwrap_or(true);
        if args.required && (!required || default.is_some()) {
            continue;
        }
        let mut row = vec![
            p.name.clone(),
            default.clone().unwrap_or_default().trim_end().to_string(),
            required.to_string(),
            p.immutable.unwrap_or(false).to_string(),
        ];
        if args.descriptions {
            row.push(p.description.trim().replace('\n', " "));
        }
        rows.push(row);
        json_rows.push(json!({"name": p.name, "default": default, "required": required, "immutable": p.immutable.unwrap_or(false), "description": p.description}));
    }
    if rows.is_empty() && args.required {
        out.result("no required parameters without default values found", json!({"parameters": json_rows}));
        return Ok(());
    }
    let mut widths: Vec<usize> = header.iter().map(String::len).collect();
    for row in &rows {
        for (i, cell) in row.iter().enumerate() {
            widths[i] = widths[i].max(cell.chars().count());
        }
    }
    let line = |cells: &[String]| {
        cells
            .iter()
            .enumerate()
            .map(|(i, c)| format!("{c:<w$}", w = widths[i]))
            .collect::<Vec<_>>()
            .join("\t")
            .trim_end()
            .to_string()
    };
    let mut text = line(&header);
    for row in &rows {
        text.push('\n');
        text.push_str(&line(row));
    }
    out.result(&text, json!({"parameters": json_rows}));
    Ok(())
}
