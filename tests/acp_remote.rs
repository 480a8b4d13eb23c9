//! `oml acp --listen`: ACP's remote transport (Streamable HTTP and WebSocket on `/acp`), driven
//! by the official TypeScript SDK's HTTP and WebSocket clients and by raw HTTP over TCP: a turn
//! with a permission question, a session that outlives its connection, the bearer token on
//! every request, and the refusals of bad requests.

mod support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::Command;

use serde_json::Value;
use support::fake_model::{FakeModel, Reply, text_chunks, tool_call_chunks};
use support::home::Env;
use support::listener::Listener;

/// One HTTP/1.1 request over a fresh TCP connection: the status and the body.
fn http(addr: &str, request: &str, body: &str) -> (u16, String) {
    let mut s = TcpStream::connect(addr).unwrap();
    let head = format!(
        "{request}\r\nHost: {addr}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    s.write_all(head.as_bytes()).unwrap();
    s.write_all(body.as_bytes()).unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    let code = text
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = text.split("\r\n\r\n").nth(1).unwrap_or_default().to_owned();
    (code, body)
}

fn drive(env: &Env, mode: &str) {
    let args = r#"{"path": "notes.txt", "content": "remote\n"}"#;
    let fake = FakeModel::start([
        Reply::from(tool_call_chunks("c1", "write", &[args])),
        Reply::from(text_chunks(&["Written."])),
    ]);
    let listener = Listener::start(env, Some(&fake), &[]);
    // Node 20's WebSocket is behind a flag (Node 22 has it by default and accepts the flag).
    let node_args: &[&str] = if mode == "ws" {
        &["--experimental-websocket"]
    } else {
        &[]
    };
    let Some(mut cmd) = support::sdk::driver(node_args, "drive_oml_remote.mjs", env, &fake) else {
        return;
    };
    cmd.arg(&listener.url)
        .arg(&listener.token_file)
        .arg(mode)
        .arg(&env.project);
    let seen = support::sdk::seen(&mut cmd);
    assert_eq!(seen["protocolVersion"], 1, "{seen}");
    assert_eq!(seen["stopReason"], "end_turn", "{seen}");
    assert_eq!(seen["permissions"], 1, "{seen}");
    let kinds = seen["updates"].to_string();
    assert!(
        kinds.contains("tool_call") && kinds.contains("agent_message_chunk"),
        "{seen}"
    );
    assert_eq!(
        std::fs::read_to_string(env.project.join("notes.txt")).unwrap(),
        "remote\n"
    );
    // The second connection's session/load replayed the first one's turn.
    let replay = seen["replay"].to_string();
    assert!(replay.contains("user_message_chunk"), "{seen}");
    assert!(replay.contains("agent_message_chunk"), "{seen}");
}

#[test]
fn the_sdks_http_client_runs_a_turn_and_a_new_connection_loads_the_session() {
    drive(&Env::new(), "http");
}

#[test]
fn the_sdks_websocket_client_runs_a_turn_and_a_new_connection_loads_the_session() {
    drive(&Env::new(), "ws");
}

#[test]
fn every_request_needs_the_token_and_bad_requests_are_refused() {
    let env = Env::new();
    let l = Listener::start(&env, None, &[]);
    let addr = l.addr();
    let token = l.token();
    assert_eq!(token.len(), 64);
    assert!(token.chars().all(|c| c.is_ascii_hexdigit()), "{token}");
    // The token it made is on its stdout only: no file of oml's holds it.
    let holds = |dir: &std::path::Path| {
        std::process::Command::new("grep")
            .args(["-rlF", &token])
            .arg(dir)
            .output()
            .map(|o| !o.stdout.is_empty())
            .unwrap_or(false)
    };
    assert!(
        !holds(&env.home.runtime) && !holds(&env.home.state),
        "a file holds the token"
    );
    let init = r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}"#;
    let json = "Content-Type: application/json";
    let (code, _) = http(&addr, &format!("POST /acp HTTP/1.1\r\n{json}"), init);
    assert_eq!(code, 401, "no token");
    let wrong = format!(
        "POST /acp HTTP/1.1\r\n{json}\r\nAuthorization: Bearer {}x",
        token
    );
    assert_eq!(http(&addr, &wrong, init).0, 401, "a wrong token");
    let auth = format!("Authorization: Bearer {token}");
    let post = format!("POST /acp HTTP/1.1\r\n{json}\r\n{auth}");
    assert_eq!(
        http(&addr, &format!("POST /other HTTP/1.1\r\n{auth}"), "").0,
        404
    );
    let text = format!("POST /acp HTTP/1.1\r\nContent-Type: text/plain\r\n{auth}");
    assert_eq!(http(&addr, &text, init).0, 415);
    let (code, body) = http(&addr, &post, &format!("[{init}]"));
    assert_eq!(code, 400, "a batch");
    assert!(body.contains("-32600"), "{body}");
    let (code, body) = http(
        &addr,
        &post,
        r#"{"jsonrpc":"2.0","id":1,"method":"session/new"}"#,
    );
    assert_eq!(code, 400, "a connection starts with initialize: {body}");
    let other = format!("{post}\r\nAcp-Connection-Id: 0000");
    assert_eq!(http(&addr, &other, init).0, 404, "an unknown connection");
    // A good initialize: answered in the body, with the connection's id.
    let (code, body) = http(&addr, &post, init);
    assert_eq!(code, 200, "{body}");
    let answer: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(answer["result"]["protocolVersion"], 1, "{body}");
}

