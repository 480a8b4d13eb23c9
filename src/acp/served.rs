//! The requests an agent sends its client besides permission: `fs/read_text_file`,
//! `fs/write_text_file`, `terminal/*` and `elicitation/create`. Their params are read once,
//! leniently (a member of another type counts as absent, and the serving side says what is
//! missing), and their answers are written from types.
//!
//! It knows the shapes, not the files, the processes or the program that decides.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::{Loose, NameValue};

/// What every served request names: its session.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionHead {
    #[serde(default)]
    session_id: Loose<String>,
}

impl SessionHead {
    /// The session `params` name, when they name one.
    pub fn session_id(params: &Value) -> Option<String> {
        SessionHead::deserialize(params).ok()?.session_id.0
    }
}

/// `fs/read_text_file` and `fs/write_text_file`.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FsParams {
    #[serde(default)]
    pub path: Loose<String>,
    /// The first line to read, 1-based.
    #[serde(default)]
    pub line: Loose<u64>,
    /// How many lines to read.
    #[serde(default)]
    pub limit: Loose<u64>,
    /// The text to write.
    #[serde(default)]
    pub content: Loose<String>,
}

impl FsParams {
    /// The params as sent; params that are not an object have none of their members.
    pub fn read(params: &Value) -> FsParams {
        FsParams::deserialize(params).unwrap_or_default()
    }
}

/// The answer to `fs/read_text_file`.
pub fn read_answer(content: String) -> Value {
    #[derive(Serialize)]
    struct Answer {
        content: String,
    }
    serde_json::to_value(Answer { content }).unwrap_or(Value::Null)
}

/// `terminal/create`.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CreateTerminalParams {
    #[serde(default)]
    pub command: Loose<String>,
    #[serde(default)]
    args: Loose<Vec<Value>>,
    #[serde(default)]
    env: Loose<Vec<Value>>,
    #[serde(default)]
    pub cwd: Loose<String>,
    #[serde(default)]
    pub output_byte_limit: Loose<u64>,
}

impl CreateTerminalParams {
    /// The params as sent; params that are not an object have none of their members.
    pub fn read(params: &Value) -> CreateTerminalParams {
        CreateTerminalParams::deserialize(params).unwrap_or_default()
    }

    /// The arguments that are strings.
    pub fn args(&self) -> Vec<String> {
        let args = self.args.get().into_iter().flatten();
        args.filter_map(|a| String::deserialize(a).ok()).collect()
    }

    /// The variables given as `{name, value}` strings.
    pub fn env(&self) -> Vec<NameValue> {
        let env = self.env.get().into_iter().flatten();
        env.filter_map(|v| NameValue::deserialize(v).ok()).collect()
    }
}

/// `terminal/output`, `terminal/wait_for_exit`, `terminal/kill` and `terminal/release`.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TerminalParams {
    #[serde(default)]
    terminal_id: Loose<String>,
}

impl TerminalParams {
    /// The terminal `params` name, when they name one.
    pub fn terminal_id(params: &Value) -> Option<String> {
        TerminalParams::deserialize(params).ok()?.terminal_id.0
    }
}

/// `terminal/create` as an agent sends it.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CreateTerminalRequest<'a> {
    pub session_id: &'a str,
    pub command: &'a str,
    pub args: &'a [String],
    pub cwd: String,
    pub env: Vec<NameValue>,
    pub output_byte_limit: u64,
}

/// A request about one terminal (`terminal/output`, `wait_for_exit`, `kill`, `release`), as an
/// agent sends it.
pub fn terminal_request(session_id: &str, terminal_id: &str) -> Value {
    #[derive(Serialize)]
    #[serde(rename_all = "camelCase")]
    struct Request<'a> {
        session_id: &'a str,
        terminal_id: &'a str,
    }
    let request = Request {
        session_id,
        terminal_id,
    };
    serde_json::to_value(request).unwrap_or(Value::Null)
}

/// A `terminal/output` answer as an agent reads it.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OutputRead {
    #[serde(default)]
    pub output: Loose<String>,
    #[serde(default)]
    pub truncated: Loose<bool>,
    /// As sent, null included (an end the agent reads as unknown).
    #[serde(default, deserialize_with = "given")]
    pub exit_status: Option<Value>,
}

