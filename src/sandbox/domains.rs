//! The hosts a confined command may reach through the domain proxy (`super::proxy`), when the
//! network is on but held to named domains (`sandbox.allowed-domains`,
//! `sandbox.denied-domains`): host patterns, and the verdict on one host.
//!
//! A pattern is an exact host (`pypi.org`, `127.0.0.1`, `[::1]` or `::1`) or a wildcard of
//! subdomains (`*.npmjs.org`: `registry.npmjs.org` and deeper, not `npmjs.org` itself, as in
//! Claude Code). Names compare without case and without a final dot. Hosts are judged by name,
//! before any lookup: an IP address is a host like any other, let through only when listed.
//! A denied pattern beats an allowed one.
//!
//! It knows patterns and names, not sockets or settings.

/// Where a host may be reached: the lists a policy holds the network to.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
pub struct Domains {
    /// Only these (less [`Domains::denied`]); `None`: any host but the denied ones.
    pub allowed: Option<Vec<String>>,
    /// Never these.
    pub denied: Vec<String>,
    /// Where [`Domains::allowed`] came from, as refusals and the status name it
    /// (`sandbox.allowed-domains`, or a settings file's key).
    pub allowed_from: String,
    /// Where [`Domains::denied`] came from.
    pub denied_from: String,
}

/// What the proxy does with a host.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Let through.
    Allowed,
    /// A denied pattern matches it.
    Denied,
    /// The allowed list is set and no pattern of it matches.
    NotAllowed,
}

impl Domains {
    /// The verdict on `host` (a name or an IP address, as the request gave it).
    pub fn verdict(&self, host: &str) -> Verdict {
        let host = normal(host);
        if self.denied.iter().any(|p| matches(p, &host).is_some()) {
            return Verdict::Denied;
        }
        let Some(allowed) = &self.allowed else {
            return Verdict::Allowed;
        };
        match allowed.iter().any(|p| matches(p, &host).is_some()) {
            true => Verdict::Allowed,
            false => Verdict::NotAllowed,
        }
    }

    /// Whether `host` may be reached at a loopback, unspecified, link-local or multicast
    /// address ([`inward`]): only when it is such an address itself, or `localhost`, and an
    /// exact pattern of the allowed list names it. A name under an allowed wildcard cannot be
    /// pointed (by whoever runs its DNS) at oml's own listeners on the loopback or at the
    /// machine's metadata service, and with no allowed list nothing inward is reached.
    pub fn reaches_inward(&self, host: &str) -> bool {
        let host = normal(host);
        let named = self
            .allowed
            .iter()
            .flatten()
            .any(|p| matches(p, &host) == Some(true));
        named && self.verdict(&host) == Verdict::Allowed && inward_literal(&host)
    }

    /// A pattern in the lists that is not one (empty, a wildcard anywhere but the front, a
    /// scheme or a path): the first such, for the setting's error.
    pub fn invalid(&self) -> Option<&str> {
        let all = self.allowed.iter().flatten().chain(&self.denied);
        all.map(String::as_str).find(|p| !valid(p))
    }
}

/// `localhost`, or an IP address that is [`inward`].
pub fn inward_literal(host: &str) -> bool {
    let host = normal(host);
    host == "localhost" || host.parse::<std::net::IpAddr>().is_ok_and(|ip| inward(&ip))
}

/// Loopback, unspecified, link-local or multicast: addresses of this machine or its link,
/// which a host reached by name may not resolve to (see [`Domains::reaches_inward`]).
pub fn inward(addr: &std::net::IpAddr) -> bool {
    match addr {
        std::net::IpAddr::V4(v4) => {
            v4.is_loopback() || v4.is_unspecified() || v4.is_link_local() || v4.is_multicast()
        }
        std::net::IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => inward(&std::net::IpAddr::V4(v4)),
            None => {
                let link_local = (v6.segments()[0] & 0xffc0) == 0xfe80;
                v6.is_loopback() || v6.is_unspecified() || v6.is_multicast() || link_local
            }
        },
    }
}

