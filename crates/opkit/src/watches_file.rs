//! What the operators driven by an operator-sdk `watches.yaml` share (the Helm and Ansible
//! operators, operator-sdk's `helm` and `ansible` plugins): reading the file, Go's
//! `os.Expand` for the `$VAR` / `${VAR}` references in it, finding each watched kind's
//! resource, and the errors of those steps. The entries themselves differ per plugin and
//! are parsed by each operator.

use std::path::Path;

use kube::core::gvk::GroupVersionKind;
use kube::discovery::{ApiCapabilities, ApiResource};

use crate::discovery::{MappingError, RestMapper};

/// Why a watches file could not be used.
#[derive(Debug, thiserror::Error)]
pub enum WatchesError {
    /// The watches file could not be read.
    #[error("reading watches file {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The watches file is not valid.
    #[error("watches file {path}: {message}")]
    Invalid {
        /// The file.
        path: String,
        /// What is wrong, naming the entry and field.
        message: String,
    },
    /// The API server does not serve a watched kind (its CRD is not installed).
    #[error("the API server does not serve {group}/{version} {kind}; install its CRD first (make install): {source}")]
    KindNotServed {
        /// The group.
        group: String,
        /// The version.
        version: String,
        /// The kind.
        kind: String,
        /// The mapper's answer.
        source: Box<MappingError>,
    },
}

/// Reads the watches file at `path` and parses its text with `parse`, whose error message
/// becomes [`WatchesError::Invalid`].
pub fn load<T>(path: &Path, parse: impl FnOnce(&str) -> Result<T, String>) -> Result<T, WatchesError> {
    let text = std::fs::read_to_string(path)
        .map_err(|source| WatchesError::Read { path: path.display().to_string(), source })?;
    parse(&text).map_err(|message| WatchesError::Invalid { path: path.display().to_string(), message })
}

/// The resource of a watched kind, with its scope; [`WatchesError::KindNotServed`] when the
/// API server does not serve it.
pub async fn served_kind(
    mapper: &RestMapper,
    group: &str,
    version: &str,
    kind: &str,
) -> Result<(ApiResource, ApiCapabilities), WatchesError> {
    mapper.rest_mapping(&GroupVersionKind::gvk(group, version, kind)).await.map_err(|source| {
        WatchesError::KindNotServed {
            group: group.into(),
            version: version.into(),
            kind: kind.into(),
            source: Box::new(source),
        }
    })
}

/// Go's `os.Expand`: each `$NAME` and `${NAME}` in `text` replaced by `mapping(NAME)`. A
/// `$` not followed by a name, and `${` without its `}`, are kept as written.
pub fn expand(text: &str, mapping: &dyn Fn(&str) -> String) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        let reference = match after.strip_prefix('{') {
            Some(braced) => braced.find('}').map(|end| (&braced[..end], end + 2)),
            None => {
                let end = after.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).unwrap_or(after.len());
                (end > 0).then(|| (&after[..end], end))
            }
        };
        match reference {
            Some((name, len)) => {
                out.push_str(&mapping(name));
                rest = &after[len..];
            }
            None => {
                out.push('$');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::expand;

    #[test]
    fn expands_both_forms_and_keeps_what_is_not_a_reference() {
        let mapping = |name: &str| format!("<{name}>");
        assert_eq!(expand("a ${B} $C-d $ e ${f", &mapping), "a <B> <C>-d $ e ${f");
        assert_eq!(expand("$A_1x${}", &mapping), "<A_1x><>");
    }
}
