//! Claude Code's hooks as users have them: real hook scripts in the settings files, run by the
//! real binary in print mode against a scripted fake model over TCP. Each test reads what the
//! model was sent next (the tool result, the context) and what the hook was given.

mod support;

use std::path::Path;

use support::fake_model::{FakeModel, Reply, text_chunks, tool_call_chunks};
use support::home::{Env, Run};

/// Write the user's `~/.claude/settings.json` with `hooks` (a JSON object of events).
fn user_hooks(env: &Env, hooks: &str) {
    let dir = env.home.home.join(".claude");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("settings.json"),
        format!(r#"{{"hooks": {hooks}}}"#),
    )
    .unwrap();
}

/// A user `SessionEnd` hook that writes the event it gets to a file; the file's path.
fn session_end_hook(env: &Env) -> std::path::PathBuf {
    let ended = env.root.join("ended.json");
    user_hooks(
        env,
        &format!(
            r#"{{"SessionEnd": [{{"hooks": [{{"type": "command", "command": "cat > {}"}}]}}]}}"#,
            ended.display()
        ),
    );
    ended
}

/// A hook script in the test's root, executable; returns its path.
fn script(env: &Env, name: &str, body: &str) -> String {
    let path = env.root.join(name);
    std::fs::write(&path, format!("#!/bin/bash\n{body}\n")).unwrap();
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path.display().to_string()
}

/// One print-mode turn in MODE making `calls`, then "done"; returns the run and every request.
fn turn(env: &Env, mode: &str, calls: &[(&str, &str)], prompt: &str) -> (Run, FakeModel) {
    let mut list: Vec<_> = calls
        .iter()
        .enumerate()
        .map(|(i, (name, args))| {
            Reply::Stream(tool_call_chunks(&format!("call_{i}"), name, &[args]))
        })
        .collect();
    list.push(Reply::Stream(text_chunks(&["done"])));
    let fake = FakeModel::start(list);
    let out = env.run(Some(&fake), &["-p", "--mode", mode, prompt]);
    (out, fake)
}

/// The content of the last message of request `i`.
fn last_content(fake: &FakeModel, i: usize) -> String {
    let requests = fake.requests();
    let msgs = requests[i].body["messages"].as_array().unwrap();
    msgs.last().unwrap()["content"]
        .as_str()
        .unwrap_or("")
        .to_owned()
}

