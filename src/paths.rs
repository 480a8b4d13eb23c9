//! Where oml keeps its files: the XDG base directories, resolved once from the environment.
//!
//! - config: `$XDG_CONFIG_HOME/oml` (`~/.config/oml`): `agents.fnl`, `init.fnl`, `lisp/`.
//! - state: `$XDG_STATE_HOME/oml` (`~/.local/state/oml`): REPL history, trusted directories,
//!   the REPL socket record, sessions, the answer to the agents offer, oml's git worktrees.
//! - cache: `$XDG_CACHE_HOME/oml` (`~/.cache/oml`): compiled Fennel, safe to delete.
//! - runtime: `$XDG_RUNTIME_DIR/oml` for sockets, else `<state>/run`.
//!
//! - the agent folders `~/.agents`, `~/.claude` and `~/.codex` ([`AGENT_DIRS`]), not oml's but
//!   loaded from: skills and commands (oml reads the first two), hooks and settings.
//!
//! This module only computes paths; it creates nothing except through `ensure_dir`, and knows
//! nothing about what the files contain.

use std::io;
use std::path::{Path, PathBuf};

use etcetera::BaseStrategy;

/// The directories of one oml process.
#[derive(Clone, Debug)]
pub struct Paths {
    pub config: PathBuf,
    pub state: PathBuf,
    pub cache: PathBuf,
    pub runtime: PathBuf,
}

impl Paths {
    /// Resolve from `XDG_*` and `HOME`. Without a home directory everything falls back to a folder
    /// under the system temp dir, so oml still starts.
    pub fn from_env() -> Paths {
        match etcetera::base_strategy::Xdg::new() {
            Ok(xdg) => {
                let state = xdg
                    .state_dir()
                    .unwrap_or_else(|| xdg.home_dir().join(".local/state"))
                    .join("oml");
                let runtime = xdg
                    .runtime_dir()
                    .map(|d| d.join("oml"))
                    .unwrap_or_else(|| state.join("run"));
                Paths {
                    config: xdg.config_dir().join("oml"),
                    cache: xdg.cache_dir().join("oml"),
                    state,
                    runtime,
                }
            }
            Err(_) => Self::under(&std::env::temp_dir().join("oml")),
        }
    }

    /// Every directory under one root; used when there is no home directory.
    pub fn under(root: &Path) -> Paths {
        Paths {
            config: root.join("config"),
            state: root.join("state"),
            cache: root.join("cache"),
            runtime: root.join("run"),
        }
    }

    pub fn user_init(&self) -> PathBuf {
        self.config.join("init.fnl")
    }

    /// The agent configuration oml may write once, on request (see docs/src/agents.md); loaded
    /// before `init.fnl`.
    pub fn agents_file(&self) -> PathBuf {
        self.config.join("agents.fnl")
    }

    /// The record of the answer to the offer to write `agents.fnl`, so it is asked once.
    pub fn agents_offer_record(&self) -> PathBuf {
        self.state.join("agents-offer")
    }

    pub fn user_lisp(&self) -> PathBuf {
        self.config.join("lisp")
    }

    pub fn fennel_cache(&self) -> PathBuf {
        self.cache.join("fennel")
    }

    pub fn trust_file(&self) -> PathBuf {
        self.state.join("trusted.json")
    }

    /// Where sessions are stored, one `<id>.jsonl` each.
    pub fn sessions_dir(&self) -> PathBuf {
        self.state.join("sessions")
    }

    pub fn history_file(&self) -> PathBuf {
        self.state.join("repl-history")
    }

    /// The terminal chat's input history (prompts, forms and commands).
    pub fn chat_history_file(&self) -> PathBuf {
        self.state.join("chat-history")
    }

    /// oml's git worktrees (`crate::project::worktree`), one folder per repository: the one
    /// part of oml's own folders that holds no code or trust of oml's, so a session working in
    /// one of them may write there (the sandbox and the write tools make that exception).
    pub fn worktrees_dir(&self) -> PathBuf {
        self.state.join("worktrees")
    }

    /// The file that records the socket of the most recently started REPL server.
    pub fn repl_socket_record(&self) -> PathBuf {
        self.state.join("repl-socket")
    }
}

impl Paths {
    /// oml's own folders, where it loads code (init files, compiled Fennel) and trust (trusted
    /// directories, saved permission rules, the REPL socket) from: no confined command may
    /// write beneath them (`crate::sandbox::Policy::protected`), but for a session's own
    /// worktree in [`Paths::worktrees_dir`].
    pub fn own_dirs(&self) -> [&Path; 4] {
        [&self.config, &self.state, &self.cache, &self.runtime]
    }
}

