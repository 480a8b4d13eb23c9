//! `oml ask`'s session owners: one small background process per (agent, directory, session
//! name) that keeps an external ACP agent and its session alive between prompts given from any
//! shell, runs those prompts one after another in the order they came, and ends a while after
//! the last one.
//!
//! - [`wire`]: the typed NDJSON messages between an asking process and an owner;
//! - [`record`]: what is kept of a persistent session on disk (its id, its prompts);
//! - [`worker`]: the agent connection, its session, and one prompt run as a stream of events;
//! - [`owner`]: the owner process — its lock, its socket, the queue, the time-to-live;
//! - [`asker`]: the asking side — reach the owner, starting it when there is none.
//!
//! The owner's socket lives in oml's runtime folder (mode 0700, the socket 0600), which the
//! sandbox hides from every confined command. This module knows the ACP client and the paths;
//! it knows nothing of Lisp (an agent's name is resolved to a command by whoever starts the
//! owner), of terminals or of how events are printed (`front::ask`).

pub mod asker;
pub mod owner;
pub mod record;
pub mod wire;
pub mod worker;

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

use crate::paths::Paths;

/// The argument that makes the `oml` binary an owner (`main.rs` dispatches it before clap).
pub const OWNER_ARG: &str = "__ask-owner";
/// How long an owner keeps its agent after the last prompt, unless `--ttl` says otherwise.
pub const DEFAULT_TTL: Duration = Duration::from_secs(300);
/// The session name when `-s` is not given.
pub const DEFAULT_SESSION: &str = "default";
/// How many prompts a record keeps in its history (the oldest go first).
pub const HISTORY_KEEP: usize = 50;

/// Which session: the agent as the user named it (a name, or `--agent`'s command line), the
/// directory, and the session's name. Two shells that give the same three reach one owner.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Key {
    pub agent: String,
    pub cwd: PathBuf,
    pub name: String,
}

impl Key {
    /// The key's file stem: 16 hex digits of a SHA-256 over its three parts, short enough for
    /// a socket path (at most 108 bytes) under any runtime folder.
    pub fn stem(&self) -> String {
        let mut hash = Sha256::new();
        for part in [
            self.agent.as_bytes(),
            self.cwd.as_os_str().as_encoded_bytes(),
            self.name.as_bytes(),
        ] {
            hash.update(part);
            hash.update([0]);
        }
        hash.finalize()[..8]
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    }
}

/// Where one key's files are.
#[derive(Clone, Debug)]
pub struct Place {
    /// `<runtime>/ask`, mode 0700.
    pub run_dir: PathBuf,
    pub socket: PathBuf,
    /// Held (`flock`) by the running owner for its whole life.
    pub lock: PathBuf,
    /// `<state>/ask/<stem>.json`: the session's id and history, kept after the owner ends.
    pub record: PathBuf,
    /// The owner's stderr.
    pub log: PathBuf,
}

impl Place {
    pub fn of(paths: &Paths, key: &Key) -> Place {
        let stem = key.stem();
        let run_dir = paths.runtime.join("ask");
        let state = records_dir(paths);
        Place {
            socket: run_dir.join(format!("{stem}.sock")),
            lock: run_dir.join(format!("{stem}.lock")),
            record: state.join(format!("{stem}.json")),
            log: state.join(format!("{stem}.log")),
            run_dir,
        }
    }
}

/// `<state>/ask`: every key's record and log.
pub fn records_dir(paths: &Paths) -> PathBuf {
    paths.state.join("ask")
}

/// Everything an owner needs to start: the key, its files, and how to start the agent
/// (resolved by the caller, which may need the Lisp image for a `client.defagent` name).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct OwnerSpec {
    pub key: Key,
    pub agent: AgentCommand,
    /// `false` for `exec`: the session is neither recorded nor loaded.
    pub persistent: bool,
    pub state_dir: PathBuf,
    pub runtime_dir: PathBuf,
}

