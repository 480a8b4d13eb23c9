//! Behaviour of the JSON-RPC transport (`oml::jsonrpc`) over real Unix socket pairs and OS
//! pipes. The test plays the peer with raw bytes, so framing, ordering and error lines are checked
//! byte for byte; nothing of ours is mocked.

use std::io::{ErrorKind, Read};
use std::os::fd::{AsRawFd, RawFd};
use std::time::{Duration, Instant};

use oml::cancel::CancelToken;
use oml::jsonrpc::{
    Connection, Flow, Incoming, MalformedKind, Options, RequestError, RequestId, RpcError,
    SendError,
};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::UnixStream;
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};
use tokio::sync::mpsc::UnboundedReceiver;

/// Long enough for a loaded 2-core machine; only reached when a test is about to fail.
const PATIENCE: Duration = Duration::from_secs(20);

// --- Harness ----------------------------------------------------------------------------------

/// The other end of a connection, driven by the test with raw bytes.
struct Peer {
    read: BufReader<OwnedReadHalf>,
    write: OwnedWriteHalf,
    /// The connection's end of the socket, to see how much of what we sent it has read.
    ours: RawFd,
}

impl Peer {
    /// Wait until the connection has read everything we sent (its socket's receive queue is
    /// empty): what was sent so far reached it as a read of its own.
    async fn until_taken(&self) {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let mut unread: libc::c_int = 0;
            // SAFETY: FIONREAD writes one int; `ours` stays open while the connection lives,
            // and it lives as long as this test's `Connection` does.
            let r = unsafe { libc::ioctl(self.ours, libc::FIONREAD, &mut unread) };
            assert_eq!(r, 0, "FIONREAD: {}", std::io::Error::last_os_error());
            if unread == 0 {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "the connection left {unread} bytes unread for {PATIENCE:?}"
            );
            // The reader is a task of this runtime: let it run.
            tokio::task::yield_now().await;
        }
    }

    async fn send_raw(&mut self, bytes: &[u8]) {
        self.write.write_all(bytes).await.expect("peer write");
    }

    async fn send(&mut self, message: Value) {
        let mut line = message.to_string();
        line.push('\n');
        self.send_raw(line.as_bytes()).await;
    }

    /// The next line we wrote, without its `\n`; `None` at EOF.
    async fn line(&mut self) -> Option<String> {
        let mut line = String::new();
        let read = tokio::time::timeout(PATIENCE, self.read.read_line(&mut line))
            .await
            .expect("timed out waiting for a line from the connection")
            .expect("peer read");
        if read == 0 {
            return None;
        }
        assert_eq!(line.pop(), Some('\n'), "every message ends with a newline");
        Some(line)
    }

    async fn json(&mut self) -> Value {
        let line = self.line().await.expect("a line, not EOF");
        serde_json::from_str(&line).expect("each line is JSON")
    }
}

fn options(peer: &str) -> Options {
    Options {
        peer: peer.to_owned(),
        ..Options::default()
    }
}

fn connect(options: Options) -> (Connection, UnboundedReceiver<Incoming>, Peer) {
    let (ours, theirs) = UnixStream::pair().expect("socket pair");
    let ours_fd = ours.as_raw_fd();
    let (read, write) = ours.into_split();
    let (connection, incoming) = Connection::start(read, write, options);
    let (peer_read, peer_write) = theirs.into_split();
    let peer = Peer {
        read: BufReader::new(peer_read),
        write: peer_write,
        ours: ours_fd,
    };
    (connection, incoming, peer)
}

async fn next(incoming: &mut UnboundedReceiver<Incoming>) -> Option<Incoming> {
    tokio::time::timeout(PATIENCE, incoming.recv())
        .await
        .expect("timed out waiting for an incoming message")
}

/// One incoming message as a line of text, for tables.
fn summary(incoming: &Incoming) -> String {
    let params = |p: &Option<Value>| p.as_ref().map_or("-".to_owned(), Value::to_string);
    match incoming {
        Incoming::Request(r) => format!("request {} {} {}", r.id, r.method, params(&r.params)),
        Incoming::Notification(n) => format!("notification {} {}", n.method, params(&n.params)),
        Incoming::Malformed {
            malformed,
            consecutive,
        } => {
            let id = malformed
                .id
                .as_ref()
                .map_or("-".to_owned(), ToString::to_string);
            let excerpt: String = malformed.excerpt.chars().take(24).collect();
            format!(
                "malformed#{consecutive} {:?} id={id} {excerpt}",
                malformed.kind
            )
        }
    }
}

