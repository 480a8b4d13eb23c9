//! The catalog of known ACP agents, discovery on `PATH`, and the Fennel configuration oml
//! proposes for what it finds (see docs/src/agents.md).
//!
//! The catalog is data: one `Entry` per agent, in `ENTRIES`. Discovery looks on `PATH` for the
//! catalog's command names only (executable regular files, first match wins). It never scans
//! other executables, installs or downloads anything, queries a network registry, or edits
//! configuration; proposing configuration means returning text for the user to review.

pub mod offer;

use std::ffi::OsStr;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// Whether an agent needs authentication before `session/new` (as the ACP registry's probe of
/// 2026-08-20 saw it with no credentials), and how it is done.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Auth {
    /// `session/new` works without logging in first.
    NotRequired,
    /// `session/new` fails until the user authenticates; `how` says how.
    Required { how: &'static str },
    /// Not probed, or the result is not known.
    Unknown,
}

impl Auth {
    pub fn as_str(self) -> &'static str {
        match self {
            Auth::NotRequired => "none",
            Auth::Required { .. } => "required",
            Auth::Unknown => "unknown",
        }
    }

    pub fn how(self) -> &'static str {
        match self {
            Auth::Required { how } => how,
            _ => "",
        }
    }
}

/// One known ACP agent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Entry {
    /// A short identifier: lowercase letters, digits and dashes (`claude`, `gemini`).
    pub id: &'static str,
    pub name: &'static str,
    /// The command names to look for on `PATH`, preferred first.
    pub commands: &'static [&'static str],
    /// The arguments that start ACP mode on stdio.
    pub args: &'static [&'static str],
    /// Variables to set when launching it (part of the proposed configuration).
    pub env: &'static [(&'static str, &'static str)],
    /// Variables the agent reads for its own provider and credentials (informational).
    pub env_hints: &'static [&'static str],
    pub auth: Auth,
    /// Empty for oml itself, which has no separate home.
    pub homepage: &'static str,
}

/// The id of oml itself, always available as the running binary.
pub const OML_ID: &str = "oml";

const fn entry(
    id: &'static str,
    name: &'static str,
    commands: &'static [&'static str],
    args: &'static [&'static str],
    auth: Auth,
    homepage: &'static str,
) -> Entry {
    Entry {
        id,
        name,
        commands,
        args,
        env: &[],
        env_hints: &[],
        auth,
        homepage,
    }
}

const AGENT_AUTH: Auth = Auth::Required {
    how: "the agent's own login or API key (ACP authenticate)",
};
const TERMINAL_AUTH: Auth = Auth::Required {
    how: "log in once in a terminal with the agent's own command",
};

