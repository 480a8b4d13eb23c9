//! MCP servers end to end: `oml acp` (and print mode) connect real servers — the reference
//! servers from npm over stdio and streamable HTTP, and `tests/mcp/fake_server.py` for faults —
//! and the model, the fake model server over TCP, calls their tools; servers come from the
//! editor, from `mcp.defserver`, and from a project's `.mcp.json` and Codex's `config.toml`.
//! Each test checks that no server process is left when oml is done.
//!
//! The npm servers come from `tests/mcp/package.json` (installed by `scripts/setup-mcp.sh`);
//! without them, or without `python3`, a test skips outside CI and fails under it.

mod support;

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::editor::{Editor, WAIT, chunks, update};
use support::fake_model::{FakeModel, Reply, text_chunks, tool_call_chunks};
use support::home::Env;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn fake_server() -> String {
    repo()
        .join("tests/mcp/fake_server.py")
        .display()
        .to_string()
}

/// The reference servers' entry points, or `None` (after `skip`) when they are not installed.
fn npm_server(name: &str) -> Option<String> {
    let bin = repo().join("tests/mcp/node_modules/.bin").join(name);
    let node = Command::new("node")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if node && bin.exists() {
        return Some(bin.display().to_string());
    }
    support::home::skip(
        "the reference MCP servers (Node.js and tests/mcp/node_modules)",
        "bash scripts/setup-mcp.sh",
    );
    None
}

fn python() -> bool {
    let ok = Command::new("python3")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        support::home::skip("python3", "apt-get install python3");
    }
    ok
}

/// `oml acp` in `env` against `fake`, initialised.
fn start(env: &Env, fake: &FakeModel) -> Editor {
    let mut ed = Editor::spawn(env.command(Some(fake), &["acp"]));
    ed.initialize();
    ed
}