/// Writes `input` as the peer, closes the peer's side, and returns every incoming message.
async fn incoming_from(input: &[u8], max_line_bytes: usize) -> Vec<String> {
    let (_connection, mut incoming, mut peer) = connect(Options {
        max_line_bytes,
        ..options("agent")
    });
    let writer = async move {
        peer.send_raw(input).await;
        peer.write.shutdown().await.expect("peer shutdown");
        peer
    };
    let reader = async {
        let mut seen = Vec::new();
        while let Some(message) = next(&mut incoming).await {
            seen.push(summary(&message));
        }
        seen
    };
    let (_peer, seen) = tokio::join!(writer, reader);
    seen
}

const A: &str = r#"{"jsonrpc":"2.0","method":"a"}"#;
const B: &str = r#"{"jsonrpc":"2.0","id":1,"method":"b","params":{}}"#;

// --- Reading ----------------------------------------------------------------------------------

#[tokio::test]
async fn lines_are_framed_classified_and_bad_ones_skipped_without_losing_neighbours() {
    let huge = "z".repeat(300_000);
    let cases: Vec<(&str, usize, Vec<u8>, Vec<&str>)> = vec![
        (
            "CRLF line ends",
            1024,
            format!("{A}\r\n{B}\r\n").into_bytes(),
            vec!["notification a -", "request 1 b {}"],
        ),
        (
            "a final line without a newline",
            1024,
            format!("{B}\n{A}").into_bytes(),
            vec!["request 1 b {}", "notification a -"],
        ),
        (
            "blank lines",
            1024,
            format!("\n\r\n  \t\n{A}\n\n").into_bytes(),
            vec!["notification a -"],
        ),
        (
            "invalid UTF-8, then a valid line",
            1024,
            [&b"say \xff\xfe\n"[..], A.as_bytes()].concat(),
            vec![
                "malformed#1 InvalidUtf8 id=- say \u{fffd}\u{fffd}",
                "notification a -",
            ],
        ),
        (
            "a garbage text line",
            1024,
            format!("Starting MCP server...\n{A}\n").into_bytes(),
            vec![
                r#"malformed#1 ParseError id=- Starting MCP server..."#,
                "notification a -",
            ],
        ),
        (
            "JSON that is not an object",
            1024,
            format!("42\n\"hi\"\nnull\n[{A}]\n{A}\n").into_bytes(),
            vec![
                r#"malformed#1 InvalidRequest id=- 42"#,
                r#"malformed#2 InvalidRequest id=- "hi""#,
                r#"malformed#3 InvalidRequest id=- null"#,
                r#"malformed#4 InvalidRequest id=- [{"jsonrpc":"2.0","metho"#,
                "notification a -",
            ],
        ),
        (
            "a JSON log object with an id",
            1024,
            b"{\"level\":\"info\",\"id\":1,\"msg\":\"ready\"}\n".to_vec(),
            vec![r#"malformed#1 InvalidRequest id=1 {"level":"info","id":1,""#],
        ),
        (
            "an oversize line between two good ones",
            64,
            format!("{A}\n{}\n{A}\n", "x".repeat(5000)).into_bytes(),
            vec![
                "notification a -",
                r#"malformed#1 TooLong { len: 5000 } id=- xxxxxxxxxxxxxxxxxxxxxxxx"#,
                "notification a -",
            ],
        ),
        (
            "an oversize line longer than many reads",
            1024,
            format!("{A}\n{huge}\n{B}\n").into_bytes(),
            vec![
                "notification a -",
                r#"malformed#1 TooLong { len: 300000 } id=- zzzzzzzzzzzzzzzzzzzzzzzz"#,
                "request 1 b {}",
            ],
        ),
        (
            "an oversize final line without a newline",
            64,
            format!("{A}\n{}", "y".repeat(300)).into_bytes(),
            vec![
                "notification a -",
                r#"malformed#1 TooLong { len: 300 } id=- yyyyyyyyyyyyyyyyyyyyyyyy"#,
            ],
        ),
        (
            "a line exactly at the cap",
            A.len(),
            format!("{A}\n{A} \n").into_bytes(),
            vec![
                "notification a -",
                r#"malformed#1 TooLong { len: 31 } id=- {"jsonrpc":"2.0","method"#,
            ],
        ),
        (
            "consecutive bad lines counted, reset by a good one",
            1024,
            format!("junk\njunk\n{A}\njunk\n").into_bytes(),
            vec![
                r#"malformed#1 ParseError id=- junk"#,
                r#"malformed#2 ParseError id=- junk"#,
                "notification a -",
                r#"malformed#1 ParseError id=- junk"#,
            ],
        ),
    ];
    for (name, max_line_bytes, input, expected) in cases {
        let seen = incoming_from(&input, max_line_bytes).await;
        assert_eq!(seen, expected, "case: {name}");
    }
}

#[tokio::test]
async fn bytes_trickled_one_at_a_time_still_make_whole_messages() {
    let (_connection, mut incoming, mut peer) = connect(options("agent"));
    let line =
        "{\"jsonrpc\":\"2.0\",\"method\":\"say\",\"params\":{\"text\":\"héllo → 😀 文字\"}}\r\n";
    for byte in line.as_bytes() {
        peer.send_raw(&[*byte]).await;
        // Each byte is a read of its own.
        peer.until_taken().await;
    }
    let message = next(&mut incoming).await.expect("a message");
    assert_eq!(
        summary(&message),
        r#"notification say {"text":"héllo → 😀 文字"}"#
    );
}

#[tokio::test]
async fn a_character_split_across_reads_is_decoded_with_its_line() {
    let (_connection, mut incoming, mut peer) = connect(options("agent"));
    let line = "{\"jsonrpc\":\"2.0\",\"method\":\"say\",\"params\":\"😀\"}\n".as_bytes();
    let middle_of_emoji = line.iter().position(|&b| b == 0xF0).expect("emoji") + 2;
    peer.send_raw(&line[..middle_of_emoji]).await;
    // The reader takes the first half on its own.
    peer.until_taken().await;
    peer.send_raw(&line[middle_of_emoji..]).await;
    let message = next(&mut incoming).await.expect("a message");
    assert_eq!(summary(&message), r#"notification say "😀""#);
}

// --- Ids and error answers --------------------------------------------------------------------

#[tokio::test]
async fn request_ids_are_echoed_verbatim() {
    let (connection, mut incoming, mut peer) = connect(options("client"));
    let ids = ["0", "\"abc\"", "\"0\"", "9007199254740993", "-1"];
    for id in ids {
        let request = format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"m\"}}\n");
        peer.send_raw(request.as_bytes()).await;
        let Some(Incoming::Request(request)) = next(&mut incoming).await else {
            panic!("expected a request for id {id}");
        };
        connection
            .respond(&request.id, json!({"ok": true}))
            .await
            .expect("respond");
        let expected = format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"result\":{{\"ok\":true}}}}");
        assert_eq!(peer.line().await.as_deref(), Some(expected.as_str()));
    }
}

