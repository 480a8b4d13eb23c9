//! What the attacks share: a throw-away home whose temp dir is its own folder (so that `outside`
//! is outside every writable path), Landlock's presence, and a print-mode turn in which the fake
//! model asks for one `bash` command.

use std::io::Read;
use std::path::PathBuf;

use crate::support::fake_model::{FakeModel, Reply, text_chunks, tool_call_chunks};
use crate::support::home::{DEADLINE, Env, Run, wait_within};

pub use crate::support::home::{landlock_or_skip, process_runs, wait_for_pid};

/// A home for one attack, with a temp dir (`TMPDIR`) of its own and a folder `outside` that no
/// writable path holds.
pub struct Target {
    pub env: Env,
    pub tmp: PathBuf,
    pub outside: PathBuf,
}

impl Target {
    pub fn new() -> Target {
        let env = Env::new();
        let tmp = env.root.join("tmp");
        let outside = env.root.join("outside");
        for dir in [&tmp, &outside] {
            std::fs::create_dir_all(dir).expect("create a folder");
        }
        Target { env, tmp, outside }
    }

    /// `oml ARGS…` with this target's temp dir, pointed at `fake` when given.
    pub fn command(&self, fake: Option<&FakeModel>, args: &[&str]) -> std::process::Command {
        let mut cmd = self.env.command(fake, args);
        cmd.env("TMPDIR", &self.tmp);
        cmd
    }

    /// One print-mode turn (`--mode yolo`: nothing asks) in which the model runs `command`
    /// with `bash`; what oml did, and the tool result the model read.
    pub fn model_runs(&self, command: &str, vars: &[(&str, &str)]) -> (Run, String) {
        let args = serde_json::json!({ "command": command }).to_string();
        let fake = FakeModel::start([
            Reply::Stream(tool_call_chunks("c1", "bash", &[&args])),
            Reply::Stream(text_chunks(&["done"])),
        ]);
        let run = Run::from(
            self.command(Some(&fake), &["-p", "--mode", "yolo", "do it"])
                .envs(vars.iter().copied())
                .output()
                .expect("run oml"),
        );
        let result = tool_result(&fake, 1);
        (run, result)
    }
}

/// The content of the (first) tool result in the fake model's request number `request`.
pub fn tool_result(fake: &FakeModel, request: usize) -> String {
    let requests = fake.requests();
    let Some(req) = requests.get(request) else {
        return String::new();
    };
    req.body["messages"]
        .as_array()
        .and_then(|m| m.iter().find(|m| m["role"] == "tool"))
        .and_then(|m| m["content"].as_str())
        .unwrap_or_default()
        .to_owned()
}

/// Run `cmd` to its end, its output captured; fails, after killing it, when it still runs at
/// the deadline (the attack hung it). The deadline is generous: only a hang reaches it.
pub fn run_within(mut cmd: std::process::Command) -> Run {
    use std::process::Stdio;
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start oml");
    let drain = |pipe: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            if let Some(mut pipe) = pipe {
                let _ = pipe.read_to_end(&mut bytes);
            }
            String::from_utf8_lossy(&bytes).into_owned()
        })
    };
    let stdout = drain(
        child
            .stdout
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let stderr = drain(
        child
            .stderr
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let Some(status) = wait_within(&mut child, DEADLINE) else {
        let _ = child.kill();
        let _ = child.wait();
        panic!("oml still ran after {DEADLINE:?}: it hung");
    };
    Run {
        code: status.code().unwrap_or(-1),
        stdout: stdout.join().expect("stdout"),
        stderr: stderr.join().expect("stderr"),
    }
}