/// `Some(true)` when `pattern` names `host` exactly, `Some(false)` when as a wildcard, `None`
/// when not at all. `host` is already [`normal`].
fn matches(pattern: &str, host: &str) -> Option<bool> {
    let pattern = normal(pattern);
    match pattern.strip_prefix("*.") {
        Some(parent) => {
            let under = host.len() > parent.len() + 1
                && host.ends_with(parent)
                && host.as_bytes()[host.len() - parent.len() - 1] == b'.';
            under.then_some(false)
        }
        None => (pattern == host).then_some(true),
    }
}

/// Lower case, without a final dot or IPv6 brackets.
fn normal(host: &str) -> String {
    let host = host.trim();
    let host = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    host.trim_end_matches('.').to_ascii_lowercase()
}

/// A pattern is a host name, an IP address, or `*.` and a name.
fn valid(pattern: &str) -> bool {
    let name = pattern.strip_prefix("*.").unwrap_or(pattern);
    let name = normal(name);
    !name.is_empty()
        && (name.parse::<std::net::IpAddr>().is_ok()
            || name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '.' || c == '_'))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn domains(allowed: Option<&[&str]>, denied: &[&str]) -> Domains {
        let own = |list: &[&str]| list.iter().map(|s| s.to_string()).collect();
        Domains {
            allowed: allowed.map(own),
            denied: own(denied),
            ..Domains::default()
        }
    }

    #[test]
    fn verdicts_follow_the_patterns() {
        let d = domains(
            Some(&["pypi.org", "*.npmjs.org", "10.0.0.1"]),
            &["evil.npmjs.org"],
        );
        let cases = [
            ("pypi.org", Verdict::Allowed),
            ("PyPI.org.", Verdict::Allowed),
            ("files.pypi.org", Verdict::NotAllowed),
            ("registry.npmjs.org", Verdict::Allowed),
            ("a.b.npmjs.org", Verdict::Allowed),
            ("npmjs.org", Verdict::NotAllowed),
            ("xnpmjs.org", Verdict::NotAllowed),
            ("evil.npmjs.org", Verdict::Denied),
            ("10.0.0.1", Verdict::Allowed),
            ("127.0.0.1", Verdict::NotAllowed),
            ("[::1]", Verdict::NotAllowed),
            ("", Verdict::NotAllowed),
        ];
        for (host, verdict) in cases {
            assert_eq!(d.verdict(host), verdict, "{host}");
        }
    }

    #[test]
    fn without_an_allowed_list_only_the_denied_are_refused() {
        let d = domains(None, &["*.example.com", "::1"]);
        assert_eq!(d.verdict("a.example.com"), Verdict::Denied);
        assert_eq!(d.verdict("[::1]"), Verdict::Denied);
        assert_eq!(d.verdict("example.com"), Verdict::Allowed);
        assert!(
            !d.reaches_inward("127.0.0.1"),
            "nothing inward without a list"
        );
    }

    #[test]
    fn only_a_listed_address_or_localhost_reaches_inwards() {
        let d = domains(
            Some(&["127.0.0.1", "localhost", "*.nip.io", "dev.lan"]),
            &[],
        );
        assert!(d.reaches_inward("127.0.0.1"));
        assert!(d.reaches_inward("LOCALHOST."));
        assert!(!d.reaches_inward("x.nip.io"), "a wildcard's name");
        assert!(!d.reaches_inward("dev.lan"), "a name, even listed");
        assert!(!d.reaches_inward("::1"), "not listed");
        for addr in [
            "127.0.0.1",
            "0.0.0.0",
            "169.254.169.254",
            "::1",
            "fe80::1",
            "::ffff:127.0.0.1",
        ] {
            assert!(inward(&addr.parse().unwrap()), "{addr}");
        }
        assert!(!inward(&"93.184.216.34".parse().unwrap()));
        assert!(!inward(&"10.1.2.3".parse().unwrap()));
    }

    #[test]
    fn invalid_patterns_are_named() {
        assert_eq!(
            domains(Some(&["ok.org", "*.fine.org"]), &[]).invalid(),
            None
        );
        for bad in ["", "https://x.org", "x.org/path", "a.*.org", "*"] {
            assert_eq!(domains(Some(&[bad]), &[]).invalid(), Some(bad), "{bad}");
        }
    }
}
