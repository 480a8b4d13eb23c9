//! Test doubles shared by the integration tests. Each test file that needs them says `mod
//! support;`, and uses only part of them, hence the `dead_code` allowance.
#![allow(dead_code)]

pub mod fake_model;
