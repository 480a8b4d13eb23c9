//! The export of hand-written session files: what the loop writes, in the order it writes it,
//! and the odd files a crash, an old oml or a hostile edit leaves.

use serde_json::{Value, json};

use super::*;

/// A store in a temporary folder holding session `id` with `header` fields and `lines`, each
/// `(entry, at)`.
fn store_with(dir: &Path, id: &str, header: Value, lines: &[(Value, f64)]) -> Store {
    let store = Store::new(dir);
    let mut text = json!({"type": "session", "id": id, "created": 10.0, "version": "0.1.0"});
    for (k, v) in header.as_object().into_iter().flatten() {
        text[k] = v.clone();
    }
    let mut file = format!("{text}\n");
    for (entry, at) in lines {
        let mut e = entry.clone();
        e["at"] = json!(at);
        file.push_str(&format!("{e}\n"));
    }
    std::fs::write(store.path(id), file).expect("write the session");
    store
}

fn user(text: &str) -> Value {
    json!({"type": "message", "message": {"role": "user", "content": text}})
}

fn answer(text: &str) -> Value {
    json!({"type": "message", "message": {"role": "assistant", "content": text}})
}

fn usage(calls: u64, prompt: u64, completion: u64, cost: Option<f64>) -> Value {
    let mut v = json!({"calls": calls, "prompt_tokens": prompt, "completion_tokens": completion});
    if let Some(c) = cost {
        v["cost"] = json!(c);
    }
    json!({"type": "data", "key": "usage", "value": v})
}

fn doc(store: &Store, id: &str) -> Value {
    let export = export(store, id, &Media::Omitted).expect("export");
    serde_json::to_value(&export.trajectory).expect("JSON")
}

#[test]
fn each_answer_gets_the_tokens_and_cost_of_its_calls_and_a_reset_counts_from_zero() {
    let dir = tempfile::tempdir().unwrap();
    let model = |m: &str, c: Option<&str>| json!({"type": "custom", "kind": "model-call", "data": {"model": m, "currency": c}});
    let store = store_with(
        dir.path(),
        "s1",
        json!({}),
        &[
            (user("a"), 11.0),
            (model("m1", Some("USD")), 11.1),
            (usage(1, 100, 10, Some(0.5)), 11.2),
            (answer("one"), 11.3),
            (model("m2", Some("EUR")), 11.4),
            (usage(3, 400, 40, Some(1.5)), 11.5),
            (answer("two"), 11.6),
            (json!({"type": "data", "key": "usage", "value": null}), 11.7),
            (usage(1, 7, 1, None), 11.8),
            (answer("three"), 11.9),
        ],
    );
    let t = doc(&store, "s1");
    let steps = t["steps"].as_array().unwrap();
    assert_eq!(
        steps[1]["metrics"],
        json!({"prompt_tokens": 100, "completion_tokens": 10, "cost_usd": 0.5})
    );
    assert_eq!(steps[1]["model_name"], "m1");
    // Two calls for one answer; a cost in euros is no cost in dollars.
    assert_eq!(steps[2]["llm_call_count"], 2);
    assert_eq!(steps[2]["model_name"], "m2");
    assert_eq!(
        steps[2]["metrics"],
        json!({"prompt_tokens": 300, "completion_tokens": 30, "extra": {"cost": 1.0, "currency": "EUR"}})
    );
    assert_eq!(steps[3]["metrics"]["prompt_tokens"], 7);
    assert_eq!(t["agent"]["model_name"], "m1");
    assert_eq!(t["final_metrics"]["total_prompt_tokens"], 407);
    assert_eq!(t["final_metrics"]["total_cost_usd"], 0.5);
    assert_eq!(t["final_metrics"]["total_steps"], 4);
    assert_eq!(steps[0]["timestamp"], "1970-01-01T00:00:11.000Z");
}

