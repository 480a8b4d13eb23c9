//! `oml sessions export --format atif`: a session made by the real `oml acp` against the fake
//! model — an image, reasoning, a failing tool call, a sub-agent, a cancelled turn, a failed
//! prompt, the API key in an answer — exported as an ATIF trajectory and checked by Harbor's
//! own validator (PyPI `harbor`, pinned; tests/support/harbor.rs), with its images beside it
//! and its secrets out as in the session file; and the export's errors.

mod support;

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};
use support::acp::partial_then_hang;
use support::editor::Editor;
use support::fake_model::{
    FakeModel, Reply, Step, delta_chunk, reasoning_chunks, text_chunks, usage_chunk,
};
use support::harbor;
use support::home::{Env, skip};

const WAIT: Duration = Duration::from_secs(20);

/// A 1×1 PNG.
const PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==";

/// The API key the test home gives `oml` (`support::home::use_fake_model`).
const KEY: &str = "test-key";

/// An answer with reasoning that calls `read` on a missing file and on an image, and runs the
/// explore sub-agent, at once.
fn reasoning_then_calls() -> Reply {
    let mut steps = reasoning_chunks("reasoning_content", &["The user wants ", "a look."]);
    let calls = [
        ("call_read", "read", json!({"path": "missing.txt"})),
        ("call_image", "read", json!({"path": "dot.png"})),
        (
            "call_task",
            "task",
            json!({"agent": "explore", "prompt": "find the notes", "description": "notes"}),
        ),
    ];
    for (i, (id, name, args)) in calls.iter().enumerate() {
        let delta = json!({"tool_calls": [{"index": i, "id": id, "type": "function",
                            "function": {"name": name, "arguments": args.to_string()}}]});
        steps.push(Step::Chunk(delta_chunk(delta, None)));
    }
    steps.push(Step::Chunk(delta_chunk(json!({}), Some("tool_calls"))));
    steps.push(usage_chunk(100, 10));
    Reply::from(steps)
}

fn text_with_usage(text: &str, prompt: u64, completion: u64) -> Reply {
    let mut steps = text_chunks(&[text]);
    steps.push(usage_chunk(prompt, completion));
    Reply::from(steps)
}

/// The session of the module doc, made over ACP; its id.
fn made_session(env: &Env, fake: &FakeModel) -> String {
    let mut ed = Editor::spawn(env.command(Some(fake), &["acp"]));
    ed.initialize();
    let (sid, _) = ed.new_session(&env.project);
    let prompt = json!([{"type": "text", "text": "look at this"},
                        {"type": "image", "mimeType": "image/png", "data": PNG}]);
    let id = ed.request(
        "session/prompt",
        json!({"sessionId": sid, "prompt": prompt}),
    );
    let (_, answer) = ed.until_response(id);
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let id = ed.prompt(&sid, "go on");
    fake.wait_for_requests(4, WAIT);
    ed.notify("session/cancel", json!({"sessionId": sid}));
    let (_, answer) = ed.until_response(id);
    assert_eq!(answer["result"]["stopReason"], "cancelled", "{answer}");
    let (_, _) = ed.turn(&sid, "and now");
    ed.finish();
    sid
}

fn export(env: &Env, args: &[&str]) -> support::home::Run {
    let mut all = vec!["sessions", "export", "--format", "atif"];
    all.extend_from_slice(args);
    env.run(None, &all)
}

