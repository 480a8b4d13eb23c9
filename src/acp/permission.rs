//! `session/request_permission`: the agent's question (a tool call and the options it offers),
//! and the client's answer (an option chosen, or `cancelled`), read and written once here.
//!
//! It knows the shapes, not who decides or how.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

use super::params::ParamsError;

/// What an option does: ACP's `PermissionOptionKind`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OptionKind {
    AllowOnce,
    AllowAlways,
    RejectOnce,
    RejectAlways,
    /// A kind this version does not know, as sent.
    Other(String),
}

/// The known kinds by their names on the wire.
const KINDS: [(&str, OptionKind); 4] = [
    ("allow_once", OptionKind::AllowOnce),
    ("allow_always", OptionKind::AllowAlways),
    ("reject_once", OptionKind::RejectOnce),
    ("reject_always", OptionKind::RejectAlways),
];

impl OptionKind {
    /// Its name on the wire.
    pub fn wire(&self) -> &str {
        match self {
            OptionKind::Other(name) => name,
            known => KINDS
                .iter()
                .find(|(_, k)| k == known)
                .map_or("", |(name, _)| name),
        }
    }
}

impl Serialize for OptionKind {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.wire())
    }
}

impl<'de> Deserialize<'de> for OptionKind {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let name = String::deserialize(d)?;
        Ok(KINDS
            .iter()
            .find(|(wire, _)| *wire == name)
            .map_or(OptionKind::Other(name), |(_, k)| k.clone()))
    }
}

/// One option of a permission request: its id, name and kind, and the rest (extensions) kept
/// as sent.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PermissionOption {
    pub option_id: String,
    /// Absent in a lenient agent's option: the id is shown instead.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    pub kind: OptionKind,
    #[serde(flatten)]
    pub rest: Map<String, Value>,
}

impl PermissionOption {
    /// Its name, or its id when it has none.
    pub fn label(&self) -> &str {
        self.name.as_deref().unwrap_or(&self.option_id)
    }
}

/// The options of a question as sent; a list that is not one reads as none.
pub fn options(value: &Value) -> Vec<PermissionOption> {
    serde_json::from_value(value.clone()).unwrap_or_default()
}

/// `session/request_permission`'s params, read once: a request without a session is refused
/// (-32602), not asked under an empty id. The tool call is kept as sent, for the program.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PermissionParams {
    pub session_id: String,
    #[serde(default)]
    pub tool_call: Value,
    #[serde(default)]
    pub options: Vec<PermissionOption>,
}

impl PermissionParams {
    /// A request's params, or the `-32602` to answer.
    pub fn parse(params: Option<Value>) -> Result<PermissionParams, ParamsError> {
        Ok(serde_json::from_value(params.unwrap_or(Value::Null))?)
    }
}

/// The answer to a permission request: ACP's `RequestPermissionOutcome`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PermissionOutcome {
    Selected(String),
    Cancelled,
}

impl PermissionOutcome {
    /// The option chosen, if one was.
    pub fn option_id(&self) -> Option<&str> {
        match self {
            PermissionOutcome::Selected(id) => Some(id),
            PermissionOutcome::Cancelled => None,
        }
    }

    /// The answer's `result`: `{"outcome": {"outcome": "selected", "optionId": …}}` or
    /// `{"outcome": {"outcome": "cancelled"}}`.
    pub fn to_value(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }
}

/// The wire form of an outcome.
#[derive(Serialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
enum OutcomeWire {
    Selected {
        #[serde(rename = "optionId")]
        option_id: String,
    },
    Cancelled,
}

impl Serialize for PermissionOutcome {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Answer {
            outcome: OutcomeWire,
        }
        let outcome = match self {
            PermissionOutcome::Selected(id) => OutcomeWire::Selected {
                option_id: id.clone(),
            },
            PermissionOutcome::Cancelled => OutcomeWire::Cancelled,
        };
        Answer { outcome }.serialize(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn options_and_outcomes_read_and_write_the_wire() {
        let sent = json!([{"optionId": "a", "name": "Allow", "kind": "allow_once", "_meta": {"x": 1}},
                          {"optionId": "z", "kind": "zap"}]);
        let read = options(&sent);
        assert_eq!(read[0].kind, OptionKind::AllowOnce);
        assert_eq!(read[1].kind, OptionKind::Other("zap".into()));
        assert_eq!(read[1].label(), "z");
        assert_eq!(serde_json::to_value(&read).expect("json"), sent);
        assert!(options(&json!({"no": "list"})).is_empty());
        assert_eq!(
            PermissionOutcome::Selected("a".into()).to_value(),
            json!({"outcome": {"outcome": "selected", "optionId": "a"}})
        );
        assert_eq!(
            PermissionOutcome::Cancelled.to_value(),
            json!({"outcome": {"outcome": "cancelled"}})
        );
    }
}