/// The `tool` messages of model request `n`'s body, by tool call id.
fn tool_results(fake: &FakeModel, n: usize) -> Vec<(String, String)> {
    let requests = fake.wait_for_requests(n + 1, WAIT);
    requests[n].body["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| {
            (
                m["tool_call_id"].as_str().unwrap_or_default().to_owned(),
                m["content"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

fn tool_names(body: &Value) -> Vec<String> {
    body["tools"]
        .as_array()
        .map(|ts| {
            ts.iter()
                .filter_map(|t| t["function"]["name"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

fn call(id: &str, name: &str, args: &str) -> Reply {
    Reply::from(tool_call_chunks(id, name, &[args]))
}

/// Processes whose environment or command line holds `token`.
fn processes_with(token: &str) -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let dir = entry.path();
        let holds = |file: &str| {
            std::fs::read(dir.join(file))
                .is_ok_and(|b| b.windows(token.len()).any(|w| w == token.as_bytes()))
        };
        if holds("environ") || holds("cmdline") {
            let cmd = std::fs::read(dir.join("cmdline")).unwrap_or_default();
            found.push(format!(
                "{}: {}",
                dir.display(),
                String::from_utf8_lossy(&cmd).replace('\0', " ")
            ));
        }
    }
    found
}

/// Wait (bounded) until no process holds `token`.
fn assert_none_left(token: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !processes_with(token).is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(
        processes_with(token),
        Vec::<String>::new(),
        "server processes were left behind"
    );
}

/// A stdio server entry for `session/new`, marked with `token` in its environment.
fn stdio(name: &str, command: &str, args: &[&str], token: &str) -> Value {
    json!({"name": name, "command": command, "args": args, "env": [{"name": "OML_MCP_TEST", "value": token}]})
}

fn token(env: &Env) -> String {
    format!("mcp-test-{}", env.project.display())
}

/// The reference `everything` server over streamable HTTP, on a free port; killed on drop.
struct HttpServer {
    child: Child,
    url: String,
}

impl HttpServer {
    fn start(bin: &str, token: &str) -> HttpServer {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = Command::new(bin)
            .arg("streamableHttp")
            .env("PORT", port.to_string())
            .env("OML_MCP_TEST", token)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start the HTTP server");
        let deadline = Instant::now() + WAIT;
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "the HTTP server did not listen");
            std::thread::sleep(Duration::from_millis(50));
        }
        HttpServer {
            child,
            url: format!("http://127.0.0.1:{port}/mcp"),
        }
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn reference_servers_over_stdio_and_http_serve_the_model() {
    let (Some(everything), Some(filesystem)) = (
        npm_server("mcp-server-everything"),
        npm_server("mcp-server-filesystem"),
    ) else {
        return;
    };
    let env = Env::new();
    env.file("hello.txt", "hi\n");
    let token = token(&env);
    let web = HttpServer::start(&everything, "http-server");
    let fake = FakeModel::start([
        call("c1", "mcp__everything__echo", r#"{"message":"hi there"}"#),
        call("c2", "mcp__web__get-sum", r#"{"a":2,"b":3}"#),
        call(
            "c3",
            "mcp__files__list_directory",
            &json!({"path": env.project}).to_string(),
        ),
        call("c4", "mcp__everything__get-tiny-image", "{}"),
        Reply::from(text_chunks(&["done"])),
    ]);
    let mut acp = start(&env, &fake);
    let project = env.project.display().to_string();
    let servers = json!([
        stdio("everything", &everything, &["stdio"], &token),
        stdio("files", &filesystem, &[&project], &token),
        {"type": "http", "name": "web", "url": web.url, "headers": [{"name": "X-Test", "value": "1"}]},
    ]);
    let (sid, _) = acp.new_session_with(&env.project, servers);
    let (updates, reason) = acp.turn(&sid, "use the servers");
    assert_eq!(reason, "end_turn");

    let first = &fake.wait_for_requests(1, WAIT)[0].body;
    let names = tool_names(first);
    for want in [
        "mcp__everything__echo",
        "mcp__files__list_directory",
        "mcp__web__get-sum",
        "read",
        "bash",
    ] {
        assert!(
            names.iter().any(|n| n == want),
            "{want} not offered: {names:?}"
        );
    }
    let echo = first["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["function"]["name"] == "mcp__everything__echo")
        .unwrap();
    assert_eq!(
        echo["function"]["parameters"]["properties"]["message"]["type"],
        "string"
    );

    let results = tool_results(&fake, 4);
    assert!(results[0].1.contains("hi there"), "{results:?}");
    assert!(results[1].1.contains('5'), "{results:?}");
    assert!(results[2].1.contains("hello.txt"), "{results:?}");
    // Read-only tools: cards of kind read, completed, no permission question.
    let cards: Vec<&Value> = updates
        .iter()
        .filter(|m| update(m) == "tool_call")
        .collect();
    assert_eq!(cards.len(), 4);
    assert!(
        cards
            .iter()
            .all(|c| c["params"]["update"]["kind"] == "read"),
        "{cards:?}"
    );
    assert_eq!(
        cards[0]["params"]["update"]["title"],
        "everything: Echo Tool"
    );
    assert!(
        updates
            .iter()
            .all(|m| m["method"] != "session/request_permission")
    );
    let done = updates
        .iter()
        .filter(|m| {
            update(m) == "tool_call_update" && m["params"]["update"]["status"] == "completed"
        })
        .count();
    assert_eq!(done, 4);
    // The image the server returned follows the tool results as an image_url part.
    let last = &fake.wait_for_requests(5, WAIT)[4].body["messages"];
    let user = last.as_array().unwrap().last().unwrap();
    assert_eq!(user["role"], "user");
    let url = user["content"][1]["image_url"]["url"]
        .as_str()
        .unwrap_or_default();
    assert!(url.starts_with("data:image/png;base64,"), "{user}");

    acp.finish();
    assert_none_left(&token);
}

#[test]
fn faults_are_reported_and_the_session_goes_on() {
    if !python() {
        return;
    }
    let env = Env::new();
    env.init("(setq mcp.start-timeout 2)\n(setq mcp.max-chars 1000)\n");
    let token = token(&env);
    let marker = env.project.join("fake2.log");
    let fake = FakeModel::start([
        call("c1", "mcp__fake__big", "{}"),
        call("c2", "mcp__fake__fails", "{}"),
        call("c3", "mcp__fake__crash", "{}"),
        Reply::from(text_chunks(&["survived"])),
    ]);
    let mut acp = start(&env, &fake);
    let script = fake_server();
    let servers = json!([
        stdio("fake", "python3", &[&script, "normal"], &token),
        stdio("fake2", "python3", &[&script, "normal", &marker.display().to_string()], &token),
        stdio("failing", "python3", &[&script, "fail"], &token),
        stdio("hang", "python3", &[&script, "hang"], &token),
        stdio("missing", "/nonexistent/mcp-server", &[], &token),
        {"type": "sse", "name": "legacy", "url": "http://127.0.0.1:9/sse", "headers": []},
        {"name": "nameless-command"},
    ]);
    let (sid, setup) = acp.new_session_with(&env.project, servers);
    let (updates, reason) = acp.turn(&sid, "go");
    assert_eq!(reason, "end_turn");
    let shown = chunks(&setup) + &chunks(&updates);
    for want in [
        "MCP server nameless-command has no command",
        "MCP server failing failed: it did not start: the server exited (exit status 3); its stderr ends: fake server: cannot start (on purpose)",
        "MCP server hang failed: it did not answer initialize and tools/list within 2 s",
        "MCP server missing failed: it did not start: cannot run `/nonexistent/mcp-server`",
        "MCP server legacy failed: the legacy HTTP+SSE transport is not supported",
        "MCP server fake: skipped tool bad_props: its input schema's properties are a string",
        "MCP server fake: skipped tool bad_schema: its input schema is not an object",
    ] {
        assert!(shown.contains(want), "{want:?} not shown in:\n{shown}");
    }
    let names = tool_names(&fake.wait_for_requests(1, WAIT)[0].body);
    assert!(
        names.contains(&"mcp__fake__echo".to_owned())
            && names.contains(&"mcp__fake2__echo".to_owned()),
        "{names:?}"
    );
    assert!(!names.iter().any(|n| n.contains("bad_")), "{names:?}");

    let results = tool_results(&fake, 3);
    let (big, fails, crash) = (&results[0].1, &results[1].1, &results[2].1);
    assert!(
        big.len() < 1200 && big.contains("[output truncated"),
        "{} chars: {}",
        big.len(),
        &big[..100]
    );
    assert_eq!(fails, "it went wrong");
    assert!(crash.contains("MCP server fake: the server exited (exit status 7); its stderr ends: fake server: crashing on purpose"), "{crash}");

    let (status, _) = acp.turn(&sid, "/mcp");
    let status = chunks(&status);
    assert!(
        status.contains("- `fake` failed")
            && status.contains("- `fake2` running — stdio")
            && status.contains("7 tools (fake 1.0)"),
        "{status}"
    );
    let (restart, _) = acp.turn(&sid, "/mcp restart fake");
    assert!(
        chunks(&restart).contains("Restarted `fake`."),
        "{restart:?}"
    );

    acp.call("session/close", json!({"sessionId": sid}));
    assert!(
        std::fs::read_to_string(&marker)
            .unwrap()
            .contains("stdin closed"),
        "fake2 was not stopped by closing its stdin"
    );
    assert_none_left(&token);
    // Every failure reached the session; none is repeated on stderr.
    assert_eq!(acp.finish(), "");
}

#[test]
fn destructive_tools_ask_and_read_only_ones_do_not() {
    if !python() {
        return;
    }
    let env = Env::new();
    let token = token(&env);
    let fake = FakeModel::start([
        call("c1", "mcp__fake__wipe", "{}"),
        call("c2", "mcp__fake__echo", r#"{"text":"ok"}"#),
        Reply::from(text_chunks(&["fine"])),
    ]);
    let mut acp = start(&env, &fake);
    let (sid, _) = acp.new_session_with(
        &env.project,
        json!([stdio(
            "fake",
            "python3",
            &[&fake_server(), "normal"],
            &token
        )]),
    );
    let id = acp.prompt(&sid, "wipe");
    let ask = acp.until(|m| m["method"] == "session/request_permission");
    let tool_call = &ask["params"]["toolCall"];
    assert_eq!(tool_call["kind"], "delete");
    assert_eq!(tool_call["title"], "fake: wipe");
    acp.answer(
        &ask["id"],
        json!({"outcome": {"outcome": "selected", "optionId": "reject_once"}}),
    );
    let (rest, _) = acp.until_response(id);
    assert!(
        rest.iter()
            .all(|m| m["method"] != "session/request_permission"),
        "echo asked"
    );
    let results = tool_results(&fake, 2);
    assert_eq!(results[0].1, "Blocked: the user rejected it");
    assert_eq!(results[1].1, "echo: ok");
    acp.finish();
    assert_none_left(&token);
}

#[test]
fn cancel_abandons_the_call_and_a_changed_list_is_read_again() {
    if !python() {
        return;
    }
    let env = Env::new();
    let token = token(&env);
    let marker = env.project.join("fake.log");
    let fake = FakeModel::start([
        call("c1", "mcp__fake__grow", "{}"),
        call("c2", "mcp__fake__echo", "{}"),
        call("c3", "mcp__fake__slow", "{}"),
        Reply::from(text_chunks(&["never"])),
    ]);
    let mut acp = start(&env, &fake);
    let server = stdio(
        "fake",
        "python3",
        &[&fake_server(), "normal", &marker.display().to_string()],
        &token,
    );
    let (sid, _) = acp.new_session_with(&env.project, json!([server]));
    let id = acp.prompt(&sid, "go");
    acp.until(|m| update(m) == "tool_call" && m["params"]["update"]["toolCallId"] == "c3");
    acp.notify("session/cancel", json!({"sessionId": sid}));
    let (_, answer) = acp.until_response(id);
    assert_eq!(answer["result"]["stopReason"], "cancelled");
    // rmcp handles a notification in a task of its own, so the change may miss the request
    // right after the call that caused it; the one after sees it.
    let requests = fake.wait_for_requests(3, WAIT);
    assert!(!tool_names(&requests[0].body).contains(&"mcp__fake__extra".to_owned()));
    assert!(
        tool_names(&requests[2].body).contains(&"mcp__fake__extra".to_owned()),
        "the list was not read again"
    );
    let deadline = Instant::now() + WAIT;
    while !std::fs::read_to_string(&marker)
        .unwrap_or_default()
        .contains("notifications/cancelled")
    {
        assert!(
            Instant::now() < deadline,
            "the server was not told of the cancel"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    acp.finish();
    assert_none_left(&token);
}

#[test]
fn servers_declared_in_lisp_serve_print_mode() {
    if !python() {
        return;
    }
    let env = Env::new();
    let marker = env.project.join("fake.log");
    env.init(&format!(
        "(mcp.defserver :fake {{:command \"python3\" :args [{:?} \"normal\" {:?}] :env {{:OML_MCP_TEST {:?}}}}})\n",
        fake_server(),
        marker.display().to_string(),
        token(&env)
    ));
    let fake = FakeModel::start([
        call("c1", "mcp__fake__echo", r#"{"text":"from lisp"}"#),
        Reply::from(text_chunks(&["echoed"])),
    ]);
    let out = env
        .command(Some(&fake), &["-p", "echo it"])
        .current_dir(&env.project)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("echoed"));
    assert_eq!(tool_results(&fake, 1)[0].1, "echo: from lisp");
    assert!(
        std::fs::read_to_string(&marker)
            .unwrap()
            .contains("stdin closed")
    );
    assert_none_left(&token(&env));
}

#[test]
fn load_and_resume_connect_their_servers_too() {
    if !python() {
        return;
    }
    let env = Env::new();
    let token = token(&env);
    let fake = FakeModel::start(Vec::<Reply>::new());
    let mut acp = start(&env, &fake);
    let (sid, _) = acp.new_session_with(&env.project, json!([]));
    let (none, _) = acp.turn(&sid, "/mcp");
    assert!(
        chunks(&none).contains("No MCP servers in this session"),
        "{none:?}"
    );
    acp.call("session/close", json!({"sessionId": sid}));
    for method in ["session/load", "session/resume"] {
        let server = stdio("fake", "python3", &[&fake_server(), "normal"], &token);
        let r = acp.call(
            method,
            json!({"sessionId": sid, "cwd": env.project, "mcpServers": [server]}),
        );
        assert!(r.get("result").is_some(), "{r}");
        let (tools, _) = acp.turn(&sid, "/mcp tools");
        assert!(
            chunks(&tools).contains("- `mcp__fake__echo` (read) Echo the text"),
            "{method}: {tools:?}"
        );
        acp.call("session/close", json!({"sessionId": sid}));
        assert_none_left(&token);
    }
    acp.finish();
}

// Servers from the files Claude Code's and Codex's users have: a project's `.mcp.json` (only
// while the project is trusted) and `$CODEX_HOME/config.toml`.

/// Make the project a git project and write its `.mcp.json`.
fn project_mcp_json(env: &Env, json: &Value) {
    env.file(".git/HEAD", "ref: refs/heads/main\n");
    env.file(".mcp.json", &serde_json::to_string_pretty(json).unwrap());
}

fn oml_trust(env: &Env) {
    let run = env.run(None, &["trust"]);
    assert_eq!(run.code, 0, "{run:?}");
}

/// `(mcp.found DIR)` for the project, run with `vars`, by name.
fn found(env: &Env, vars: &[(&str, &str)]) -> Vec<(String, Value)> {
    let form = format!(
        "(print (json.encode (mcp.found {:?})))",
        env.project.display().to_string()
    );
    let run = env.run_with(None, vars, &["eval", &form]);
    assert_eq!(run.code, 0, "{run:?}");
    let line = run.stdout.lines().next().unwrap_or_default();
    let list: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {run:?}"));
    list.as_array()
        .expect("a list")
        .iter()
        .map(|f| {
            let key = format!(
                "{}/{}",
                f["origin"].as_str().unwrap_or("?"),
                f["name"].as_str().unwrap_or("-")
            );
            (key, f.clone())
        })
        .collect()
}

fn entry<'a>(found: &'a [(String, Value)], key: &str) -> &'a Value {
    found
        .iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v)
        .unwrap_or_else(|| panic!("{key} not found in {found:?}"))
}

#[test]
fn project_and_codex_files_serve_print_mode_once_trusted_with_variables_expanded() {
    if !python() {
        return;
    }
    let env = Env::new();
    let token = token(&env);
    let codex = env.root.join("codex");
    let marks = env.root.join("marks");
    std::fs::create_dir_all(&marks).unwrap();
    project_mcp_json(
        &env,
        &json!({"mcpServers": {
            "proj": {"command": "python3", "args": ["${FAKE}", "${FAKE_MODE:-normal}"],
                     "env": {"FAKE_MCP_MARKER": "${MARKS}/proj.log", "OML_MCP_TEST": "${TOKEN}"}},
            "own": {"command": "/nonexistent/shadowed-by-defserver"},
            "unset": {"command": "python3", "args": ["${OML_SURELY_UNSET_VAR}"]}
        }}),
    );
    env.init(&format!(
        "(mcp.defserver :own {{:command \"python3\" :args [{:?} \"normal\" {:?}] :env {{:OML_MCP_TEST {token:?}}}}})\n",
        fake_server(),
        marks.join("own.log").display().to_string(),
    ));
    support::home::write(
        &codex.join("config.toml"),
        &format!(
            "model = \"o3\"\n\n[mcp_servers.cdx]\ncommand = \"python3\"\nargs = [{:?}, \"normal\", {:?}]\nenv = {{ OML_MCP_TEST = {token:?} }}\n\n\
             [mcp_servers.proj]\ncommand = \"/nonexistent/shadowed-by-the-project\"\n\n\
             [mcp_servers.off]\ncommand = \"/nonexistent/disabled\"\nenabled = false\n",
            fake_server(),
            marks.join("cdx.log").display().to_string(),
        ),
    );
    let codex_home = codex.display().to_string();
    let fake_path = fake_server();
    let marks_dir = marks.display().to_string();
    let vars = [
        ("CODEX_HOME", codex_home.as_str()),
        ("FAKE", fake_path.as_str()),
        ("MARKS", marks_dir.as_str()),
        ("TOKEN", token.as_str()),
    ];

    // Untrusted: the project's servers are listed, not used; Codex's (the user's) are.
    let before = found(&env, &vars);
    let why = entry(&before, "claude-project/proj")["why"]
        .as_str()
        .unwrap();
    assert!(why.starts_with("untrusted: "), "{why}");
    assert_eq!(entry(&before, "codex-user/cdx")["used?"], true);
    assert_eq!(entry(&before, "codex-user/proj")["used?"], true);
    // /setup says so too.
    let shown = env.run_with(None, &vars, &["-p", "/setup"]);
    assert!(
        shown.stdout.contains("`proj` from ")
            && shown
                .stdout
                .contains("/project/.mcp.json (not used: untrusted: "),
        "{shown:?}"
    );

    oml_trust(&env);
    let after = found(&env, &vars);
    let keys: Vec<&str> = after.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(
        keys,
        [
            "oml/own",
            "claude-project/proj",
            "claude-project/own",
            "claude-project/unset",
            "codex-user/cdx",
            "codex-user/off",
            "codex-user/proj"
        ]
    );
    let proj = entry(&after, "claude-project/proj");
    assert_eq!(proj["used?"], true, "{proj}");
    assert_eq!(proj["transport"], "stdio");
    assert_eq!(proj["line"], 3);
    // As written: a variable's value is never shown.
    assert_eq!(proj["target"], "python3 ${FAKE} ${FAKE_MODE:-normal}");
    assert!(
        proj["source"]
            .as_str()
            .unwrap()
            .ends_with("/project/.mcp.json")
    );
    let shadowed = |key: &str| entry(&after, key)["why"].as_str().unwrap().to_owned();
    assert_eq!(
        shadowed("claude-project/own"),
        "shadowed by own of mcp.defserver"
    );
    assert!(
        shadowed("codex-user/proj").starts_with("shadowed by proj of /"),
        "{after:?}"
    );
    assert_eq!(
        shadowed("claude-project/unset"),
        "${OML_SURELY_UNSET_VAR} is not set and has no default"
    );
    assert_eq!(
        shadowed("codex-user/off"),
        "it is disabled (enabled = false)"
    );

    let fake = FakeModel::start([
        call("c1", "mcp__proj__echo", r#"{"text":"from .mcp.json"}"#),
        call("c2", "mcp__cdx__echo", r#"{"text":"from codex"}"#),
        call("c3", "mcp__own__echo", r#"{"text":"own"}"#),
        Reply::from(text_chunks(&["echoed"])),
    ]);
    let run = env.run_with(Some(&fake), &vars, &["-p", "echo them"]);
    assert_eq!(run.code, 0, "{run:?}");
    let results: Vec<String> = tool_results(&fake, 3).into_iter().map(|r| r.1).collect();
    assert_eq!(
        results,
        ["echo: from .mcp.json", "echo: from codex", "echo: own"]
    );
    // Only the unset variable is worth a notice; shadowed and disabled servers are choices.
    assert!(
        run.stderr.contains("MCP server unset of ")
            && run
                .stderr
                .contains("/project/.mcp.json not started: ${OML_SURELY_UNSET_VAR} is not set"),
        "{}",
        run.stderr
    );
    assert!(!run.stderr.contains("shadowed"), "{}", run.stderr);
    // The env of .mcp.json reached its server (its marker came from it); each was stopped.
    for log in ["proj.log", "cdx.log", "own.log"] {
        let text = std::fs::read_to_string(marks.join(log)).unwrap_or_default();
        assert!(text.contains("stdin closed"), "{log}: {text:?}");
    }
    assert_none_left(&token);

    // Turned off, nothing of the files is used, and mcp.found says why.
    env.init("(setq mcp.claude-codex? false)\n");
    let off = found(&env, &vars);
    for (key, f) in &off {
        assert_eq!(f["why"], "mcp.claude-codex? is false", "{key}");
    }
}

#[test]
fn bad_files_are_reported_with_their_line_and_cost_nothing_else() {
    let env = Env::new();
    let codex = env.root.join("codex");
    env.file(".git/HEAD", "ref: refs/heads/main\n");
    env.file(
        ".mcp.json",
        "{\n  \"mcpServers\": {\n    \"a\": {\"command\": \"x\",}\n  }\n}\n",
    );
    support::home::write(
        &codex.join("config.toml"),
        "[mcp_servers.docs]\nurl = \"http://127.0.0.1:9/mcp\"\n",
    );
    oml_trust(&env);
    let codex_home = codex.display().to_string();
    let vars = [("CODEX_HOME", codex_home.as_str())];
    let list = found(&env, &vars);
    let bad = entry(&list, "claude-project/.mcp.json");
    assert_eq!(bad["used?"], false);
    assert_eq!(bad["line"], 3);
    assert!(
        bad["why"]
            .as_str()
            .unwrap()
            .starts_with("bad JSON at line 3: "),
        "{bad}"
    );
    assert_eq!(entry(&list, "codex-user/docs")["used?"], true);
    assert_eq!(entry(&list, "codex-user/docs")["transport"], "http");

    support::home::write(&codex.join("config.toml"), "a = 1\n[mcp_servers.docs\n");
    env.file(".mcp.json", r#"{"mcpServers": {"fine": {"command": "x"}}}"#);
    // The file changed: trusted again, the project's server is used, Codex's file is reported.
    oml_trust(&env);
    let list = found(&env, &vars);
    assert_eq!(
        entry(&list, "claude-project/fine")["used?"],
        true,
        "{list:?}"
    );
    let bad = entry(&list, "codex-user/config.toml");
    assert!(
        bad["why"]
            .as_str()
            .unwrap()
            .starts_with("bad TOML at line 2: "),
        "{bad}"
    );
    // A print-mode session still runs, and says what it could not read.
    let fake = FakeModel::start([Reply::from(text_chunks(&["fine"]))]);
    let run = env.run_with(Some(&fake), &vars, &["-p", "hi"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(
        run.stderr
            .contains("config.toml not read: bad TOML at line 2"),
        "{}",
        run.stderr
    );
    let shown = env.run_with(None, &vars, &["-p", "/setup"]);
    assert!(
        shown
            .stdout
            .contains("/config.toml (not used: bad TOML at line 2: "),
        "{shown:?}"
    );
}

#[test]
fn a_project_http_server_of_mcp_json_serves_the_model() {
    let Some(everything) = npm_server("mcp-server-everything") else {
        return;
    };
    let env = Env::new();
    let web = HttpServer::start(&everything, "http-server");
    let port = web
        .url
        .trim_start_matches("http://127.0.0.1:")
        .split('/')
        .next()
        .unwrap()
        .to_owned();
    project_mcp_json(
        &env,
        &json!({"mcpServers": {"web": {
            "type": "http",
            "url": "http://127.0.0.1:${WEB_PORT}/mcp",
            "headers": {"X-Test": "${X_TEST:-1}"}
        }}}),
    );
    oml_trust(&env);
    let fake = FakeModel::start([
        call("c1", "mcp__web__get-sum", r#"{"a":2,"b":3}"#),
        Reply::from(text_chunks(&["summed"])),
    ]);
    let run = env.run_with(Some(&fake), &[("WEB_PORT", &port)], &["-p", "add"]);
    assert_eq!(run.code, 0, "{run:?}");
    let result = &tool_results(&fake, 1)[0].1;
    assert!(result.contains('5'), "{result}");
    assert!(run.stdout.contains("summed"), "{run:?}");
}

#[test]
fn in_acp_an_editor_server_wins_over_a_project_server_of_its_name() {
    if !python() {
        return;
    }
    let env = Env::new();
    let token = token(&env);
    project_mcp_json(
        &env,
        &json!({"mcpServers": {
            "fake": {"command": "/nonexistent/shadowed-by-the-editor"},
            "proj": {"command": "python3", "args": [fake_server(), "normal"],
                     "env": {"OML_MCP_TEST": token}}
        }}),
    );
    oml_trust(&env);
    let fake = FakeModel::start([
        call("c1", "mcp__proj__echo", r#"{"text":"project"}"#),
        call("c2", "mcp__fake__echo", r#"{"text":"editor"}"#),
        Reply::from(text_chunks(&["both"])),
    ]);
    let mut acp = start(&env, &fake);
    let editor = stdio("fake", "python3", &[&fake_server(), "normal"], &token);
    let (sid, setup) = acp.new_session_with(&env.project, json!([editor]));
    let (updates, reason) = acp.turn(&sid, "echo");
    assert_eq!(reason, "end_turn");
    let results: Vec<String> = tool_results(&fake, 2).into_iter().map(|r| r.1).collect();
    assert_eq!(results, ["echo: project", "echo: editor"]);
    let shown = chunks(&setup) + &chunks(&updates);
    assert!(!shown.contains("shadowed"), "{shown}");
    let (status, _) = acp.turn(&sid, "/mcp");
    let status = chunks(&status);
    assert!(
        status.contains("- `fake` running") && status.contains("- `proj` running"),
        "{status}"
    );
    acp.finish();
    assert_none_left(&token);
}
