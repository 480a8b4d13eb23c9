//! The escape suite: every way found from a model's tool call, a confined command or a file in an
//! untrusted repository to code or writes outside the sandbox, run for real as the attack it is
//! (a scripted model asks for the command or the tool call; real Unix sockets, real symlinks,
//! real resource limits) and kept forever. A denial oml built proves nothing; an attack that
//! fails does. Each submodule holds one family of attacks; `docs/src/safety.md` names them.
//!
//! Tests that need Landlock fail under CI and skip elsewhere when the kernel has none
//! (`support::home::skip`).

#![allow(clippy::print_stderr)] // the skip notice

mod support;

#[path = "escape/agents.rs"]
mod agents;
#[path = "escape/client.rs"]
mod client;
#[path = "escape/confine.rs"]
mod confine;
#[path = "escape/control.rs"]
mod control;
#[path = "escape/export.rs"]
mod export;
#[path = "escape/harness.rs"]
mod harness;
#[path = "escape/helper.rs"]
mod helper;
#[path = "escape/home.rs"]
mod home;
#[path = "escape/hook_answers.rs"]
mod hook_answers;
#[path = "escape/hook_trust.rs"]
mod hook_trust;
#[path = "escape/hooks.rs"]
mod hooks;
#[path = "escape/listen.rs"]
mod listen;
#[path = "escape/mcp_files.rs"]
mod mcp_files;
#[path = "escape/network.rs"]
mod network;
#[path = "escape/paths.rs"]
mod paths;
#[path = "escape/project.rs"]
mod project;
#[path = "escape/proxy.rs"]
mod proxy;
#[path = "escape/proxy_attacks.rs"]
mod proxy_attacks;
#[path = "escape/rewind.rs"]
mod rewind;
#[path = "escape/roots.rs"]
mod roots;
#[path = "escape/rule_paths.rs"]
mod rule_paths;
#[path = "escape/rules.rs"]
mod rules;
#[path = "escape/secrets.rs"]
mod secrets;
#[path = "escape/settings_rules.rs"]
mod settings_rules;
#[path = "escape/setup.rs"]
mod setup;
#[path = "escape/signals.rs"]
mod signals;
#[path = "escape/skills.rs"]
mod skills;
#[path = "escape/subagents.rs"]
mod subagents;
#[path = "escape/syscalls.rs"]
mod syscalls;
#[path = "escape/worktrees.rs"]
mod worktrees;
