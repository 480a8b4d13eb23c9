//! Errors at the boundary of the Lisp host, and how an `mlua::Error` becomes one.
//!
//! A runtime error keeps its parts apart: where it was raised (`file:line`, as Lua prefixes it),
//! the message, and the Lua stack traceback, which only a debugging reader wants (`Display`
//! leaves it out; [`LispError::traceback`] gives it). `os.exit`, cancellation and interruption
//! are variants of their own, so nobody parses them out of a message; Rust raises them inside
//! Lua with [`LispError::into_lua`], and Lisp reads them with `oml.error-category`.
//!
//! This module knows nothing about who raised an error or how it is shown to a user.

use std::path::PathBuf;

/// The line Lua puts between an error's message and its stack traceback.
const TRACEBACK_MARK: &str = "\nstack traceback:";

/// Errors at the boundary of the Lisp host.
#[derive(Debug, thiserror::Error)]
pub enum LispError {
    /// A parse or compile error, already prefixed with `file:line:col:` by Fennel.
    #[error("{0}")]
    Compile(String),
    /// A runtime error raised in Lua (or by a host function Lua called).
    #[error("{0}")]
    Raised(RuntimeError),
    /// A runtime error made by Rust code around the evaluation: a message only.
    #[error("{0}")]
    Runtime(String),
    #[error("interrupted")]
    Interrupted,
    /// `(os.exit code)`: the evaluation unwound; the caller turns it into an exit status.
    #[error("oml: exit requested with status {0}")]
    Exit(i32),
    /// A wait given up because the work it was for was cancelled (a request to the ACP client,
    /// when the prompt that made it is cancelled). `what` names what was waited for.
    #[error("Cancelled while waiting for {what}")]
    Cancelled { what: String },
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    /// A setting that is missing or holds a value of the wrong type.
    #[error("{0}")]
    Setting(String),
}

/// A runtime error from Lua, in its parts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RuntimeError {
    /// `file:line` of the code that raised it, when Lua prefixed the message with it.
    pub location: Option<String>,
    pub message: String,
    /// Lua's stack traceback, when the error carried one.
    pub traceback: Option<String>,
}

impl std::fmt::Display for RuntimeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.location {
            Some(location) => write!(f, "{location}: {}", self.message),
            None => f.write_str(&self.message),
        }
    }
}

impl RuntimeError {
    /// Split Lua's text of an error (`file:line: message\nstack traceback:\n...`) into its parts.
    /// `traceback` is the one mlua kept beside the message, if any.
    pub fn parse(text: &str, traceback: Option<&str>) -> RuntimeError {
        let (text, embedded) = match text.find(TRACEBACK_MARK) {
            Some(i) => (&text[..i], Some(text[i + 1..].trim_end())),
            None => (text, None),
        };
        let traceback = traceback.map(str::trim_end).or(embedded).map(str::to_owned);
        let text = text.trim_end();
        match split_location(text) {
            Some((location, message)) => RuntimeError {
                location: Some(location.to_owned()),
                message: message.to_owned(),
                traceback,
            },
            None => RuntimeError {
                location: None,
                message: text.to_owned(),
                traceback,
            },
        }
    }
}

/// `("file:line", "message")` for a message Lua prefixed with where it was raised.
fn split_location(text: &str) -> Option<(&str, &str)> {
    let first_line = text.lines().next()?;
    let mut search = 0;
    while let Some(colon) = first_line[search..].find(':').map(|i| search + i) {
        let rest = &first_line[colon + 1..];
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        if digits > 0 && rest[digits..].starts_with(": ") && colon > 0 {
            let end = colon + 1 + digits;
            return Some((&text[..end], &text[end + 2..]));
        }
        search = colon + 1;
    }
    None
}

impl LispError {
    /// The Lua stack traceback of a runtime error, for debugging.
    pub fn traceback(&self) -> Option<&str> {
        match self {
            LispError::Raised(e) => e.traceback.as_deref(),
            _ => None,
        }
    }

    /// This error as an `mlua::Error` a host function returns: Lua sees an error value whose
    /// `tostring` is this error's text and whose category `oml.error-category` reads, and Rust
    /// gets this error back when it propagates out of the evaluation.
    pub fn into_lua(self) -> mlua::Error {
        mlua::Error::external(self)
    }

    /// The category Lisp reads with `oml.error-category`.
    pub fn category(&self) -> &'static str {
        match self {
            LispError::Compile(_) => "compile",
            LispError::Raised(_) | LispError::Runtime(_) => "runtime",
            LispError::Interrupted => "interrupted",
            LispError::Exit(_) => "exit",
            LispError::Cancelled { .. } => "cancelled",
            LispError::Io { .. } => "io",
            LispError::Setting(_) => "setting",
        }
    }

    /// A copy, for an error found by reference inside an `mlua::Error`.
    fn copy(&self) -> LispError {
        match self {
            LispError::Compile(m) => LispError::Compile(m.clone()),
            LispError::Raised(e) => LispError::Raised(e.clone()),
            LispError::Runtime(m) => LispError::Runtime(m.clone()),
            LispError::Interrupted => LispError::Interrupted,
            LispError::Exit(code) => LispError::Exit(*code),
            LispError::Cancelled { what } => LispError::Cancelled { what: what.clone() },
            LispError::Io { .. } => LispError::Runtime(self.to_string()),
            LispError::Setting(m) => LispError::Setting(m.clone()),
        }
    }
}