fn read_json(path: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[test]
fn exit_2_blocks_the_command_and_the_model_reads_the_reason() {
    let env = Env::new();
    env.file("victim", "still here\n");
    let guard = script(
        &env,
        "guard.sh",
        r#"input=$(cat); case "$input" in *'rm '*) echo "no rm in this project" >&2; exit 2;; esac; exit 0"#,
    );
    user_hooks(
        &env,
        &format!(
            r#"{{"PreToolUse": [{{"matcher": "Bash", "hooks": [{{"type": "command", "command": "{guard}"}}]}}]}}"#
        ),
    );
    let (out, fake) = turn(
        &env,
        "yolo",
        &[
            ("bash", r#"{"command": "rm -f victim"}"#),
            ("bash", r#"{"command": "echo fine"}"#),
        ],
        "go",
    );
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(
        last_content(&fake, 1),
        "Blocked by a hook: no rm in this project"
    );
    assert!(env.project.join("victim").exists());
    assert_eq!(last_content(&fake, 2).trim(), "fine");
}

#[test]
fn the_input_a_hook_receives_field_by_field_and_its_environment() {
    let env = Env::new();
    let out_dir = env.root.join("seen");
    std::fs::create_dir_all(&out_dir).unwrap();
    let record = script(
        &env,
        "record.sh",
        &format!(
            r#"input=$(cat); event=$(printf '%s' "$input" | sed -n 's/.*"hook_event_name":"\([A-Za-z]*\)".*/\1/p')
printf '%s' "$input" > {dir}/$event.json
printf '%s|%s' "$CLAUDE_PROJECT_DIR" "$OML_PROJECT_DIR" > {dir}/$event.env"#,
            dir = out_dir.display()
        ),
    );
    let hook = format!(r#"[{{"hooks": [{{"type": "command", "command": "{record}"}}]}}]"#);
    user_hooks(
        &env,
        &format!(
            r#"{{"PreToolUse": {hook}, "PostToolUse": {hook}, "UserPromptSubmit": {hook}, "SessionStart": {hook}, "Stop": {hook}}}"#
        ),
    );
    let (out, _fake) = turn(
        &env,
        "accept-edits",
        &[("write", r#"{"path": "a.txt", "content": "x"}"#)],
        "make a file",
    );
    assert_eq!(out.code, 0, "{out:?}");
    let pre = read_json(&out_dir.join("PreToolUse.json"));
    let project = env.project.display().to_string();
    assert_eq!(pre["hook_event_name"], "PreToolUse");
    assert_eq!(pre["tool_name"], "Write");
    assert_eq!(pre["tool_input"]["file_path"], format!("{project}/a.txt"));
    assert_eq!(pre["tool_input"]["content"], "x");
    assert_eq!(pre["tool_use_id"], "call_0");
    assert_eq!(pre["cwd"], project.as_str());
    assert_eq!(pre["permission_mode"], "acceptEdits");
    let sid = pre["session_id"].as_str().unwrap();
    let transcript = pre["transcript_path"].as_str().unwrap();
    assert!(
        transcript.ends_with(&format!("{sid}.jsonl")),
        "{transcript}"
    );
    assert!(Path::new(transcript).is_file(), "{transcript}");
    let post = read_json(&out_dir.join("PostToolUse.json"));
    assert_eq!(post["tool_name"], "Write");
    assert!(post["tool_response"]["content"].is_string(), "{post}");
    let prompt = read_json(&out_dir.join("UserPromptSubmit.json"));
    assert_eq!(prompt["prompt"], "make a file");
    assert_eq!(
        read_json(&out_dir.join("SessionStart.json"))["source"],
        "startup"
    );
    assert_eq!(
        read_json(&out_dir.join("Stop.json"))["stop_hook_active"],
        false
    );
    let vars = std::fs::read_to_string(out_dir.join("PreToolUse.env")).unwrap();
    assert_eq!(vars, format!("{project}|{project}"));
}

#[test]
fn updated_input_changes_the_command_and_additional_context_reaches_the_model() {
    let env = Env::new();
    let rewrite = script(
        &env,
        "rewrite.sh",
        r#"cat >/dev/null; echo '{"hookSpecificOutput": {"hookEventName": "PreToolUse", "updatedInput": {"command": "echo changed"}, "additionalContext": "PRE-CONTEXT"}}'"#,
    );
    let context = script(&env, "context.sh", "cat >/dev/null; echo PROMPT-CONTEXT");
    user_hooks(
        &env,
        &format!(
            r#"{{"PreToolUse": [{{"matcher": "Bash", "hooks": [{{"type": "command", "command": "{rewrite}"}}]}}],
                "UserPromptSubmit": [{{"hooks": [{{"type": "command", "command": "{context}"}}]}}]}}"#
        ),
    );
    let (out, fake) = turn(
        &env,
        "yolo",
        &[("bash", r#"{"command": "echo original"}"#)],
        "go",
    );
    assert_eq!(out.code, 0, "{out:?}");
    let result = last_content(&fake, 1);
    assert!(result.starts_with("changed\n"), "{result}");
    assert!(result.contains("PRE-CONTEXT"), "{result}");
    let first = fake.requests()[0].body["messages"].to_string();
    assert!(first.contains("PROMPT-CONTEXT"), "{first}");
}

#[test]
fn permission_decision_deny_blocks_and_ask_asks_even_in_yolo() {
    let env = Env::new();
    let decide = script(
        &env,
        "decide.sh",
        r#"input=$(cat); case "$input" in
*deny-me*) echo '{"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny", "permissionDecisionReason": "not this one"}}';;
*ask-me*) echo '{"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "ask"}}';;
esac"#,
    );
    user_hooks(
        &env,
        &format!(
            r#"{{"PreToolUse": [{{"matcher": "Bash", "hooks": [{{"type": "command", "command": "{decide}"}}]}}]}}"#
        ),
    );
    // The user's answer, scripted: the question is asked (and recorded), then refused.
    env.init(
        r#"(set _G.asked [])
(set agent.ask-permission (fn [call] (table.insert _G.asked call.args.command) :reject-once))
(hook.add :Stop nil (fn [] (print (.. "ASKED:" (table.concat _G.asked ",")))))"#,
    );
    let (out, fake) = turn(
        &env,
        "yolo",
        &[
            ("bash", r#"{"command": "echo deny-me"}"#),
            ("bash", r#"{"command": "echo ask-me"}"#),
            ("bash", r#"{"command": "echo plain"}"#),
        ],
        "go",
    );
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(last_content(&fake, 1), "Blocked by a hook: not this one");
    assert_eq!(last_content(&fake, 2), "Blocked: the user rejected it");
    assert_eq!(last_content(&fake, 3).trim(), "plain");
    assert!(
        out.stdout.contains("ASKED:echo ask-me") || out.stderr.contains("ASKED:echo ask-me"),
        "{out:?}"
    );
}

#[test]
fn a_stop_hook_sends_the_agent_back_once() {
    let env = Env::new();
    let stop = script(
        &env,
        "stop.sh",
        r#"input=$(cat); case "$input" in
*'"stop_hook_active":false'*) echo '{"decision": "block", "reason": "run the tests first"}';;
esac"#,
    );
    user_hooks(
        &env,
        &format!(r#"{{"Stop": [{{"hooks": [{{"type": "command", "command": "{stop}"}}]}}]}}"#),
    );
    let fake = FakeModel::start([
        Reply::Stream(text_chunks(&["done"])),
        Reply::Stream(text_chunks(&["tests pass"])),
    ]);
    let out = env.run(Some(&fake), &["-p", "go"]);
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(fake.requests().len(), 2);
    let back = last_content(&fake, 1);
    assert!(back.contains("run the tests first"), "{back}");
    assert!(out.stdout.contains("tests pass"), "{out:?}");
}

#[test]
fn a_hanging_hook_times_out_and_a_crashing_one_does_not_block_but_a_crashing_lisp_one_does() {
    let env = Env::new();
    let hang = script(&env, "hang.sh", "cat >/dev/null; sleep 60");
    let crash = script(&env, "crash.sh", "cat >/dev/null; echo oops >&2; exit 1");
    user_hooks(
        &env,
        &format!(
            r#"{{"PreToolUse": [{{"matcher": "Bash", "hooks": [
                {{"type": "command", "command": "{hang}", "timeout": 1}},
                {{"type": "command", "command": "{crash}"}}]}}]}}"#
        ),
    );
    env.init(r#"(hook.add :PreToolUse "write" (fn [event] (error "boom")) :strict)"#);
    let (out, fake) = turn(
        &env,
        "yolo",
        &[
            ("bash", r#"{"command": "echo ran"}"#),
            ("write", r#"{"path": "w.txt", "content": "x"}"#),
        ],
        "go",
    );
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(last_content(&fake, 1).trim(), "ran");
    let shown = format!("{}{}", out.stdout, out.stderr);
    assert!(shown.contains("timed out"), "{out:?}");
    assert!(shown.contains("exited with status 1: oops"), "{out:?}");
    let blocked = last_content(&fake, 2);
    assert!(
        blocked.starts_with("Blocked by a hook: the Lisp hook strict"),
        "{blocked}"
    );
    assert!(blocked.contains("boom"), "{blocked}");
    assert!(!env.project.join("w.txt").exists());
}

#[test]
fn hooks_of_one_event_run_at_the_same_time() {
    let env = Env::new();
    // Each waits for the other's mark: run one after the other, the first would give up.
    let meet = |me: &str, other: &str| {
        script(
            &env,
            &format!("{me}.sh"),
            &format!(
                "cat >/dev/null; touch {root}/{me}; for i in $(seq 100); do [ -f {root}/{other} ] && exit 0; sleep 0.1; done; echo alone >&2; exit 1",
                root = env.root.display()
            ),
        )
    };
    let (a, b) = (meet("a", "b"), meet("b", "a"));
    user_hooks(
        &env,
        &format!(
            r#"{{"PreToolUse": [{{"hooks": [{{"type": "command", "command": "{a}"}}]}},
                                {{"hooks": [{{"type": "command", "command": "{b}"}}]}}]}}"#
        ),
    );
    let (out, fake) = turn(
        &env,
        "yolo",
        &[("bash", r#"{"command": "echo ran"}"#)],
        "go",
    );
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(last_content(&fake, 1).trim(), "ran");
    assert!(!format!("{out:?}").contains("alone"), "{out:?}");
}

#[test]
fn codex_hooks_json_and_an_http_hook_are_run_too() {
    let env = Env::new();
    // An HTTP hook endpoint: answers every POST with a deny, and keeps the body it was sent.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let server = std::thread::spawn(move || {
        use std::io::{BufRead as _, BufReader, Read as _, Write as _};
        let (stream, _) = listener.accept().unwrap();
        let mut reader = BufReader::new(stream);
        let mut length = 0;
        loop {
            let mut line = String::new();
            reader.read_line(&mut line).unwrap();
            if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                length = v.trim().parse().unwrap();
            }
            if line == "\r\n" {
                break;
            }
        }
        let mut body = vec![0; length];
        reader.read_exact(&mut body).unwrap();
        let answer = r#"{"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny", "permissionDecisionReason": "the http hook says no"}}"#;
        write!(
            reader.get_mut(),
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{answer}",
            answer.len()
        )
        .unwrap();
        String::from_utf8(body).unwrap()
    });
    let codex = env.home.home.join(".codex");
    std::fs::create_dir_all(&codex).unwrap();
    let marker = env.root.join("codex-ran");
    std::fs::write(
        codex.join("hooks.json"),
        format!(
            r#"{{"hooks": {{"PreToolUse": [{{"matcher": "Bash", "hooks": [
                {{"type": "command", "command": "cat >/dev/null; touch {}"}},
                {{"type": "http", "url": "http://127.0.0.1:{port}/hook", "timeout": 30}}]}}]}}}}"#,
            marker.display()
        ),
    )
    .unwrap();
    let (out, fake) = turn(
        &env,
        "yolo",
        &[("bash", r#"{"command": "echo ran"}"#)],
        "go",
    );
    assert_eq!(out.code, 0, "{out:?}");
    assert!(marker.exists(), "the Codex hook did not run");
    assert_eq!(
        last_content(&fake, 1),
        "Blocked by a hook: the http hook says no"
    );
    let sent: serde_json::Value = serde_json::from_str(&server.join().unwrap()).unwrap();
    assert_eq!(sent["tool_input"]["command"], "echo ran");
}

#[test]
fn hooks_lists_sources_unsupported_events_and_bad_json_at_its_line() {
    let env = Env::new();
    user_hooks(
        &env,
        r#"{"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "true"}]}],
            "PostCompact": [{"hooks": [{"type": "command", "command": "true"}]}],
            "Stop": [{"hooks": [{"type": "prompt", "prompt": "done?"}]}]}"#,
    );
    env.file(".claude/settings.json", "{\n  \"hooks\": {\n    oops\n}");
    env.init(r#"(hook.add :PostToolUse "edit|write" (fn [] nil) :format-on-save)"#);
    let out = env.run(None, &["-p", "/hooks"]);
    assert_eq!(out.code, 0, "{out:?}");
    let home = env.home.home.display().to_string();
    assert!(
        out.stdout.contains(&format!(
            "- PreToolUse Bash: command `true`  [{home}/.claude/settings.json hooks.PreToolUse[0]]"
        )),
        "{out:?}"
    );
    assert!(
        out.stdout.contains("PostCompact")
            && out
                .stdout
                .contains("not run: unsupported: oml has no moment for this event"),
        "{out:?}"
    );
    assert!(
        out.stdout.contains("prompt (oml does not run this type)"),
        "{out:?}"
    );
    assert!(
        out.stdout
            .contains("- PostToolUse edit|write: Lisp format-on-save"),
        "{out:?}"
    );
    assert!(
        out.stdout
            .contains(".claude/settings.json: bad JSON at line 3"),
        "{out:?}"
    );
}

#[test]
fn a_lisp_hook_decides_in_process_on_olms_or_claudes_tool_name() {
    let env = Env::new();
    env.init(
        r#"(hook.add :PreToolUse "Bash" (fn [e] (when (e.tool_input.command:find "secret")
  {:hookSpecificOutput {:permissionDecision :deny :permissionDecisionReason "not the secret"}})))