#[tokio::test]
async fn an_agent_answers_bad_input_with_exact_error_lines() {
    let (connection, mut incoming, mut peer) = connect(Options {
        max_line_bytes: 100,
        ..options("client")
    });
    let input = [
        &b"not json\n"[..],
        b"\xff\xfe\n",
        b"[1,2]\n",
        b"{\"id\":5,\"method\":\"x\"}\n",
        b"{\"jsonrpc\":\"2.0\",\"id\":6,\"method\":\"nope/x\"}\n",
        &[b'w'; 150],
        b"\n",
    ]
    .concat();
    peer.send_raw(&input).await;
    let mut lines = Vec::new();
    for _ in 0..6 {
        match next(&mut incoming).await.expect("a message") {
            Incoming::Request(request) => {
                let error = RpcError::method_not_found(&request.method);
                connection.respond_error(&request.id, error).await
            }
            Incoming::Malformed { malformed, .. } => connection.respond_malformed(&malformed).await,
            Incoming::Notification(n) => panic!("unexpected notification {n:?}"),
        }
        .expect("answer");
        lines.push(peer.line().await.expect("an error line"));
    }
    insta::assert_snapshot!(lines.join("\n"), @r#"
    {"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error","data":"line is not JSON: expected ident at line 1 column 2"}}
    {"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error","data":"line is not valid UTF-8: invalid utf-8 sequence of 1 bytes from index 0"}}
    {"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid Request","data":"expected a JSON-RPC object, got an array (batches are not supported)"}}
    {"jsonrpc":"2.0","id":5,"error":{"code":-32600,"message":"Invalid Request","data":"not JSON-RPC: no \"jsonrpc\": \"2.0\""}}
    {"jsonrpc":"2.0","id":6,"error":{"code":-32601,"message":"Method not found: nope/x"}}
    {"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error","data":"line of 150 bytes is longer than the limit of 100 bytes"}}
    "#);
}

