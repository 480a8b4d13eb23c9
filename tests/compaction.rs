//! Compaction's cut point: whatever the transcript and the budget, `agent.compact-cut` never
//! separates a tool call from its result (a property test over generated transcripts), and the
//! summary replaces only whole turns.

use oml::cancel::CancelToken;
use oml::lisp::{Lisp, Output};
use oml::paths::Paths;
use proptest::prelude::*;
use serde_json::{Value, json};

fn transcript(turns: &[Vec<usize>]) -> Vec<Value> {
    let mut t = Vec::new();
    let mut n = 0;
    for (i, rounds) in turns.iter().enumerate() {
        t.push(json!({"role": "user", "content": format!("task {i} {}", "x".repeat(i * 7 % 50))}));
        for calls in rounds {
            let ids: Vec<String> = (0..*calls)
                .map(|_| {
                    n += 1;
                    format!("call_{n}")
                })
                .collect();
            t.push(json!({"role": "assistant", "content": null, "tool_calls": ids.iter().map(|id|
                json!({"id": id, "type": "function", "function": {"name": "read", "arguments": "{}"}})
            ).collect::<Vec<_>>()}));
            for id in &ids {
                t.push(json!({"role": "tool", "tool_call_id": id, "content": "r".repeat(40)}));
            }
        }
        t.push(json!({"role": "assistant", "content": "done"}));
    }
    t
}

/// Every tool result's call is in an earlier assistant message of the same list.
fn pairs_intact(messages: &[Value]) -> bool {
    let mut open = std::collections::HashSet::new();
    for m in messages {
        for c in m["tool_calls"].as_array().into_iter().flatten() {
            open.insert(c["id"].as_str().unwrap().to_owned());
        }
        if m["role"] == "tool" && !open.remove(m["tool_call_id"].as_str().unwrap()) {
            return false;
        }
    }
    open.is_empty()
}

fn host(rt: &tokio::runtime::Runtime) -> (Lisp, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let paths = Paths::under(dir.path());
    let (lisp, _) = rt
        .block_on(oml::cli::boot(&paths, true, Output::Stderr))
        .expect("the Lisp image starts");
    (lisp, dir)
}

#[test]
fn the_cut_never_separates_a_tool_call_from_its_result() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let (lisp, _dir) = host(&rt);
    let turns = prop::collection::vec(prop::collection::vec(0usize..4, 0..4), 1..8);
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig::with_cases(200));
    runner
        .run(&(turns, 0u64..2000), |(turns, keep)| {
            let t = transcript(&turns);
            let cut = rt
                .block_on(lisp.call_json(
                    "agent.compact-cut",
                    &[json!(t), json!(keep)],
                    &CancelToken::new(),
                ))
                .unwrap();
            let cut = cut.as_u64().unwrap() as usize;
            prop_assert!(cut >= 1 && cut <= t.len());
            if cut > 1 {
                prop_assert_eq!(&t[cut - 1]["role"], "user");
            }
            prop_assert!(pairs_intact(&t[..cut - 1]));
            prop_assert!(pairs_intact(&t[cut - 1..]));
            Ok(())
        })
        .unwrap();
}