/// `Some` whenever the member is there, null included.
fn given<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(d).map(Some)
}

impl OutputRead {
    pub fn read(answer: Value) -> OutputRead {
        serde_json::from_value(answer).unwrap_or_default()
    }
}

/// A `TerminalExitStatus` as an agent reads it: `{exitCode?, signal?}`.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExitRead {
    #[serde(default)]
    pub exit_code: Loose<i64>,
    #[serde(default)]
    pub signal: Loose<String>,
}

impl ExitRead {
    pub fn read(status: Value) -> ExitRead {
        serde_json::from_value(status).unwrap_or_default()
    }
}

/// The answer to `terminal/create`.
pub fn create_terminal_answer(terminal_id: String) -> Value {
    #[derive(Serialize)]
    #[serde(rename_all = "camelCase")]
    struct Answer {
        terminal_id: String,
    }
    serde_json::to_value(Answer { terminal_id }).unwrap_or(Value::Null)
}

/// How a terminal's command ended: its exit code, or the signal that ended it (`SIGKILL`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ExitStatus {
    pub exit_code: Option<i32>,
    /// Absent when the end is not known at all; null when no signal ended it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signal: Option<Option<String>>,
}

impl ExitStatus {
    /// An end that is not known (the wait failed).
    pub fn unknown() -> ExitStatus {
        ExitStatus {
            exit_code: None,
            signal: None,
        }
    }

    pub fn to_value(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }
}

/// The answer to `terminal/output`: the output kept, whether some was cut, and the end once
/// there is one.
pub fn output_answer(output: String, truncated: bool, exit: Option<&ExitStatus>) -> Value {
    #[derive(Serialize)]
    #[serde(rename_all = "camelCase")]
    struct Answer<'a> {
        output: String,
        truncated: bool,
        #[serde(skip_serializing_if = "Option::is_none")]
        exit_status: Option<&'a ExitStatus>,
    }
    let answer = Answer {
        output,
        truncated,
        exit_status: exit,
    };
    serde_json::to_value(answer).unwrap_or(Value::Null)
}

/// The answer to `elicitation/create`: `accept` (with the content), `decline` or `cancel`.
#[derive(Debug, Deserialize)]
pub struct ElicitationAnswer {
    pub action: String,
}

impl ElicitationAnswer {
    /// Whether `answer` says what it does (an `action` string).
    pub fn is_answer(answer: &Value) -> bool {
        ElicitationAnswer::deserialize(answer).is_ok()
    }

    /// The answer that gives the question up.
    pub fn cancel() -> Value {
        let mut answer = Map::new();
        answer.insert("action".into(), "cancel".into());
        Value::Object(answer)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn params_are_read_leniently_and_answers_written() {
        let fs = FsParams::read(&json!({"path": "/a", "line": "2", "limit": 3}));
        assert_eq!(
            (
                fs.path.get().map(String::as_str),
                fs.line.get(),
                fs.limit.get()
            ),
            (Some("/a"), None, Some(&3))
        );
        let create = CreateTerminalParams::read(&json!({"command": "ls", "args": ["-l", 1],
            "env": [{"name": "A", "value": "b"}, {"name": "C"}], "outputByteLimit": 10}));
        assert_eq!(create.args(), vec!["-l".to_owned()]);
        assert_eq!(create.env().len(), 1);
        assert_eq!(TerminalParams::terminal_id(&json!({"terminalId": 4})), None);
        assert_eq!(
            SessionHead::session_id(&json!({"sessionId": "s"})).as_deref(),
            Some("s")
        );
        let end = ExitStatus {
            exit_code: Some(0),
            signal: Some(None),
        };
        assert_eq!(
            output_answer("x".into(), false, Some(&end)),
            json!({"output": "x", "truncated": false,
                   "exitStatus": {"exitCode": 0, "signal": null}})
        );
        assert_eq!(ExitStatus::unknown().to_value(), json!({"exitCode": null}));
        assert!(ElicitationAnswer::is_answer(&json!({"action": "decline"})));
        assert!(!ElicitationAnswer::is_answer(&json!({"content": {}})));
    }
}