/// The folders in the home folder where oml and other coding agents load code and instructions
/// from: skills (with their `skill.fnl`, which oml runs in its own process), markdown commands,
/// sub-agents, hooks and settings (`~/.claude/settings.json` names programs Claude Code runs,
/// `~/.codex/config.toml` programs Codex runs). Like oml's own folders, no confined command may
/// write beneath them (`crate::sandbox::Policy::protected`).
pub const AGENT_DIRS: [&str; 3] = [".agents", ".claude", ".codex"];

/// The home folder (`$HOME`), where the [`AGENT_DIRS`] are, when it is set.
pub fn home_dir() -> Option<PathBuf> {
    std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from)
}

/// Claude Code's folder of the user: `$CLAUDE_CONFIG_DIR` when absolute, else `~/.claude`.
pub fn claude_home() -> Option<PathBuf> {
    moved_or_home("CLAUDE_CONFIG_DIR", ".claude")
}

/// Codex's folder of the user: `$CODEX_HOME` when absolute, else `~/.codex`.
pub fn codex_home() -> Option<PathBuf> {
    moved_or_home("CODEX_HOME", ".codex")
}

/// A relative `var` is not used: read against the folder oml runs in, it would make a
/// project's own `.claude/` or `.codex/` the user's, whose hooks run untrusted.
fn moved_or_home(var: &str, name: &str) -> Option<PathBuf> {
    std::env::var_os(var)
        .map(PathBuf::from)
        .filter(|d| d.is_absolute())
        .or_else(|| home_dir().map(|h| h.join(name)))
}

/// The variables that move an agent folder elsewhere: Claude Code's `CLAUDE_CONFIG_DIR` (in
/// place of `~/.claude`) and Codex's `CODEX_HOME` (in place of `~/.codex`).
pub const AGENT_DIR_VARS: [&str; 2] = ["CLAUDE_CONFIG_DIR", "CODEX_HOME"];

/// The [`AGENT_DIRS`] in the home folder, whether they exist or not (none without a home), and
/// the folders [`AGENT_DIR_VARS`] name, when set.
pub fn agent_dirs() -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = home_dir()
        .map(|home| AGENT_DIRS.iter().map(|d| home.join(d)).collect())
        .unwrap_or_default();
    let moved = AGENT_DIR_VARS.iter().filter_map(std::env::var_os);
    dirs.extend(moved.filter(|d| !d.is_empty()).map(PathBuf::from));
    dirs
}

/// The files of a project, relative to its root, that carry code or grants other agents' tools
/// defined: Claude Code's settings (hooks run commands, permission rules), Codex's hooks and a
/// project's MCP servers. `oml trust` covers them, so a changed one is not used until trusted
/// again.
pub const PROJECT_SETUP_FILES: [&str; 4] = [
    ".claude/settings.json",
    ".claude/settings.local.json",
    ".codex/hooks.json",
    ".mcp.json",
];

/// The project-local init file and load path of a directory.
pub fn project_init(dir: &Path) -> PathBuf {
    dir.join(".oml").join("init.fnl")
}

pub fn project_lisp(dir: &Path) -> PathBuf {
    dir.join(".oml").join("lisp")
}

/// Why a folder may not hold oml's sockets ([`check_private_dir`]).
#[derive(Debug, thiserror::Error)]
pub enum PrivateDirError {
    /// Its metadata could not be read (it is missing, say).
    #[error(transparent)]
    Unreadable(#[from] io::Error),
    /// It is a file, or a symbolic link.
    #[error("it is not a directory")]
    NotADirectory,
    /// Another user owns it.
    #[error("it belongs to user {owner}, not to user {me}")]
    NotOurs { owner: u32, me: u32 },
    /// Group or others may use it (`mode` holds its permission bits).
    #[error("its mode is {mode:o}: group or others can use it")]
    Open { mode: u32 },
}

/// Why `dir` may not hold oml's sockets, or `Ok`: it must be a real directory (not a link),
/// owned by this user, that neither group nor others can write or enter — what ssh-agent and
/// tmux ask of theirs, so nobody else can put a socket in oml's place or reach oml's.
pub fn check_private_dir(dir: &Path) -> Result<(), PrivateDirError> {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let meta = std::fs::symlink_metadata(dir)?;
    if !meta.is_dir() {
        return Err(PrivateDirError::NotADirectory);
    }
    let me = rustix::process::geteuid().as_raw();
    if meta.uid() != me {
        return Err(PrivateDirError::NotOurs {
            owner: meta.uid(),
            me,
        });
    }
    let mode = meta.permissions().mode() & 0o777;
    if mode & 0o077 != 0 {
        return Err(PrivateDirError::Open { mode });
    }
    Ok(())
}

/// Create `dir` (and parents) with mode 0700 when it is missing.
pub fn ensure_private_dir(dir: &Path) -> io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    if dir.is_dir() {
        return Ok(());
    }
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
}
