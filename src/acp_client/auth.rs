//! Which authentication method a client may use by itself: one whose credentials are
//! environment variables that are set. Pure: the agent's `authMethods` and a lookup of the
//! agent's environment in, a method id out.
//!
//! Agents describe such methods in three ways: the unstable `type: "env_var"` with
//! `vars: [{name, optional}]`, its older form with one `varName`, and plain agent methods whose
//! description says which variable they read (codex-acp: "Requires setting the
//! `OPENAI_API_KEY` environment variable."). Terminal methods (`type: "terminal"`, or
//! `_meta.type: "terminal"` as Qwen Code writes it) are never chosen: the client must not send
//! `authenticate` for them. This module sends nothing and knows no connection.

use serde::Deserialize;
use serde_json::Value;

use super::capabilities::lenient_field;

/// One of the agent's `authMethods`, the fields the client reads. A field of another type
/// counts as absent; an entry that is not an object, or has no id, is no method.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct AuthMethod {
    pub id: String,
    #[serde(deserialize_with = "lenient_field")]
    pub name: Option<String>,
    #[serde(rename = "type", deserialize_with = "lenient_field")]
    pub kind: Option<String>,
    #[serde(rename = "_meta", deserialize_with = "lenient_field")]
    pub meta: Option<Meta>,
    #[serde(deserialize_with = "lenient_field")]
    pub vars: Option<Vec<EnvVar>>,
    #[serde(deserialize_with = "lenient_field")]
    pub var_name: Option<String>,
    #[serde(deserialize_with = "lenient_field")]
    pub description: Option<String>,
}

/// `_meta` of a method: its `type` (where Qwen Code marks a terminal method).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct Meta {
    #[serde(rename = "type", deserialize_with = "lenient_field")]
    pub kind: Option<String>,
}

/// One variable of an `env_var` method.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct EnvVar {
    pub name: String,
    #[serde(deserialize_with = "lenient_field")]
    pub optional: Option<bool>,
}

/// The agent's `authMethods` (as sent), each read once; what is not a method is left out.
pub fn methods(sent: &Value) -> Vec<AuthMethod> {
    sent.as_array()
        .into_iter()
        .flatten()
        .filter_map(|m| AuthMethod::deserialize(m).ok())
        .filter(|m| !m.id.is_empty())
        .collect()
}

/// The id of the first method in `methods` (the agent's order) whose variables are all set,
/// according to `is_set`; `None` when there is none.
pub fn env_method(methods: &[AuthMethod], is_set: impl Fn(&str) -> bool) -> Option<String> {
    methods.iter().find_map(|m| {
        let vars = env_vars(m);
        (!vars.is_empty() && vars.iter().all(|v| is_set(v))).then(|| m.id.clone())
    })
}

/// The variables a method needs, or nothing when it is not an environment-variable method.
fn env_vars(method: &AuthMethod) -> Vec<String> {
    let kind = method.kind.as_deref();
    let meta_kind = method.meta.as_ref().and_then(|m| m.kind.as_deref());
    if kind == Some("terminal") || meta_kind == Some("terminal") {
        return Vec::new();
    }
    if kind == Some("env_var") {
        if let Some(vars) = &method.vars {
            return vars
                .iter()
                .filter(|v| v.optional != Some(true) && !v.name.is_empty())
                .map(|v| v.name.clone())
                .collect();
        }
        return method.var_name.iter().cloned().collect();
    }
    if kind.is_some_and(|k| k != "agent") {
        return Vec::new();
    }
    // An agent method that names its variable: "Requires setting the `NAME` environment variable".
    let description = method.description.as_deref().unwrap_or("");
    if !description.contains("environment variable") {
        return Vec::new();
    }
    description
        .split('`')
        .skip(1)
        .step_by(2)
        .find(|name| is_variable_name(name))
        .map(|name| vec![name.to_owned()])
        .unwrap_or_default()
}

fn is_variable_name(s: &str) -> bool {
    let mut chars = s.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_uppercase() || c == '_')
        && chars.all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn set(names: &[&str]) -> impl Fn(&str) -> bool {
        let names: Vec<String> = names.iter().map(|s| s.to_string()).collect();
        move |v| names.iter().any(|n| n == v)
    }

    #[test]
    fn codex_style_descriptions_name_the_variable() {
        let codex = json!([
            {"id": "chatgpt", "name": "Login with ChatGPT", "description": "Use your ChatGPT login"},
            {"id": "codex-api-key", "name": "Use CODEX_API_KEY", "description": "Requires setting the `CODEX_API_KEY` environment variable."},
            {"id": "openai-api-key", "name": "Use OPENAI_API_KEY", "description": "Requires setting the `OPENAI_API_KEY` environment variable."},
        ]);
        assert_eq!(
            env_method(&methods(&codex), set(&["OPENAI_API_KEY"])).as_deref(),
            Some("openai-api-key")
        );
        assert_eq!(
            env_method(&methods(&codex), set(&["CODEX_API_KEY", "OPENAI_API_KEY"])).as_deref(),
            Some("codex-api-key")
        );
        assert_eq!(env_method(&methods(&codex), set(&[])), None);
    }

    #[test]
    fn env_var_methods_need_every_required_variable() {
        let methods = json!([
            {"id": "two", "name": "Two", "type": "env_var",
             "vars": [{"name": "A_KEY"}, {"name": "B_KEY"}, {"name": "C_OPT", "optional": true}]},
            {"id": "old", "name": "Old", "type": "env_var", "varName": "OLD_KEY"},
        ]);
        assert_eq!(env_method(&super::methods(&methods), set(&["A_KEY"])), None);
        assert_eq!(
            env_method(&super::methods(&methods), set(&["A_KEY", "B_KEY"])).as_deref(),
            Some("two")
        );
        assert_eq!(
            env_method(&super::methods(&methods), set(&["OLD_KEY"])).as_deref(),
            Some("old")
        );
    }

    #[test]
    fn terminal_methods_and_vague_descriptions_are_never_chosen() {
        let methods = json!([
            {"id": "qwen", "name": "Use OpenAI API key", "description": "Requires setting the `OPENAI_API_KEY` environment variable",
             "_meta": {"type": "terminal", "args": ["--auth-type=openai"]}},
            {"id": "term", "type": "terminal", "name": "Log in", "description": "Requires setting the `OPENAI_API_KEY` environment variable", "args": []},
            {"id": "vague", "name": "Key", "description": "Uses `OPENAI_API_KEY` somehow"},
            "not an object",
        ]);
        assert_eq!(
            env_method(&super::methods(&methods), set(&["OPENAI_API_KEY"])),
            None
        );
        assert_eq!(env_method(&super::methods(&json!(null)), set(&["X"])), None);
    }
}
