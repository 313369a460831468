//! `opkit cluster load` and `opkit cluster images`: the local cluster's image store (see
//! `opkit_kubelet::images`), where a local executable stands in for an image, and
//! the built-in images that run without being loaded.

use std::path::{Path, PathBuf};

use opkit_kubelet::images::builtin::{self, BuiltinImage};
use opkit_kubelet::images::{ImageFile, ImageStore, LoadedImage};
use serde_json::json;

use super::{CliError, project_dir};
use crate::cli::{ImageStoreArgs, ImagesArgs, LoadArgs};
use crate::output::Output;
use crate::project::Project;

/// The image store of the cluster `target` names: `--data-dir`, else the opkit cluster of
/// the kubeconfig's context.
fn store(target: &ImageStoreArgs) -> Result<ImageStore, CliError> {
    let data_dir = match &target.data_dir {
        Some(dir) => dir.clone(),
        None => super::cluster::context::data_dir(
            target.kubeconfig.as_deref(),
            target.context.as_deref(),
            Path::new(super::cluster::DEFAULT_DATA_DIR),
        )?,
    };
    Ok(ImageStore::new(std::path::absolute(data_dir)?.join("images")))
}

/// `opkit cluster load`.
pub(super) fn load(args: LoadArgs, out: &mut Output) -> Result<(), CliError> {
    let binary = match args.binary {
        Some(path) => path,
        None => project_binary(&args.profile)?,
    };
    let files = args.files.iter().map(|f| ImageFile::parse(f)).collect::<Result<Vec<_>, _>>()?;
    let store = store(&args.target)?;
    out.waiting(&format!("loading {} as {}", binary.display(), args.image));
    let image = store.load_with_files(&args.image, &binary, &files)?;
    out.result(
        &format!(
            "Loaded {} ({}, {}{}) from {} into {}.",
            image.reference,
            short_digest(&image.digest),
            human_size(image.size),
            match files.len() {
                0 => String::new(),
                n => format!(", with {n} file(s)"),
            },
            binary.display(),
            store.dir().display()
        ),
        json!({"image": image, "binary": binary, "store": store.dir()}),
    );
    Ok(())
}

/// `opkit cluster images`: the loaded images, then the built-in ones (`builtIn: true`,
/// any tag of their repository).
pub(super) fn list(args: ImagesArgs, out: &mut Output) -> Result<(), CliError> {
    let store = store(&args.target)?;
    let images = store.list()?;
    let mut listed = Vec::new();
    for image in &images {
        let mut entry = json!(image);
        entry["builtIn"] = json!(false);
        listed.push(entry);
    }
    for image in builtin::ALL {
        listed.push(json!({
            "reference": format!("{}:*", image.repository()),
            "repository": image.repository(),
            "digest": image.digest(),
            "builtIn": true,
            "runs": image.description(),
        }));
    }
    out.result(&table(&images, &builtin::ALL), json!({"images": listed}));
    Ok(())
}

/// The images as `crictl images` lays them out, the built-in ones last (their tags `*`,
/// their LOADED column saying how they run).
fn table(images: &[LoadedImage], built_in: &[BuiltinImage]) -> String {
    let mut rows: Vec<[String; 4]> = images
        .iter()
        .map(|i| [i.reference.clone(), short_digest(&i.digest), human_size(i.size), i.loaded_at.clone()])
        .collect();
    rows.extend(built_in.iter().map(|b| {
        [
            format!("{}:*", b.repository()),
            short_digest(&b.digest()),
            "-".into(),
            format!("built-in: {}", b.description()),
        ]
    }));
    let header = ["IMAGE", "DIGEST", "SIZE", "LOADED"].map(String::from);
    let width = |col: usize| rows.iter().chain([&header]).map(|r| r[col].len()).max().unwrap_or(0);
    let (w0, w1, w2) = (width(0), width(1), width(2));
    let table = std::iter::once(&header)
        .chain(&rows)
        .map(|r| format!("{:w0$}   {:w1$}   {:>w2$}   {}", r[0], r[1], r[2], r[3]))
        .collect::<Vec<_>>()
        .join("\n");
    if images.is_empty() {
        return format!("{table}\nNo images loaded. Load one with `opkit cluster load IMAGE --binary PATH`.");
    }
    table
}

/// `sha256:` and the first 12 hex digits, as Docker shows image IDs.
fn short_digest(digest: &str) -> String {
    let hex = digest.strip_prefix("sha256:").unwrap_or(digest);
    format!("sha256:{}", &hex[..hex.len().min(12)])
}

/// A size in decimal units, as `docker images` prints them.
fn human_size(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["B", "kB", "MB", "GB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1000.0 && unit < UNITS.len() - 1 {
        value /= 1000.0;
        unit += 1;
    }
    if unit == 0 { format!("{bytes}B") } else { format!("{value:.1}{}", UNITS[unit]) }
}

/// The current project's binary built with cargo profile `profile`:
/// `<cargo target dir>/<profile dir>/<project name>` (`dev` builds into `debug/`).
fn project_binary(profile: &str) -> Result<PathBuf, CliError> {
    let root = project_dir()?;
    let project = Project::load(&root)?;
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let metadata = std::process::Command::new(&cargo)
        .args(["metadata", "--format-version", "1", "--no-deps", "--quiet"])
        .current_dir(&root)
        .output()
        .map_err(|e| CliError::Build(format!("running {cargo} metadata: {e}")))?;
    if !metadata.status.success() {
        return Err(CliError::Build(format!(
            "{cargo} metadata failed: {}",
            String::from_utf8_lossy(&metadata.stderr).trim()
        )));
    }
    let target_dir = serde_json::from_slice::<serde_json::Value>(&metadata.stdout)
        .ok()
        .and_then(|v| v.get("target_directory").and_then(|d| d.as_str()).map(PathBuf::from))
        .ok_or_else(|| CliError::Build(format!("{cargo} metadata did not name the target directory")))?;
    let profile_dir = if profile == "dev" { "debug" } else { profile };
    let binary = target_dir.join(profile_dir).join(&project.project_name);
    if !binary.is_file() {
        return Err(CliError::Usage(format!(
            "{} does not exist; build it first (`make build` or `cargo build --profile {profile}`), or name a binary with --binary",
            binary.display()
        )));
    }
    Ok(binary)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_digests_print_as_docker_does() {
        assert_eq!(human_size(999), "999B");
        assert_eq!(human_size(12_345_678), "12.3MB");
        assert_eq!(short_digest("sha256:0123456789abcdef"), "sha256:0123456789ab");
        let image = LoadedImage {
            reference: "example.com/op:v1".into(),
            digest: "sha256:0123456789abcdef".into(),
            size: 2_000_000,
            loaded_at: "2026-11-26T01:00:00Z".into(),
            blob: "sha256-0123456789abcdef".into(),
            files: None,
            file_targets: Vec::new(),
        };
        let t = table(&[image], &[]);
        assert!(t.starts_with("IMAGE"), "{t}");
        assert_eq!(
            t,
            "IMAGE               DIGEST                 SIZE   LOADED\n\
             example.com/op:v1   sha256:0123456789ab   2.0MB   2026-11-26T01:00:00Z"
        );
        let t = table(&[], &[BuiltinImage::Busybox]);
        let row = t.lines().nth(1).unwrap_or_default();
        assert!(row.starts_with("docker.io/library/busybox:*   sha256:") && row.contains("   -   built-in: "), "{t}");
        assert!(t.ends_with("No images loaded. Load one with `opkit cluster load IMAGE --binary PATH`."), "{t}");
    }
}
