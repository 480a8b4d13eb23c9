//! Everything the integration tests share: the test doubles at the edge (the fake model, a
//! scripted agent), the one ACP client (`editor`, and `acp` for `oml acp` in a test home),
//! running the real `oml` in a throw-away home (`home`), the model-request readers (`model`),
//! a turn of scripted tool calls and the permission rules it meets (`turns`), and the
//! pseudo-terminal that runs a program as in a real terminal (`pty`). Each test file
//! says `mod support;` and uses only part of it, hence the `dead_code` allowance.
#![allow(dead_code)]

pub mod acp;
pub mod anthropic;
pub mod call;
pub mod chat;
pub mod editor;
pub mod fake_model;
pub mod gemini;
pub mod harbor;
pub mod home;
pub mod listener;
pub mod model;
pub mod pty;
pub mod responses;
pub mod sdk;
pub mod turns;
