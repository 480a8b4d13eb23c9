//! One full agent turn in-process: prompt → the model calls `read` → the tool runs → the model
//! answers, against the fake model server of the tests (real TCP, real SSE).
//!
//! Run with `cargo bench --bench turn -j 1`.
//!
//! - `turn`: what `oml -p` does for one prompt after start-up (`front::print::run` minus writing
//!   to the terminal): a new session whose events are drained, `Agent::prompt`, the session
//!   dropped. Two model requests, one `read` tool call.
//! - `baseline`: the same two scripted replies fetched by a bare reqwest client (same HTTP stack)
//!   and read to their end. This is the fake model's own time plus the HTTP round trips.
//!
//! - `turn_in_a_project`: `turn` in a subdirectory of a git repository with an `AGENTS.md` at
//!   the root and one in the subdirectory, so the system prompt carries the instructions and the
//!   git state (`git status` runs at most once per 2 s per directory, see `bind::project`).
//! - `git_summary`: one uncached `git status` summary of that repository, what a turn pays at most
//!   once per 2 s.
//!
//! The harness's overhead for one turn is `turn − baseline`: building two requests from the
//! transcript in Lisp, parsing the SSE stream into messages, running the tool, emitting events.
//! Start-up (process, Lisp image, init files) is not included: `oml -p` pays it once per run.
//!
//! Measured on the shared 2-core build machine (200 samples each, same run): turn median 1.74 ms
//! (mean 1.97 ms), baseline median 0.35 ms (mean 0.37 ms), so the overhead is about 1.4 ms
//! median (1.6 ms mean) per turn, under the 2 ms target.

use std::sync::Arc;

use divan::Bencher;
use oml::agent::Agent;
use oml::cancel::CancelToken;
use oml::lisp::Output;
use oml::paths::Paths;
use serde_json::json;

#[path = "../tests/support/fake_model.rs"]
#[allow(dead_code)]
mod fake_model;

use fake_model::{FakeModel, Reply, text_chunks, tool_call_chunks};

fn main() {
    divan::main();
}

struct Fixture {
    rt: tokio::runtime::Runtime,
    fake: FakeModel,
    dir: tempfile::TempDir,
}

fn fixture() -> Fixture {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("notes.txt"), "hello\nworld\n").expect("write");
    let fake = FakeModel::start(Vec::<Reply>::new());
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    Fixture { rt, fake, dir }
}

fn push_turn(fake: &FakeModel) {
    fake.push(Reply::Stream(tool_call_chunks(
        "call_1",
        "read",
        &[r#"{"path": "notes.txt"}"#],
    )));
    fake.push(Reply::Stream(text_chunks(&["The file ", "says hello."])));
}

#[divan::bench(sample_count = 200)]
fn turn(bencher: Bencher) {
    let fx = fixture();
    let cwd = fx.dir.path().to_path_buf();
    run_turns(bencher, &fx, cwd);
}

/// A git repository with instructions at its root and in `sub/`; returns `sub`.
fn project(root: &std::path::Path) -> std::path::PathBuf {
    let git = |args: &[&str]| {
        let ok = std::process::Command::new("git")
            .args(args)
            .current_dir(root)
            .env("GIT_AUTHOR_NAME", "b")
            .env("GIT_AUTHOR_EMAIL", "b@example.com")
            .env("GIT_COMMITTER_NAME", "b")
            .env("GIT_COMMITTER_EMAIL", "b@example.com")
            .output()
            .expect("git")
            .status
            .success();
        assert!(ok, "git {args:?}");
    };
    git(&["init", "-q"]);
    std::fs::write(
        root.join("AGENTS.md"),
        "Run the tests with cargo test.\n".repeat(40),
    )
    .expect("write");
    std::fs::create_dir_all(root.join("sub")).expect("mkdir");
    std::fs::write(root.join("sub/AGENTS.md"), "Keep functions short.\n").expect("write");
    std::fs::write(root.join("sub/notes.txt"), "hello\nworld\n").expect("write");
    git(&["add", "."]);
    git(&["commit", "-qm", "start"]);
    root.join("sub")
}

#[divan::bench(sample_count = 200)]
fn turn_in_a_project(bencher: Bencher) {
    let fx = fixture();
    let sub = project(fx.dir.path());
    run_turns(bencher, &fx, sub);
}

#[divan::bench(sample_count = 100)]
fn git_summary(bencher: Bencher) {
    let fx = fixture();
    let sub = project(fx.dir.path());
    bencher.bench_local(|| {
        fx.rt.block_on(oml::project::git::summary(
            &sub,
            oml::project::git::GIT_STATUS_TIMEOUT,
            // What oml gives it: the read-only sandbox (bind::project).
            oml::sandbox::prepare(&oml::sandbox::Policy {
                mode: oml::sandbox::Mode::ReadOnly,
                writable: Vec::new(),
                network: false,
                protected: Vec::new(),
                guarded: Vec::new(),
                deny_read: Vec::new(),
                domains: None,
            }),
        ))
    });
}

fn run_turns(bencher: Bencher, fx: &Fixture, cwd: std::path::PathBuf) {
    // SAFETY: set before the runtime and the Lisp host start any thread that reads the
    // environment; the settings take their defaults from these variables at boot.
    unsafe {
        std::env::set_var("OPENAI_BASE_URL", fx.fake.base_url());
        std::env::set_var("OPENAI_MODEL", "fake/model");
        std::env::set_var("OPENAI_API_KEY", "bench-key");
    }
    let paths = Paths::under(fx.dir.path());
    let (lisp, _) = fx
        .rt
        .block_on(oml::cli::boot(&paths, true, Output::Stderr))
        .expect("boot");
    let agent = Agent::of(&lisp).expect("agent");
    bencher.bench_local(|| {
        push_turn(&fx.fake);
        fx.rt.block_on(async {
            let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
            let id = agent.new_session(cwd.clone(), Some(tx));
            agent.sessions().with(&id, |s| {
                s.data.insert("permission-mode".into(), json!("yolo"));
            });
            let drain = tokio::spawn(async move {
                let mut n = 0usize;
                while rx.recv().await.is_some() {
                    n += 1;
                }
                n
            });
            let outcome = agent
                .prompt(&id, "what does notes.txt say?", &CancelToken::new())
                .await
                .expect("the turn runs");
            assert_eq!(outcome.stop_reason, "end-turn");
            agent.sessions().remove(&id);
            drain.await.expect("drained")
        })
    });
}

#[divan::bench(sample_count = 200)]
fn baseline(bencher: Bencher) {
    let fx = fixture();
    let client = Arc::new(reqwest::Client::new());
    let url = format!("{}/chat/completions", fx.fake.base_url());
    let body = json!({"model": "fake/model", "stream": true,
                      "messages": [{"role": "user", "content": "what does notes.txt say?"}]})
    .to_string();
    bencher.bench_local(|| {
        push_turn(&fx.fake);
        fx.rt.block_on(async {
            let mut bytes = 0usize;
            for _ in 0..2 {
                let mut resp = client
                    .post(&url)
                    .header("content-type", "application/json")
                    .body(body.clone())
                    .send()
                    .await
                    .expect("send");
                while let Some(chunk) = resp.chunk().await.expect("chunk") {
                    bytes += chunk.len();
                }
            }
            bytes
        })
    });
}