impl OwnerSpec {
    pub fn place(&self) -> Place {
        let paths = Paths {
            config: PathBuf::new(),
            cache: PathBuf::new(),
            state: self.state_dir.clone(),
            runtime: self.runtime_dir.clone(),
        };
        Place::of(&paths, &self.key)
    }
}

/// The agent's command line and extra environment.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentCommand {
    pub command: String,
    #[serde(default)]
    pub args: Vec<String>,
    #[serde(default)]
    pub env: Vec<(String, String)>,
}

/// Why an `--agent` line names no command.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum BadAgentLine {
    #[error("--agent needs a command")]
    Empty,
    #[error("--agent: a single quote is not closed")]
    OpenSingleQuote,
    #[error("--agent: a double quote is not closed")]
    OpenDoubleQuote,
}

impl AgentCommand {
    /// `--agent 'COMMAND ARGS…'`, split the way a shell splits words (quotes, backslashes).
    pub fn parse(line: &str) -> Result<AgentCommand, BadAgentLine> {
        let words = shell_words(line)?;
        let mut words = words.into_iter();
        let command = words.next().ok_or(BadAgentLine::Empty)?;
        Ok(AgentCommand {
            command,
            args: words.collect(),
            env: Vec::new(),
        })
    }
}

/// Splits LINE into words: blanks separate, single quotes keep everything, double quotes keep
/// all but `\"` and `\\`, a backslash outside quotes keeps the next character.
fn shell_words(line: &str) -> Result<Vec<String>, BadAgentLine> {
    let mut words = Vec::new();
    let mut word: Option<String> = None;
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            c if c.is_whitespace() => words.extend(word.take()),
            '\'' => {
                let w = word.get_or_insert_with(String::new);
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(c) => w.push(c),
                        None => return Err(BadAgentLine::OpenSingleQuote),
                    }
                }
            }
            '"' => {
                let w = word.get_or_insert_with(String::new);
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => match chars.next() {
                            Some(c @ ('"' | '\\')) => w.push(c),
                            Some(c) => {
                                w.push('\\');
                                w.push(c);
                            }
                            None => return Err(BadAgentLine::OpenDoubleQuote),
                        },
                        Some(c) => w.push(c),
                        None => return Err(BadAgentLine::OpenDoubleQuote),
                    }
                }
            }
            '\\' => {
                let w = word.get_or_insert_with(String::new);
                w.extend(chars.next());
            }
            c => word.get_or_insert_with(String::new).push(c),
        }
    }
    words.extend(word);
    Ok(words)
}

/// The directory as the key names it: absolute, links resolved where it exists.
pub fn key_dir(dir: &Path) -> PathBuf {
    std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agent_command_lines_split_like_a_shell() {
        let cases: &[(&str, &[&str])] = &[
            ("oml acp", &["oml", "acp"]),
            (
                "  a   'b c'  \"d \\\"e\\\"\" f\\ g",
                &["a", "b c", "d \"e\"", "f g"],
            ),
            ("x ''", &["x", ""]),
        ];
        for (line, want) in cases {
            let got = shell_words(line).unwrap();
            assert_eq!(got, want.to_vec(), "{line}");
        }
        assert_eq!(shell_words("a 'b"), Err(BadAgentLine::OpenSingleQuote));
        assert_eq!(AgentCommand::parse("   "), Err(BadAgentLine::Empty));
    }

    #[test]
    fn keys_differ_by_each_part_and_fit_a_socket_path() {
        let k = |a: &str, d: &str, n: &str| Key {
            agent: a.into(),
            cwd: d.into(),
            name: n.into(),
        };
        let base = k("codex", "/src/x", "default").stem();
        assert_eq!(base.len(), 16);
        for other in [
            k("claude", "/src/x", "default"),
            k("codex", "/src/y", "default"),
            k("codex", "/src/x", "b"),
        ] {
            assert_ne!(other.stem(), base);
        }
        // The separator keeps ("ab", "c") apart from ("a", "bc").
        assert_ne!(k("ab", "/c", "d").stem(), k("a", "b/c", "d").stem());
    }
}
