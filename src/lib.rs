//! oml: a programmable coding-agent harness, extended in Fennel.
//!
//! The crate is one library with one binary. `main.rs` only turns the status `cli::main` returns
//! into the process's exit code; everything else lives here, in layers whose imports only go down
//! (ARCHITECTURE.md says why each exists; `tests/tidy.rs` checks the rule):
//!
//! 1. foundation: `acp` (ACP's messages as types, for both faces), `cancel` (the cancellation
//!    token), `paths` (the XDG folders), `sized` (JSON encoded to its size), `regular` (files
//!    opened only when regular, without blocking), `printable` (text stripped of terminal
//!    controls);
//! 2. subsystems without Lisp: `llm` (the streaming model client: chat completions and the
//!    native protocols), `tools` (the built-in tools as plain Rust), `catalog` (known ACP
//!    agents), `jsonrpc` (the newline-delimited JSON-RPC transport), `acp_client` (oml driving
//!    external ACP agents), `mcp` (oml as an MCP client), `session` (the registry, the loop's
//!    events and the session store), `project` (the project root, its instruction files, skills
//!    and git state), `sandbox` (confining the commands oml runs: Landlock, a private mount
//!    view, a system-call filter, the network held to named domains, a new session, PDEATHSIG,
//!    secrets kept out of their environment), `ask` (`oml ask`'s session owners, over `acp_client`),
//!    `hooks` (running the command and HTTP hooks of Claude Code's and Codex's settings);
//! 3. `lisp`: the Fennel host — state, prelude, compile cache, runner, settings, init files, the
//!    REPL conversation;
//! 4. `bind`: the Lisp surface, one namespace per file with its Fennel beside it;
//! 5. `agent`: the model loop as named Lisp steps;
//! 6. `front`: the front ends — `front::chat` (`oml`, the terminal chat), `front::acp`
//!    (`oml acp`), `front::listen` (`oml acp --listen`, ACP's remote transport), `front::print`
//!    (`oml -p`), `front::repl` (the terminal REPL and the REPL socket), `front::ask`
//!    (`oml ask`), `front::proxy` (`oml proxy`, an ACP agent in front of another),
//!    `front::compare` (`oml compare`, one prompt to several agents in worktrees);
//! 7. `cli`: arguments, modes, boot and exit statuses.

pub mod acp;
pub mod acp_client;
pub mod agent;
pub mod ask;
pub mod bind;
pub mod cancel;
pub mod catalog;
pub mod cli;
pub mod front;
pub mod hooks;
pub mod jsonrpc;
pub mod lisp;
pub mod llm;
pub mod mcp;
pub mod paths;
pub mod printable;
pub mod project;
pub mod regular;
pub mod sandbox;
pub mod session;
pub mod sized;
pub mod tools;
