//! The agent end to end through `oml -p`, continued: the Lisp recipes of examples/lisp
//! installed as init files, and stored sessions (continuing, compaction, reasoning kept).

mod support;

use serde_json::{Value, json};
use support::fake_model::{FakeModel, Reply, Step, delta_chunk, text_chunks, tool_call_chunks};
use support::home::{Env, Run};
use support::model::*;

// --- recipes (examples/lisp)

fn install_example(env: &Env, name: &str) {
    let dir = env.root.join("config/oml/lisp");
    std::fs::create_dir_all(&dir).unwrap();
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("examples/lisp")
        .join(name);
    std::fs::copy(src, dir.join(name)).unwrap();
}

#[test]
fn recipe_project_context_and_usage_totals() {
    let env = Env::new();
    install_example(&env, "project-context.fnl");
    install_example(&env, "usage.fnl");
    env.init(
        r#"(require :project-context)
(require :usage)
(fn commands.ask-twice [input] "Ask twice, then show the totals."
  (agent.complete "one") (agent.complete "two") (commands.tokens ""))"#,
    );
    env.file("AGENTS.md", "Always answer in French.\n");
    let answer = || {
        vec![
            Step::Chunk(delta_chunk(json!({"content": "oui"}), None)),
            Step::Chunk(delta_chunk(json!({}), Some("stop"))),
            support::fake_model::usage_chunk(10, 1),
        ]
    };
    let fake = FakeModel::start(replies(vec![answer(), answer(), answer()]));
    let run = env.run(Some(&fake), &["-p", "hello"]);
    assert_eq!(run.code, 0, "{run:?}");
    let system = fake.requests()[0].body["messages"][0]["content"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        system.ends_with("\n\nProject instructions (AGENTS.md):\n\nAlways answer in French.\n"),
        "{system}"
    );
    let run = env.run(Some(&fake), &["-p", "/ask-twice"]);
    assert_eq!(
        run.stdout, "2 model calls, 20 prompt tokens, 2 completion tokens\n",
        "{run:?}"
    );
}

// --- stored sessions

