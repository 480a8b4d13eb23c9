//! Mechanical checks of the invariants written in ARCHITECTURE.md and docs/src/style.md: they
//! fail the build when a change crosses a boundary the design depends on.
//!
//! Each rule is a function from files (a path and its text) to the offences it finds, so that it
//! runs over the real tree and over a planted one alike: every rule has a test that runs it over
//! `src/` (or `tests/`) and expects nothing, and one that plants a violation and expects it found.
//! `tidy/tree.rs` reads the tree; the other files hold the rules, by what they guard.

#![allow(clippy::print_stdout, clippy::print_stderr)] // test and tool output

#[path = "tidy/effects.rs"]
mod effects;
#[path = "tidy/fennel.rs"]
mod fennel;
#[path = "tidy/judging.rs"]
mod judging;
#[path = "tidy/layers.rs"]
mod layers;
#[path = "tidy/settings.rs"]
mod settings;
#[path = "tidy/sizes.rs"]
mod sizes;
#[path = "tidy/tree.rs"]
mod tree;