// --- Requests ---------------------------------------------------------------------------------

#[tokio::test]
async fn responses_reach_their_own_request_when_answered_out_of_order() {
    let (connection, _incoming, mut peer) = connect(options("agent"));
    let mut tasks = Vec::new();
    for method in ["first", "second", "third"] {
        let connection = connection.clone();
        tasks.push(tokio::spawn(async move {
            connection.request(method, json!({"ask": method})).await
        }));
    }
    let mut asked = Vec::new();
    for _ in 0..3 {
        asked.push(peer.json().await);
    }
    let mut ids: Vec<u64> = asked.iter().filter_map(|r| r["id"].as_u64()).collect();
    ids.sort_unstable();
    assert_eq!(ids, [1, 2, 3], "ids count up from 1");
    for request in asked.iter().rev() {
        let method = request["method"].as_str().expect("method");
        let answer = if method == "second" {
            json!({"jsonrpc": "2.0", "id": request["id"], "error": {"code": -32000, "message": "Authentication required", "data": {"methods": []}}})
        } else {
            json!({"jsonrpc": "2.0", "id": request["id"], "result": {"for": request["params"]["ask"]}})
        };
        peer.send(answer).await;
    }
    let mut results = Vec::new();
    for task in tasks {
        results.push(task.await.expect("task"));
    }
    assert_eq!(results[0], Ok(json!({"for": "first"})));
    assert_eq!(
        results[1],
        Err(RequestError::Rpc {
            method: "second".into(),
            error: RpcError::auth_required().with_data(json!({"methods": []})),
        })
    );
    assert_eq!(results[2], Ok(json!({"for": "third"})));
    assert_eq!(connection.pending_requests(), 0);
}

#[tokio::test]
async fn answers_to_unknown_ids_and_log_objects_do_not_disturb_a_pending_request() {
    let (connection, mut incoming, mut peer) = connect(options("agent"));
    let asking = {
        let connection = connection.clone();
        tokio::spawn(async move { connection.request("session/new", json!({})).await })
    };
    let request = peer.json().await;
    assert_eq!(request["id"], 1);
    peer.send(json!({"jsonrpc": "2.0", "id": 99, "result": "stray"}))
        .await;
    peer.send(json!({"jsonrpc": "2.0", "id": "1", "result": "string id 1 is not id 1"}))
        .await;
    peer.send(json!({"level": "info", "id": 1, "result": "a log record"}))
        .await;
    peer.send(json!({"jsonrpc": "2.0", "id": 1, "result": {"sessionId": "s1"}}))
        .await;
    let answer = asking.await.expect("task");
    assert_eq!(answer, Ok(json!({"sessionId": "s1"})));
    let noise = next(&mut incoming).await.expect("the log object");
    let Incoming::Malformed { malformed, .. } = noise else {
        panic!("expected noise, got {noise:?}");
    };
    assert_eq!(malformed.kind, MalformedKind::InvalidRequest);
}

#[tokio::test]
async fn a_request_times_out_and_stops_being_pending() {
    let (connection, _incoming, mut peer) = connect(options("agent"));
    let after = Duration::from_millis(100);
    let answer = connection
        .request_with("slow", json!({}), Some(after), None)
        .await;
    assert_eq!(
        answer,
        Err(RequestError::Timeout {
            method: "slow".into(),
            id: RequestId::from(1),
            after,
        })
    );
    assert_eq!(connection.pending_requests(), 0);
    // The late answer is dropped, and the connection goes on working.
    assert_eq!(peer.json().await["id"], 1);
    // The peer is told the request was given up (ACP's `$/cancel_request`).
    assert_eq!(
        peer.json().await,
        json!({"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": 1}})
    );
    peer.send(json!({"jsonrpc": "2.0", "id": 1, "result": "late"}))
        .await;
    let next_request = tokio::spawn({
        let connection = connection.clone();
        async move { connection.request("fast", json!({})).await }
    });
    assert_eq!(peer.json().await["id"], 2);
    peer.send(json!({"jsonrpc": "2.0", "id": 2, "result": "on time"}))
        .await;
    assert_eq!(next_request.await.expect("task"), Ok(json!("on time")));
}

