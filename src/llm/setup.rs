//! What a new user's machine can reach, for the first run without a model: the providers whose
//! key is in the environment (`OPENAI_API_KEY`, `ANTHROPIC_API_KEY`, `GEMINI_API_KEY`,
//! `OPENROUTER_API_KEY`) and the local model servers that answer on their default port
//! (Ollama, llama.cpp), each as a [`Candidate`] with the settings it needs; and the reviewable
//! Lisp that configures one ([`snippet`]). The key itself is never written: the snippet reads it
//! from its variable at start-up.
//!
//! It knows the providers' variables, URLs and protocols; the dialog is the caller's.

use std::time::Duration;

use super::{Api, LlmClient, LlmConfig, anthropic, gemini};

/// A model endpoint found on this machine.
#[derive(Clone, Debug, PartialEq)]
pub struct Candidate {
    /// What the user reads: "Anthropic", "Ollama at http://localhost:11434".
    pub name: String,
    pub api: Api,
    pub base_url: String,
    /// The environment variable holding the key; `None` for a local server.
    pub key_env: Option<&'static str>,
}

/// The hosted providers found by their key's variable: name, key variable, base URL variable
/// and default, protocol.
const HOSTED: [(&str, &str, &str, &str, Api); 4] = [
    (
        "OpenAI",
        super::ENV_API_KEY,
        super::ENV_BASE_URL,
        super::DEFAULT_BASE_URL,
        Api::Chat,
    ),
    (
        "Anthropic",
        anthropic::ENV_API_KEY,
        anthropic::ENV_BASE_URL,
        anthropic::DEFAULT_BASE_URL,
        Api::Anthropic,
    ),
    (
        "Google Gemini",
        gemini::ENV_API_KEY,
        gemini::ENV_BASE_URL,
        gemini::DEFAULT_BASE_URL,
        Api::Gemini,
    ),
    (
        "OpenRouter",
        "OPENROUTER_API_KEY",
        "OPENROUTER_BASE_URL",
        "https://openrouter.ai/api/v1",
        Api::Chat,
    ),
];

/// The local servers looked for: name and base URL (their default port).
pub const LOCAL: [(&str, &str); 2] = [
    ("Ollama", "http://localhost:11434/v1"),
    ("llama.cpp", "http://localhost:8080/v1"),
];

/// How long a local server may take to list its models before it counts as absent.
pub const LOCAL_WAIT: Duration = Duration::from_millis(500);

/// How long a provider may take to list its models in the dialog.
pub const LIST_WAIT: Duration = Duration::from_secs(10);

/// The hosted providers whose key `lookup` finds (an empty variable counts as unset).
pub fn hosted(lookup: impl Fn(&str) -> Option<String>) -> Vec<Candidate> {
    let set = |name: &str| lookup(name).filter(|v| !v.is_empty());
    HOSTED
        .iter()
        .filter(|(_, key, ..)| set(key).is_some())
        .map(|(name, key, base, default, api)| {
            let base_url = set(base).unwrap_or_else(|| (*default).to_owned());
            let name = match set(base) {
                Some(base) => format!("{name} at {base}"),
                None => (*name).to_owned(),
            };
            Candidate {
                name,
                api: *api,
                base_url,
                key_env: Some(*key),
            }
        })
        .collect()
}

/// The servers of `local` (name, base URL) that list at least one model within [`LOCAL_WAIT`].
pub async fn local(client: &LlmClient, local: &[(&str, &str)]) -> Vec<Candidate> {
    let mut found = Vec::new();
    for (name, base_url) in local {
        let candidate = Candidate {
            name: format!("{name} at {}", base_url.trim_end_matches("/v1")),
            api: Api::Chat,
            base_url: (*base_url).to_owned(),
            key_env: None,
        };
        let listed = client
            .list_models(&config(&candidate, None), LOCAL_WAIT)
            .await;
        if listed.is_ok_and(|models| !models.is_empty()) {
            found.push(candidate);
        }
    }
    found
}

