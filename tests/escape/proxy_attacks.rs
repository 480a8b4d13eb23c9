//! Attacks on the domain proxy that got through when it was first built (a security review
//! of cd82c5e): a denied address spelled another way, a repository's own list leading the
//! proxy to this machine's own (non-loopback) address, `CONNECT` tunnels that the proxy's
//! limit on connections does not count (so a command can use up oml's descriptors), and the
//! user's Claude Code settings in `$CLAUDE_CONFIG_DIR` rewritten by a confined command to open
//! the network for the next one.
//!
//! Each test reaches the real binary through a scripted model's `bash` call, as
//! `tests/escape/proxy.rs` does.

use std::io::Read;
use std::net::{IpAddr, TcpListener, TcpStream, UdpSocket};
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use crate::support::fake_model::{FakeModel, Reply, text_chunks, tool_call_chunks};
use crate::support::home::{Run, skip};

use super::harness::{Target, landlock_or_skip, tool_result};

/// The proxy's own limit on connections served at once (`MAX_CONNECTIONS` in
/// `src/sandbox/proxy/serve.rs`).
const PROXY_CONNECTIONS: usize = 256;

/// How many tunnels the attack asks for: more than the proxy serves at once.
const TUNNELS: usize = 300;

/// The Python the attacks share: `PX` is the proxy, `req(bytes)` sends one request on a
/// connection of its own and prints the status line it got back.
const PRELUDE: &str = r#"import os, socket, sys, time
host, port = os.environ['HTTP_PROXY'].rsplit('/', 1)[1].split(':')
PX = (host, int(port))
def req(tag, data):
    try:
        s = socket.create_connection(PX, timeout=10)
        s.sendall(data)
        out = b''
        while True:
            chunk = s.recv(65536)
            if not chunk: break
            out += chunk
        print(tag, '=>', out.split(b'\r\n')[0].decode(), out.split(b'\r\n\r\n', 1)[-1][:60])
    except OSError as e:
        print(tag, '=> error', e)
def get(url):
    req(url, ('GET %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n' % url).encode())
"#;

/// An address of this machine other than the loopback: the source address of its default
/// route (found without sending anything). `None` (after a notice) where there is none.
fn own_address() -> Option<IpAddr> {
    let found = UdpSocket::bind("0.0.0.0:0")
        .and_then(|s| s.connect("203.0.113.1:9").map(|()| s))
        .and_then(|s| s.local_addr())
        .map(|a| a.ip())
        .ok()
        .filter(|ip| !ip.is_loopback() && !ip.is_unspecified());
    if found.is_none() {
        skip(
            "an address of this machine besides the loopback",
            "run where the machine has a default route",
        );
    }
    found
}

/// A server on every address of this machine that answers `HELLO` and counts connections.
struct Everywhere {
    port: u16,
    hits: Arc<AtomicUsize>,
}

impl Everywhere {
    fn start() -> Everywhere {
        let listener = TcpListener::bind("0.0.0.0:0").expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let hits = Arc::new(AtomicUsize::new(0));
        let counted = hits.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { continue };
                counted.fetch_add(1, Ordering::SeqCst);
                let mut head = [0u8; 4096];
                let _ = stream.read(&mut head);
                let _ = std::io::Write::write_all(
                    &mut stream,
                    b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: close\r\n\r\nHELLO",
                );
            }
        });
        Everywhere { port, hits }
    }

    fn hits(&self) -> usize {
        self.hits.load(Ordering::SeqCst)
    }
}

/// The command that runs `steps` (Python, after [`PRELUDE`]).
fn python(steps: &str) -> String {
    format!("python3 - <<'PY'\n{PRELUDE}{steps}\nPY")
}

/// One print-mode turn, run in `dir`, in which the model runs `command` with `bash`; what oml
/// did and the tool result.
fn model_runs_in(t: &Target, dir: &Path, command: &str, vars: &[(&str, &str)]) -> (Run, String) {
    let args = serde_json::json!({ "command": command }).to_string();
    let fake = FakeModel::start([
        Reply::Stream(tool_call_chunks("c1", "bash", &[&args])),
        Reply::Stream(text_chunks(&["done"])),
    ]);
    let mut cmd = t.command(Some(&fake), &["-p", "--mode", "yolo", "do it"]);
    cmd.current_dir(dir).envs(vars.iter().copied());
    let run = Run::from(cmd.output().expect("run oml"));
    (run, tool_result(&fake, 1))
}

