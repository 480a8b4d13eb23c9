//! Path resolution shared by the file tools: the model's `path` argument becomes one absolute,
//! lexically normalised path.
//!
//! Rules (the original's): a blank path is an error; a leading `~` (alone or followed by `/`)
//! means the home directory (`$HOME`); an absolute path is kept; a relative path is taken against
//! the session's working directory; `.` and `..` are then folded away lexically.
//!
//! It deliberately knows nothing of confinement: any path is allowed (a permission policy, if
//! any, lives above the tools). It does not touch the file system, so symlinks are not resolved,
//! and `~user` is not expanded (it is an ordinary relative name).
//!
//! Compare with pi: `packages/coding-agent/src/core/tools/path-utils.ts` (`resolveToCwd`).
//! Compare with oml.clj: `oml.session/resolve-path`.

use std::path::{Component, Path, PathBuf};

use super::ToolError;

/// Resolve the model's `path` argument against `cwd`.
///
/// Errors: a blank `path` gives "path is required"; a `~` path with `HOME` unset is an error too.
pub fn resolve_path(cwd: &Path, path: &str) -> Result<PathBuf, ToolError> {
    if path.trim().is_empty() {
        return Err(ToolError::PathRequired);
    }
    let joined = match path.strip_prefix('~') {
        Some(rest) if rest.is_empty() || rest.starts_with('/') => {
            let home = std::env::var_os("HOME")
                .filter(|home| !home.is_empty())
                .ok_or_else(|| ToolError::NoHome {
                    path: path.to_owned(),
                })?;
            PathBuf::from(home).join(rest.trim_start_matches('/'))
        }
        _ => cwd.join(path),
    };
    Ok(normalize(&joined))
}

// --- private helpers

/// Fold `.` and `..` away without touching the file system; `..` never climbs above the root.
/// A relative input (only possible when `cwd` itself is relative) is made absolute against the
/// process's current directory first.
fn normalize(path: &Path) -> PathBuf {
    let absolute = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    let mut out = PathBuf::new();
    for component in absolute.components() {
        match component {
            Component::Prefix(_) | Component::RootDir => out.push(component),
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            Component::Normal(name) => out.push(name),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_resolve_like_the_original() {
        let home = std::env::var("HOME").unwrap_or_default();
        let cases: &[(&str, String)] = &[
            ("a.txt", "/work/proj/a.txt".into()),
            ("./src/../b.rs", "/work/proj/b.rs".into()),
            ("../../../../etc/passwd", "/etc/passwd".into()),
            ("/tmp//x/./y/..", "/tmp/x".into()),
            ("~", home.clone()),
            ("~/notes.md", format!("{home}/notes.md")),
            ("~user/x", "/work/proj/~user/x".into()),
            ("dir/", "/work/proj/dir".into()),
        ];
        for (input, expected) in cases {
            let resolved = resolve_path(Path::new("/work/proj"), input);
            assert_eq!(
                resolved.ok(),
                Some(PathBuf::from(expected)),
                "resolving {input:?}"
            );
        }
    }

    #[test]
    fn a_blank_path_is_refused() {
        for blank in ["", "   ", "\t\n"] {
            let error = resolve_path(Path::new("/work"), blank).err();
            assert_eq!(
                error.map(|e| e.to_string()).as_deref(),
                Some("path is required")
            );
        }
    }
}
