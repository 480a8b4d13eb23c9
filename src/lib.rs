//! oml: a programmable coding-agent harness, extended in Fennel.
//!
//! The crate is one library with one binary. `main.rs` only parses arguments and maps results to
//! exit codes; everything else lives here. Module map (see ARCHITECTURE.md):
//!
//! - `cancel`: the cancellation token shared by one prompt's work.

pub mod cancel;
