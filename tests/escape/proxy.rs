//! The network held to named domains: a confined command reaches an allowed host only through
//! oml's proxy, by name; an address, a host not listed, a denied host, a `CONNECT` to either,
//! and a socket opened around the proxy reach nothing, and each refusal names the host and the
//! setting, in the answer and in the tool result. A name may not lead the proxy to this
//! machine's own listeners unless the user listed it so; a flood of connections to the proxy
//! leaves oml answering. The lists also come from Claude Code's settings, which a project's may
//! narrow and never widen.

use std::io::{Read, Write};
use std::net::{TcpListener, UdpSocket};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::support::home::Run;

use super::harness::{Target, landlock_or_skip};

/// The attack, in Python: PORT is the host's server. Each step prints what it got.
const ATTACK: &str = r#"python3 - <<'PY'
import os, socket, time, urllib.request, urllib.error
P = PORT
def get(url):
    for attempt in range(40):
        try:
            r = urllib.request.urlopen(url, timeout=10)
            print(url, '=>', r.status, r.read().decode()); return
        except urllib.error.HTTPError as e:
            print(url, '=>', e.code, e.read().decode().strip()); return
        except OSError as e:
            last = e; time.sleep(0.1)
    print(url, '=> error', last)
def proxy():
    host, port = os.environ['HTTPS_PROXY'].rsplit('/', 1)[1].split(':')
    return host, int(port)
def connect(target):
    s = socket.create_connection(proxy(), timeout=10)
    s.sendall(('CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n' % (target, target)).encode())
    status = s.recv(4096).decode().split()[1]
    body = ''
    if status == '200':
        s.sendall(b'GET / HTTP/1.1\r\nHost: tunnel\r\nConnection: close\r\n\r\n')
        data = b''
        while True:
            chunk = s.recv(4096)
            if not chunk: break
            data += chunk
        body = data.decode().split('\r\n\r\n')[-1]
    print('connect', target, '=>', status, body)
def direct():
    try:
        socket.create_connection(('127.0.0.1', P), timeout=5); print('direct=reached')
    except OSError as e:
        print('direct=refused', e.errno)
    try:
        socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b'LEAK', ('127.0.0.1', UDP))
        print('udp=sent')
    except OSError as e:
        print('udp=refused', e.errno)
def flood(n):
    held = []
    for _ in range(n):
        try:
            s = socket.socket(); s.setblocking(False); s.connect_ex(proxy()); held.append(s)
        except OSError:
            break
    time.sleep(0.5)
    for s in held: s.close()
    print('flooded', len(held))
STEPS
PY"#;

/// A server on the host's loopback that answers every connection `HELLO` and counts them,
/// and a UDP socket there that nothing should reach.
struct Server {
    port: u16,
    hits: Arc<AtomicUsize>,
    udp: UdpSocket,
}

impl Server {
    fn start() -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let hits = Arc::new(AtomicUsize::new(0));
        let counted = hits.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { continue };
                counted.fetch_add(1, Ordering::SeqCst);
                let mut head = [0u8; 4096];
                let _ = stream.read(&mut head);
                let _ = stream.write_all(
                    b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: close\r\n\r\nHELLO",
                );
            }
        });
        let udp = UdpSocket::bind("127.0.0.1:0").expect("bind udp");
        udp.set_nonblocking(true).expect("non-blocking");
        Server { port, hits, udp }
    }

    /// The attack with these steps (Python calls of the functions above).
    fn attack(&self, steps: &[String]) -> String {
        ATTACK
            .replace("PORT", &self.port.to_string())
            .replace(
                "UDP",
                &self.udp.local_addr().expect("addr").port().to_string(),
            )
            .replace("STEPS", &steps.join("\n"))
    }

    fn hits(&self) -> usize {
        self.hits.load(Ordering::SeqCst)
    }
}

