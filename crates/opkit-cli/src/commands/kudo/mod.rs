//! `opkit kudo ...`: KUDO's `kubectl kudo` on opkit (`opkit-kudo`). `init` installs
//! KUDO's CRDs and its manager pod, `manager` runs the engine (in that pod, or anywhere
//! else), `install`,
//! `upgrade`, `update` and `uninstall` manage Instances, `plan` shows and drives their
//! plans, `package` works on packages on disk. Installed as `kubectl-kudo` (a link to the
//! `opkit` binary: see `main.rs`), it answers `kubectl kudo ...`, so kuttl suites written
//! for KUDO run unchanged.

pub(crate) mod args;
mod cluster;
mod init;
mod package;
mod plan;

use std::collections::BTreeMap;

use self::args::{KudoCommand, KudoManagerArgs, KudoPackageCommand, KudoParamArgs, KudoPlanCommand};
use super::CliError;
use crate::output::Output;

/// Runs `opkit kudo ...`.
pub(crate) async fn run(command: KudoCommand, out: &mut Output) -> Result<(), CliError> {
    match command {
        KudoCommand::Init(args) => init::init(args, out).await,
        KudoCommand::Manager(args) => manager(args).await,
        KudoCommand::Install(args) => cluster::install(args, out).await,
        KudoCommand::Upgrade(args) => cluster::upgrade(args, out).await,
        KudoCommand::Update(args) => cluster::update(args, out).await,
        KudoCommand::Uninstall(args) => cluster::uninstall(args, out).await,
        KudoCommand::Plan(KudoPlanCommand::Status(args)) => plan::status(args, out).await,
        KudoCommand::Plan(KudoPlanCommand::History(args)) => plan::history(args, out).await,
        KudoCommand::Plan(KudoPlanCommand::Trigger(args)) => plan::trigger(args, out).await,
        KudoCommand::Plan(KudoPlanCommand::Cancel(args)) => plan::cancel(args, out).await,
        KudoCommand::Plan(KudoPlanCommand::Retry(args)) => plan::retry(args, out).await,
        KudoCommand::Package(KudoPackageCommand::Create(args)) => package::create(args, out),
        KudoCommand::Package(KudoPackageCommand::Verify(args)) => package::verify(args, out),
        KudoCommand::Package(KudoPackageCommand::List(args::KudoPackageListCommand::Params(args))) => {
            package::list_params(args, out)
        }
    }
}

async fn manager(args: KudoManagerArgs) -> Result<(), CliError> {
    let options = args.manager.options().map_err(|e| CliError::Usage(e.to_string()))?;
    let config = args.manager.config().await.map_err(|e| CliError::Kubeconfig(e.to_string()))?;
    let mgr = opkit::Manager::from_config(config, options).map_err(|e| CliError::Client(e.to_string()))?;
    let engine = opkit_kudo::EngineOptions { concurrency: args.concurrency, drift_repair: !args.no_drift_repair };
    opkit_kudo::setup_with(&mgr, engine).await?;
    tracing::info!("starting the KUDO engine");
    mgr.run().await.map_err(|e| CliError::Build(e.to_string()))
}

/// `-P` files then `-p` pairs, as KUDO merges them.
fn parameters(args: &KudoParamArgs) -> Result<BTreeMap<String, String>, CliError> {
    let mut out = BTreeMap::new();
    for file in &args.parameter_file {
        let text = std::fs::read_to_string(file)
            .map_err(|e| CliError::Usage(format!("reading parameter file {}: {e}", file.display())))?;
        let values: serde_json::Value = serde_saphyr::from_str(&text)
            .map_err(|e| CliError::Usage(format!("parameter file {}: not YAML: {e}", file.display())))?;
        let serde_json::Value::Object(map) = values else {
            if values.is_null() {
                continue;
            }
            return Err(CliError::Usage(format!("parameter file {}: not a map of NAME: VALUE", file.display())));
        };
        for (k, v) in map {
            let v = match v {
                serde_json::Value::String(s) => s,
                serde_json::Value::Array(_) | serde_json::Value::Object(_) => {
                    serde_saphyr::to_string(&v).unwrap_or_default()
                }
                other => other.to_string(),
            };
            out.insert(k, v);
        }
    }
    for pair in &args.parameter {
        let Some((k, v)) = pair.split_once('=') else {
            return Err(CliError::Usage(format!("parameter {pair:?} is not NAME=VALUE")));
        };
        if k.is_empty() {
            return Err(CliError::Usage(format!("parameter {pair:?} has no name")));
        }
        out.insert(k.to_string(), v.to_string());
    }
    Ok(out)
}

/// The name the binary answers `kubectl kudo` under (a kubectl plugin on `PATH`).
pub(crate) const KUBECTL_PLUGIN: &str = "kubectl-kudo";

/// The command line to parse: when the binary runs as `kubectl-kudo` (a link or copy of
/// `opkit` named so), `kubectl kudo ARGS` arrives as `kubectl-kudo ARGS` and is read as
/// `opkit kudo ARGS`; otherwise the arguments are unchanged.
pub fn plugin_args<I>(args: I) -> Vec<std::ffi::OsString>
where
    I: IntoIterator<Item = std::ffi::OsString>,
{
    let mut args: Vec<std::ffi::OsString> = args.into_iter().collect();
    let invoked =
        args.first().and_then(|a| std::path::Path::new(a).file_stem().map(|s| s.to_string_lossy().into_owned()));
    if invoked.as_deref() == Some(KUBECTL_PLUGIN) {
        args.splice(0..1, ["opkit".into(), "kudo".into()]);
    }
    args
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kubectl_kudo_reads_as_opkit_kudo() {
        let args = plugin_args(["/usr/local/bin/kubectl-kudo", "install", "./op"].map(std::ffi::OsString::from));
        assert_eq!(args, ["opkit", "kudo", "install", "./op"].map(std::ffi::OsString::from));
        let args = plugin_args(["opkit", "version"].map(std::ffi::OsString::from));
        assert_eq!(args, ["opkit", "version"].map(std::ffi::OsString::from));
    }

    #[test]
    fn parameter_files_then_pairs() {
        let dir = std::env::temp_dir().join(format!("opkit-kudo-params-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let file = dir.join("p.yaml");
        std::fs::write(&file, "A: 1\nB: [x, y]\nC: keep\n").expect("write");
        let args = KudoParamArgs { parameter: vec!["A=2".into()], parameter_file: vec![file] };
        let params = parameters(&args).expect("parse");
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(params["A"], "2");
        assert_eq!(params["C"], "keep");
        assert!(params["B"].contains("- x"));
        assert!(parameters(&KudoParamArgs { parameter: vec!["novalue".into()], parameter_file: vec![] }).is_err());
    }
}