#[test]
fn a_fork_marks_its_parent_s_steps_as_copied_context() {
    let dir = tempfile::tempdir().unwrap();
    let store = store_with(
        dir.path(),
        "s-fork",
        json!({"parent": "s-parent", "fork_prompt": 2, "created": 20.0}),
        &[
            (user("old"), 5.0),
            (answer("old answer"), 6.0),
            (user("new"), 21.0),
        ],
    );
    let t = doc(&store, "s-fork");
    let copied: Vec<Option<bool>> = t["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["is_copied_context"].as_bool())
        .collect();
    assert_eq!(copied, [Some(true), Some(true), None]);
    assert_eq!(t["agent"]["extra"]["forked_from"], "s-parent");
}

#[test]
fn odd_calls_and_results_stay_valid_references() {
    let dir = tempfile::tempdir().unwrap();
    let call = json!({"id": "c1", "type": "function",
                      "function": {"name": "bash", "arguments": "not json"}});
    let store = store_with(
        dir.path(),
        "s1",
        json!({}),
        &[
            (user("go"), 1.0),
            (
                json!({"type": "message", "message": {"role": "assistant", "content": null, "tool_calls": [call]}}),
                2.0,
            ),
            (
                json!({"type": "message", "message": {"role": "tool", "tool_call_id": "c1", "content": "ran"}}),
                3.0,
            ),
            (
                json!({"type": "message", "message": {"role": "tool", "tool_call_id": "ghost", "content": "?"}}),
                4.0,
            ),
        ],
    );
    let t = doc(&store, "s1");
    let steps = t["steps"].as_array().unwrap();
    let c = &steps[1]["tool_calls"][0];
    assert_eq!(c["arguments"], json!({}));
    assert_eq!(c["extra"]["raw_arguments"], "not json");
    assert_eq!(
        steps[1]["observation"]["results"][0]["source_call_id"],
        "c1"
    );
    // A result of no call is an event, so no source_call_id dangles.
    assert_eq!(steps[2]["source"], "system");
    assert_eq!(steps[2]["extra"]["detail"]["tool_call_id"], "ghost");
}

#[test]
fn an_empty_session_has_one_step_saying_so() {
    let dir = tempfile::tempdir().unwrap();
    let store = store_with(dir.path(), "s1", json!({}), &[]);
    let t = doc(&store, "s1");
    assert_eq!(t["steps"].as_array().map(Vec::len), Some(1));
    assert_eq!(t["steps"][0]["step_id"], 1);
}

/// Sub-agent records that point back at their parent, or at a name that is no session id,
/// are named in the notes rather than followed.
#[test]
fn sub_agent_records_that_loop_or_leave_the_store_are_not_followed() {
    let dir = tempfile::tempdir().unwrap();
    let run = |session: &str| json!({"type": "custom", "kind": "subagent", "data": {"session": session, "agent": "x", "call": "c"}});
    let lines = [
        (user("a"), 1.0),
        (run("s-b"), 2.0),
        (run("../../etc/passwd"), 3.0),
    ];
    let store = store_with(dir.path(), "s-a", json!({}), &lines);
    store_with(
        dir.path(),
        "s-b",
        json!({}),
        &[(user("b"), 1.0), (run("s-a"), 2.0)],
    );
    let t = doc(&store, "s-a");
    let subs = t["subagent_trajectories"].as_array().expect("s-b");
    assert_eq!(subs.len(), 1);
    assert_eq!(subs[0]["trajectory_id"], "s-b");
    assert!(
        subs[0]["notes"].as_str().is_some_and(|n| n.contains("s-a")),
        "{t:#}"
    );
    assert!(
        t["notes"]
            .as_str()
            .is_some_and(|n| n.contains("no session ../../etc/passwd")),
        "{t:#}"
    );
}

/// Times a hand-edited file may hold: far past RFC 3339's range, before the epoch, or no
/// number JSON can write; each is shown at the nearest end, never an overflow.
#[test]
fn odd_times_are_clamped_not_overflowed() {
    assert_eq!(timestamp(1e300), "9999-12-31T23:59:59.000Z");
    assert_eq!(timestamp(f64::INFINITY), "9999-12-31T23:59:59.000Z");
    assert_eq!(timestamp(-5.0), "1970-01-01T00:00:00.000Z");
    assert_eq!(timestamp(f64::NAN), "1970-01-01T00:00:00.000Z");
    assert_eq!(timestamp(1.9996), "1970-01-01T00:00:01.999Z");
    let dir = tempfile::tempdir().unwrap();
    let store = store_with(
        dir.path(),
        "s1",
        json!({"created": 1e300}),
        &[(user("a"), 1e300)],
    );
    let t = doc(&store, "s1");
    assert_eq!(t["steps"][0]["timestamp"], "9999-12-31T23:59:59.000Z");
}

fn custom(kind: &str, data: Value) -> Value {
    json!({"type": "custom", "kind": kind, "data": data})
}

fn image_message(text: &str, data: &str) -> Value {
    json!({"type": "message", "message": {"role": "user", "content": [
        {"type": "text", "text": text},
        {"type": "image_url", "image_url": {"url": format!("data:image/png;base64,{data}")}}]}})
}

fn calls(ids: &[&str]) -> Value {
    let calls: Vec<Value> = ids
        .iter()
        .map(|id| json!({"id": id, "type": "function", "function": {"name": "task", "arguments": "{}"}}))
        .collect();
    json!({"type": "message", "message": {"role": "assistant", "content": "", "tool_calls": calls}})
}

fn result(id: &str) -> Value {
    json!({"type": "message", "message": {"role": "tool", "tool_call_id": id, "content": "ok"}})
}

/// The tools' images (after a `tool-images` entry) join the answer's results; a prompt steered
/// in after the results is a user step of its own; no two images share a file name.
#[test]
fn tool_images_join_their_results_and_a_steered_prompt_stays_a_prompt() {
    let dir = tempfile::tempdir().unwrap();
    let store = store_with(
        dir.path(),
        "s1",
        json!({}),
        &[
            (user("look"), 1.0),
            (custom("tool-images", json!({"count": 1})), 2.0),
            (calls(&["c1"]), 2.0),
            (result("c1"), 2.0),
            (
                image_message("The images the tool calls above returned:", "UE5HMQ=="),
                2.0,
            ),
            (image_message("and mine", "UE5HMg=="), 3.0),
            (answer("seen"), 4.0),
        ],
    );
    let media = Media::Files {
        dir: "t.images".into(),
    };
    let export = export(&store, "s1", &media).expect("export");
    let t = serde_json::to_value(&export.trajectory).unwrap();
    let steps = t["steps"].as_array().unwrap();
    let sources: Vec<&str> = steps.iter().filter_map(|s| s["source"].as_str()).collect();
    assert_eq!(sources, ["user", "agent", "user", "agent"], "{t:#}");
    let results = steps[1]["observation"]["results"].as_array().unwrap();
    assert_eq!(results[1]["extra"]["oml_event"], "tool_images");
    let paths: Vec<&str> = export.images.iter().map(|i| i.path.as_str()).collect();
    assert_eq!(paths, ["t.images/s1-image1.png", "t.images/s1-image2.png"]);
    assert_eq!(export.images[0].bytes, b"PNG1");
}

/// Reasoning recorded for a turn that failed does not move to the next answer.
#[test]
fn a_failed_turn_s_reasoning_is_not_the_next_answer_s() {
    let dir = tempfile::tempdir().unwrap();
    let store = store_with(
        dir.path(),
        "s1",
        json!({}),
        &[
            (user("q1"), 1.0),
            (custom("thought", json!({"text": "plan for q1"})), 2.0),
            (custom("failure", json!({"message": "HTTP 500"})), 3.0),
            (custom("prompt", json!({"text": "q2"})), 4.0),
            (user("q2"), 4.0),
            (answer("a2"), 5.0),
        ],
    );
    let t = doc(&store, "s1");
    assert_eq!(t["steps"][3]["message"], "a2");
    assert_eq!(t["steps"][3].get("reasoning_content"), None, "{t:#}");
}

/// Calls of a turn cancelled before its answer are in the totals and on the cancel's step;
/// a fork's copied calls are not in its totals.
#[test]
fn calls_without_an_answer_count_and_a_fork_s_copied_calls_do_not() {
    let dir = tempfile::tempdir().unwrap();
    let store = store_with(
        dir.path(),
        "s-fork",
        json!({"parent": "s-parent", "created": 10.0}),
        &[
            (user("old"), 1.0),
            (usage(1, 10, 1, Some(0.01)), 2.0),
            (answer("old answer"), 2.0),
            (user("new"), 11.0),
            (usage(3, 510, 11, Some(1.01)), 12.0),
            (custom("cancelled", json!({})), 13.0),
        ],
    );
    let t = doc(&store, "s-fork");
    assert_eq!(t["final_metrics"]["total_prompt_tokens"], 500, "{t:#}");
    assert_eq!(t["final_metrics"]["total_cost_usd"], 1.0);
    assert_eq!(
        t["steps"][3]["extra"]["detail"]["llm_call_count"], 2,
        "{t:#}"
    );
}

/// A call id used again in a later turn: each sub-agent is referred to from its own turn's
/// result; a sub-agent named twice is embedded once.
#[test]
fn each_sub_agent_is_referred_to_from_the_result_after_its_record() {
    let dir = tempfile::tempdir().unwrap();
    let run = |child: &str| {
        custom(
            "subagent",
            json!({"session": child, "agent": "x", "call": "t1"}),
        )
    };
    let store = store_with(
        dir.path(),
        "s1",
        json!({}),
        &[
            (user("go"), 1.0),
            (run("s-c1"), 2.0),
            (calls(&["t1"]), 2.0),
            (result("t1"), 2.0),
            (run("s-c2"), 3.0),
            (run("s-c2"), 3.0),
            (calls(&["t1"]), 3.0),
            (result("t1"), 3.0),
        ],
    );
    for child in ["s-c1", "s-c2"] {
        store_with(dir.path(), child, json!({}), &[(user("sub"), 1.0)]);
    }
    let t = doc(&store, "s1");
    let referred = |step: usize| {
        t["steps"][step]["observation"]["results"][0]["subagent_trajectory_ref"][0]["trajectory_id"]
            .clone()
    };
    assert_eq!(referred(1), "s-c1", "{t:#}");
    assert_eq!(referred(2), "s-c2", "{t:#}");
    let embedded: Vec<&str> = t["subagent_trajectories"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s["trajectory_id"].as_str())
        .collect();
    assert_eq!(embedded, ["s-c1", "s-c2"]);
}

/// A markdown command rewound before its expansion labels no later prompt.
#[test]
fn a_rewound_command_labels_no_later_prompt() {
    let dir = tempfile::tempdir().unwrap();
    let store = store_with(
        dir.path(),
        "s1",
        json!({}),
        &[
            (
                custom(
                    "command",
                    json!({"name": "review", "input": "x", "expanded": true}),
                ),
                1.0,
            ),
            (
                custom(
                    "rewind",
                    json!({"prompt": 1, "conversation": true, "files": false}),
                ),
                2.0,
            ),
            (user("a real prompt"), 3.0),
        ],
    );
    let t = doc(&store, "s1");
    assert_eq!(t["steps"][2]["message"], "a real prompt");
    assert_eq!(t["steps"][2].get("extra"), None, "{t:#}");
}
