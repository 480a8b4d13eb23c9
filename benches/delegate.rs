//! What delegating a turn costs over the sub-agent's own turn: the `delegate` tool against the
//! scripted fake agent (`oml-fake-agent prompt-ok`: two message chunks, then `end_turn`) over
//! real pipes, and the same turn through the bare client core.
//!
//! Run with `cargo bench --bench delegate -j 1`.
//!
//! - `delegate_tool`: one `delegate` tool call as the model would make it, inside a session
//!   (`agent.call-tool`: the card, `agent.execute-tool` and the permission policy,
//!   `agent.delegate` on the session's sub-agent connection — opened by the first sample and
//!   reused —, `client.prompt` with a Lisp callback per update, the card's live view, the
//!   result).
//! - `client_turn`: the same prompt through `acp_client::Client::prompt` on a connection to the
//!   same fake agent, its updates drained: the sub-agent's own turn plus the transport.
//!
//! Delegation's overhead is `delegate_tool − client_turn`.
//!
//! Measured on the shared 2-core build machine with `cargo bench --profile dev` (unoptimised:
//! the C Lua VM too, so this is the pessimistic figure), 200 samples each, same run:
//! delegate_tool median 2.08 ms (mean 3.32 ms), client_turn median 0.49 ms (mean 1.25 ms), so
//! delegation adds about 1.6 ms median (2.1 ms mean) per turn, under the 5 ms target.

use divan::Bencher;
use oml::acp_client::{Client, ConnectOptions, Spawn, TurnEvent};
use oml::agent::Agent;
use oml::cancel::CancelToken;
use oml::lisp::Output;
use oml::paths::Paths;
use serde_json::json;

const FAKE: &str = env!("CARGO_BIN_EXE_oml-fake-agent");

fn main() {
    divan::main();
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

#[divan::bench(sample_count = 200)]
fn delegate_tool(bencher: Bencher) {
    let rt = runtime();
    let dir = tempfile::tempdir().expect("tempdir");
    let paths = Paths::under(dir.path());
    let (lisp, _) = rt
        .block_on(oml::cli::boot(&paths, true, Output::Stderr))
        .expect("boot");
    let agent = Agent::of(&lisp).expect("agent");
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let sid = agent.new_session(dir.path().to_path_buf(), Some(tx));
    let define = format!("(client.defagent :fake {{:command {FAKE:?} :args [:prompt-ok]}})");
    rt.block_on(lisp.eval(&define, "bench")).expect("defagent");
    let call = rt.block_on(lisp.eval(
        "(fn [] (. (agent.call-tool :delegate {:agent :fake :prompt \"hi\"}) :content))",
        "bench",
    ));
    let Some(mlua::Value::Function(call)) = call.expect("eval").into_iter().next() else {
        panic!("the call function")
    };
    rt.spawn(async move { while rx.recv().await.is_some() {} });
    let sessions = agent.sessions().clone();
    bencher.bench_local(|| {
        rt.block_on(async {
            let mut key = 0usize;
            let r: Result<String, _> = lisp
                .run_with(call.clone(), (), &CancelToken::new(), |thread| {
                    key = thread.to_pointer() as usize;
                    sessions.bind_thread(key, Some(sid.clone()));
                })
                .await;
            sessions.bind_thread(key, None);
            let content = r.expect("the tool runs");
            assert!(content.starts_with("Hello, world!"), "{content}");
        })
    });
    rt.block_on(async {
        agent.sessions().remove(&sid);
        let close = lisp.eval("(agent.close-delegates)", "bench");
        let _ = close.await;
    });
}

#[divan::bench(sample_count = 200)]
fn client_turn(bencher: Bencher) {
    let rt = runtime();
    let dir = tempfile::tempdir().expect("tempdir");
    let client = rt
        .block_on(Client::connect(ConnectOptions {
            spawn: Spawn {
                command: FAKE.to_owned(),
                args: vec!["prompt-ok".to_owned()],
                ..Spawn::default()
            },
            ..ConnectOptions::default()
        }))
        .expect("connect");
    let (answer, _) = rt
        .block_on(client.new_session(dir.path()))
        .expect("session");
    let sid = answer["sessionId"].as_str().expect("id").to_owned();
    bencher.bench_local(|| {
        rt.block_on(async {
            let prompt = json!([{"type": "text", "text": "hi"}]);
            let mut turn = client.prompt(&sid, prompt, None).expect("prompt");
            let mut n = 0usize;
            loop {
                match turn.next().await {
                    TurnEvent::Updates(batch) => n += batch.len(),
                    TurnEvent::Done(stop) => {
                        assert_eq!(stop.expect("a stop reason").0, "end-turn");
                        break n;
                    }
                }
            }
        })
    });
    rt.block_on(client.close());
}