#[tokio::test]
async fn a_request_is_cancelled_by_its_token() {
    let (connection, _incoming, mut peer) = connect(options("client"));
    let token = CancelToken::new();
    let asking = tokio::spawn({
        let connection = connection.clone();
        let token = token.clone();
        async move {
            connection
                .request_with("session/request_permission", json!({}), None, Some(&token))
                .await
        }
    });
    assert_eq!(peer.json().await["id"], 1);
    assert_eq!(connection.pending_requests(), 1);
    token.cancel();
    assert_eq!(
        asking.await.expect("task"),
        Err(RequestError::Cancelled {
            method: "session/request_permission".into(),
            id: Some(RequestId::from(1)),
        })
    );
    assert_eq!(connection.pending_requests(), 0);
    assert_eq!(
        peer.json().await,
        json!({"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": 1}})
    );

    // An already-cancelled token sends nothing: the next request on the wire is id 2.
    let refused = connection
        .request_with("never", json!({}), None, Some(&token))
        .await;
    assert_eq!(
        refused,
        Err(RequestError::Cancelled {
            method: "never".into(),
            id: None,
        })
    );
    connection
        .notify("marker", json!({}))
        .await
        .expect("notify");
    assert_eq!(peer.json().await["method"], "marker");
}

#[tokio::test]
async fn dropping_a_waiting_request_stops_it_being_pending() {
    let (connection, _incoming, mut peer) = connect(options("agent"));
    let asking = tokio::spawn({
        let connection = connection.clone();
        async move { connection.request("session/prompt", json!({})).await }
    });
    assert_eq!(peer.json().await["id"], 1);
    assert_eq!(connection.pending_requests(), 1);
    asking.abort();
    assert!(asking.await.is_err_and(|e| e.is_cancelled()));
    assert_eq!(connection.pending_requests(), 0);
    assert_eq!(
        peer.json().await,
        json!({"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": 1}}),
        "a dropped waiter tells the peer too"
    );
}

#[tokio::test]
async fn peer_eof_fails_every_pending_request_and_ends_incoming() {
    let (connection, mut incoming, mut peer) = connect(options("agent"));
    let mut tasks = Vec::new();
    for method in ["session/prompt", "fs/read_text_file"] {
        let connection = connection.clone();
        tasks.push(tokio::spawn(async move {
            connection.request(method, json!({})).await
        }));
    }
    peer.json().await;
    peer.json().await;
    drop(peer);
    for (task, method) in tasks
        .into_iter()
        .zip(["session/prompt", "fs/read_text_file"])
    {
        let error = task.await.expect("task").expect_err("no answer can come");
        assert_eq!(
            error.to_string(),
            format!("agent closed the connection before answering {method}")
        );
    }
    assert_eq!(next(&mut incoming).await, None);
    assert_eq!(
        connection.request("later", json!({})).await,
        Err(RequestError::Closed {
            peer: "agent".into(),
            method: "later".into(),
        })
    );
}

