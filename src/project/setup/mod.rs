//! The settings users already keep for other agents, read as they are: Claude Code's
//! `settings.json` files (the user's, the project's and its `settings.local.json`), oml's own
//! `settings.json` in its config folder, and Codex's `hooks.json` files (`files`); the hooks
//! they declare (`hooks`).
//!
//! This module finds, reads and types what the files say, with where each thing came from and
//! what was wrong (a file that is not JSON, a hook without a command). It knows nothing of trust,
//! Lisp or sessions: whether a project's file may be used, and what a hook does in the loop, are
//! decided above it (`crate::bind::hooks`, `src/agent/hooks.fnl`).

pub mod files;
pub mod hooks;
pub mod rules;

pub use files::{Origin, SettingsFile, settings_files};
