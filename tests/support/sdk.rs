//! The official ACP TypeScript SDK (`tests/interop/ts`, pinned, installed by
//! `scripts/setup-mcp.sh`): a `node` command running one of the drivers there, in a test home
//! and against a fake model, and the one JSON line the driver prints of what it saw.

use std::path::Path;
use std::process::Command;

use serde_json::Value;

use super::fake_model::FakeModel;
use super::home::{Env, use_fake_model};

/// `node [node_args…] SCRIPT` in the SDK's folder, with `env`'s XDG folders and `fake`'s
/// address; `None` (after saying so) when the SDK is not installed.
pub fn driver(node_args: &[&str], script: &str, env: &Env, fake: &FakeModel) -> Option<Command> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/interop/ts");
    if !dir.join("node_modules/@agentclientprotocol/sdk").exists() {
        super::home::skip(
            "the ACP TypeScript SDK",
            "scripts/setup-mcp.sh installs it (npm ci in tests/interop/ts)",
        );
        return None;
    }
    let mut cmd = Command::new("node");
    cmd.args(node_args)
        .arg(dir.join(script))
        .current_dir(&dir)
        .env("XDG_CONFIG_HOME", &env.home.config)
        .env("XDG_STATE_HOME", &env.home.state)
        .env("XDG_CACHE_HOME", &env.home.cache)
        .env("XDG_RUNTIME_DIR", &env.home.runtime)
        .env("HOME", &env.home.home);
    use_fake_model(&mut cmd, &fake.base_url());
    Some(cmd)
}

/// Run a driver: it must succeed, and the SDK must have refused no message (it drops a
/// notification its schema refuses, saying so on stderr); what it printed.
pub fn seen(cmd: &mut Command) -> Value {
    let out = cmd.output().expect("run node");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        !stderr.contains("Error handling"),
        "the SDK refused a message: {stderr}"
    );
    serde_json::from_slice(out.stdout.trim_ascii()).expect("one JSON line")
}