/// The model client's settings for `candidate`, with its key when `key` is given.
pub fn config(candidate: &Candidate, key: Option<String>) -> LlmConfig {
    LlmConfig {
        base_url: candidate.base_url.clone(),
        api: Some(candidate.api),
        api_key: key,
        ..LlmConfig::default()
    }
}

/// The Lisp that makes `candidate` and `model` the configured model: reviewable, and without
/// the key, which it reads from its variable.
pub fn snippet(candidate: &Candidate, model: &str) -> String {
    // The name holds a base URL from the environment: no control character (a newline would
    // end the comment) reaches the file.
    let name: String = candidate
        .name
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    // The chat protocol is written as `:auto`, which is chat everywhere but on OpenAI's own
    // host, where a reasoning model gets the Responses API.
    let api = match candidate.api {
        Api::Chat => "auto",
        api => api.name(),
    };
    let mut lines = vec![
        format!(";; The model, chosen at oml's first run: {name}."),
        format!("(setq llm.api :{api}"),
        format!("      llm.base-url {}", fennel_string(&candidate.base_url)),
    ];
    match candidate.key_env {
        Some(key) => lines.push(format!(
            "      llm.api-key (os.getenv {})",
            fennel_string(key)
        )),
        // A local server gets no key, whatever key the environment holds for another endpoint.
        None => lines.push("      llm.api-key nil".to_owned()),
    }
    lines.push(format!("      llm.model {})", fennel_string(model)));
    lines.join("\n") + "\n"
}

/// What the dialog says when it has nothing to offer, or nothing was chosen: what was found,
/// and how to configure a model without it.
pub fn advice(candidates: &[Candidate]) -> String {
    let set = "or set llm.model (e.g. (setq llm.model \"...\") in ~/.config/oml/init.fnl, or \
               OPENAI_MODEL)";
    if candidates.is_empty() {
        return format!(
            "No model configured, and no provider key (OPENAI_API_KEY, ANTHROPIC_API_KEY, \
             GEMINI_API_KEY, OPENROUTER_API_KEY) or local model server (Ollama, llama.cpp) was \
             found: set a key or start a server and start oml again to choose, {set}."
        );
    }
    let names: Vec<&str> = candidates.iter().map(|c| c.name.as_str()).collect();
    format!(
        "No model configured. Found: {}. Start oml again to choose one, {set}.",
        names.join(", ")
    )
}

/// `text` as a Fennel string literal.
fn fennel_string(text: &str) -> String {
    let mut out = String::from("\"");
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_in_the_environment_are_candidates_and_the_snippet_never_holds_one() {
        let vars = [
            ("ANTHROPIC_API_KEY", "sk-ant-secret"),
            ("OPENROUTER_API_KEY", "sk-or-secret"),
            ("GEMINI_API_KEY", ""),
        ];
        let found = hosted(|name| {
            vars.iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| (*v).to_owned())
        });
        let names: Vec<&str> = found.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["Anthropic", "OpenRouter"]);
        let text = snippet(&found[0], "claude-\"x\"");
        assert_eq!(
            text,
            ";; The model, chosen at oml's first run: Anthropic.\n(setq llm.api :anthropic\n      \
             llm.base-url \"https://api.anthropic.com\"\n      llm.api-key (os.getenv \
             \"ANTHROPIC_API_KEY\")\n      llm.model \"claude-\\\"x\\\"\")\n"
        );
        assert!(!text.contains("secret"));
        let sneaky = Candidate {
            name: "Ollama at http://x\n(os.execute \"id\")".into(),
            api: Api::Chat,
            base_url: "http://x".into(),
            key_env: None,
        };
        let text = snippet(&sneaky, "m");
        assert_eq!(text.lines().count(), 5, "{text}");
        assert!(
            text.contains("llm.api :auto") && text.contains("llm.api-key nil"),
            "{text}"
        );
        assert!(advice(&found).contains("Found: Anthropic, OpenRouter."));
        assert!(advice(&[]).contains("no provider key"));
    }
}