/// The known ACP agents (commands and arguments from the ACP registry and the agents' docs,
/// late 2026). oml is last.
pub static ENTRIES: &[Entry] = &[
    Entry {
        env_hints: &[
            "ANTHROPIC_API_KEY",
            "ANTHROPIC_AUTH_TOKEN",
            "ANTHROPIC_BASE_URL",
        ],
        ..entry(
            "claude",
            "Claude Agent",
            &["claude-agent-acp", "claude-code-acp"],
            &[],
            Auth::NotRequired,
            "https://github.com/agentclientprotocol/claude-agent-acp",
        )
    },
    Entry {
        env_hints: &[
            "CODEX_API_KEY",
            "OPENAI_API_KEY",
            "MODEL_PROVIDER",
            "CODEX_CONFIG",
        ],
        ..entry(
            "codex",
            "Codex",
            &["codex-acp"],
            &[],
            AGENT_AUTH,
            "https://github.com/agentclientprotocol/codex-acp",
        )
    },
    Entry {
        env_hints: &["GEMINI_API_KEY"],
        ..entry(
            "gemini",
            "Gemini CLI",
            &["gemini"],
            &["--acp"],
            AGENT_AUTH,
            "https://github.com/google-gemini/gemini-cli",
        )
    },
    Entry {
        env_hints: &["OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_MODEL"],
        ..entry(
            "qwen",
            "Qwen Code",
            &["qwen"],
            &["--acp"],
            AGENT_AUTH,
            "https://github.com/QwenLM/qwen-code",
        )
    },
    entry(
        "opencode",
        "OpenCode",
        &["opencode"],
        &["acp"],
        Auth::NotRequired,
        "https://opencode.ai",
    ),
    entry(
        "kilo",
        "Kilo",
        &["kilo"],
        &["acp"],
        Auth::NotRequired,
        "https://kilocode.ai",
    ),
    Entry {
        env_hints: &["GOOSE_PROVIDER", "OPENAI_HOST", "OPENAI_BASE_PATH"],
        ..entry(
            "goose",
            "goose",
            &["goose"],
            &["acp"],
            Auth::Required {
                how: "configure a provider first (goose configure, or GOOSE_PROVIDER)",
            },
            "https://github.com/block/goose",
        )
    },
    entry(
        "cline",
        "Cline",
        &["cline"],
        &["--acp"],
        AGENT_AUTH,
        "https://cline.bot",
    ),
    entry(
        "copilot",
        "GitHub Copilot CLI",
        &["copilot"],
        &["--acp"],
        TERMINAL_AUTH,
        "https://github.com/github/copilot-cli",
    ),
    Entry {
        env: &[("AUGMENT_DISABLE_AUTO_UPDATE", "1")],
        ..entry(
            "auggie",
            "Auggie (Augment)",
            &["auggie"],
            &["--acp"],
            TERMINAL_AUTH,
            "https://www.augmentcode.com",
        )
    },
    Entry {
        env_hints: &["FACTORY_API_KEY"],
        ..entry(
            "droid",
            "Factory Droid",
            &["droid"],
            &["exec", "--output-format", "acp-daemon"],
            AGENT_AUTH,
            "https://factory.ai",
        )
    },
    entry(
        "cursor",
        "Cursor",
        &["cursor-agent"],
        &["acp"],
        AGENT_AUTH,
        "https://cursor.com/cli",
    ),
    entry(
        "kimi",
        "Kimi CLI",
        &["kimi"],
        &["acp"],
        TERMINAL_AUTH,
        "https://github.com/MoonshotAI/kimi-cli",
    ),
    entry(
        "vibe",
        "Mistral Vibe",
        &["vibe-acp"],
        &[],
        Auth::Unknown,
        "https://github.com/mistralai/mistral-vibe",
    ),
    Entry {
        env_hints: &["FAST_AGENT_MODEL"],
        ..entry(
            "fast-agent",
            "fast-agent",
            &["fast-agent-acp"],
            &["-x"],
            Auth::Unknown,
            "https://fast-agent.ai",
        )
    },
    entry(
        "junie",
        "Junie (JetBrains)",
        &["junie"],
        &["--acp=true"],
        Auth::NotRequired,
        "https://www.jetbrains.com/junie/",
    ),
    entry(
        "devin",
        "Devin CLI",
        &["devin"],
        &["acp"],
        Auth::NotRequired,
        "https://devin.ai",
    ),
    entry(
        "qoder",
        "Qoder CLI",
        &["qodercli"],
        &["--acp"],
        Auth::Unknown,
        "https://qoder.com",
    ),
    entry(
        "openhands",
        "OpenHands",
        &["openhands"],
        &["acp"],
        Auth::Unknown,
        "https://openhands.dev",
    ),
    entry(
        "kiro",
        "Kiro CLI",
        &["kiro-cli"],
        &["acp"],
        Auth::Unknown,
        "https://kiro.dev",
    ),
    Entry {
        env_hints: &["OML_ACP_MAX_LINE_BYTES"],
        ..entry(OML_ID, "oml", &["oml"], &["acp"], Auth::NotRequired, "")
    },
];

/// The catalog entry with this id.
pub fn find(id: &str) -> Option<&'static Entry> {
    ENTRIES.iter().find(|e| e.id == id)
}

/// An entry found on this machine: the executable and the arguments that start ACP mode.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Found {
    pub entry: &'static Entry,
    pub path: PathBuf,
}

/// Whether `path` is a regular file (after symlinks) with an execute bit.
fn is_executable_file(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// Where `entry` is, given the value of `PATH`: its command names in order of preference, each
/// looked up in `PATH`'s folders in order (empty folders are skipped, not taken as `.`). oml
/// itself is the running binary.
pub fn locate(entry: &'static Entry, path_var: Option<&OsStr>) -> Option<Found> {
    if entry.id == OML_ID {
        return std::env::current_exe()
            .ok()
            .map(|path| Found { entry, path });
    }
    let path_var = path_var?;
    for name in entry.commands {
        for dir in std::env::split_paths(path_var) {
            if dir.as_os_str().is_empty() {
                continue;
            }
            let candidate = dir.join(name);
            if is_executable_file(&candidate) {
                return Some(Found {
                    entry,
                    path: candidate,
                });
            }
        }
    }
    None
}

/// Every catalog entry with where it was found, if it was, in catalog order.
pub fn discover(path_var: Option<&OsStr>) -> Vec<(&'static Entry, Option<Found>)> {
    ENTRIES.iter().map(|e| (e, locate(e, path_var))).collect()
}

/// Discovery with this process's `PATH`.
pub fn discover_env() -> Vec<(&'static Entry, Option<Found>)> {
    discover(std::env::var_os("PATH").as_deref())
}

/// The found entries other than oml itself.
pub fn found_external(discovered: &[(&'static Entry, Option<Found>)]) -> Vec<Found> {
    discovered
        .iter()
        .filter_map(|(_, f)| f.clone())
        .filter(|f| f.entry.id != OML_ID)
        .collect()
}

/// A Fennel string literal.
pub fn fennel_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            _ => out.push(c),
        }
    }
    out.push('"');
    out
}

