//! Sub-agent definitions as users already write them: Claude Code's `*.md` (YAML front matter,
//! the body the sub-agent's system prompt; `agent_md`) and Codex's `*.toml` (`agent_toml`), in
//! the project's `.oml/agents`, `.claude/agents` and `.codex/agents` (nearest the working
//! directory first, up to the project root), then the user's `agents` folder of oml's config
//! folder, `~/.claude/agents` (`$CLAUDE_CONFIG_DIR/agents`) and `~/.codex/agents`
//! (`$CODEX_HOME/agents`). The project comes before the user, as in Claude Code.
//!
//! As for skills: the first of a name wins, later ones are listed as shadowed; a file that cannot
//! be read as a definition is a [`Problem`] naming its line and is skipped; a field that is
//! wrong (an unknown tool, an unknown permission mode) is a problem too, and the definition is
//! kept without it. A project's file that is a link leading out of the project is not read.
//! Tool names are mapped to oml's (`Read` → `read`, `Glob` → `find`, …); a lower-case name and
//! `mcp__server__tool` are kept as written, for the caller to check against the tools it has.
//!
//! It knows nothing of Lisp, sessions or trust: what a definition may grant is the caller's
//! decision (`agent.granted`, in `src/agent/agents.fnl`).

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::Value;

use super::agent_md;
use super::agent_toml;
use super::skills::{self, Folder, Found, Problem};

/// A project's definition folders, in precedence order, at each level from the working
/// directory up to the project root.
pub const PROJECT_AGENT_DIRS: [&str; 3] = [TRUSTED_AGENT_DIR, ".claude/agents", ".codex/agents"];
/// The project folder whose files `oml trust` records (`crate::lisp::init`), at the root.
pub const TRUSTED_AGENT_DIR: &str = ".oml/agents";
/// The user's definition folder inside oml's config folder.
pub const USER_AGENT_DIR: &str = "agents";
/// Definitions (found and shadowed) one discovery keeps at most.
pub const MAX_FOUND: usize = 500;
/// Characters of a description kept.
pub const MAX_DESCRIPTION_CHARS: usize = 1024;
/// Entries of one list field (`tools`, `skills`, `mcpServers`, …) kept at most.
pub const MAX_LIST: usize = 256;

/// Claude Code's tool names and oml's for the same tool. `WebFetch`, `WebSearch` and
/// `NotebookEdit` have none: oml has no such tool, and naming one is a problem.
pub const CLAUDE_TOOLS: [(&str, &str); 13] = [
    ("Read", "read"),
    ("Grep", "grep"),
    ("Glob", "find"),
    ("Bash", "bash"),
    ("Edit", "edit"),
    ("MultiEdit", "edit"),
    ("Write", "write"),
    ("LS", "ls"),
    ("Task", "task"),
    ("Agent", "task"),
    ("TodoWrite", "update_plan"),
    ("Skill", "skill"),
    ("AskUserQuestion", "ask_user"),
];

/// Claude Code's permission modes and oml's for each. `dontAsk` (refuse whatever would ask) has
/// no exact match: `read-only` is the nearest mode that never asks and never grants more.
pub const CLAUDE_MODES: [(&str, &str); 5] = [
    ("default", "ask"),
    ("acceptEdits", "accept-edits"),
    ("bypassPermissions", "yolo"),
    ("plan", "read-only"),
    ("dontAsk", "read-only"),
];

/// oml's permission modes, as `agent.permission-modes` names them.
pub const OML_MODES: [&str; 4] = ["read-only", "ask", "accept-edits", "yolo"];

/// Codex's `sandbox_mode` values.
pub const CODEX_SANDBOX_MODES: [&str; 3] = ["read-only", "workspace-write", "danger-full-access"];

/// One sub-agent definition, as the Lisp face shows it (kebab-case keys; an absent field is
/// absent).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct AgentDef {
    pub name: String,
    pub description: String,
    /// The sub-agent's system prompt: the markdown body, or `developer_instructions`.
    pub prompt: String,
    /// oml tool names; absent means every tool.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tools: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub disallowed_tools: Option<Vec<String>>,
    /// Absent (or `inherit`): the parent's model.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// One of [`OML_MODES`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub permission_mode: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_turns: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub skills: Option<Vec<String>>,
    /// Each `{"name": …}` (a server configured elsewhere) or `{"name": …, "command"|"url": …}`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mcp_servers: Option<Vec<Value>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub background: Option<bool>,
    /// Only `worktree`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub isolation: Option<String>,
    /// An ACP agent to drive instead of a model.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub acp: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reasoning_effort: Option<String>,
    /// One of [`CODEX_SANDBOX_MODES`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sandbox_mode: Option<String>,
    /// The file it was read from.
    pub source: String,
    /// The line it starts on (1).
    pub line: usize,
    /// Whether it is from the project's folders.
    #[serde(rename = "project?")]
    pub project: bool,
    /// Whether it is a file `oml trust` covers (the root's [`TRUSTED_AGENT_DIR`], which
    /// confined commands cannot write either): only such a project definition may start MCP
    /// servers of its own.
    #[serde(rename = "trust-covered?")]
    pub trust_covered: bool,
    /// The line of each list field of tool names (`tools`, `disallowed-tools`), for problems
    /// found later (a lower-case name the caller has no tool for).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub lines: BTreeMap<String, usize>,
}

/// A definition read, with what was wrong in fields it was kept without.
pub struct Read {
    pub def: AgentDef,
    pub problems: Vec<Problem>,
}

