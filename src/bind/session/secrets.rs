//! The secret values a session's file must not hold, gathered at the moment an entry is
//! recorded: `llm.api-key`, the string values of `llm.headers` (both secret settings), and the
//! value of every environment variable the sandbox keeps from commands
//! ([`crate::bind::sandbox::secrets`]: names that look secret, the key's own variable,
//! `sandbox.drop-env`; `sandbox.keep-env` is not secret). Each is named in its redaction by its
//! variable, else by its setting.
//!
//! It knows nothing of how a line is redacted ([`crate::session::redact`]).

use std::ffi::OsString;

use serde_json::Value as Json;

use crate::lisp::Lisp;
use crate::session::Redactions;

/// The redactions for what Lisp records now; none when the settings cannot be read.
pub(super) fn redactions(lua: &mlua::Lua) -> Redactions {
    let Some(lisp) = Lisp::from_lua(lua) else {
        return Redactions::default();
    };
    let vars: Vec<(OsString, OsString)> = std::env::vars_os().collect();
    let named = |value: &str, fallback: &str| {
        vars.iter()
            .find(|(_, v)| v.as_encoded_bytes() == value.as_bytes())
            .map(|(n, _)| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| fallback.to_owned())
    };
    let mut secrets = Vec::new();
    if let Ok(Some(key)) = lisp.setting::<Option<String>>("llm.api-key") {
        let name = named(&key, "llm.api-key");
        secrets.push((key, name));
    }
    if let Ok(Json::Object(headers)) = lisp.setting::<Json>("llm.headers") {
        for (header, value) in headers {
            if let Json::String(value) = value {
                let name = named(&value, &format!("llm.headers {header}"));
                secrets.push((value, name));
            }
        }
    }
    if let Ok(sandbox) = crate::bind::sandbox::secrets(&lisp) {
        let names = crate::sandbox::secret_names(vars.iter().map(|(n, _)| n.clone()), &sandbox);
        for (name, value) in &vars {
            if names.contains(name) {
                let value = value.to_string_lossy().into_owned();
                secrets.push((value, name.to_string_lossy().into_owned()));
            }
        }
    }
    Redactions::new(secrets)
}
