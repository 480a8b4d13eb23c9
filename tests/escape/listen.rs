//! `oml acp --listen` against what can reach its port: a confined command (network on) that
//! looks for the token in a `--token-file`, and clients that open HTTP/2 connections, answer
//! every ping and never send the token.

use std::io::{BufRead as _, Read as _, Write as _};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Stdio};
use std::time::Duration;

use crate::support::home::poll_until;

use super::harness::{Target, landlock_or_skip};

/// A listener killed when dropped.
struct Listening(Child);

impl Drop for Listening {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `oml acp --listen 127.0.0.1:0 EXTRA…`: the listener and the lines it printed (its URL, and
/// the token it made unless it read one), or its exit code and stderr when it did not start.
fn listen(t: &Target, extra: &[&str]) -> Result<(Listening, Vec<String>), (i32, String)> {
    let mut args = vec!["acp", "--listen", "127.0.0.1:0"];
    args.extend_from_slice(extra);
    let mut child = t
        .command(None, &args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the listener");
    let mut out = std::io::BufReader::new(child.stdout.take().expect("stdout"));
    let mut first = String::new();
    out.read_line(&mut first)
        .expect("read the listener's stdout");
    if first.is_empty() {
        let mut stderr = String::new();
        child
            .stderr
            .take()
            .expect("stderr")
            .read_to_string(&mut stderr)
            .expect("read its stderr");
        let code = child.wait().expect("wait").code().unwrap_or(-1);
        return Err((code, stderr));
    }
    let mut lines = vec![first.trim().to_owned()];
    if !extra.contains(&"--token-file") {
        let mut token = String::new();
        out.read_line(&mut token).expect("the token line");
        lines.push(token.trim().to_owned());
    }
    // Its stderr is not read from here on: a full pipe must not block it.
    drop(child.stderr.take());
    Ok((Listening(child), lines))
}

/// The URL from the listener's `listening URL` line.
fn url_of(lines: &[String]) -> String {
    lines[0]
        .strip_prefix("listening ")
        .expect("a URL")
        .to_owned()
}

/// Python that reads the token from TOKEN_FILE (when it can) and asks the listener at URL to open
/// a connection with it: with one, it could start a session anywhere and run the agent
/// unconfined.
const USE_THE_TOKEN_FILE: &str = r#"
import os, urllib.request
token = None
try:
    token = open(os.environ["TOKEN_FILE"]).read().strip()
    print("token read")
except Exception as e:
    print("unreadable:", type(e).__name__)
body = b'{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}'
req = urllib.request.Request(os.environ["URL"], data=body, method="POST")
req.add_header("Content-Type", "application/json")
if token:
    req.add_header("Authorization", "Bearer " + token)
try:
    with urllib.request.urlopen(req, timeout=5) as r:
        print("status", r.status, r.read().decode())
except urllib.error.HTTPError as e:
    print("status", e.code)
except Exception as e:
    print("refused:", type(e).__name__, e)
"#;

/// The model's command, confined with the network on, runs [`USE_THE_TOKEN_FILE`] against the
/// listener at `url` with the token file `file`; what it printed.
fn command_uses_the_token_file(t: &Target, url: &str, file: &Path) -> String {
    let script = t.env.project.join("use-token.py");
    std::fs::write(&script, USE_THE_TOKEN_FILE).expect("write the script");
    let command = format!(
        "TOKEN_FILE={} URL={url} python3 {}",
        file.display(),
        script.display()
    );
    let (run, result) = t.model_runs(&command, &[]);
    assert_eq!(run.code, 0, "{run:?}");
    result
}

/// A `--token-file` a confined command can read is refused: the listener does not start. One
/// in a folder the sandbox hides (the runtime folder) is taken, and the same command finds
/// nothing there and is refused.
#[test]
fn a_token_file_a_confined_command_could_read_is_refused() {
    let Some(_) = landlock_or_skip() else { return };
    let t = Target::new();
    t.env.init("(setq sandbox.network? true)");
    let token = "a-token-of-the-users-own-making-0123456789";
    let readable = t.env.root.join("listener.token");
    std::fs::write(&readable, token).expect("write the token file");
    let readable_arg = readable.display().to_string();
    match listen(&t, &["--token-file", &readable_arg]) {
        Ok((_listener, lines)) => {
            let said = command_uses_the_token_file(&t, &url_of(&lines), &readable);
            panic!("the listener took a token file commands can read; the command said: {said}");
        }
        Err((code, stderr)) => {
            assert_ne!(code, 0, "{stderr}");
            assert!(
                stderr.contains("--token-file") && stderr.contains("could read the token"),
                "the refusal says why: {stderr}"
            );
        }
    }
    let hidden = t.env.home.runtime.join("listener.token");
    std::fs::write(&hidden, token).expect("write the token file");
    let hidden_arg = hidden.display().to_string();
    let (_listener, lines) = listen(&t, &["--token-file", &hidden_arg])
        .unwrap_or_else(|(code, e)| panic!("a token file in the runtime folder: {code} {e}"));
    let said = command_uses_the_token_file(&t, &url_of(&lines), &hidden);
    assert!(said.contains("unreadable"), "{said}");
    assert!(said.contains("status 401"), "{said}");
    assert!(!said.contains("status 200"), "{said}");
}

/// HTTP/2's connection preface, and an empty SETTINGS frame.
const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0\0\x04\0\0\0\0\0";
const SETTINGS: u8 = 0x4;
const PING: u8 = 0x6;
const ACK: u8 = 0x1;

/// An HTTP/2 client that never sends a request: it acknowledges the server's SETTINGS and
/// answers its PINGs, so it looks alive for ever.
struct Idler {
    stream: TcpStream,
    read: Vec<u8>,
    closed: bool,
}

impl Idler {
    fn open(addr: &str) -> Option<Idler> {
        let mut stream = TcpStream::connect(addr).ok()?;
        stream.write_all(PREFACE).ok()?;
        stream.set_nonblocking(true).ok()?;
        Some(Idler {
            stream,
            read: Vec::new(),
            closed: false,
        })
    }

    /// Reads what has come, answers it; notes the server's end.
    fn tend(&mut self) {
        let mut buf = [0u8; 4096];
        loop {
            match self.stream.read(&mut buf) {
                Ok(0) => {
                    self.closed = true;
                    return;
                }
                Ok(n) => self.read.extend_from_slice(&buf[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(_) => {
                    self.closed = true;
                    return;
                }
            }
        }
        while self.read.len() >= 9 {
            let len = usize::from(self.read[0]) << 16
                | usize::from(self.read[1]) << 8
                | usize::from(self.read[2]);
            if self.read.len() < 9 + len {
                break;
            }
            let (kind, flags) = (self.read[3], self.read[4]);
            let payload: Vec<u8> = self.read[9..9 + len].to_vec();
            self.read.drain(..9 + len);
            let answer: Option<Vec<u8>> = match kind {
                SETTINGS if flags & ACK == 0 => Some(vec![0, 0, 0, SETTINGS, ACK, 0, 0, 0, 0]),
                PING if flags & ACK == 0 => {
                    let mut frame = vec![0, 0, 8, PING, ACK, 0, 0, 0, 0];
                    frame.extend_from_slice(&payload);
                    Some(frame)
                }
                _ => None,
            };
            if let Some(frame) = answer {
                let _ = self.stream.write_all(&frame);
            }
        }
    }
}

/// Tends `idlers` until `stop`; returns them.
fn tend_all(
    mut idlers: Vec<Idler>,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> std::thread::JoinHandle<Vec<Idler>> {
    std::thread::spawn(move || {
        while !stop.load(std::sync::atomic::Ordering::SeqCst) {
            for idler in idlers.iter_mut().filter(|i| !i.closed) {
                idler.tend();
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        idlers
    })
}

/// Three hundred HTTP/2 connections that answer pings and never show the token do not keep a
/// real client out, and none of them stays open: connections without the token are bounded in
/// number (the oldest go) and in time.
#[test]
fn unauthenticated_http2_connections_do_not_starve_oml_acp_listen() {
    let t = Target::new();
    let (_listener, lines) = listen(&t, &[]).expect("the listener starts");
    let url = url_of(&lines);
    let token = lines[1]
        .strip_prefix("token ")
        .expect("the token")
        .to_owned();
    let addr = url
        .trim_start_matches("http://")
        .trim_end_matches("/acp")
        .to_owned();
    let idlers: Vec<Idler> = (0..300).filter_map(|_| Idler::open(&addr)).collect();
    assert_eq!(idlers.len(), 300, "the connections were made");
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let tending = tend_all(idlers, std::sync::Arc::clone(&stop));
    let init = r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}"#;
    // curl gives up after 20 s: connections that held every slot would keep it out.
    let answer = std::process::Command::new("curl")
        .args(["-sS", "--max-time", "20"])
        .args(["-H", "Content-Type: application/json"])
        .args(["-H", &format!("Authorization: Bearer {token}")])
        .args(["--data", init, &url])
        .output()
        .expect("curl");
    let text = String::from_utf8_lossy(&answer.stdout);
    assert!(
        text.contains(r#""protocolVersion":1"#),
        "a real client got in: {text} {}",
        String::from_utf8_lossy(&answer.stderr)
    );
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    let mut idlers = tending.join().expect("the idlers' thread");
    // The listener ends each of them, however alive it looks.
    let all_closed = poll_until(Duration::from_secs(40), || {
        for idler in idlers.iter_mut().filter(|i| !i.closed) {
            idler.tend();
        }
        idlers.iter().all(|i| i.closed)
    });
    let open = idlers.iter().filter(|i| !i.closed).count();
    assert!(
        all_closed,
        "{open} connections without the token are still open"
    );
}
