//! The front ends: what a user or a program talks to. `chat` is the terminal chat (`oml`),
//! `acp` serves oml's agent over ACP on stdio, `print` runs one prompt headless (`oml -p`),
//! `repl` is the terminal REPL (`oml repl`) and the REPL socket, `ask` is `oml ask`,
//! `proxy` is `oml proxy` (an ACP agent in front of another, every message through Lisp),
//! `compare` is `oml compare` (one prompt to several agents, each in a worktree of its own). Each
//! front end owns its stdout; nothing below this layer writes to it.
//!
//! Front ends know the agent, the bindings and the host; they do not know each other or `cli`.
//! `stdio`, `signals` and `lines` are what they share: writing to the terminal without
//! panicking on a closed pipe, SIGTERM and SIGHUP run as the end of input, and the line editor
//! of the chat and the REPLs.

pub mod acp;
pub mod ask;
pub mod chat;
pub mod compare;
pub mod lines;
pub mod listen;
pub mod print;
pub mod proxy;
pub mod repl;
pub mod signals;
pub mod stdio;
