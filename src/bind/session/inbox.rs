//! `session.post!` and `session.take-posted!`: the Lisp face of a session's inbox
//! ([`crate::session::inbox`]), messages posted for the loop's next model call from any
//! coroutine or task (a steered prompt, a background task's result).
//!
//! It moves messages in and out; what the loop does with them (`agent.take-posted!` appends
//! them to the transcript and shows them) and how a front end wakes an idle session
//! ([`crate::session::Sessions::posted_notify`]) are not its business.

use mlua::{Lua, Value};

use super::{session_id, sessions};
use crate::bind::rt;
use crate::lisp::{HostFn, LispError, define, from_lua, to_lua};

/// Define `session.post!` and `session.take-posted!`.
pub(super) fn install(lua: &Lua) -> Result<(), LispError> {
    define(lua, "session", INBOX)?;
    Ok(())
}

const INBOX: &[HostFn] = &[
    HostFn {
        name: "post!",
        args: "message ?session-id",
        doc: "Queue MESSAGE (an OpenAI message, a table with :role, such as {:role :user \
              :content \"…\"}) for the session: the loop appends it to the transcript before its \
              next model call (`agent.take-posted!`), and a front end that waits for posts to an \
              idle session is woken. Callable from any coroutine or task; outside a session, \
              pass SESSION-ID. Returns nil.",
        make: |lua| {
            lua.create_function(|lua, (message, id): (Value, Option<String>)| {
                let s = sessions(lua)?;
                let id = session_id(lua, &s, id)?;
                let message = from_lua(lua, message)?;
                if !message
                    .get("role")
                    .is_some_and(serde_json::Value::is_string)
                {
                    return Err(rt("session.post!: a message is a table with :role"));
                }
                s.post(&id, message);
                Ok(())
            })
        },
    },
    HostFn {
        name: "take-posted!",
        args: "?session-id",
        doc: "The messages posted to the session (`session.post!`) since the last take, oldest \
              first, removed from its inbox: a list, empty when there are none.",
        make: |lua| {
            lua.create_function(|lua, id: Option<String>| {
                let s = sessions(lua)?;
                let id = session_id(lua, &s, id)?;
                let taken = serde_json::Value::Array(s.take_posted(&id));
                to_lua(lua, &taken)
            })
        },
    },
];
