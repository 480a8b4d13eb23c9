//! Which settings files a session in a directory reads, in order, and each one read once into
//! JSON or a problem that names its line. A missing file is simply not there; a project's file
//! that is a link leading out of the project is not read.

use std::path::{Path, PathBuf};

use serde::Serialize;

/// The largest settings file read; a bigger one is a problem, not a slow start.
pub const MAX_SETTINGS_BYTES: u64 = 1 << 20;

/// Where a settings file belongs: whose it is and which agent's format it is in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Origin {
    /// `~/.claude/settings.json` (`$CLAUDE_CONFIG_DIR/settings.json`).
    ClaudeUser,
    /// `~/.codex/hooks.json` (`$CODEX_HOME/hooks.json`).
    CodexUser,
    /// `settings.json` in oml's config folder.
    Oml,
    /// The project's `.claude/settings.json`, shared through its repository.
    ClaudeProject,
    /// The project's `.claude/settings.local.json`, the user's own for that project.
    ClaudeLocal,
    /// The project's `.codex/hooks.json`.
    CodexProject,
}

impl Origin {
    /// Whether the file comes with the project (and so is used only while it is trusted).
    pub fn project(self) -> bool {
        self.project_file().is_some()
    }

    /// A project's file: its path relative to the project root (one of
    /// [`crate::paths::PROJECT_SETUP_FILES`]).
    pub fn project_file(self) -> Option<&'static str> {
        match self {
            Origin::ClaudeProject => Some(".claude/settings.json"),
            Origin::ClaudeLocal => Some(".claude/settings.local.json"),
            Origin::CodexProject => Some(".codex/hooks.json"),
            Origin::ClaudeUser | Origin::CodexUser | Origin::Oml => None,
        }
    }
}

/// Why a settings file that exists could not be used.
#[derive(Debug, Clone, thiserror::Error)]
pub enum FileProblem {
    #[error("not read: a link leading out of the project (to {})", .0.display())]
    LeadsOut(PathBuf),
    #[error("cannot read it: {0}")]
    Unreadable(String),
    #[error("not read: {0} bytes, more than {MAX_SETTINGS_BYTES} (MAX_SETTINGS_BYTES)")]
    TooBig(u64),
    #[error("bad JSON at line {line}, column {column}: {message}")]
    BadJson {
        line: usize,
        column: usize,
        message: String,
    },
}

/// One settings file that exists: its JSON, or why it could not be used.
#[derive(Debug)]
pub struct SettingsFile {
    pub path: PathBuf,
    pub origin: Origin,
    pub value: Result<serde_json::Value, FileProblem>,
    /// The bytes read (empty when it could not be read): what trust is checked on.
    pub bytes: Vec<u8>,
}

/// The settings files for a session in `dir`, the user's first (Claude Code's, Codex's, oml's
/// in `config`), then the project's (its root, else `dir`), each only when it exists.
pub fn settings_files(config: &Path, dir: &Path) -> Vec<SettingsFile> {
    let root = crate::project::find_root(dir).unwrap_or_else(|| dir.to_path_buf());
    let mut wanted: Vec<(PathBuf, Origin)> = Vec::new();
    if let Some(claude) = crate::paths::claude_home() {
        wanted.push((claude.join("settings.json"), Origin::ClaudeUser));
    }
    if let Some(codex) = crate::paths::codex_home() {
        wanted.push((codex.join("hooks.json"), Origin::CodexUser));
    }
    wanted.push((config.join("settings.json"), Origin::Oml));
    for origin in [
        Origin::ClaudeProject,
        Origin::ClaudeLocal,
        Origin::CodexProject,
    ] {
        wanted.extend(origin.project_file().map(|name| (root.join(name), origin)));
    }
    wanted
        .into_iter()
        .filter(|(path, _)| std::fs::symlink_metadata(path).is_ok())
        .map(|(path, origin)| {
            let (bytes, value) = match read(&path, origin.project().then_some(root.as_path())) {
                Ok(bytes) => {
                    let value = parse(&bytes);
                    (bytes, value)
                }
                Err(why) => (Vec::new(), Err(why)),
            };
            SettingsFile {
                path,
                origin,
                value,
                bytes,
            }
        })
        .collect()
}

/// The bytes of the file at `path`, or why not; `project` is the root a project's file must
/// stay inside.
fn read(path: &Path, project: Option<&Path>) -> Result<Vec<u8>, FileProblem> {
    if let Some(real) = project.and_then(|root| crate::project::escapes(path, root)) {
        return Err(FileProblem::LeadsOut(real));
    }
    let unreadable = |e: std::io::Error| FileProblem::Unreadable(e.to_string());
    let file = crate::regular::open_regular(path).map_err(unreadable)?;
    let size = file.metadata().map(|m| m.len()).unwrap_or(0);
    if size > MAX_SETTINGS_BYTES {
        return Err(FileProblem::TooBig(size));
    }
    let mut bytes = Vec::new();
    std::io::Read::read_to_end(
        &mut std::io::Read::take(file, MAX_SETTINGS_BYTES),
        &mut bytes,
    )
    .map_err(unreadable)?;
    Ok(bytes)
}

/// The JSON of `bytes`, or where it is not JSON.
fn parse(bytes: &[u8]) -> Result<serde_json::Value, FileProblem> {
    serde_json::from_slice(bytes).map_err(|e| FileProblem::BadJson {
        line: e.line(),
        column: e.column(),
        message: e.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_json_names_its_line_and_a_link_out_of_the_project_is_not_read() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path().join("p");
        std::fs::create_dir_all(root.join(".git")).unwrap();
        std::fs::create_dir_all(root.join(".claude")).unwrap();
        std::fs::create_dir_all(root.join(".codex")).unwrap();
        std::fs::write(root.join(".claude/settings.json"), "{\n  \"hooks\": {,\n}").unwrap();
        std::fs::write(t.path().join("outside.json"), "{}").unwrap();
        std::os::unix::fs::symlink(
            t.path().join("outside.json"),
            root.join(".claude/settings.local.json"),
        )
        .unwrap();
        std::fs::write(root.join(".codex/hooks.json"), r#"{"hooks": {}}"#).unwrap();
        let files = settings_files(&t.path().join("config"), &root);
        let project: Vec<_> = files.iter().filter(|f| f.origin.project()).collect();
        assert_eq!(project.len(), 3, "{files:?}");
        let bad = project[0].value.as_ref().unwrap_err();
        assert!(matches!(bad, FileProblem::BadJson { line: 2, .. }), "{bad}");
        let link = project[1].value.as_ref().unwrap_err();
        assert!(matches!(link, FileProblem::LeadsOut(_)), "{link}");
        assert_eq!(
            project[2].value.as_ref().unwrap()["hooks"],
            serde_json::json!({})
        );
    }
}