// --- Writing ----------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_senders_write_whole_lines_in_each_senders_order() {
    const SENDERS: usize = 8;
    const EACH: usize = 30;
    let sizes = [10, 300, 5_000, 100_000];
    let (connection, _incoming, mut peer) = connect(options("client"));
    let mut tasks = Vec::new();
    for sender in 0..SENDERS {
        let connection = connection.clone();
        tasks.push(tokio::spawn(async move {
            for seq in 0..EACH {
                let size = sizes[(sender + seq) % sizes.len()];
                let text = char::from(b'a' + sender as u8).to_string().repeat(size);
                let params = json!({"sender": sender, "seq": seq, "text": text});
                connection.notify("session/update", params).await?;
            }
            Ok::<(), SendError>(())
        }));
    }
    let mut next_seq = [0usize; SENDERS];
    for _ in 0..SENDERS * EACH {
        let message = peer.json().await;
        let params = &message["params"];
        let sender = params["sender"].as_u64().expect("sender") as usize;
        let seq = params["seq"].as_u64().expect("seq") as usize;
        assert_eq!(seq, next_seq[sender], "sender {sender} out of order");
        next_seq[sender] += 1;
        let text = params["text"].as_str().expect("text");
        let letter = char::from(b'a' + sender as u8);
        assert_eq!(text.len(), sizes[(sender + seq) % sizes.len()]);
        assert!(text.chars().all(|c| c == letter), "bytes of another sender");
    }
    for task in tasks {
        task.await.expect("task").expect("sends");
    }
    assert_eq!(next_seq, [EACH; SENDERS]);
}

#[tokio::test]
async fn a_flushed_response_is_on_the_wire_before_a_later_notification() {
    let (ours, theirs) = std::os::unix::net::UnixStream::pair().expect("socket pair");
    ours.set_nonblocking(true).expect("nonblocking");
    theirs.set_nonblocking(true).expect("nonblocking");
    let (read, write) = UnixStream::from_std(ours)
        .expect("tokio socket")
        .into_split();
    let (connection, _incoming) = Connection::start(read, write, options("client"));
    let mut theirs = theirs;

    for turn_update in 0..3 {
        let params = json!({"update": turn_update});
        connection
            .notify("session/update", params)
            .await
            .expect("update");
    }
    connection
        .respond(&RequestId::from(1), json!({"sessionId": "s1"}))
        .await
        .expect("respond");
    connection.flush().await.expect("flush");
    // Once flush has returned, the bytes are in the socket: a non-blocking read finds them all.
    let mut written = String::new();
    match theirs.read_to_string(&mut written) {
        Err(e) if e.kind() == ErrorKind::WouldBlock => {}
        other => panic!("expected the socket to be drained, got {other:?}"),
    }
    let lines: Vec<&str> = written.lines().collect();
    assert_eq!(
        lines,
        [
            r#"{"jsonrpc":"2.0","method":"session/update","params":{"update":0}}"#,
            r#"{"jsonrpc":"2.0","method":"session/update","params":{"update":1}}"#,
            r#"{"jsonrpc":"2.0","method":"session/update","params":{"update":2}}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":{"sessionId":"s1"}}"#,
        ]
    );

    connection
        .notify("session/update", json!({"available_commands": []}))
        .await
        .expect("notify");
    connection.flush().await.expect("flush");
    let mut later = String::new();
    let _ = theirs.read_to_string(&mut later);
    assert_eq!(
        later,
        "{\"jsonrpc\":\"2.0\",\"method\":\"session/update\",\"params\":{\"available_commands\":[]}}\n"
    );
}

#[tokio::test]
async fn writing_to_a_closed_pipe_fails_sends_without_panicking() {
    let (to_peer, peer_reads) = tokio::net::unix::pipe::pipe().expect("pipe");
    let (_peer_writes, from_peer) = tokio::net::unix::pipe::pipe().expect("pipe");
    let (connection, _incoming) = Connection::start(from_peer, to_peer, options("agent"));
    drop(peer_reads);

    connection
        .notify("first", json!({}))
        .await
        .expect("enqueued");
    let flushed = connection.flush().await;
    let Err(SendError::Closed { peer, reason }) = flushed else {
        panic!("expected the flush to fail, got {flushed:?}");
    };
    assert_eq!(peer, "agent");
    assert!(reason.contains("Broken pipe"), "{reason}");

    let later = connection.notify("second", json!({})).await;
    assert!(
        matches!(&later, Err(SendError::Closed { reason: r, .. }) if *r == reason),
        "{later:?}"
    );
    let request = connection.request("third", json!({})).await;
    assert!(
        matches!(request, Err(RequestError::Send { .. })),
        "{request:?}"
    );
}

