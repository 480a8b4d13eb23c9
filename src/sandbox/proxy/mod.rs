//! The domain proxy: how commands with the network held to named domains
//! (`sandbox.allowed-domains`, [`super::domains`]) reach those domains and nothing else.
//!
//! Such commands join a user and network namespace of their own kind (made once per set of
//! domains, [`super::shared_ns::make_proxied`]): it has a loopback and no route out. On that
//! loopback is one listener, held by oml outside the sandbox. oml serves it as an HTTP proxy
//! (`serve.rs`: plain HTTP forwarding and `CONNECT`), on a thread and runtime of its own, and
//! the commands are told where it is by `HTTP_PROXY`, `HTTPS_PROXY`, `ALL_PROXY` and their
//! lower-case forms. The proxy judges each request's host by name before any lookup, opens the
//! connection from oml's own network, and answers 403, naming the host and the setting, to
//! anything else. Each refusal is also kept ([`Refusals`]) so that the tool result of the
//! command that ran meanwhile can say what was refused.
//!
//! It knows the namespaces, the listener and the refusals, not the policy that asked for them.

mod serve;

use std::collections::HashMap;
use std::collections::VecDeque;
use std::ffi::OsString;
use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use super::domains::Domains;
use super::shared_ns::Shared;

/// The most refusals one proxy keeps for the tool results; older ones are forgotten.
const REFUSALS_KEPT: usize = 64;

/// The most refusal lines one tool result carries (the same line is said once); the rest
/// are counted in one more line.
const REFUSALS_SHOWN: usize = 10;

/// The most sets of domains (each its own namespace, listener and thread) one process serves;
/// a policy with yet another set gets no network (see [`for_domains`]).
const MAX_PROXIES: usize = 16;

/// The proxy variables a command is given, upper- and lower-case.
const PROXY_VARS: [&str; 3] = ["HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"];

/// The variables that would let a command go around the proxy (there is nothing to reach
/// around it, but a client told to go direct would fail without saying why).
const BYPASS_VARS: [&str; 2] = ["NO_PROXY", "no_proxy"];

/// One proxy: its namespaces, where it listens inside them, what it refused.
pub struct ProxyNet {
    shared: Arc<Shared>,
    port: u16,
    refusals: Arc<Refusals>,
}

impl std::fmt::Debug for ProxyNet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProxyNet")
            .field("port", &self.port)
            .finish()
    }
}

impl ProxyNet {
    /// The namespaces, for the child to join.
    pub(in crate::sandbox) fn shared(&self) -> Arc<Shared> {
        self.shared.clone()
    }

    /// The namespaces' descriptors, borrowed, to hand to the spawn helper: the user namespace
    /// first when there is one, then the network namespace.
    pub(in crate::sandbox) fn borrowed(&self) -> Vec<std::os::fd::BorrowedFd<'_>> {
        self.shared.borrowed()
    }

    /// The variables that point a command at this proxy, and those it must not have.
    pub(in crate::sandbox) fn env(&self) -> (Vec<(OsString, OsString)>, Vec<OsString>) {
        let url = OsString::from(format!("http://127.0.0.1:{}", self.port));
        let set = PROXY_VARS
            .iter()
            .flat_map(|name| [name.to_string(), name.to_ascii_lowercase()])
            .map(|name| (OsString::from(name), url.clone()))
            .collect();
        (set, BYPASS_VARS.iter().map(OsString::from).collect())
    }

    /// Where the refusals stand now, for [`ProxyNet::refused_since`].
    pub fn mark(&self) -> u64 {
        self.refusals.mark()
    }

    /// The refusals since `mark`, one line each (`[sandbox: refused connection to …]`), each
    /// said once, at most [`REFUSALS_SHOWN`] of them and a line that counts the rest.
    pub fn refused_since(&self, mark: u64) -> Vec<String> {
        let mut lines: Vec<String> = Vec::new();
        let mut more = 0usize;
        for line in self.refusals.since(mark) {
            if lines.contains(&line) {
                continue;
            }
            match lines.len() < REFUSALS_SHOWN {
                true => lines.push(line),
                false => more += 1,
            }
        }
        if more > 0 {
            lines.push(format!("[sandbox: and {more} more refused connections]"));
        }
        lines
    }
}

/// The proxy for `domains`, made (namespaces, listener, thread) on first use. `Err` when it
/// cannot be made here; the caller then keeps the command off the network.
pub(in crate::sandbox) fn for_domains(domains: &Domains) -> io::Result<Arc<ProxyNet>> {
    static PROXIES: OnceLock<Mutex<HashMap<Domains, Arc<ProxyNet>>>> = OnceLock::new();
    let proxies = PROXIES.get_or_init(Mutex::default);
    let mut proxies = proxies.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(net) = proxies.get(domains) {
        return Ok(net.clone());
    }
    if proxies.len() >= MAX_PROXIES {
        return Err(io::Error::other(format!(
            "more than {MAX_PROXIES} different domain lists in one process"
        )));
    }
    let net = Arc::new(start(domains.clone())?);
    proxies.insert(domains.clone(), net.clone());
    Ok(net)
}

/// Make the namespaces and the listener, and serve it on a thread of its own.
fn start(domains: Domains) -> io::Result<ProxyNet> {
    let (shared, listener) = super::shared_ns::make_proxied()?;
    let port = listener.local_addr()?.port();
    listener.set_nonblocking(true)?;
    let refusals = Arc::new(Refusals::default());
    let kept = refusals.clone();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    std::thread::Builder::new()
        .name("oml-domain-proxy".into())
        .spawn(move || runtime.block_on(serve::run(listener, Arc::new(domains), kept)))?;
    Ok(ProxyNet {
        shared: Arc::new(shared),
        port,
        refusals,
    })
}

/// The refusals one proxy made, numbered, the last [`REFUSALS_KEPT`] of them.
#[derive(Default)]
pub(super) struct Refusals {
    next: AtomicU64,
    kept: Mutex<VecDeque<(u64, String)>>,
}

impl Refusals {
    fn mark(&self) -> u64 {
        self.next.load(Ordering::SeqCst)
    }

    fn since(&self, mark: u64) -> Vec<String> {
        let kept = self.kept.lock().unwrap_or_else(|e| e.into_inner());
        kept.iter()
            .filter(|(n, _)| *n >= mark)
            .map(|(_, line)| line.clone())
            .collect()
    }

    /// Keep `line`, forgetting the oldest beyond [`REFUSALS_KEPT`].
    pub(super) fn push(&self, line: String) {
        let mut kept = self.kept.lock().unwrap_or_else(|e| e.into_inner());
        let n = self.next.fetch_add(1, Ordering::SeqCst);
        kept.push_back((n, line));
        while kept.len() > REFUSALS_KEPT {
            kept.pop_front();
        }
    }
}
