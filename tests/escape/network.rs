//! With the network off, nothing leaves a confined command: no UDP datagram (IPv4 or IPv6), no
//! TCP connection, no abstract Unix socket of the host, not even to the host's loopback. Each
//! listener is real and outside the sandbox, and the same command with the network on reaches
//! them, so the test would see a leak.

use std::io::ErrorKind;
use std::net::{TcpListener, UdpSocket};
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixListener};

use crate::support::home::Run;

use super::harness::{Target, landlock_or_skip};

/// The attack, in Python: each listener tried, what happened printed (UDP4, UDP6, TCP and NAME
/// are replaced by the ports and the abstract socket's name).
const ATTACK: &str = r#"python3 - <<'PY'
import socket
def attempt(name, f):
    try:
        f(); print(name + '=reached')
    except OSError as e:
        print(name + '=refused ' + str(e.errno))
def udp4():
    socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b'LEAK4', ('127.0.0.1', UDP4))
def udp6():
    if UDP6: socket.socket(socket.AF_INET6, socket.SOCK_DGRAM).sendto(b'LEAK6', ('::1', UDP6))
def tcp():
    socket.create_connection(('127.0.0.1', TCP), timeout=5)
def unix():
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM); s.connect('\0NAME')
for name, f in [('udp4', udp4), ('udp6', udp6), ('tcp', tcp), ('abstract', unix)]:
    attempt(name, f)
PY"#;

/// Listeners on the host: UDP on both loopbacks, TCP, and an abstract Unix socket.
struct Listeners {
    udp4: UdpSocket,
    udp6: Option<UdpSocket>,
    tcp: TcpListener,
    abstract_unix: UnixListener,
    abstract_name: String,
}

impl Listeners {
    fn new() -> Listeners {
        let udp4 = UdpSocket::bind("127.0.0.1:0").expect("bind udp4");
        // A host without IPv6 on its loopback has nothing to leak to there.
        let udp6 = UdpSocket::bind("[::1]:0").ok();
        let tcp = TcpListener::bind("127.0.0.1:0").expect("bind tcp");
        let abstract_name = format!("oml-escape-{}", std::process::id());
        let addr = SocketAddr::from_abstract_name(abstract_name.as_bytes()).expect("name");
        let abstract_unix = UnixListener::bind_addr(&addr).expect("bind abstract");
        for nonblocking in [
            udp4.set_nonblocking(true),
            tcp.set_nonblocking(true),
            abstract_unix.set_nonblocking(true),
        ] {
            nonblocking.expect("non-blocking");
        }
        if let Some(udp6) = &udp6 {
            udp6.set_nonblocking(true).expect("non-blocking");
        }
        Listeners {
            udp4,
            udp6,
            tcp,
            abstract_unix,
            abstract_name,
        }
    }

    /// A Python program that tries each listener and prints what happened.
    fn attack(&self) -> String {
        let port = |addr: std::io::Result<std::net::SocketAddr>| addr.expect("addr").port();
        let udp6 = self.udp6.as_ref().map_or(0, |s| port(s.local_addr()));
        ATTACK
            .replace("UDP4", &port(self.udp4.local_addr()).to_string())
            .replace("UDP6", &udp6.to_string())
            .replace("TCP", &port(self.tcp.local_addr()).to_string())
            .replace("NAME", &self.abstract_name)
    }

    /// What reached a listener, by name.
    fn reached(&self) -> Vec<&'static str> {
        let mut reached = Vec::new();
        let mut buf = [0u8; 64];
        if !matches!(self.udp4.recv(&mut buf), Err(e) if e.kind() == ErrorKind::WouldBlock) {
            reached.push("udp4");
        }
        if let Some(udp6) = &self.udp6
            && !matches!(udp6.recv(&mut buf), Err(e) if e.kind() == ErrorKind::WouldBlock)
        {
            reached.push("udp6");
        }
        if !matches!(self.tcp.accept(), Err(e) if e.kind() == ErrorKind::WouldBlock) {
            reached.push("tcp");
        }
        if !matches!(self.abstract_unix.accept(), Err(e) if e.kind() == ErrorKind::WouldBlock) {
            reached.push("abstract");
        }
        reached
    }
}

#[test]
fn with_the_network_off_no_datagram_connection_or_abstract_socket_leaves_the_command() {
    let Some(_) = landlock_or_skip() else { return };
    let t = Target::new();
    let listeners = Listeners::new();
    let (run, result) = t.model_runs(&listeners.attack(), &[]);
    assert_eq!(run.code, 0, "{run:?}");
    for name in ["udp4", "tcp", "abstract"] {
        assert!(
            result.contains(&format!("{name}=refused")),
            "{name}: {result}"
        );
    }
    assert_eq!(listeners.reached(), Vec::<&str>::new(), "{result}");

    // The same attack with the network on reaches every listener: the test sees a leak.
    t.env.init("(setq sandbox.network? true)");
    let (run, result) = t.model_runs(&listeners.attack(), &[]);
    assert_eq!(run.code, 0, "{run:?}");
    let reached = listeners.reached();
    for name in ["udp4", "tcp"] {
        assert!(
            reached.contains(&name),
            "{name} with the network on: {result}"
        );
    }
}

#[test]
fn the_status_says_a_namespace_keeps_commands_off_the_network() {
    let Some(_) = landlock_or_skip() else { return };
    let t = Target::new();
    let run = Run::from(
        t.command(None, &["eval", "(. (oml.sandbox-status) :network)"])
            .output()
            .expect("oml"),
    );
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(run.stdout.trim(), "\"namespace\"", "{run:?}");
}

/// The X server's socket folder is hidden: a command that reached X could type into any
/// window, a terminal's included, and run what it typed outside the sandbox.
#[test]
fn the_x_servers_socket_is_out_of_reach() {
    let Some(_) = landlock_or_skip() else { return };
    let dir = std::path::Path::new("/tmp/.X11-unix");
    if std::fs::create_dir_all(dir).is_err() {
        panic!("cannot make {} for the test", dir.display());
    }
    let socket = dir.join(format!("Xoml-escape-{}", std::process::id()));
    let _ = std::fs::remove_file(&socket);
    let listener = UnixListener::bind(&socket).expect("bind the X socket");
    listener.set_nonblocking(true).expect("non-blocking");
    let t = Target::new();
    let command = format!(
        "python3 -c 'import socket; s = socket.socket(socket.AF_UNIX); s.connect(\"{}\"); print(\"x=reached\")' 2>&1; ls /tmp/.X11-unix | sed s/^/listed:/",
        socket.display()
    );
    let (run, result) = t.model_runs(&command, &[]);
    let _ = std::fs::remove_file(&socket);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(!result.contains("x=reached"), "{result}");
    assert!(!result.contains("listed:Xoml-escape"), "{result}");
    assert!(
        matches!(listener.accept(), Err(e) if e.kind() == ErrorKind::WouldBlock),
        "{result}"
    );
}
