//! MCP benchmarks (run with `cargo bench --bench mcp`), against `tests/mcp/fake_server.py`
//! (python3). Two figures, each next to its baseline from the same run:
//!
//! - **a tool call**: `mcp::Server::call` (rmcp over the server's pipes, as the `mcp.call` tool
//!   path uses it) against the server's own time for the same `tools/call`, measured by a bare
//!   client that writes the request line and reads the answer line on the pipes of a second
//!   instance of the server;
//! - **a session with three stdio servers**: `oml acp`'s `session/new` answer, and the time
//!   from `session/new` to the first model request of a prompt sent right after it (which waits
//!   for the servers to be listed), with three servers and with none.

#![allow(clippy::print_stdout, clippy::print_stderr)] // tool output

#[path = "../tests/support/fake_model.rs"]
#[allow(dead_code)]
mod fake_model;

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use fake_model::{FakeModel, Reply, text_chunks};
use oml::cancel::CancelToken;
use oml::mcp::{Server, ServerSpec, Transport};
use serde_json::{Value, json};

const CALLS: usize = 500;
const SESSIONS: usize = 10;

fn script() -> String {
    format!("{}/tests/mcp/fake_server.py", env!("CARGO_MANIFEST_DIR"))
}

fn median(mut xs: Vec<Duration>) -> Duration {
    xs.sort();
    xs[xs.len() / 2]
}

/// The server's own time: `tools/call` lines over its pipes, no SDK.
fn bare_calls() -> Duration {
    let mut child = Command::new("python3")
        .args([&script(), "normal"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("python3");
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    let mut ask = |v: Value, read: bool, line: &mut String| {
        writeln!(stdin, "{v}").unwrap();
        stdin.flush().unwrap();
        if read {
            line.clear();
            stdout.read_line(line).unwrap();
        }
    };
    ask(
        json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "b", "version": "0"}}}),
        true,
        &mut line,
    );
    ask(
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        false,
        &mut line,
    );
    let mut times = Vec::with_capacity(CALLS);
    for i in 1..=CALLS {
        let t = Instant::now();
        ask(
            json!({"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": {"name": "echo", "arguments": {"text": "hi"}}}),
            true,
            &mut line,
        );
        times.push(t.elapsed());
        assert!(line.contains("echo: hi"), "{line}");
    }
    drop(stdin);
    let _ = child.wait();
    median(times)
}

/// The same calls through `mcp::Server`.
fn sdk_calls(rt: &tokio::runtime::Runtime) -> Duration {
    rt.block_on(async {
        let spec = ServerSpec {
            name: "fake".into(),
            transport: Transport::Stdio {
                command: "python3".into(),
                args: vec![script(), "normal".into()],
                env: vec![],
            },
        };
        let cancel = CancelToken::new();
        let (server, _) = Server::start(
            &spec,
            &std::env::temp_dir(),
            Duration::from_secs(30),
            &cancel,
        )
        .await
        .expect("the fake server starts");
        let mut times = Vec::with_capacity(CALLS);
        for _ in 0..CALLS {
            let t = Instant::now();
            let r = server
                .call(
                    "echo",
                    json!({"text": "hi"}),
                    &cancel,
                    Duration::from_secs(30),
                )
                .await
                .unwrap();
            times.push(t.elapsed());
            assert_eq!(oml::mcp::render(&r).text, "echo: hi");
        }
        server.stop().await;
        median(times)
    })
}

/// `session/new` answer and `session/new` → first model request, with `servers`.
fn session_times(servers: &Value) -> (Duration, Duration) {
    let root = tempdir();
    let mut answers = Vec::new();
    let mut ready = Vec::new();
    for _ in 0..SESSIONS {
        let fake = FakeModel::start([Reply::from(text_chunks(&["ok"]))]);
        let mut child = Command::new(env!("CARGO_BIN_EXE_oml"))
            .arg("acp")
            .current_dir(&root)
            .env("HOME", &root)
            .env("XDG_CONFIG_HOME", root.join("config"))
            .env("XDG_STATE_HOME", root.join("state"))
            .env("XDG_CACHE_HOME", root.join("cache"))
            .env("XDG_RUNTIME_DIR", root.join("runtime"))
            .env("OPENAI_BASE_URL", fake.base_url())
            .env("OPENAI_MODEL", "fake/model")
            .env("OPENAI_API_KEY", "k")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("oml acp");
        let mut stdin = child.stdin.take().unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = mpsc::channel::<String>();
        std::thread::spawn(move || {
            for l in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(l).is_err() {
                    break;
                }
            }
        });
        let mut send = |v: Value| {
            writeln!(stdin, "{v}").unwrap();
            stdin.flush().unwrap();
        };
        let wait = |id: u64| loop {
            let l = rx.recv_timeout(Duration::from_secs(60)).expect("an answer");
            let v: Value = serde_json::from_str(&l).unwrap();
            if v["id"] == json!(id) && v.get("method").is_none() {
                return v;
            }
        };
        send(
            json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1, "clientCapabilities": {}}}),
        );
        wait(1);
        let t = Instant::now();
        send(
            json!({"jsonrpc": "2.0", "id": 2, "method": "session/new", "params": {"cwd": root, "mcpServers": servers}}),
        );
        let sid = wait(2)["result"]["sessionId"].as_str().unwrap().to_owned();
        answers.push(t.elapsed());
        send(
            json!({"jsonrpc": "2.0", "id": 3, "method": "session/prompt", "params": {"sessionId": sid, "prompt": [{"type": "text", "text": "hi"}]}}),
        );
        fake.wait_for_requests(1, Duration::from_secs(60));
        ready.push(t.elapsed());
        wait(3);
        drop(stdin);
        let _ = child.wait();
    }
    let _ = std::fs::remove_dir_all(&root);
    (median(answers), median(ready))
}

fn tempdir() -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("oml-mcp-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn main() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let bare = bare_calls();
    let sdk = sdk_calls(&rt);
    println!(
        "tools/call echo, median of {CALLS}: server's own {bare:?}, through mcp::Server {sdk:?}; added {:?} ({:.2}x)",
        sdk.saturating_sub(bare),
        sdk.as_secs_f64() / bare.as_secs_f64()
    );
    let server =
        |n: &str| json!({"name": n, "command": "python3", "args": [script(), "normal"], "env": []});
    let (answer0, ready0) = session_times(&json!([]));
    let (answer3, ready3) = session_times(&json!([server("a"), server("b"), server("c")]));
    println!(
        "session/new answer, median of {SESSIONS}: no servers {answer0:?}, three {answer3:?} ({:.2}x)",
        answer3.as_secs_f64() / answer0.as_secs_f64()
    );
    println!(
        "session/new → first model request: no servers {ready0:?}, three {ready3:?} ({:.2}x; one server alone starts in python3's start-up time)",
        ready3.as_secs_f64() / ready0.as_secs_f64()
    );
}
