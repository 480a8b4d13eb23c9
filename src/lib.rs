//! oml: a programmable coding-agent harness, extended in Fennel.
//!
//! The crate is one library with one binary. `main.rs` only turns the status `cli::main` returns
//! into the process's exit code; everything else lives here. Module map (see ARCHITECTURE.md):
//!
//! - `cli`: argument parsing and the modes (REPL, eval, run, trust, repl server/client).
//! - `lisp`: the Fennel host — state, prelude, conversion, settings, advice, init files, REPL.
//! - `paths`: the XDG directories oml uses.
//! - `acp`: the Agent Client Protocol; `acp::jsonrpc` is the newline-delimited JSON-RPC 2.0
//!   transport shared by oml as agent and oml as client.
//! - `cancel`: the cancellation token shared by one prompt's work.
//! - `llm`: the model client (streaming OpenAI-compatible chat completions: SSE decoding, delta
//!   folding, retries, timeouts, cancellation).

pub mod acp;
pub mod cancel;
pub mod cli;
pub mod lisp;
pub mod paths;
pub mod llm;