impl From<mlua::Error> for LispError {
    fn from(e: mlua::Error) -> Self {
        classify(&e, None)
    }
}

/// The marker error raised inside Lua when an evaluation is interrupted.
#[derive(Debug)]
pub(super) struct Interrupted;

impl std::fmt::Display for Interrupted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("interrupted")
    }
}

impl std::error::Error for Interrupted {}

/// `(os.exit n)` inside Lisp: unwinds to the caller, which gets [`LispError::Exit`]. Inside Lua
/// its text is `exit N`.
#[derive(Debug, Clone, Copy)]
pub(super) struct ExitRequest(pub i32);

impl std::fmt::Display for ExitRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "exit {}", self.0)
    }
}

impl std::error::Error for ExitRequest {}

/// The innermost error of `e`, with the traceback of the outermost callback that had one.
pub(super) fn classify(e: &mlua::Error, traceback: Option<&str>) -> LispError {
    match e {
        mlua::Error::CallbackError {
            cause,
            traceback: own,
        } => classify(cause, traceback.or(Some(own))),
        mlua::Error::WithContext { cause, .. } => classify(cause, traceback),
        mlua::Error::ExternalError(inner) => {
            if inner.is::<Interrupted>() {
                LispError::Interrupted
            } else if let Some(exit) = inner.downcast_ref::<ExitRequest>() {
                LispError::Exit(exit.0)
            } else if let Some(known) = inner.downcast_ref::<LispError>() {
                known.copy()
            } else {
                LispError::Raised(RuntimeError::parse(&inner.to_string(), traceback))
            }
        }
        // An interrupt is raised as the `Interrupted` value above; a message that merely ends
        // in "interrupted" is a message like any other.
        mlua::Error::RuntimeError(msg) | mlua::Error::SyntaxError { message: msg, .. } => {
            LispError::Raised(RuntimeError::parse(msg, traceback))
        }
        other => LispError::Runtime(other.to_string()),
    }
}

/// The message of a compile error, without mlua's wrapping.
pub(super) fn compile_message(e: &mlua::Error) -> String {
    match e {
        mlua::Error::CallbackError { cause, .. } => compile_message(cause),
        mlua::Error::RuntimeError(m) => m.clone(),
        mlua::Error::SyntaxError { message, .. } => message.clone(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lua_error_text_splits_into_location_message_and_traceback() {
        let e = RuntimeError::parse(
            "eval:1: x\nstack traceback:\n\t[C]: in function 'error'\n\teval:1: in main chunk",
            None,
        );
        assert_eq!(e.location.as_deref(), Some("eval:1"));
        assert_eq!(e.message, "x");
        assert_eq!(
            e.traceback.as_deref(),
            Some("stack traceback:\n\t[C]: in function 'error'\n\teval:1: in main chunk")
        );
        assert_eq!(e.to_string(), "eval:1: x");
        let plain = RuntimeError::parse("json.decode: EOF while parsing", None);
        assert_eq!(
            (plain.location, plain.message.as_str()),
            (None, "json.decode: EOF while parsing")
        );
        let path = RuntimeError::parse("/tmp/a b/init.fnl:3: attempt to index a nil value", None);
        assert_eq!(path.location.as_deref(), Some("/tmp/a b/init.fnl:3"));
    }

    #[test]
    fn a_callback_error_keeps_the_innermost_message_and_its_traceback() {
        let e = mlua::Error::CallbackError {
            traceback: "stack traceback:\n\t[C]: in ?".into(),
            cause: std::sync::Arc::new(mlua::Error::RuntimeError("llm.model is not set".into())),
        };
        let e = LispError::from(e);
        assert_eq!(e.to_string(), "llm.model is not set");
        assert_eq!(e.traceback(), Some("stack traceback:\n\t[C]: in ?"));
    }

    #[test]
    fn an_error_is_an_interrupt_by_its_type_never_by_its_text() {
        let text = mlua::Error::RuntimeError("eval:1: the download was interrupted".into());
        assert!(matches!(LispError::from(text), LispError::Raised(_)));
        let raised = mlua::Error::external(Interrupted);
        assert!(matches!(LispError::from(raised), LispError::Interrupted));
    }

    #[test]
    fn structured_errors_survive_a_trip_through_lua() {
        let lua = mlua::Lua::new();
        let f = lua
            .create_function(|_, ()| -> mlua::Result<()> {
                Err(LispError::Cancelled {
                    what: "session/request_permission".into(),
                }
                .into_lua())
            })
            .unwrap();
        let e = f.call::<()>(()).unwrap_err();
        let e = LispError::from(e);
        assert!(
            matches!(&e, LispError::Cancelled { what } if what == "session/request_permission")
        );
        assert_eq!(
            e.to_string(),
            "Cancelled while waiting for session/request_permission"
        );
        assert_eq!(e.category(), "cancelled");
    }
}