#[tokio::test]
async fn a_request_that_cannot_be_written_fails_instead_of_waiting() {
    let (connection, _incoming, peer) = connect(options("agent"));
    // The peer stops reading but keeps its write half open, so no EOF comes to save us.
    let Peer { read, write, .. } = peer;
    let stream = read.into_inner().reunite(write).expect("same stream");
    let std_stream = stream.into_std().expect("std socket");
    std_stream
        .shutdown(std::net::Shutdown::Read)
        .expect("shutdown read");
    let answer = connection.request("initialize", json!({})).await;
    let Err(RequestError::Io { method, reason }) = answer else {
        panic!("expected an i/o error, got {answer:?}");
    };
    assert_eq!(method, "initialize");
    assert!(reason.contains("Broken pipe"), "{reason}");
    assert_eq!(connection.pending_requests(), 0);
    drop(std_stream);
}

#[tokio::test]
async fn close_writes_what_is_queued_then_the_peer_sees_eof() {
    let (connection, _incoming, mut peer) = connect(options("agent"));
    connection.notify("bye", json!({})).await.expect("notify");
    connection.close().await.expect("close");
    assert_eq!(
        peer.line().await.as_deref(),
        Some(r#"{"jsonrpc":"2.0","method":"bye","params":{}}"#)
    );
    assert_eq!(peer.line().await, None);
    assert_eq!(
        connection.notify("after", json!({})).await,
        Err(SendError::Closed {
            peer: "agent".into(),
            reason: "this side closed the connection".into(),
        })
    );
    assert_eq!(connection.close().await, Ok(()));
}

#[tokio::test]
async fn dropping_the_last_handle_ends_incoming_and_the_peer_sees_eof() {
    let (connection, mut incoming, mut peer) = connect(options("agent"));
    connection
        .notify("last", json!(null))
        .await
        .expect("notify");
    drop(connection);
    assert_eq!(next(&mut incoming).await, None);
    assert_eq!(
        peer.line().await.as_deref(),
        Some(r#"{"jsonrpc":"2.0","method":"last","params":null}"#)
    );
    assert_eq!(peer.line().await, None);
    let mut rest = Vec::new();
    peer.read.read_to_end(&mut rest).await.expect("read");
    assert!(rest.is_empty());
}

#[tokio::test]
async fn a_synchronous_handler_has_seen_every_earlier_line_when_a_response_wakes_its_waiter() {
    use std::sync::{Arc, Mutex};
    let seen: Arc<Mutex<Vec<String>>> = Arc::new(Mutex::new(Vec::new()));
    let record = Arc::clone(&seen);
    let (connection, mut incoming, mut peer) = connect(Options {
        on_incoming: Some(Arc::new(move |message: Incoming| {
            record.lock().unwrap().push(summary(&message));
            Flow::Continue
        })),
        ..options("agent")
    });
    let waiter = {
        let connection = connection.clone();
        tokio::spawn(async move {
            let answer = connection.request("session/prompt", json!({})).await;
            (answer, ())
        })
    };
    let request = peer.json().await;
    // Many updates, a bad line and a request from the peer, then the answer, in one write.
    let mut burst = String::new();
    for n in 0..500 {
        burst.push_str(&format!(
            "{{\"jsonrpc\":\"2.0\",\"method\":\"session/update\",\"params\":{{\"n\":{n}}}}}\n"
        ));
    }
    burst.push_str("noise\n");
    burst.push_str("{\"jsonrpc\":\"2.0\",\"id\":\"p\",\"method\":\"ask\"}\n");
    burst.push_str(&format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":{},\"result\":{{\"stopReason\":\"end_turn\"}}}}\n",
        request["id"]
    ));
    peer.send_raw(burst.as_bytes()).await;
    let (answer, ()) = tokio::time::timeout(PATIENCE, waiter)
        .await
        .expect("the request is answered")
        .expect("the waiter did not panic");
    assert_eq!(answer.unwrap(), json!({"stopReason": "end_turn"}));
    // No waiting here: the handler ran before the answer was routed.
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 502, "every earlier line was handled first");
    assert_eq!(seen[0], "notification session/update {\"n\":0}");
    assert_eq!(seen[499], "notification session/update {\"n\":499}");
    assert!(
        seen[500].starts_with("malformed#1 ParseError"),
        "{}",
        seen[500]
    );
    assert_eq!(seen[501], "request \"p\" ask -");
    // The channel stays empty while a handler is set, and ends with the connection.
    peer.write.shutdown().await.unwrap();
    drop(connection);
    assert!(next(&mut incoming).await.is_none());
}