fn session_file(env: &Env, sid: &str) -> String {
    let path = env.root.join(format!("state/oml/sessions/{sid}.jsonl"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn steps_with<'a>(t: &'a Value, key: &str, value: &str) -> Vec<&'a Value> {
    t["steps"]
        .as_array()
        .expect("steps")
        .iter()
        .filter(|s| s["extra"][key] == value)
        .collect()
}

#[test]
fn a_session_with_an_image_reasoning_a_failed_call_a_sub_agent_a_cancel_and_a_failure_is_valid_atif()
 {
    let python = match harbor::python() {
        Ok(p) => p,
        Err(missing) => return skip(&missing, harbor::INSTALL_HARBOR),
    };
    let env = Env::new();
    let png = base64::Engine::decode(&base64::engine::general_purpose::STANDARD, PNG).unwrap();
    std::fs::write(env.project.join("dot.png"), png).expect("the image the model reads");
    let fake = FakeModel::start([
        reasoning_then_calls(),
        text_with_usage("The notes are in notes.md.", 50, 5),
        text_with_usage(&format!("Done; your key is {KEY}."), 200, 20),
        partial_then_hang("Let me"),
        Reply::error(400, "{\"error\": {\"message\": \"bad request\"}}"),
    ]);
    let sid = made_session(&env, &fake);
    let out_dir = env.root.join("out");
    std::fs::create_dir_all(&out_dir).expect("the output folder");
    let file = out_dir.join("trajectory.json");
    let run = export(&env, &["-o", &file.display().to_string(), &sid]);
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(run.stdout, "", "{run:?}");
    if let Err(errors) = harbor::validate(&python, &file) {
        panic!("Harbor's validator refused the export: {errors}");
    }
    let text = std::fs::read_to_string(&file).expect("the trajectory");
    let t: Value = serde_json::from_str(&text).expect("JSON");
    assert_eq!(t["schema_version"], "ATIF-v1.7");
    assert_eq!(t["session_id"], sid.as_str());
    assert_eq!(t["agent"]["name"], "oml");
    assert_eq!(t["agent"]["model_name"], "fake/model");
    check_steps(&t, &out_dir);
    check_subagent(&t);
    // The totals count every call, the sub-agent's included.
    assert_eq!(
        t["final_metrics"]["total_prompt_tokens"], 350,
        "{}",
        t["final_metrics"]
    );
    assert_eq!(t["final_metrics"]["total_completion_tokens"], 35);
    // Secrets are out as in the session file.
    assert!(!text.contains(KEY), "{text}");
    assert!(text.contains("[redacted OPENAI_API_KEY]"), "{text}");
    assert!(session_file(&env, &sid).contains("[redacted OPENAI_API_KEY]"));
}

fn check_steps(t: &Value, out_dir: &Path) {
    let steps = t["steps"].as_array().expect("steps");
    // The prompt with its image, written beside the trajectory.
    let first = &steps[0];
    assert_eq!(first["source"], "user", "{first}");
    let said = first["message"][0]["text"].as_str().unwrap_or_default();
    assert!(said.starts_with("look at this"), "{first}");
    let image = &first["message"][1]["source"];
    assert_eq!(image["media_type"], "image/png", "{first}");
    let path = out_dir.join(image["path"].as_str().expect("an image path"));
    assert!(
        path.starts_with(out_dir.join("trajectory.images")),
        "{}",
        path.display()
    );
    assert_eq!(std::fs::read(&path).expect("the image file")[1..4], *b"PNG");
    // The answer: its reasoning, two calls, their results by call id, its tokens.
    let answer = &steps[1];
    assert_eq!(answer["source"], "agent");
    assert_eq!(
        answer["reasoning_content"], "The user wants a look.",
        "{answer}"
    );
    assert_eq!(answer["model_name"], "fake/model");
    assert_eq!(answer["metrics"]["prompt_tokens"], 100, "{answer}");
    assert_eq!(answer["llm_call_count"], 1);
    let calls: Vec<&str> = answer["tool_calls"]
        .as_array()
        .expect("calls")
        .iter()
        .map(|c| c["function_name"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(calls, ["read", "read", "task"]);
    let results = answer["observation"]["results"]
        .as_array()
        .expect("results");
    let read = results
        .iter()
        .find(|r| r["source_call_id"] == "call_read")
        .expect("the read's result");
    assert_eq!(read["extra"]["error"], true, "{read}");
    // The image the second read returned is a result of the same step, its file beside.
    let shown = results
        .iter()
        .find(|r| r["extra"]["oml_event"] == "tool_images")
        .expect("the tools' images");
    let image = shown["content"]
        .as_array()
        .and_then(|parts| parts.iter().find(|p| p["type"] == "image"))
        .expect("an image part");
    let path = out_dir.join(image["source"]["path"].as_str().expect("its path"));
    assert_eq!(
        std::fs::read(&path).expect("the tool's image")[1..4],
        *b"PNG"
    );
    // The cancelled turn and the failed prompt are steps of their own.
    let cancelled = steps_with(t, "oml_event", "cancelled");
    assert_eq!(cancelled.len(), 1, "{t:#}");
    assert_eq!(cancelled[0]["source"], "system");
    let failed = steps_with(t, "oml_event", "failure");
    assert_eq!(failed.len(), 1, "{t:#}");
    assert!(
        failed[0]["message"]
            .as_str()
            .is_some_and(|m| m.contains("400")),
        "{}",
        failed[0]
    );
}

fn check_subagent(t: &Value) {
    let subs = t["subagent_trajectories"].as_array().expect("a sub-agent");
    assert_eq!(subs.len(), 1, "{t:#}");
    let sub = &subs[0];
    let child = sub["trajectory_id"].as_str().expect("its id");
    assert_ne!(child, t["session_id"].as_str().unwrap_or(""));
    let said: Vec<&str> = sub["steps"]
        .as_array()
        .expect("its steps")
        .iter()
        .filter_map(|s| s["message"].as_str())
        .collect();
    assert!(said.contains(&"The notes are in notes.md."), "{sub:#}");
    assert_eq!(sub["final_metrics"]["total_prompt_tokens"], 50);
    let task = t["steps"][1]["observation"]["results"]
        .as_array()
        .expect("results")
        .iter()
        .find(|r| r["source_call_id"] == "call_task")
        .expect("the task's result")
        .clone();
    assert_eq!(
        task["subagent_trajectory_ref"][0]["trajectory_id"], child,
        "{task}"
    );
    assert_eq!(task["extra"]["subagent"], "explore", "{task}");
}

/// To stdout the trajectory names each image instead of writing it, and is still valid.
#[test]
fn to_stdout_images_are_named_not_written_and_the_document_is_still_valid() {
    let python = match harbor::python() {
        Ok(p) => p,
        Err(missing) => return skip(&missing, harbor::INSTALL_HARBOR),
    };
    let env = Env::new();
    let fake = FakeModel::start([Reply::from(text_chunks(&["A dot."]))]);
    let mut ed = Editor::spawn(env.command(Some(&fake), &["acp"]));
    ed.initialize();
    let (sid, _) = ed.new_session(&env.project);
    let prompt = json!([{"type": "image", "mimeType": "image/png", "data": PNG}]);
    let id = ed.request(
        "session/prompt",
        json!({"sessionId": sid, "prompt": prompt}),
    );
    ed.until_response(id);
    ed.finish();
    let run = export(&env, &[&sid]);
    assert_eq!(run.code, 0, "{run:?}");
    let t: Value = serde_json::from_str(&run.stdout).expect("one JSON document");
    let parts = t["steps"][0]["message"].as_array().expect("parts");
    assert!(parts.iter().all(|p| p["type"] == "text"), "{parts:?}");
    assert!(
        parts.iter().any(|p| p["text"]
            .as_str()
            .is_some_and(|s| s.starts_with("[image: image/png, 70 bytes, not exported]"))),
        "{parts:?}"
    );
    let file = env.root.join("stdout.json");
    std::fs::write(&file, &run.stdout).expect("keep it");
    harbor::validate(&python, &file).expect("Harbor's validator accepts it");
}

/// An unknown id, a file that is no session and an unwritable output are clear errors that
/// write nothing; a torn last line (a crash mid-write) is left out, as the loader leaves it.
#[test]
fn bad_ids_files_and_outputs_are_clear_errors_and_a_torn_line_is_left_out() {
    let env = Env::new();
    let sessions = env.root.join("state/oml/sessions");
    std::fs::create_dir_all(&sessions).expect("the sessions folder");
    let run = export(&env, &["s-nope"]);
    assert_eq!(run.code, 1, "{run:?}");
    assert_eq!(run.stdout, "");
    assert!(run.stderr.contains("no session s-nope"), "{run:?}");
    for id in ["../x", "a/b"] {
        let run = export(&env, &[id]);
        assert_eq!(run.code, 1, "{run:?}");
        assert!(run.stderr.contains("no session"), "{run:?}");
    }
    std::fs::write(sessions.join("s-junk.jsonl"), "{\"type\":\"message\"}\n").unwrap();
    let run = export(&env, &["s-junk"]);
    assert_eq!(run.code, 1, "{run:?}");
    assert!(run.stderr.contains("not a session file"), "{run:?}");

    let torn = "{\"type\":\"session\",\"id\":\"s-torn\",\"created\":1.0,\"version\":\"0.1.0\"}\n\
        {\"type\":\"message\",\"message\":{\"role\":\"user\",\"content\":\"hi\"},\"at\":2.0}\n\
        {\"type\":\"message\",\"message\":{\"role\":\"assis";
    std::fs::write(sessions.join("s-torn.jsonl"), torn).unwrap();
    let run = export(&env, &["s-torn"]);
    assert_eq!(run.code, 0, "{run:?}");
    let t: Value = serde_json::from_str(&run.stdout).expect("JSON");
    assert_eq!(t["steps"].as_array().map(Vec::len), Some(1), "{t}");
    assert_eq!(t["steps"][0]["timestamp"], "1970-01-01T00:00:02.000Z");

    // A FILE that cannot be written (it is a folder) leaves no image behind either.
    let image = format!(
        "{{\"type\":\"session\",\"id\":\"s-img\",\"created\":1.0,\"version\":\"0.1.0\"}}\n\
         {{\"type\":\"message\",\"message\":{{\"role\":\"user\",\"content\":[{{\"type\":\"image_url\",\
         \"image_url\":{{\"url\":\"data:image/png;base64,{PNG}\"}}}}]}},\"at\":2.0}}\n"
    );
    std::fs::write(sessions.join("s-img.jsonl"), image).unwrap();
    let out = env.root.join("out");
    std::fs::create_dir_all(out.join("t.json")).unwrap();
    let run = export(
        &env,
        &["-o", &out.join("t.json").display().to_string(), "s-img"],
    );
    assert_eq!(run.code, 1, "{run:?}");
    assert!(run.stderr.contains("cannot write"), "{run:?}");
    let left: Vec<_> = std::fs::read_dir(&out)
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert_eq!(left, ["t.json"], "only the folder that was there");
    let run = export(
        &env,
        &["-o", &out.join("u.json").display().to_string(), "s-img"],
    );
    assert_eq!(run.code, 0, "{run:?}");
    assert!(out.join("u.images/s-img-image1.png").is_file());

    let nowhere: PathBuf = env.root.join("no/such/dir/t.json");
    let run = export(&env, &["-o", &nowhere.display().to_string(), "s-torn"]);
    assert_eq!(run.code, 1, "{run:?}");
    assert!(run.stderr.contains("cannot write"), "{run:?}");
    assert!(!nowhere.exists());
}
