//! Path resolution shared by the file tools: the model's `path` argument becomes one absolute
//! path, lexically (`resolve_path`) or for real (`resolve_real`, `real_path`).
//!
//! Rules (the original's): a blank path is an error; a leading `~` (alone or followed by `/`)
//! means the home directory (`$HOME`); an absolute path is kept; a relative path is taken against
//! the session's working directory; `.` and `..` are then folded away lexically.
//!
//! `resolve_real` then follows every symbolic link in the result, the way the kernel would, and
//! returns the path with none left: an existing file's real path, or for a new file its nearest
//! existing ancestor's real path plus the names below it (a dangling link is followed to where
//! it points, so a new file "through" it is the file it would create). That real path is what a
//! permission policy checks and what `write` and `edit` then use (`atomic.rs` opens it without
//! following any link, so a link swapped in after the check makes the write fail).
//!
//! It deliberately knows nothing of confinement: any path is allowed (a permission policy, if
//! any, lives above the tools). `~user` is not expanded (it is an ordinary relative name).
//!
//! Compare with pi: `packages/coding-agent/src/core/tools/path-utils.ts` (`resolveToCwd`).
//! Compare with oml.clj: `oml.session/resolve-path`.

use std::ffi::OsString;
use std::path::{Component, Path, PathBuf};

use super::ToolError;

/// Symbolic links followed at most while resolving one path, the kernel's own limit
/// (`MAXSYMLINKS` on Linux): more is a loop, or as good as one.
pub const MAX_LINK_FOLLOWS: usize = 40;

/// Resolve the model's `path` argument against `cwd`, lexically: no file is looked at.
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

/// [`resolve_path`], then [`real_path`]: the file the path names once every link is followed.
pub fn resolve_real(cwd: &Path, path: &str) -> Result<PathBuf, ToolError> {
    real_path(&resolve_path(cwd, path)?)
}

/// The absolute `path` with every symbolic link followed, as the kernel follows them: each name
/// is looked at in turn (`lstat`), a link's target replaces it (a relative target against the
/// link's real folder, its `..` climbing from there), and from the first name that does not
/// exist on, the rest is taken as it is. The result holds no link, `.` or `..`.
///
/// Errors: more than [`MAX_LINK_FOLLOWS`] links ([`ToolError::TooManyLinks`]), a link that
/// cannot be read.
pub fn real_path(path: &Path) -> Result<PathBuf, ToolError> {
    let path = normalize(path);
    // The names still to walk, the next one last.
    let mut todo: Vec<OsString> = names_reversed(&path);
    let mut out = PathBuf::from("/");
    let mut follows = 0;
    while let Some(name) = todo.pop() {
        if name == ".." {
            out.pop();
            continue;
        }
        let next = out.join(&name);
        match std::fs::symlink_metadata(&next) {
            Ok(meta) if meta.file_type().is_symlink() => {
                follows += 1;
                if follows > MAX_LINK_FOLLOWS {
                    return Err(ToolError::TooManyLinks(path));
                }
                let target = std::fs::read_link(&next)
                    .map_err(|e| ToolError::io("read the link", &next, e))?;
                if target.is_absolute() {
                    out = PathBuf::from("/");
                }
                todo.extend(names_reversed(&target));
            }
            // A name that exists, or one that does not (nor anything below it, unless a later
            // `..` climbs back out, which is walked like any other name).
            _ => out = next,
        }
    }
    Ok(out)
}

// --- private helpers

/// The names of `path` (`..` kept, `.` and the root dropped), last first.
fn names_reversed(path: &Path) -> Vec<OsString> {
    let mut names: Vec<OsString> = path
        .components()
        .filter_map(|c| match c {
            Component::Normal(name) => Some(name.to_os_string()),
            Component::ParentDir => Some(OsString::from("..")),
            _ => None,
        })
        .collect();
    names.reverse();
    names
}

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

    #[test]
    fn real_paths_follow_every_link() {
        use std::os::unix::fs::symlink;
        let t = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(t.path()).unwrap();
        let (ws, out) = (base.join("ws"), base.join("out"));
        std::fs::create_dir_all(ws.join("real")).unwrap();
        std::fs::create_dir_all(&out).unwrap();
        symlink(&out, ws.join("h")).unwrap();
        symlink("../out/new.txt", ws.join("dangling")).unwrap();
        symlink("real/../h", ws.join("twisted")).unwrap();
        symlink("loop", ws.join("loop")).unwrap();
        let cases = [
            ("h/.bashrc", out.join(".bashrc")),
            ("h/a/b", out.join("a/b")),
            ("dangling", out.join("new.txt")),
            ("twisted/x", out.join("x")),
            ("real/new/deeper", ws.join("real/new/deeper")),
            // The model's own `..` folds lexically first (as `resolve_path` always did): `h/..`
            // is the workspace, whatever `h` points at.
            ("h/../real", ws.join("real")),
        ];
        for (input, expected) in cases {
            assert_eq!(resolve_real(&ws, input).ok(), Some(expected), "{input}");
        }
        assert!(matches!(
            resolve_real(&ws, "loop/x"),
            Err(ToolError::TooManyLinks(_))
        ));
    }
}
