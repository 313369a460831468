//! Package archives as `kubectl kudo package create` writes them: a gzipped tar of the
//! package directory's regular files, paths relative to it (no top directory), with
//! reproducible headers (mtime 0, owner root), named by `Package::archive_name`
//! (`NAME-OPERATORVERSION.tgz` or `NAME-APPVERSION_OPERATORVERSION.tgz`).

use std::io::Read;
use std::path::Path;

/// The `.tgz` bytes of the package directory `dir` (regular files only, sorted).
pub fn write_tgz(dir: &Path) -> std::io::Result<Vec<u8>> {
    let mut files = Vec::new();
    collect(dir, dir, &mut files)?;
    files.sort();
    let gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    let mut tar = tar::Builder::new(gz);
    for rel in files {
        let data = std::fs::read(dir.join(&rel))?;
        let mut header = tar::Header::new_gnu();
        header.set_size(data.len() as u64);
        header.set_mode(0o644);
        header.set_mtime(0);
        header.set_uid(0);
        header.set_gid(0);
        header.set_username("root")?;
        header.set_groupname("root")?;
        header.set_entry_type(tar::EntryType::Regular);
        tar.append_data(&mut header, &rel, data.as_slice())?;
    }
    tar.into_inner()?.finish()
}

fn collect(root: &Path, dir: &Path, out: &mut Vec<String>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let kind = entry.file_type()?;
        let path = entry.path();
        if kind.is_dir() {
            collect(root, &path, out)?;
        } else if kind.is_file()
            && let Ok(rel) = path.strip_prefix(root)
        {
            out.push(rel.to_string_lossy().replace('\\', "/"));
        }
    }
    Ok(())
}

/// The regular files of a `.tgz`, with paths relative to the package root (a leading
/// `./` or a single top directory holding `operator.yaml` is dropped).
pub(crate) fn read_tgz(bytes: &[u8]) -> std::io::Result<Vec<(String, Vec<u8>)>> {
    let mut archive = tar::Archive::new(flate2::read::GzDecoder::new(bytes));
    let mut files = Vec::new();
    for entry in archive.entries()? {
        let mut entry = entry?;
        if !entry.header().entry_type().is_file() {
            continue;
        }
        let name = entry.path()?.to_string_lossy().trim_start_matches("./").to_string();
        let mut data = Vec::new();
        entry.read_to_end(&mut data)?;
        files.push((name, data));
    }
    let top = files
        .iter()
        .find_map(|(n, _)| n.strip_suffix("/operator.yaml").filter(|d| !d.contains('/')).map(str::to_string));
    if let Some(top) = top
        && !files.iter().any(|(n, _)| n == "operator.yaml")
    {
        let prefix = format!("{top}/");
        files = files.into_iter().filter_map(|(n, d)| n.strip_prefix(&prefix).map(|n| (n.to_string(), d))).collect();
    }
    Ok(files)
}