#[test]
fn only_an_allowed_name_goes_through_and_each_refusal_is_named() {
    let Some(_) = landlock_or_skip() else { return };
    let t = Target::new();
    t.env
        .init("(setq sandbox.network? true)\n(setq sandbox.allowed-domains [\"localhost\"])");
    let server = Server::start();
    let p = server.port;
    let steps = [
        format!("get('http://localhost:{p}/')"),
        format!("get('http://127.0.0.1:{p}/')"),
        format!("connect('localhost:{p}')"),
        "connect('evil.example:443')".to_owned(),
        format!("connect('127.0.0.1:{p}')"),
        "direct()".to_owned(),
    ];
    let (run, result) = t.model_runs(&server.attack(&steps), &[]);
    assert_eq!(run.code, 0, "{run:?}");
    let lines = [
        format!("http://localhost:{p}/ => 200 HELLO"),
        format!(
            "http://127.0.0.1:{p}/ => 403 oml sandbox: refused connection to 127.0.0.1:{p} — not in sandbox.allowed-domains"
        ),
        format!("connect localhost:{p} => 200 HELLO"),
        "connect evil.example:443 => 403".to_owned(),
        format!("connect 127.0.0.1:{p} => 403"),
        "direct=refused".to_owned(),
        format!("[sandbox: refused connection to 127.0.0.1:{p} — not in sandbox.allowed-domains]"),
        "[sandbox: refused connection to evil.example:443 — not in sandbox.allowed-domains]"
            .to_owned(),
    ];
    for line in lines {
        assert!(result.contains(&line), "{line}\n---\n{result}");
    }
    assert_eq!(server.hits(), 2, "only the two allowed requests: {result}");
    let mut datagram = [0u8; 16];
    assert!(
        server.udp.recv(&mut datagram).is_err(),
        "a datagram got out: {result}"
    );
}

#[test]
fn a_name_cannot_lead_the_proxy_to_this_machine_and_a_denied_host_is_named() {
    let Some(_) = landlock_or_skip() else { return };
    let t = Target::new();
    t.env
        .init("(setq sandbox.network? true)\n(setq sandbox.denied-domains [\"evil.example\"])");
    let server = Server::start();
    let p = server.port;
    let steps = [
        format!("get('http://localhost:{p}/')"),
        format!("get('http://127.0.0.1:{p}/')"),
        format!("get('http://[::1]:{p}/')"),
        "connect('evil.example:443')".to_owned(),
        "connect('sub.evil.example:443')".to_owned(),
    ];
    let (run, result) = t.model_runs(&server.attack(&steps), &[]);
    assert_eq!(run.code, 0, "{run:?}");
    for line in [
        format!("http://localhost:{p}/ => 403"),
        format!("http://127.0.0.1:{p}/ => 403"),
        "connect evil.example:443 => 403".to_owned(),
        "[sandbox: refused connection to evil.example:443 — in sandbox.denied-domains]".to_owned(),
        "(this machine or its link)".to_owned(),
    ] {
        assert!(result.contains(&line), "{line}\n---\n{result}");
    }
    assert_eq!(server.hits(), 0, "{result}");
}

#[test]
fn a_flood_of_connections_to_the_proxy_leaves_oml_answering() {
    let Some(_) = landlock_or_skip() else { return };
    let t = Target::new();
    t.env
        .init("(setq sandbox.network? true)\n(setq sandbox.allowed-domains [\"localhost\"])");
    let server = Server::start();
    let p = server.port;
    let steps = [
        "flood(1000)".to_owned(),
        format!("get('http://localhost:{p}/')"),
    ];
    let (run, result) = t.model_runs(&server.attack(&steps), &[]);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(run.stdout.contains("done"), "the turn ended: {run:?}");
    assert!(result.contains("flooded 1000"), "{result}");
    assert!(
        result.contains(&format!("http://localhost:{p}/ => 200 HELLO")),
        "{result}"
    );
}

