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

use serde_json::Value;

/// The id of the first method in `methods` (the agent's order) whose variables are all set,
/// according to `is_set`; `None` when there is none.
pub fn env_method(methods: &Value, is_set: impl Fn(&str) -> bool) -> Option<String> {
    methods.as_array()?.iter().find_map(|m| {
        let id = m.get("id").and_then(Value::as_str)?;
        let vars = env_vars(m);
        (!vars.is_empty() && vars.iter().all(|v| is_set(v))).then(|| id.to_owned())
    })
}

/// The variables a method needs, or nothing when it is not an environment-variable method.
fn env_vars(method: &Value) -> Vec<String> {
    let kind = method.get("type").and_then(Value::as_str);
    let meta_kind = method
        .get("_meta")
        .and_then(|m| m.get("type"))
        .and_then(Value::as_str);
    if kind == Some("terminal") || meta_kind == Some("terminal") {
        return Vec::new();
    }
    if kind == Some("env_var") {
        if let Some(vars) = method.get("vars").and_then(Value::as_array) {
            return vars
                .iter()
                .filter(|v| v.get("optional").and_then(Value::as_bool) != Some(true))
                .filter_map(|v| v.get("name").and_then(Value::as_str))
                .map(str::to_owned)
                .collect();
        }
        return method
            .get("varName")
            .and_then(Value::as_str)
            .map(|v| vec![v.to_owned()])
            .unwrap_or_default();
    }
    if kind.is_some_and(|k| k != "agent") {
        return Vec::new();
    }
    // An agent method that names its variable: "Requires setting the `NAME` environment variable".
    let description = method
        .get("description")
        .and_then(Value::as_str)
        .unwrap_or("");
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
            env_method(&codex, set(&["OPENAI_API_KEY"])).as_deref(),
            Some("openai-api-key")
        );
        assert_eq!(
            env_method(&codex, set(&["CODEX_API_KEY", "OPENAI_API_KEY"])).as_deref(),
            Some("codex-api-key")
        );
        assert_eq!(env_method(&codex, set(&[])), None);
    }

    #[test]
    fn env_var_methods_need_every_required_variable() {
        let methods = json!([
            {"id": "two", "name": "Two", "type": "env_var",
             "vars": [{"name": "A_KEY"}, {"name": "B_KEY"}, {"name": "C_OPT", "optional": true}]},
            {"id": "old", "name": "Old", "type": "env_var", "varName": "OLD_KEY"},
        ]);
        assert_eq!(env_method(&methods, set(&["A_KEY"])), None);
        assert_eq!(
            env_method(&methods, set(&["A_KEY", "B_KEY"])).as_deref(),
            Some("two")
        );
        assert_eq!(
            env_method(&methods, set(&["OLD_KEY"])).as_deref(),
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
        assert_eq!(env_method(&methods, set(&["OPENAI_API_KEY"])), None);
        assert_eq!(env_method(&json!(null), set(&["X"])), None);
    }
}
