//! The Lisp REPL front ends: `terminal` (the interactive `oml repl`, with line editing) and
//! `server` (the live REPL on a Unix socket), which both drive a REPL conversation of the host
//! (`crate::lisp::repl`), and `client` (`oml repl --connect`, the server's terminal client).

pub mod client;
pub mod server;
pub mod terminal;