(hook.add :PreToolUse "write" (fn [e] {:updatedInput {:file_path e.tool_input.file_path :content "from lisp"}}))"#,
    );
    let (out, fake) = turn(
        &env,
        "yolo",
        &[
            ("bash", r#"{"command": "cat secret"}"#),
            ("write", r#"{"path": "w.txt", "content": "from the model"}"#),
        ],
        "go",
    );
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(last_content(&fake, 1), "Blocked by a hook: not the secret");
    assert_eq!(
        std::fs::read_to_string(env.project.join("w.txt")).unwrap(),
        "from lisp"
    );
}

#[test]
fn continue_false_ends_the_turn_after_the_call_with_its_reason() {
    let env = Env::new();
    let stop = script(
        &env,
        "stop.sh",
        r#"cat >/dev/null; echo '{"continue": false, "stopReason": "quota reached"}'"#,
    );
    let marker = env.root.join("stop-hook-ran");
    user_hooks(
        &env,
        &format!(
            r#"{{"PostToolUse": [{{"hooks": [{{"type": "command", "command": "{stop}"}}]}}],
                "Stop": [{{"hooks": [{{"type": "command", "command": "cat >/dev/null; touch {}; echo '{{\"decision\": \"block\"}}'"}}]}}]}}"#,
            marker.display()
        ),
    );
    let fake = FakeModel::start([
        Reply::Stream(tool_call_chunks(
            "call_0",
            "bash",
            &[r#"{"command": "echo one"}"#],
        )),
        Reply::Stream(tool_call_chunks(
            "call_1",
            "bash",
            &[r#"{"command": "echo two"}"#],
        )),
        Reply::Stream(text_chunks(&["done"])),
    ]);
    let out = env.run(Some(&fake), &["-p", "--mode", "yolo", "go"]);
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(
        fake.requests().len(),
        1,
        "the loop went on after continue: false"
    );
    assert!(format!("{out:?}").contains("quota reached"), "{out:?}");
    assert!(!marker.exists(), "a Stop hook ran after continue: false");
}

#[test]
fn sub_agents_and_compaction_fire_their_own_events_and_not_the_prompts() {
    let env = Env::new();
    let log = env.root.join("events");
    env.init(&format!(
        r#"(each [_ e (ipairs [:SessionStart :UserPromptSubmit :PreToolUse :SubagentStart :SubagentStop :Stop :PreCompact])]
  (hook.add e nil (fn [i] (with-open [f (io.open "{}" :a)]
    (f:write (.. i.hook_event_name " " (or i.agent_type i.tool_name i.trigger "") "\n"))) nil)))"#,
        log.display()
    ));
    let fake = FakeModel::start([
        Reply::Stream(tool_call_chunks(
            "call_1",
            "task",
            &[r#"{"agent": "explore", "prompt": "look around"}"#],
        )),
        Reply::Stream(text_chunks(&["looked"])),
        Reply::Stream(text_chunks(&["done"])),
        Reply::Stream(text_chunks(&["again"])),
        Reply::Stream(text_chunks(&["the summary"])),
    ]);
    let out = env.run(Some(&fake), &["-p", "--mode", "yolo", "go"]);
    assert_eq!(out.code, 0, "{out:?}");
    let again = env.run(Some(&fake), &["-p", "--continue", "again"]);
    assert_eq!(again.code, 0, "{again:?}");
    let compact = env.run(Some(&fake), &["-p", "--continue", "/compact"]);
    assert_eq!(compact.code, 0, "{compact:?}");
    assert!(compact.stdout.contains("Compacted"), "{compact:?}");
    let events = std::fs::read_to_string(&log).unwrap();
    assert_eq!(
        events.lines().collect::<Vec<_>>(),
        [
            "SessionStart ",
            "UserPromptSubmit ",
            "PreToolUse Task",
            "SubagentStart explore",
            "SubagentStop ",
            "Stop ",
            "SessionStart ",
            "UserPromptSubmit ",
            "Stop ",
            "PreCompact manual",
        ],
        "{events}"
    );
}

#[test]
fn session_end_runs_when_an_editor_closes_the_session() {
    use support::editor::Editor;
    let env = Env::new();
    let ended = session_end_hook(&env);
    let fake = FakeModel::start([Reply::Stream(text_chunks(&["hello"]))]);
    let mut ed = Editor::spawn(env.command(Some(&fake), &["acp"]));
    ed.initialize();
    let (sid, _) = ed.new_session_with(&env.project, serde_json::json!([]));
    let id = ed.prompt(&sid, "hi");
    ed.until_response(id);
    assert!(!ended.exists(), "SessionEnd ran before the session ended");
    let closed = ed.call("session/close", serde_json::json!({"sessionId": sid}));
    assert!(closed.get("error").is_none(), "{closed}");
    assert!(
        support::home::poll_until(support::home::DEADLINE, || ended.exists()
            && std::fs::read_to_string(&ended).is_ok_and(|t| t.ends_with('}'))),
        "SessionEnd did not run"
    );
    let input = read_json(&ended);
    assert_eq!(input["hook_event_name"], "SessionEnd");
    assert_eq!(input["session_id"], sid.as_str());
}

#[test]
fn setup_lists_trust_instructions_hooks_and_what_was_skipped() {
    let env = Env::new();
    env.file(".git/HEAD", "ref: refs/heads/main\n");
    env.file("AGENTS.md", "Be brief.\n");
    env.file(
        ".claude/settings.json",
        r#"{"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "true"}]}]},
            "permissions": {"allow": ["Bash(npm test:*)"], "deny": ["Read(./.env)"]}}"#,
    );
    env.file(
        ".claude/agents/reviewer.md",
        "---\nname: reviewer\ndescription: reviews\n---\nReview.\n",
    );
    let out = env.run(None, &["-p", "/setup"]);
    assert_eq!(out.code, 0, "{out:?}");
    let project = env.project.display().to_string();
    for want in [
        format!("Project {project}: not trusted"),
        format!("- {project}/AGENTS.md"),
        "- Stop: command `true`".to_owned(),
        "not run: the project is not trusted".to_owned(),
        "`reviewer`".to_owned(),
        "- deny Read(./.env)".to_owned(),
    ] {
        assert!(out.stdout.contains(&want), "no {want:?} in {out:?}");
    }
    assert!(env.run(None, &["trust"]).code == 0);
    let trusted = env.run(None, &["-p", "/setup"]);
    assert!(
        trusted
            .stdout
            .contains(&format!("Project {project}: trusted")),
        "{trusted:?}"
    );
    assert!(!trusted.stdout.contains("not run:"), "{trusted:?}");
    // Trusted or not, a project's allow is never used.
    assert!(
        trusted.stdout.contains("- allow Bash(npm test:*)")
            && trusted
                .stdout
                .contains("(not used: a project may only narrow what the user allows)"),
        "{trusted:?}"
    );
}

#[test]
fn session_end_runs_before_print_mode_exits() {
    let env = Env::new();
    let ended = session_end_hook(&env);
    let fake = FakeModel::start([Reply::Stream(text_chunks(&["hello"]))]);
    let out = env.run(Some(&fake), &["-p", "hi"]);
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(read_json(&ended)["hook_event_name"], "SessionEnd");
}
