//! The process's HTTP clients for model calls: which root certificates each trusts
//! ([`Roots`]), the pool shared by every call, the warm-up that builds one ahead of the first
//! call, and the redirect rule (to the same host only, because the native protocols' key
//! headers are not stripped on a redirect elsewhere).
//!
//! It knows reqwest's set-up, not requests or streams.

use std::time::Duration;

use parking_lot::Mutex;

use super::chain;
use crate::llm::{LlmConfig, LlmError};

/// Sent as `User-Agent`, so server logs can tell oml's requests apart.
const USER_AGENT: &str = concat!("oml/", env!("CARGO_PKG_VERSION"));

/// Which root certificates an HTTP client trusts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Roots {
    /// The system's (corporate CAs, `SSL_CERT_FILE`) and the bundled Mozilla ones: for an
    /// `https://` endpoint.
    System,
    /// The bundled ones only: for an `http://` endpoint (a local model server), which needs no
    /// certificate unless it redirects to https. Reading the system's store is most of what
    /// building a client costs (PEM-decoding every certificate there: about 37 million
    /// instructions, 28% of a process that ran six tool turns).
    Bundled,
}

impl Roots {
    /// The roots a client for `base_url` needs.
    pub fn for_url(base_url: &str) -> Roots {
        let plain = base_url
            .get(..7)
            .is_some_and(|scheme| scheme.eq_ignore_ascii_case("http://"));
        if plain { Roots::Bundled } else { Roots::System }
    }
}

/// The process's HTTP clients, one per [`Roots`], each with the connect timeout it was built
/// for. Building one with the system's roots takes milliseconds of a start-up, so every
/// [`LlmClient`] shares them, and [`warm_up`] builds the one the configured endpoint needs
/// ahead of the first call.
static HTTP: Mutex<[Option<(Duration, reqwest::Client)>; 2]> = Mutex::new([None, None]);

fn slot(roots: Roots) -> usize {
    match roots {
        Roots::System => 0,
        Roots::Bundled => 1,
    }
}

/// The niceness of the thread that builds the HTTP client at start-up (0 is normal, 19 the
/// lowest priority).
const WARM_UP_NICE: libc::c_int = 10;

/// Build the HTTP client for `connect_timeout` and `roots` on a thread of its own, unless one
/// is there: called at start-up, so that the first model call (or model list) does not wait
/// for the root certificates. Harmless when it loses a race with a call, which builds its own.
pub fn warm_up(connect_timeout: Duration, roots: Roots) {
    let spawned = std::thread::Builder::new()
        .name("oml-http-warm".into())
        .spawn(move || {
            // Behind what start-up is for: on a machine with few cores this thread would
            // otherwise take the core the editor's `initialize` is answered on.
            // SAFETY: setpriority with integers, on this thread (a Linux thread id).
            unsafe {
                libc::setpriority(
                    libc::PRIO_PROCESS,
                    libc::gettid() as libc::id_t,
                    WARM_UP_NICE,
                )
            };
            if HTTP.lock()[slot(roots)].is_none()
                && let Ok(client) = build_http(connect_timeout, roots)
            {
                let mut cached = HTTP.lock();
                if cached[slot(roots)].is_none() {
                    cached[slot(roots)] = Some((connect_timeout, client));
                }
            }
        });
    if let Err(error) = spawned {
        tracing::debug!("no thread to warm the HTTP client up: {error}");
    }
}

/// Redirects followed at most, each to the host the request was for: reqwest strips only
/// `Authorization` on a redirect to another host, not the native protocols' `x-api-key` and
/// `x-goog-api-key`, so a redirect elsewhere is not followed at all.
const MAX_REDIRECTS: usize = 10;

fn same_host_redirects() -> reqwest::redirect::Policy {
    reqwest::redirect::Policy::custom(|attempt| {
        let same = attempt
            .previous()
            .first()
            .is_some_and(|first| first.host_str() == attempt.url().host_str());
        if same && attempt.previous().len() <= MAX_REDIRECTS {
            attempt.follow()
        } else {
            attempt.stop()
        }
    })
}

fn build_http(connect_timeout: Duration, roots: Roots) -> Result<reqwest::Client, LlmError> {
    reqwest::Client::builder()
        .redirect(same_host_redirects())
        .connect_timeout(connect_timeout)
        .user_agent(USER_AGENT)
        .tls_built_in_native_certs(roots == Roots::System)
        .build()
        .map_err(|error| {
            LlmError::Config(format!("cannot set up the HTTP client: {}", chain(&error)))
        })
}

/// The pooled HTTP client for `config`'s connect timeout and base URL ([`Roots::for_url`]).
pub(super) fn pooled(config: &LlmConfig) -> Result<reqwest::Client, LlmError> {
    let roots = Roots::for_url(&config.base_url);
    if let Some((timeout, client)) = HTTP.lock()[slot(roots)].as_ref()
        && *timeout == config.connect_timeout
    {
        return Ok(client.clone());
    }
    // Built without the lock held: a warm-up under way finishes on its own.
    let client = build_http(config.connect_timeout, roots)?;
    HTTP.lock()[slot(roots)] = Some((config.connect_timeout, client.clone()));
    Ok(client)
}