/// The user's definition folders: oml's (in `config`), Claude Code's, Codex's.
pub fn user_folders(config: &Path) -> Vec<Folder> {
    let claude = crate::paths::claude_home();
    let codex = crate::paths::codex_home();
    let mut dirs = vec![config.join(USER_AGENT_DIR)];
    dirs.extend(claude.map(|d| d.join(USER_AGENT_DIR)));
    dirs.extend(codex.map(|d| d.join(USER_AGENT_DIR)));
    dirs.into_iter()
        .map(|dir| Folder {
            dir,
            project_root: None,
        })
        .collect()
}

/// The folders for a session in `dir`: the project's from `dir` up to its root (`dir` itself
/// outside any project), then the user's.
pub fn folders(config: &Path, dir: &Path) -> Vec<Folder> {
    let root = super::find_root(dir).unwrap_or_else(|| dir.to_path_buf());
    let mut out = skills::project_folders(&root, dir, &PROJECT_AGENT_DIRS);
    out.extend(user_folders(config));
    out
}

/// The definitions of `folders`, in precedence order.
pub fn agent_defs(folders: &[Folder]) -> Found<AgentDef> {
    let mut out = Found::default();
    let mut names = HashSet::new();
    for folder in folders {
        let linked = skills::leads_out(folder);
        let Ok(entries) = std::fs::read_dir(&folder.dir) else {
            continue;
        };
        let mut files: Vec<(PathBuf, bool)> = entries
            .flatten()
            .filter(|e| !e.file_name().as_encoded_bytes().starts_with(b"."))
            .filter(|e| format_of(&e.path()).is_some())
            .map(|e| (e.path(), e.file_type().is_ok_and(|k| k.is_symlink())))
            .collect();
        files.sort();
        for (file, link) in files {
            if out.found.len() + out.shadowed.len() >= MAX_FOUND {
                return out;
            }
            match read_def(folder, &file, linked || link) {
                Ok(read) => {
                    out.problems.extend(read.problems);
                    if names.insert(read.def.name.clone()) {
                        out.found.push(read.def);
                    } else {
                        out.shadowed.push(read.def);
                    }
                }
                Err(p) => out.problems.push(p),
            }
        }
    }
    out
}

/// The two formats, by the file's extension.
#[derive(Clone, Copy)]
enum Format {
    Markdown,
    Toml,
}

fn format_of(file: &Path) -> Option<Format> {
    match file.extension()?.to_str()? {
        "md" => Some(Format::Markdown),
        "toml" => Some(Format::Toml),
        _ => None,
    }
}

/// The definition in `file` of `folder` (a link on its way checked when `linked`).
fn read_def(folder: &Folder, file: &Path, linked: bool) -> Result<Read, Problem> {
    let text = skills::read_text(folder, file, linked)?;
    let mut read = match format_of(file) {
        Some(Format::Toml) => agent_toml::parse(&text, file)?,
        _ => agent_md::parse(&text, file)?,
    };
    read.def.project = folder.project_root.is_some();
    read.def.trust_covered = folder
        .project_root
        .as_ref()
        .is_some_and(|root| folder.dir == root.join(TRUSTED_AGENT_DIR));
    Ok(read)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_project_comes_first_and_a_name_shadows_the_next() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path().join("p");
        let config = t.path().join("config");
        std::fs::create_dir_all(root.join(".git")).unwrap();
        let write = |dir: &Path, file: &str, text: &str| {
            std::fs::create_dir_all(dir).unwrap();
            std::fs::write(dir.join(file), text).unwrap();
        };
        write(
            &root.join(".claude/agents"),
            "r.md",
            "---\ndescription: project\n---\nP\n",
        );
        write(
            &config.join("agents"),
            "r.md",
            "---\ndescription: user\n---\nU\n",
        );
        write(
            &root.join(".codex/agents"),
            "c.toml",
            "description = \"codex\"\n",
        );
        write(
            &root.join(".claude/agents"),
            "bad.md",
            "---\nname: a b\ndescription: x\n---\n",
        );
        let mut dirs = skills::project_folders(&root, &root, &PROJECT_AGENT_DIRS);
        dirs.push(Folder {
            dir: config.join(USER_AGENT_DIR),
            project_root: None,
        });
        let found = agent_defs(&dirs);
        let names: Vec<_> = found
            .found
            .iter()
            .map(|d| (d.name.as_str(), d.project))
            .collect();
        assert_eq!(names, [("r", true), ("c", true)]);
        assert_eq!(found.found[0].prompt, "P\n");
        assert_eq!(found.shadowed[0].description, "user");
        assert_eq!(found.problems.len(), 1, "{:?}", found.problems);
        assert_eq!(found.problems[0].line, 2);
    }

    #[test]
    fn a_project_file_that_links_out_of_the_project_is_not_read() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path().join("p");
        std::fs::create_dir_all(root.join(".git")).unwrap();
        std::fs::create_dir_all(root.join(".claude/agents")).unwrap();
        let outside = t.path().join("secret.md");
        std::fs::write(&outside, "---\ndescription: secret\n---\nkey\n").unwrap();
        std::os::unix::fs::symlink(&outside, root.join(".claude/agents/x.md")).unwrap();
        let found = agent_defs(&skills::project_folders(&root, &root, &PROJECT_AGENT_DIRS));
        assert!(found.found.is_empty(), "{:?}", found.found);
        assert!(
            found.problems[0]
                .message
                .contains("leads out of the project")
        );
    }
}
