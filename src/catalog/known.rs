//! oml's own knowledge of ACP agents: the command names an installed copy goes by on `PATH`, the
//! arguments that start its ACP mode, the environment it reads and how it authenticates. The
//! registry snapshot (`super::registry`) gives names, descriptions, versions and homepages; for
//! an agent in both, `super` keeps this table's ids, commands and arguments (what discovery and
//! the proposed configuration use) and takes the rest from the registry. An agent the registry
//! lacks (oml itself, Qoder, OpenHands, Kiro) comes from here alone.
//!
//! Data only; it knows neither `PATH` nor the registry's format.

use super::{Auth, Entry, Source};

/// oml's ids of the agents the registry lists under another id. An agent whose registry id is
/// its oml id needs no line.
pub const REGISTRY_IDS: &[(&str, &str)] = &[
    ("claude", "claude-acp"),
    ("codex", "codex-acp"),
    ("qwen", "qwen-code"),
    ("copilot", "github-copilot-cli"),
    ("droid", "factory-droid"),
    ("vibe", "mistral-vibe"),
];

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
        source: Source::Oml,
        registry_id: "",
        description: "",
        version: "",
        runs: &[],
    }
}

const AGENT_AUTH: Auth = Auth::Required {
    how: "the agent's own login or API key (ACP authenticate)",
};
const TERMINAL_AUTH: Auth = Auth::Required {
    how: "log in once in a terminal with the agent's own command",
};

/// The agents oml knows by itself (commands and arguments from the ACP registry and the agents'
/// docs, late 2026), in the catalog's order. oml is last.
pub static KNOWN: &[Entry] = &[
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
        ..entry(
            super::OML_ID,
            "oml",
            &["oml"],
            &["acp"],
            Auth::NotRequired,
            "",
        )
    },
];