#[test]
fn a_listener_outside_loopback_needs_tls_or_an_explicit_flag() {
    let env = Env::new();
    let run = env.run(None, &["acp", "--listen", "0.0.0.0:0"]);
    assert_ne!(run.code, 0);
    assert!(
        run.stderr.contains("not a loopback address"),
        "{}",
        run.stderr
    );
    assert!(run.stderr.contains("--tls-cert"), "{}", run.stderr);
}

/// oml's own client at the listener's URL: a prompt whose `write` its permission handler
/// allows, over Streamable HTTP or a WebSocket; a connection without the token is refused.
fn oml_client_over(transport: &str) {
    let env = Env::new();
    let args = r#"{"path": "remote.txt", "content": "via oml\n"}"#;
    let fake = FakeModel::start([
        Reply::from(tool_call_chunks("c1", "write", &[args])),
        Reply::from(text_chunks(&["Done."])),
    ]);
    let l = Listener::start(&env, Some(&fake), &[]);
    let url = match transport {
        "ws" => l.url.replacen("http://", "ws://", 1),
        _ => l.url.clone(),
    };
    let script = env.file(
        "drive.fnl",
        r#"(local [url token-file cwd] arg)
(local (ok e) (pcall client.connect url [] {:token "not-the-token"}))
(print "without the token:" ok e.category)
(var asked nil)
(local conn (client.connect url [] {:token-file token-file
                                    :on-permission (fn [req] (set asked req.tool-call.title) :allow)}))
(print "connected" (tostring conn) (conn:pid))
(local s (client.new-session conn cwd))
(local r (client.prompt conn s.session-id "write it"))
(print "stop" r.stop-reason "asked" asked)
(print "closed" (client.close conn))
"#,
    );
    let token_file = l.token_file.display().to_string();
    let project = env.project.display().to_string();
    let run = env.run(
        None,
        &[
            "run",
            &script.display().to_string(),
            &url,
            &token_file,
            &project,
        ],
    );
    assert_eq!(run.code, 0, "{run:?}");
    let out = run.stdout.replace('\t', " ");
    assert!(out.contains("without the token: false connection"), "{out}");
    assert!(out.contains(&format!("at {url}> nil")), "{out}");
    assert!(
        out.contains("stop end-turn asked Write remote.txt"),
        "{out}"
    );
    assert!(out.contains("closed true"), "{out}");
    assert_eq!(
        std::fs::read_to_string(env.project.join("remote.txt")).unwrap(),
        "via oml\n"
    );
}

#[test]
fn oml_s_client_drives_the_listener_over_http() {
    oml_client_over("http");
}

#[test]
fn oml_s_client_drives_the_listener_over_a_websocket() {
    oml_client_over("ws");
}

#[test]
fn the_endpoint_speaks_http2_too() {
    let env = Env::new();
    let l = Listener::start(&env, None, &[]);
    // curl (Debian's, built with nghttp2) speaks HTTP/2 over cleartext with prior knowledge.
    let text = curl_initialize(&["--http2-prior-knowledge", "-D", "-"], &l.token(), &l.url);
    assert!(text.contains("version 2"), "{text}");
    assert!(
        text.to_ascii_lowercase().contains("acp-connection-id:"),
        "{text}"
    );
    assert!(text.contains(r#""protocolVersion":1"#), "{text}");
}

#[test]
fn with_a_certificate_the_endpoint_is_https() {
    let env = Env::new();
    let (cert, key) = (env.root.join("cert.pem"), env.root.join("key.pem"));
    let made = Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
        ])
        .args(["-nodes", "-days", "1", "-subj", "/CN=localhost", "-keyout"])
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .output()
        .expect("openssl is on every Debian system the tests run on");
    assert!(made.status.success(), "{made:?}");
    let (c, k) = (cert.display().to_string(), key.display().to_string());
    let l = Listener::start(&env, None, &["--tls-cert", &c, "--tls-key", &k]);
    assert!(l.url.starts_with("https://"), "{}", l.url);
    let url = l.url.replace("127.0.0.1", "localhost");
    let text = curl_initialize(&["--cacert", &c], &l.token(), &url);
    // TLS offers h2 by ALPN, which curl takes.
    assert!(text.contains("version 2"), "{text}");
    assert!(text.contains(r#""protocolVersion":1"#), "{text}");
}

/// `initialize` POSTed by curl with `args` and the token: what it printed, ending with the HTTP
/// version it spoke (`version 2`).
fn curl_initialize(args: &[&str], token: &str, url: &str) -> String {
    let init = r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}"#;
    let out = Command::new("curl")
        .args(["-sS", "-w", "\nversion %{http_version}\n"])
        .args(args)
        .args(["-H", "Content-Type: application/json"])
        .args(["-H", &format!("Authorization: Bearer {token}")])
        .args(["--data", init, url])
        .output()
        .expect("curl is on every Debian system the tests run on");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    text
}