/// An address in `sandbox.denied-domains` is refused however the request spells it: as a
/// number (`inet_aton` reads `3221225986` as `192.0.2.2`) or as an IPv4-mapped IPv6 address.
/// The verdict compared the text; the lookup then read the other spelling as the denied
/// address.
#[test]
fn a_denied_address_is_refused_in_every_spelling() {
    let Some(_) = landlock_or_skip() else { return };
    let Some(IpAddr::V4(addr)) = own_address() else {
        return;
    };
    let t = Target::new();
    t.env.init(&format!(
        "(setq sandbox.network? true)\n(setq sandbox.denied-domains [\"{addr}\"])"
    ));
    let server = Everywhere::start();
    let p = server.port;
    let [a, b, c, d] = addr.octets();
    let spellings = [
        format!("{addr}"),
        format!("{}", u32::from(addr)),
        format!("{a}.{b}.{}", u16::from(c) * 256 + u16::from(d)),
        format!("0x{a:x}.{b}.{c}.{d}"),
        format!("[::ffff:{addr}]"),
    ];
    let steps: Vec<String> = spellings
        .iter()
        .map(|s| format!("get('http://{s}:{p}/')"))
        .collect();
    let (run, result) = t.model_runs(&python(&steps.join("\n")), &[]);
    assert_eq!(run.code, 0, "{run:?}");
    for s in &spellings {
        let line = format!("http://{s}:{p}/ => HTTP/1.1 403");
        assert!(result.contains(&line), "{line}\n---\n{result}");
    }
    assert_eq!(server.hits(), 0, "a denied address was reached: {result}");
}

/// A repository's `allowedDomains`, where the user has no allowed list of their own, become
/// the list "less any address of this machine" (docs/src/safety.md): this machine's own
/// address on its network (not only the loopback) is one, and reaches every service that
/// listens on all addresses.
#[test]
fn a_repositorys_list_does_not_lead_the_proxy_to_this_machines_own_address() {
    let Some(_) = landlock_or_skip() else { return };
    let Some(addr) = own_address() else { return };
    let t = Target::new();
    t.env
        .init("(setq sandbox.network? true)\n(setq sandbox.denied-domains [\"evil.example\"])");
    let host = match addr {
        IpAddr::V4(v4) => v4.to_string(),
        IpAddr::V6(v6) => format!("[{v6}]"),
    };
    let project = format!(r#"{{"sandbox": {{"network": {{"allowedDomains": ["{addr}"]}}}}}}"#);
    t.env
        .home
        .write_project_file(".claude/settings.json", &project);
    let server = Everywhere::start();
    let url = format!("http://{host}:{}/", server.port);
    let (run, result) = t.model_runs(&python(&format!("get('{url}')")), &[]);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(
        result.contains(&format!("{url} => HTTP/1.1 403")),
        "this machine was reached through its own address: {result}"
    );
    assert_eq!(server.hits(), 0, "{result}");
}

/// A server that accepts connections and holds them open, counting them.
fn holding_server() -> (u16, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let count = Arc::new(AtomicUsize::new(0));
    let counted = count.clone();
    let held: Arc<Mutex<Vec<TcpStream>>> = Arc::default();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { continue };
            counted.fetch_add(1, Ordering::SeqCst);
            held.lock().expect("lock").push(stream);
        }
    });
    (port, count)
}

/// `CONNECT` tunnels count against the proxy's limit on connections: hyper hands the upgraded
/// connection over and the task that held the connection's permit ends, so each tunnel held
/// two of oml's descriptors past the limit, as many as a command cared to open. Enough of them
/// (a background process keeps them after the tool call) leave oml unable to start a command,
/// write its session or reach its model ("Too many open files").
#[test]
fn tunnels_count_against_the_proxys_limit_on_connections() {
    let Some(_) = landlock_or_skip() else { return };
    let t = Target::new();
    t.env
        .init("(setq sandbox.network? true)\n(setq sandbox.allowed-domains [\"localhost\"])");
    let (port, upstream) = holding_server();
    let steps = format!(
        r#"held, opened = [], 0
for _ in range({TUNNELS}):
    try:
        s = socket.create_connection(PX, timeout=10)
        s.sendall(b'CONNECT localhost:{port} HTTP/1.1\r\nHost: x\r\n\r\n')
        if b' 200' in s.recv(4096).split(b'\r\n')[0]: opened += 1
        held.append(s)
    except OSError:
        pass
print('tunnels', opened)
time.sleep(1)"#
    );
    let (run, result) = t.model_runs(&python(&steps), &[]);
    assert_eq!(run.code, 0, "{run:?}");
    let reached = upstream.load(Ordering::SeqCst);
    assert!(
        reached <= PROXY_CONNECTIONS,
        "{reached} tunnels were open at once, past the proxy's {PROXY_CONNECTIONS}: {result}"
    );
}

