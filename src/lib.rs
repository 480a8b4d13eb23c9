//! oml: a programmable coding-agent harness, extended in Fennel.
//!
//! The crate is one library with one binary. `main.rs` only turns the status `cli::main` returns
//! into the process's exit code; everything else lives here. Module map (see ARCHITECTURE.md):
//!
//! - `cli`: argument parsing and the modes (REPL, eval, run, trust, repl server/client).
//! - `lisp`: the Fennel host — state, prelude, conversion, settings, advice, init files, REPL.
//! - `llm`: the streaming OpenAI-compatible chat-completions client (request, SSE, folding).
//! - `tools`: the built-in tools `read`, `write`, `edit` and `bash` as plain Rust.
//! - `acp`: the Agent Client Protocol; `acp::jsonrpc` is the newline-delimited JSON-RPC 2.0
//!   transport shared by oml as agent and oml as client; `acp::client` drives external agents
//!   (its Lisp face is `lisp::bind::client`).
//! - `agent`: the model loop as named Lisp steps, the tools and commands, sessions and events.
//! - `print_mode`: `oml -p`, one prompt streamed to stdout (text or JSON lines).
//! - `paths`: the XDG directories oml uses.
//! - `cancel`: the cancellation token shared by one prompt's work.

pub mod acp;
pub mod agent;
pub mod cancel;
pub mod catalog;
pub mod cli;
pub mod lisp;
pub mod llm;
pub mod paths;
pub mod print_mode;
pub mod tools;