#[test]
fn print_mode_continues_the_latest_session_here() {
    let env = Env::new();
    let fake = FakeModel::start(replies(vec![
        text_chunks(&["First answer."]),
        text_chunks(&["Second answer."]),
        text_chunks(&["Third answer."]),
        text_chunks(&["Fresh."]),
    ]));
    let run = env.run(Some(&fake), &["-p", "first question"]);
    assert_eq!(run.code, 0, "{run:?}");
    let run = env.run(Some(&fake), &["-p", "second question", "--continue"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(run.stdout, "Second answer.\n");
    let requests = fake.requests();
    assert_eq!(
        roles(&requests[1].body),
        ["system", "user", "assistant", "user"]
    );
    assert_eq!(requests[1].body["messages"][1]["content"], "first question");

    // `oml sessions` lists it, titled by its first message; --session picks it by id.
    let list = env.run(None, &["sessions"]);
    assert_eq!(list.code, 0, "{list:?}");
    let lines: Vec<&str> = list.stdout.lines().collect();
    assert_eq!(lines.len(), 1, "{list:?}");
    assert!(lines[0].ends_with("first question"), "{list:?}");
    let id = lines[0].split_whitespace().next().unwrap();
    let run = env.run(Some(&fake), &["-p", "third", "--session", id, "--json"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(
        run.stdout.contains(&format!("\"session\":\"{id}\"")),
        "{run:?}"
    );
    assert_eq!(
        fake.requests()[2].body["messages"]
            .as_array()
            .unwrap()
            .len(),
        6
    );

    // --no-session stores nothing; an unknown id is an error.
    let run = env.run(Some(&fake), &["-p", "fresh", "--no-session"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(roles(&fake.requests()[3].body), ["system", "user"]);
    assert_eq!(env.run(None, &["sessions"]).stdout.lines().count(), 1);
    let run = env.run(Some(&fake), &["-p", "x", "--session", "s-nope"]);
    assert_eq!(run.code, 1, "{run:?}");
    assert!(run.stderr.contains("no stored session s-nope"), "{run:?}");
}

#[test]
fn openrouters_reasoning_details_go_back_unmodified_also_from_the_session_file() {
    let env = Env::new();
    env.file("notes.txt", "hello\n");
    env.init("(setq llm.provider :openrouter)\n");
    let items = [
        json!({"type": "reasoning.text", "text": "Read it.", "signature": null, "index": 0}),
        json!({"type": "reasoning.encrypted", "data": "opaque==", "id": "rs_1", "index": 1}),
    ];
    let mut first = vec![Step::Chunk(delta_chunk(
        json!({"reasoning": "Read it.", "reasoning_details": items}),
        None,
    ))];
    first.extend(tool_call_chunks(
        "call_1",
        "read",
        &[r#"{"path":"notes.txt"}"#],
    ));
    let fake = FakeModel::start(replies(vec![
        first,
        text_chunks(&["It says hello."]),
        text_chunks(&["Yes."]),
    ]));
    let run = env.run(Some(&fake), &["-p", "What do my notes say?"]);
    assert_eq!(run.code, 0, "{run:?}");
    let run = env.run(Some(&fake), &["-p", "Sure?", "--continue"]);
    assert_eq!(run.code, 0, "{run:?}");
    let requests = fake.requests();
    assert_eq!(
        roles(&requests[2].body),
        ["system", "user", "assistant", "tool", "assistant", "user"]
    );
    // The same prompt's next request, and the next prompt's, read from the session file.
    for request in &requests[1..] {
        let tool_turn = &request.body["messages"][2];
        assert_eq!(tool_turn["reasoning_details"], json!(items), "{tool_turn}");
        assert!(tool_turn.get("reasoning_content").is_none(), "{tool_turn}");
        assert!(tool_turn.get("reasoning").is_none(), "{tool_turn}");
    }
}

#[test]
fn compact_summarises_all_but_the_last_turn() {
    let env = Env::new();
    let fake = FakeModel::start(replies(vec![
        text_chunks(&["First answer."]),
        text_chunks(&["Second answer."]),
        text_chunks(&["THE SUMMARY"]),
        text_chunks(&["Next answer."]),
    ]));
    assert_eq!(env.run(Some(&fake), &["-p", "first question"]).code, 0);
    assert_eq!(
        env.run(Some(&fake), &["-p", "second question", "-c"]).code,
        0
    );
    let run = env.run(Some(&fake), &["-p", "/compact mention names", "-c"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(
        run.stdout, "Compacted 2 messages into a summary.\n",
        "{run:?}"
    );
    let requests = fake.requests();
    let ask = requests[2].body["messages"][1]["content"].as_str().unwrap();
    assert!(ask.contains("[user] first question"), "{ask}");
    assert!(ask.contains("Also: mention names"), "{ask}");
    assert!(!ask.contains("second question"), "{ask}");
    assert_eq!(env.run(Some(&fake), &["-p", "next", "-c"]).code, 0);
    let body = &fake.requests()[3].body;
    assert_eq!(roles(body), ["system", "user", "user", "assistant", "user"]);
    assert_eq!(
        body["messages"][1]["content"],
        "Summary of the earlier conversation:\n\nTHE SUMMARY"
    );
    // The file keeps the whole history: the replaced messages, then the replacement.
    let dir = env.root.join("state/oml/sessions");
    let file = std::fs::read_dir(&dir)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let text = std::fs::read_to_string(file).unwrap();
    assert!(text.contains("\"first question\""));
    assert!(text.contains("\"type\":\"transcript\""));
    assert!(text.contains("\"kind\":\"compaction\""));
}

#[test]
fn a_transcript_past_the_threshold_is_compacted_before_the_model_call() {
    let env = Env::new();
    env.init("(setq llm.context-window 100 agent.compact-at 0.45 agent.compact-keep 0.1)\n");
    let fake = FakeModel::start(replies(vec![
        text_chunks(&["First answer."]),
        text_chunks(&["Second answer."]),
        text_chunks(&["AUTO SUMMARY"]),
        text_chunks(&["Third answer."]),
    ]));
    assert_eq!(env.run(Some(&fake), &["-p", "first question"]).code, 0);
    assert_eq!(
        env.run(Some(&fake), &["-p", "second question", "-c"]).code,
        0
    );
    let run = env.run(
        Some(&fake),
        &["-p", "third question", "-c", "--show-thinking"],
    );
    assert_eq!(run.code, 0, "{run:?}");
    // The pause is explained as reasoning, which --show-thinking prints before the answer.
    assert_eq!(
        run.stdout,
        "Compacting the conversation: it passed agent.compact-at of llm.context-window.\n\
         Third answer.\n",
        "{run:?}"
    );
    let requests = fake.requests();
    assert_eq!(requests.len(), 4);
    let ask = requests[2].body["messages"][1]["content"].as_str().unwrap();
    assert!(ask.contains("[user] second question"), "{ask}");
    assert_eq!(roles(&requests[3].body), ["system", "user", "user"]);
    assert_eq!(requests[3].body["messages"][2]["content"], "third question");
}

/// Run `oml -p` over a fake model that calls each of CALLS (tool name, JSON arguments) in turn,
/// then answers; returns what the model read back for each call.
fn tool_results(env: &Env, path: Option<&std::ffi::OsStr>, calls: &[(&str, &str)]) -> Vec<String> {
    let mut list: Vec<Vec<Step>> = calls
        .iter()
        .enumerate()
        .map(|(i, (name, args))| tool_call_chunks(&format!("call_{i}"), name, &[args]))
        .collect();
    list.push(text_chunks(&["done"]));
    let fake = FakeModel::start(replies(list));
    let mut cmd = env.command(Some(&fake), &["-p", "search"]);
    if let Some(path) = path {
        cmd.env("PATH", path);
    }
    let run = Run::from(cmd.output().expect("run oml"));
    assert_eq!(run.code, 0, "{run:?}");
    let requests = fake.requests();
    (1..=calls.len())
        .map(|i| {
            let msgs = requests[i].body["messages"].as_array().unwrap();
            let last = msgs.last().unwrap();
            assert_eq!(last["role"], "tool");
            last["content"].as_str().unwrap().to_owned()
        })
        .collect()
}

/// A directory holding only a link to the system's grep: a PATH without rg.
fn path_without_rg(env: &Env) -> std::ffi::OsString {
    let bin = env.root.join("bin-grep-only");
    std::fs::create_dir_all(&bin).unwrap();
    let grep = std::env::split_paths(&std::env::var_os("PATH").unwrap())
        .map(|d| d.join("grep"))
        .find(|p| p.is_file())
        .expect("grep on PATH");
    std::os::unix::fs::symlink(grep, bin.join("grep")).unwrap();
    bin.into_os_string()
}

fn search_tree(env: &Env) {
    install_example(env, "search-tools.fnl");
    env.init("(require :search-tools)");
    for d in ["src/lib", ".hidden", "empty"] {
        std::fs::create_dir_all(env.project.join(d)).unwrap();
    }
    env.file("a.txt", "hello\nworld\n");
    env.file("top.rs", "fn top() {}\n");
    env.file("src/main.rs", "fn main() {}\n// hello there\n");
    env.file("src/lib/x.rs", "pub fn x() {}\n");
    env.file(".hidden/h.rs", "hello hidden\n");
    env.file(".env", "SECRET=1\n");
}

#[test]
fn recipe_search_tools_ls_and_find() {
    let env = Env::new();
    search_tree(&env);
    let out = tool_results(
        &env,
        None,
        &[
            ("ls", "{}"),
            ("ls", r#"{"path": "src"}"#),
            ("ls", r#"{"path": "empty"}"#),
            ("ls", r#"{"path": "a.txt"}"#),
            ("find", r#"{"pattern": "**/*.rs"}"#),
            ("find", r#"{"pattern": "*.rs"}"#),
            ("find", r#"{"pattern": "*.rs", "path": "src/lib"}"#),
            ("find", r#"{"pattern": "{a,top}.*"}"#),
            ("find", r#"{"pattern": "**/*.py"}"#),
        ],
    );
    assert_eq!(
        out,
        [
            ".env\n.hidden/\na.txt\nempty/\nsrc/\ntop.rs",
            "lib/\nmain.rs",
            "(empty)",
            "Not a directory: a.txt",
            "src/lib/x.rs\nsrc/main.rs\ntop.rs",
            "top.rs",
            "x.rs",
            "a.txt\ntop.rs",
            "No files found.",
        ]
    );
}

#[test]
fn recipe_search_tools_grep_falls_back_to_grep_without_rg() {
    let env = Env::new();
    search_tree(&env);
    let lines: String = (1..=250).map(|i| format!("needle {i}\n")).collect();
    env.file("many.txt", &lines);
    env.file("long.txt", &format!("needle {}\n", "x".repeat(400)));
    let path = path_without_rg(&env);
    let out = tool_results(
        &env,
        Some(&path),
        &[
            ("grep", r#"{"pattern": "hel+o"}"#),
            ("grep", r#"{"pattern": "hello", "glob": "*.rs"}"#),
            ("grep", r#"{"pattern": "nothing-matches"}"#),
            ("grep", r#"{"pattern": "x", "path": "missing"}"#),
            ("grep", r#"{"pattern": "needle"}"#),
        ],
    );
    // grep -r does not skip hidden files; ripgrep does.
    assert_eq!(
        out[0],
        ".hidden/h.rs:1:hello hidden\na.txt:1:hello\nsrc/main.rs:2:// hello there"
    );
    assert_eq!(
        out[1],
        ".hidden/h.rs:1:hello hidden\nsrc/main.rs:2:// hello there"
    );
    assert_eq!(out[2], "No matches.");
    assert!(
        out[3].starts_with("grep failed: grep: missing: No such file"),
        "{}",
        out[3]
    );
    let lines: Vec<&str> = out[4].lines().collect();
    assert_eq!(lines.len(), 201);
    assert_eq!(
        lines[0],
        format!("long.txt:1:needle {}...", "x".repeat(300 - 18))
    );
    assert_eq!(lines[1], "many.txt:1:needle 1");
    assert_eq!(lines[199], "many.txt:199:needle 199");
    assert_eq!(lines[200], "[51 more lines; narrow the search]");
}

#[test]
fn recipe_search_tools_grep_uses_rg_when_on_path() {
    let env = Env::new();
    search_tree(&env);
    let bin = env.root.join("bin-rg");
    std::fs::create_dir_all(&bin).unwrap();
    let log = env.root.join("rg-args");
    let rg = bin.join("rg");
    std::fs::write(
        &rg,
        format!(
            "#!/bin/sh\nprintf '%s\\n' \"$@\" > {}\necho 'src/main.rs:2:// hello there'\n",
            log.display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(&rg, std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = std::env::join_paths(
        std::iter::once(bin).chain(std::env::split_paths(&std::env::var_os("PATH").unwrap())),
    )
    .unwrap();
    let out = tool_results(
        &env,
        Some(&path),
        &[(
            "grep",
            r#"{"pattern": "hello", "glob": "*.rs", "path": "src"}"#,
        )],
    );
    assert_eq!(out, ["src/main.rs:2:// hello there"]);
    assert_eq!(
        std::fs::read_to_string(&log).unwrap(),
        "-n\n--no-heading\n--color=never\n-g\n*.rs\n-e\nhello\nsrc\n"
    );
}

#[test]
fn recipe_permissions_blocks_a_write_in_print_mode() {
    let env = Env::new();
    install_example(&env, "permissions.fnl");
    env.init("(require :permissions)");
    env.file("a.txt", "hello\n");
    let out = tool_results(
        &env,
        None,
        &[
            ("write", r#"{"path": "new.txt", "content": "x"}"#),
            ("read", r#"{"path": "a.txt"}"#),
        ],
    );
    assert_eq!(
        out[0],
        "Blocked: nobody can be asked whether write may run here (print mode), so it counts as \
         rejected"
    );
    assert!(out[1].contains("hello"), "{}", out[1]);
    assert!(!env.project.join("new.txt").exists());
}

#[test]
fn recipe_permissions_follows_the_answers_and_remembers_always() {
    let env = Env::new();
    install_example(&env, "permissions.fnl");
    env.init(
        r#"(require :permissions)
(local answers [:allow-once :reject-always :allow-always :reject-once :cancelled])
(set agent.ask-permission (fn [call] (table.remove answers 1)))"#,
    );
    env.file("a.txt", "one\n");
    let out = tool_results(
        &env,
        None,
        &[
            ("bash", r#"{"command": "echo ran"}"#),
            ("write", r#"{"path": "w.txt", "content": "x"}"#),
            ("write", r#"{"path": "w.txt", "content": "x"}"#),
            (
                "edit",
                r#"{"path": "a.txt", "old_text": "one", "new_text": "two"}"#,
            ),
            (
                "edit",
                r#"{"path": "a.txt", "old_text": "two", "new_text": "three"}"#,
            ),
            ("bash", r#"{"command": "echo ran"}"#),
            ("bash", r#"{"command": "echo ran"}"#),
            ("read", r#"{"path": "a.txt"}"#),
        ],
    );
    assert_eq!(out[0].trim(), "ran");
    assert_eq!(out[1], "Blocked: the user rejected it");
    assert_eq!(out[2], "Blocked: the user always rejects write");
    assert!(!out[3].starts_with("Blocked"), "{}", out[3]);
    assert!(!out[4].starts_with("Blocked"), "{}", out[4]);
    assert_eq!(out[5], "Blocked: the user rejected it");
    assert_eq!(
        out[6],
        "Blocked: the prompt was cancelled before the user answered"
    );
    assert!(out[7].contains("three"), "{}", out[7]);
    assert!(!env.project.join("w.txt").exists());
    // The remembered write and edit were not asked again: a sixth question would have had no
    // answer (nil), which blocks.
    assert_eq!(
        std::fs::read_to_string(env.project.join("a.txt")).unwrap(),
        "three\n"
    );
}

/// The role and content of each message of a recorded request, after the system prompt.
fn shape(body: &Value) -> Vec<String> {
    body["messages"].as_array().unwrap()[1..]
        .iter()
        .map(|m| {
            let content = m["content"].as_str().unwrap_or("");
            match m["tool_calls"].as_array() {
                Some(calls) => format!(
                    "{}: {content}[{}]",
                    m["role"].as_str().unwrap(),
                    calls[0]["function"]["name"].as_str().unwrap()
                ),
                None => format!("{}: {content}", m["role"].as_str().unwrap()),
            }
        })
        .collect()
}

#[test]
fn recipe_plan_review_plans_executes_and_reviews() {
    let env = Env::new();
    install_example(&env, "plan-review.fnl");
    env.init("(require :plan-review)");
    let fake = FakeModel::start(replies(vec![
        text_chunks(&["1. write a.txt"]),
        tool_call_chunks("call_1", "write", &[r#"{"path": "a.txt", "content": "a"}"#]),
        text_chunks(&["wrote a.txt"]),
        text_chunks(&["b.txt is missing"]),
        text_chunks(&["nothing else to do"]),
        text_chunks(&["DONE"]),
    ]));
    let run = env.run(Some(&fake), &["-p", "make a.txt and b.txt"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(
        run.stdout,
        format!(
            "1. write a.txt\n\n> write: Write a.txt\n  ok: Wrote 1 byte to {}/a.txt\nwrote \
             a.txt\n\nNot done yet: b.txt is missing\n\nnothing else to do\n",
            env.project.display()
        ),
        "{run:?}"
    );
    let requests = fake.requests();
    assert_eq!(requests.len(), 6);
    let with_tools: Vec<bool> = requests
        .iter()
        .map(|r| !tool_names(&r.body).is_empty())
        .collect();
    assert_eq!(with_tools, [false, true, true, false, true, false]);
    let plan_q = "user: Before doing anything, write a short numbered plan for the request above. \
                  Do not carry it out yet.";
    let review_q = "user: Review the work above against the request. If it is complete, answer \
                    exactly DONE. Otherwise list what is missing.";
    assert_eq!(
        shape(&requests[0].body),
        ["user: make a.txt and b.txt", plan_q]
    );
    let executed = [
        "user: make a.txt and b.txt",
        "assistant: 1. write a.txt",
        "user: Carry out the plan.",
    ];
    assert_eq!(shape(&requests[1].body), executed);
    let mut reviewed: Vec<String> = executed.iter().map(|s| s.to_string()).collect();
    reviewed.extend([
        "assistant: [write]".to_owned(),
        format!("tool: Wrote 1 byte to {}/a.txt", env.project.display()),
        "assistant: wrote a.txt".to_owned(),
    ]);
    let mut review1 = reviewed.clone();
    review1.push(review_q.to_owned());
    assert_eq!(shape(&requests[3].body), review1);
    reviewed.push("user: Not done yet: b.txt is missing".to_owned());
    assert_eq!(shape(&requests[4].body), reviewed);
    assert_eq!(shape(&requests[5].body).last().unwrap(), review_q);
}

#[test]
fn recipe_plan_review_stops_after_max_reviews_and_unadvise_restores_the_loop() {
    let env = Env::new();
    install_example(&env, "plan-review.fnl");
    env.init("(require :plan-review)");
    let fake = FakeModel::start(replies(vec![
        text_chunks(&["plan"]),
        text_chunks(&["did 1"]),
        text_chunks(&["missing 1"]),
        text_chunks(&["did 2"]),
        text_chunks(&["missing 2"]),
        text_chunks(&["did 3"]),
    ]));
    let run = env.run(Some(&fake), &["-p", "task"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(fake.requests().len(), 6, "two reviews, then stop");
    let last = shape(&fake.requests()[5].body);
    assert_eq!(last.last().unwrap(), "user: Not done yet: missing 2");

    env.init("(require :plan-review)\n(unadvise! agent.run :plan-review)");
    let fake = FakeModel::start(replies(vec![text_chunks(&["plain"])]));
    let run = env.run(Some(&fake), &["-p", "task"]);
    assert_eq!(run.stdout, "plain\n", "{run:?}");
    assert_eq!(fake.requests().len(), 1);
    assert_eq!(shape(&fake.requests()[0].body), ["user: task"]);
}

#[test]
fn a_context_length_error_compacts_once_and_retries_once_and_resuming_keeps_the_compaction() {
    let env = Env::new();
    let fake = FakeModel::start([
        Reply::from(text_chunks(&["First answer."])),
        Reply::error(
            400,
            r#"{"error":{"message":"This model's maximum context length is 8192 tokens.","code":"context_length_exceeded"}}"#,
        ),
        Reply::from(text_chunks(&["EARLIER SUMMARY"])),
        Reply::from(text_chunks(&["Second answer."])),
        Reply::from(text_chunks(&["Third answer."])),
    ]);
    assert_eq!(env.run(Some(&fake), &["-p", "first question"]).code, 0);
    let run = env.run(
        Some(&fake),
        &["-p", "second question", "-c", "--show-thinking"],
    );
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(
        run.stdout,
        "Compacting the conversation: the model refused it as longer than its context.\n\
         Second answer.\n",
        "{run:?}"
    );
    // Resuming the stored session after the compaction sees the compacted view.
    let run = env.run(Some(&fake), &["-p", "third question", "-c"]);
    assert_eq!(run.code, 0, "{run:?}");
    let requests = fake.requests();
    assert_eq!(requests.len(), 5);
    assert_eq!(
        roles(&requests[4].body),
        ["system", "user", "user", "assistant", "user"]
    );
    assert!(
        requests[4].body["messages"][1]["content"]
            .as_str()
            .unwrap()
            .contains("EARLIER SUMMARY")
    );
    // The summariser got the older turn, without tools.
    assert!(requests[2].body.get("tools").is_none());
    // The retry carries the summary, then the question, and nothing older.
    let retry = &requests[3].body["messages"];
    assert_eq!(roles(&requests[3].body), ["system", "user", "user"]);
    assert!(
        retry[1]["content"]
            .as_str()
            .unwrap()
            .contains("EARLIER SUMMARY"),
        "{retry}"
    );
    assert_eq!(retry[2]["content"], "second question");
}

/// A rate limit that speaks of tokens is not a context refusal: the conversation is not
/// compacted away for it (the provider's wording is read once, where the answer is parsed).
#[test]
fn a_rate_limit_about_tokens_is_reported_not_compacted_for() {
    let env = Env::new();
    env.home.write_user_init("(setq llm.max-retries 0)");
    let limit = r#"{"error":{"message":"Rate limit reached: too many tokens per minute","code":"rate_limit_exceeded"}}"#;
    let fake = FakeModel::start([
        Reply::from(text_chunks(&["First answer."])),
        Reply::error(429, limit),
        Reply::from(text_chunks(&["SUMMARY"])),
    ]);
    assert_eq!(env.run(Some(&fake), &["-p", "first question"]).code, 0);
    let run = env.run(Some(&fake), &["-p", "second question", "-c"]);
    assert_eq!(run.code, 3, "{run:?}");
    assert!(run.stderr.contains("too many tokens per minute"), "{run:?}");
    assert!(!run.stdout.contains("Compacting"), "{run:?}");
    assert_eq!(fake.requests().len(), 2, "no summary call was made");
}

#[test]
fn a_second_context_length_error_is_reported_not_retried_again() {
    let env = Env::new();
    let too_long = r#"{"error":{"message":"prompt is too long"}}"#;
    let fake = FakeModel::start([
        Reply::from(text_chunks(&["First answer."])),
        Reply::error(400, too_long),
        Reply::from(text_chunks(&["SUMMARY"])),
        Reply::error(400, too_long),
    ]);
    assert_eq!(env.run(Some(&fake), &["-p", "first question"]).code, 0);
    let run = env.run(Some(&fake), &["-p", "second question", "-c"]);
    assert_eq!(run.code, 3, "{run:?}");
    assert!(run.stderr.contains("prompt is too long"), "{run:?}");
    assert_eq!(fake.requests().len(), 4);
}