/// oml reads the user's Claude Code lists from `$CLAUDE_CONFIG_DIR/settings.json`, but keeps
/// only `~/.claude` out of a command's reach. With the session in the home folder (its
/// workspace), a confined command rewrote that file, and the next command had the network
/// open to every host, directly.
#[test]
fn the_users_claude_settings_in_claude_config_dir_are_out_of_a_commands_reach() {
    let Some(_) = landlock_or_skip() else { return };
    let t = Target::new();
    t.env.init("(setq sandbox.network? true)");
    let home = t.env.home.home.clone();
    let config = home.join(".claude-work");
    std::fs::create_dir_all(&config).expect("mkdir");
    let settings = config.join("settings.json");
    let user = r#"{"sandbox": {"network": {"allowedDomains": ["pypi.org"]}}}"#;
    std::fs::write(&settings, user).expect("write");
    let vars = [("CLAUDE_CONFIG_DIR", config.to_str().expect("utf-8"))];
    let (run, result) = model_runs_in(
        &t,
        &home,
        "echo '{}' > \"$CLAUDE_CONFIG_DIR/settings.json\"; echo wrote=$?",
        &vars,
    );
    assert_eq!(run.code, 0, "{run:?}");
    let now = std::fs::read_to_string(&settings).expect("read");
    let server = Everywhere::start();
    let direct = format!(
        "python3 -c \"import socket; socket.create_connection(('127.0.0.1', {}), timeout=5); \
         print('direct=reached')\"",
        server.port
    );
    let (_, second) = model_runs_in(&t, &home, &direct, &vars);
    assert_eq!(
        now, user,
        "a command rewrote the user's settings: {result}\nthe next command: {second}"
    );
    assert!(!second.contains("direct=reached"), "{second}");
    assert_eq!(server.hits(), 0, "{second}");
}

/// The characters of output `bash` returns at most, for [`refusals_stay_within_the_output_cap`].
const OUTPUT_CAP: usize = 2000;

/// What the proxy's refusal lines may add past [`OUTPUT_CAP`]: a bounded note, not 64 lines
/// of a 60 kB name each.
const REFUSALS_ALLOWANCE: usize = 32 * 1024;

/// The lines naming what the proxy refused are appended to a tool result after its output was
/// cut to `tools.bash-max-chars`, each naming the host as the request gave it (a URI may be
/// 64 kB long), up to the 64 the proxy keeps: a command filled the model's context with 3.8 MB
/// whatever the cap.
#[test]
fn refusals_stay_within_the_output_cap() {
    let Some(_) = landlock_or_skip() else { return };
    let t = Target::new();
    t.env.init(&format!(
        "(setq sandbox.network? true)\n(setq sandbox.allowed-domains [\"localhost\"])\n\
         (setq tools.bash-max-chars {OUTPUT_CAP})"
    ));
    let steps = r#"for i in range(64):
    name = 'a' * 60000 + str(i) + '.evil.example'
    s = socket.create_connection(PX, timeout=10)
    s.sendall(('CONNECT %s:443 HTTP/1.1\r\nHost: x\r\n\r\n' % name).encode())
    s.recv(4096)
    s.close()
print('asked 64 times')"#;
    let (run, result) = t.model_runs(&python(steps), &[]);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(result.contains("refused connection to"), "{:.300}", result);
    assert!(
        result.len() <= OUTPUT_CAP + REFUSALS_ALLOWANCE,
        "a tool result of {} bytes under a cap of {OUTPUT_CAP} characters",
        result.len()
    );
}
