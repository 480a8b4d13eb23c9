//! Errors at the boundary of the Lisp host, and how an `mlua::Error` becomes one.
//!
//! This module knows nothing about who raised an error or how it is shown to a user.

use std::path::PathBuf;

/// Errors at the boundary of the Lisp host.
#[derive(Debug, thiserror::Error)]
pub enum LispError {
    /// A parse or compile error, already prefixed with `file:line:col:` by Fennel.
    #[error("{0}")]
    Compile(String),
    /// A runtime error; the message starts with `file:line:` when the code came from a file.
    #[error("{0}")]
    Runtime(String),
    #[error("interrupted")]
    Interrupted,
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    /// A setting that is missing or holds a value of the wrong type.
    #[error("{0}")]
    Setting(String),
}

impl From<mlua::Error> for LispError {
    fn from(e: mlua::Error) -> Self {
        classify(&e)
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

pub(super) fn classify(e: &mlua::Error) -> LispError {
    match e {
        mlua::Error::CallbackError { cause, .. } => classify(cause),
        mlua::Error::WithContext { cause, .. } => classify(cause),
        mlua::Error::ExternalError(inner) if inner.is::<Interrupted>() => LispError::Interrupted,
        mlua::Error::RuntimeError(msg) | mlua::Error::SyntaxError { message: msg, .. } => {
            if msg.contains("interrupted") && msg.ends_with("interrupted") {
                LispError::Interrupted
            } else {
                LispError::Runtime(msg.clone())
            }
        }
        other => LispError::Runtime(other.to_string()),
    }
}

/// `(os.exit n)` inside Lisp: unwinds to the caller, which turns it into an exit status.
#[derive(Debug, Clone, Copy)]
pub struct ExitRequest(pub i32);

impl std::fmt::Display for ExitRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "exit {}", self.0)
    }
}

impl std::error::Error for ExitRequest {}

fn classify_exit(e: &mlua::Error) -> Option<i32> {
    match e {
        mlua::Error::CallbackError { cause, .. } | mlua::Error::WithContext { cause, .. } => {
            classify_exit(cause)
        }
        mlua::Error::ExternalError(inner) => inner.downcast_ref::<ExitRequest>().map(|x| x.0),
        _ => None,
    }
}

/// What ended a coroutine, as a [`LispError`]: an `os.exit` or any other error.
pub(super) fn ended(e: mlua::Error) -> LispError {
    match classify_exit(&e) {
        Some(c) => LispError::Runtime(format!("{EXIT_PREFIX}{c}")),
        None => classify(&e),
    }
}

/// `os.exit` is reported as a runtime error with this prefix; `exit_status` recognises it.
const EXIT_PREFIX: &str = "oml: exit requested with status ";

impl LispError {
    /// The status requested by `(os.exit n)`, when that is what ended the evaluation.
    pub fn exit_status(&self) -> Option<i32> {
        match self {
            LispError::Runtime(m) => m.strip_prefix(EXIT_PREFIX).and_then(|s| s.parse().ok()),
            _ => None,
        }
    }
}

/// The useful part of an error from Lisp: the innermost message, without Lua's traceback.
pub fn clean_error(message: &str) -> String {
    let inner = match message.rfind("runtime error: ") {
        Some(i) => &message[i + "runtime error: ".len()..],
        None => message,
    };
    let inner = inner.split("\nstack traceback:").next().unwrap_or(inner);
    inner.trim().to_owned()
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
