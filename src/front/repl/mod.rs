//! The Lisp REPL front ends: `terminal` (the interactive `oml repl`, with line editing) and
//! `server` (the live REPL on a Unix socket, and its terminal client). Both drive a REPL
//! conversation of the host (`crate::lisp::repl`).

pub mod server;
pub mod terminal;
