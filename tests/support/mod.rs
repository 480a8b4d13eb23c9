//! Test doubles shared by the integration tests (the fake model, a scripted editor), and the
//! pseudo-terminal that runs a program as in a real terminal (`pty`). Each test file that needs them says `mod support;`,
//! and uses only part of them, hence the `dead_code` allowance.
#![allow(dead_code)]

pub mod editor;
pub mod fake_model;
pub mod pty;