#[test]
fn the_status_says_the_proxy_holds_the_network_and_where_the_lists_came_from() {
    let Some(_) = landlock_or_skip() else { return };
    let t = Target::new();
    t.env.init("(setq sandbox.network? true)");
    let claude = t.env.home.home.join(".claude");
    std::fs::create_dir_all(&claude).expect("mkdir");
    let user = r#"{"sandbox": {"network": {"allowedDomains": ["localhost", "*.pypi.org"]},
                   "filesystem": {"denyRead": ["~/vault"]}}}"#;
    std::fs::write(claude.join("settings.json"), user).expect("write");
    // The project tries to widen: a host the user did not list, this machine's address, a
    // wildcard above the user's.
    let project = r#"{"sandbox": {"network": {"allowedDomains":
                        ["localhost", "evil.example", "127.0.0.1", "*.org", "files.pypi.org"],
                      "deniedDomains": ["bad.pypi.org"]}}}"#;
    t.env
        .home
        .write_project_file(".claude/settings.json", project);
    let form = "(let [s (oml.sandbox-status)] \
                [s.network s.allowed-domains s.denied-domains s.from.allowed-domains \
                 (icollect [_ e (ipairs s.deny-read)] (if (e.path:match \"vault$\") e.from))])";
    let run = Run::from(t.command(None, &["eval", form]).output().expect("oml"));
    assert_eq!(run.code, 0, "{run:?}");
    let out = run.stdout;
    for part in [
        "\"proxy\"",
        "[\"localhost\" \"files.pypi.org\"]",
        "[\"bad.pypi.org\"]",
        "~/.claude/settings.json sandbox.network.allowedDomains, narrowed by .claude/settings.json sandbox.network.allowedDomains",
        "~/.claude/settings.json sandbox.filesystem.denyRead",
    ] {
        assert!(out.contains(part), "{part}\n---\n{out}");
    }
    for widened in ["evil.example", "127.0.0.1", "\"*.org\""] {
        assert!(!out.contains(widened), "{widened}\n---\n{out}");
    }
}

#[test]
fn claude_codes_allowed_domains_hold_the_network_when_omls_are_unset() {
    let Some(_) = landlock_or_skip() else { return };
    let t = Target::new();
    t.env.init("(setq sandbox.network? true)");
    let claude = t.env.home.home.join(".claude");
    std::fs::create_dir_all(&claude).expect("mkdir");
    let user = r#"{"sandbox": {"network": {"allowedDomains": ["localhost"]}}}"#;
    std::fs::write(claude.join("settings.json"), user).expect("write");
    let server = Server::start();
    let p = server.port;
    let steps = [
        format!("get('http://localhost:{p}/')"),
        format!("get('http://127.0.0.1:{p}/')"),
    ];
    let (run, result) = t.model_runs(&server.attack(&steps), &[]);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(
        result.contains(&format!("http://localhost:{p}/ => 200 HELLO")),
        "{result}"
    );
    let named = format!(
        "[sandbox: refused connection to 127.0.0.1:{p} — not in ~/.claude/settings.json sandbox.network.allowedDomains]"
    );
    assert!(result.contains(&named), "{result}");
    assert_eq!(server.hits(), 1, "{result}");
}

/// A repository's entries that are not patterns, or that would hide its own workspace, are
/// left out and named, not made an error that stops every command; the user's own settings
/// file that cannot be read holds the network closed rather than open.
#[test]
fn a_repositorys_bad_entries_are_skipped_and_an_unreadable_user_file_holds_the_network_closed() {
    let Some(_) = landlock_or_skip() else { return };
    let t = Target::new();
    t.env.init("(setq sandbox.network? true)");
    let project = r#"{"sandbox": {"network": {"deniedDomains": ["*", "evil.example"]},
                      "filesystem": {"denyRead": ["/"]}}}"#;
    t.env
        .home
        .write_project_file(".claude/settings.json", project);
    let claude = t.env.home.home.join(".claude");
    std::fs::create_dir_all(&claude).expect("mkdir");
    std::fs::write(claude.join("settings.json"), "{\"sandbox\": {,}}").expect("write");
    let (run, result) = t.model_runs("echo ran", &[]);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(result.contains("ran"), "the command ran: {result}");
    let form =
        "(let [s (oml.sandbox-status)] [s.network s.allowed-domains s.denied-domains s.skipped])";
    let run = Run::from(t.command(None, &["eval", form]).output().expect("oml"));
    assert_eq!(run.code, 0, "{run:?}");
    let out = run.stdout;
    for part in [
        "\"proxy\"",
        "[\"evil.example\"]",
        "\"*\\\" is not a host pattern",
        "holds the workspace",
        "~/.claude/settings.json",
    ] {
        assert!(out.contains(part), "{part}\n---\n{out}");
    }
    assert!(
        out.contains("{}\n [\"evil.example\"]"),
        "an empty allowed list: {out}"
    );
}