/// `(client.defagent :id {:command "/path" :args [...]})` for one found agent.
pub fn defagent_form(found: &Found) -> String {
    let e = found.entry;
    let args: Vec<String> = e.args.iter().map(|a| fennel_string(a)).collect();
    let mut s = format!(
        "(client.defagent :{} {{:command {} :args [{}]",
        e.id,
        fennel_string(&found.path.to_string_lossy()),
        args.join(" ")
    );
    if !e.env.is_empty() {
        let env: Vec<String> = e
            .env
            .iter()
            .map(|(k, v)| format!("{} {}", fennel_string(k), fennel_string(v)))
            .collect();
        let _ = write!(s, " :env {{{}}}", env.join(" "));
    }
    s.push_str("})");
    s
}

/// The proposed configuration for the found agents: one `client.defagent` per agent and a
/// `setq client.default-agent` naming the first external agent found (oml itself when it is the
/// only one). Empty when nothing is found.
pub fn proposed_config(found: &[Found]) -> String {
    let mut s = String::new();
    if found.is_empty() {
        return s;
    }
    s.push_str(";; ACP agents found on PATH by `oml agents`; review and edit freely.\n");
    for f in found {
        s.push_str(&defagent_form(f));
        s.push('\n');
    }
    let default = found
        .iter()
        .find(|f| f.entry.id != OML_ID)
        .unwrap_or(&found[0]);
    let _ = writeln!(s, "(setq client.default-agent :{})", default.entry.id);
    s
}

/// The catalog as a Markdown table (the one in docs/src/agents.md).
pub fn markdown_table() -> String {
    let code = |s: &str| format!("`{s}`");
    let mut s = String::from(
        "| Id | Agent | Commands looked for | ACP arguments | Auth before `session/new` | Homepage |\n\
         |---|---|---|---|---|---|\n",
    );
    for e in ENTRIES {
        let commands: Vec<String> = e.commands.iter().map(|c| code(c)).collect();
        let args = if e.args.is_empty() {
            "(none)".to_owned()
        } else {
            code(&e.args.join(" "))
        };
        let auth = match e.auth {
            Auth::Required { how } => format!("required: {how}"),
            other => other.as_str().to_owned(),
        };
        let mut commands = commands.join(", ");
        if e.id == OML_ID {
            commands = "the running binary".to_owned();
        }
        let homepage = if e.homepage.is_empty() {
            "(this program)".to_owned()
        } else {
            format!("<{}>", e.homepage)
        };
        let _ = writeln!(
            s,
            "| `{}` | {} | {} | {} | {} | {} |",
            e.id, e.name, commands, args, auth, homepage
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_catalog_is_well_formed() {
        let mut ids = std::collections::HashSet::new();
        for e in ENTRIES {
            assert!(ids.insert(e.id), "duplicate id {}", e.id);
            assert!(
                !e.id.is_empty()
                    && e.id.starts_with(|c: char| c.is_ascii_lowercase())
                    && e.id
                        .chars()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-'),
                "bad id {:?}",
                e.id
            );
            assert!(!e.name.is_empty(), "{} has no name", e.id);
            assert!(!e.commands.is_empty(), "{} has no command", e.id);
            for c in e.commands {
                assert!(
                    !c.is_empty() && !c.contains('/') && !c.contains(char::is_whitespace),
                    "{}: bad command name {c:?}",
                    e.id
                );
            }
            for a in e.args {
                assert!(
                    !a.is_empty() && !a.contains(char::is_whitespace),
                    "{}: bad argument {a:?}",
                    e.id
                );
            }
            for (k, _) in e.env {
                assert!(!k.is_empty() && !k.contains('='), "{}: bad env {k:?}", e.id);
            }
            assert!(
                e.homepage.starts_with("https://") || e.id == OML_ID,
                "{}: homepage",
                e.id
            );
        }
        for id in [
            "claude",
            "codex",
            "gemini",
            "qwen",
            "opencode",
            "kilo",
            "goose",
            "cline",
            "copilot",
            "auggie",
            "cursor",
            "kimi",
            "vibe",
            "fast-agent",
            "junie",
            "devin",
            "qoder",
            "openhands",
            "kiro",
            "oml",
        ] {
            assert!(find(id).is_some(), "{id} is missing");
        }
        assert_eq!(
            find("claude").unwrap().commands,
            &["claude-agent-acp", "claude-code-acp"]
        );
    }

    #[test]
    fn fennel_strings_escape() {
        assert_eq!(fennel_string(r#"a"b\c"#), r#""a\"b\\c""#);
    }

    #[test]
    fn the_proposal_names_the_first_external_agent_as_default() {
        let oml = Found {
            entry: find("oml").unwrap(),
            path: "/bin/oml".into(),
        };
        let codex = Found {
            entry: find("codex").unwrap(),
            path: "/x/codex-acp".into(),
        };
        let text = proposed_config(&[codex, oml]);
        assert!(text.contains(r#"(client.defagent :codex {:command "/x/codex-acp" :args []})"#));
        assert!(text.contains(r#"(client.defagent :oml {:command "/bin/oml" :args ["acp"]})"#));
        assert!(text.ends_with("(setq client.default-agent :codex)\n"));
    }
}
