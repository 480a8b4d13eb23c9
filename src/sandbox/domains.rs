//! The hosts a confined command may reach through the domain proxy (`super::proxy`), when the
//! network is on but held to named domains (`sandbox.allowed-domains`,
//! `sandbox.denied-domains`): host patterns, and the verdict on one host.
//!
//! A pattern is an exact host (`pypi.org`, `127.0.0.1`, `[::1]` or `::1`) or a wildcard of
//! subdomains (`*.npmjs.org`: `registry.npmjs.org` and deeper, not `npmjs.org` itself, as in
//! Claude Code). Names compare without case and without a final dot; addresses compare as
//! addresses (`::ffff:10.0.0.1` is `10.0.0.1`, `fd00:0::2` is `fd00::2`), and a host that only
//! a C library reads as a number (`3221225986`, `0xc0.0.2.2`, `192.0.514`) is not a host here
//! ([`Verdict::NotAHost`]). Hosts are judged by name, before any lookup: an IP address is a
//! host like any other, let through only when listed. A denied pattern beats an allowed one,
//! and a denied address is also refused when a name resolves to it ([`Domains::denies`]).
//! This machine's own addresses ([`this_machine`]: loopback, link-local, its interfaces',
//! cloud metadata services) are reached only when listed exactly.
//!
//! It knows patterns, names and this machine's addresses, not sockets or settings.

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
    /// Not a name nor an address as written (a number in another spelling, too long, odd
    /// characters): refused before any lookup could read it as something else.
    NotAHost,
}

/// The longest host name (RFC 1035).
pub const MAX_HOST_CHARS: usize = 253;

/// Cloud metadata services outside the link-local range (AWS over IPv6, Alibaba Cloud), which
/// hand out the machine's credentials.
const METADATA_ADDRESSES: [&str; 2] = ["fd00:ec2::254", "100.100.100.200"];

impl Domains {
    /// The verdict on `host` (a name or an IP address, as the request gave it).
    pub fn verdict(&self, host: &str) -> Verdict {
        let host = normal(host);
        if !is_host(&host) {
            return Verdict::NotAHost;
        }
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

    /// Whether a denied pattern names the address `ip` (for the addresses a name resolved to).
    pub fn denies(&self, ip: &std::net::IpAddr) -> bool {
        let ip = canonical(*ip).to_string();
        self.denied.iter().any(|p| normal(p) == ip)
    }

    /// A pattern in the lists that is not one (empty, a wildcard anywhere but the front, a
    /// scheme or a path): the first such, for the setting's error.
    pub fn invalid(&self) -> Option<&str> {
        let all = self.allowed.iter().flatten().chain(&self.denied);
        all.map(String::as_str).find(|p| !valid(p))
    }
}

/// `localhost`, or an IP address of [`this_machine`].
pub fn inward_literal(host: &str) -> bool {
    let host = normal(host);
    host == "localhost"
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| this_machine(&ip))
}

/// Whether `ip` reaches this machine or what stands beside it: [`inward`], one of its own
/// interfaces' addresses (asked of the kernel each time: interfaces come and go), or a cloud
/// metadata service.
pub fn this_machine(ip: &std::net::IpAddr) -> bool {
    let ip = canonical(*ip);
    inward(&ip)
        || METADATA_ADDRESSES.iter().any(|m| m.parse() == Ok(ip))
        || interface_addresses().contains(&ip)
}

/// The addresses of this machine's interfaces (none when the kernel cannot say).
fn interface_addresses() -> Vec<std::net::IpAddr> {
    let mut list: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs fills `list` with a list it allocated, freed below.
    if unsafe { libc::getifaddrs(&mut list) } != 0 {
        return Vec::new();
    }
    let mut out = Vec::new();
    let mut at = list;
    while !at.is_null() {
        // SAFETY: `at` is a node of the list getifaddrs made; its address, when not null,
        // points at a sockaddr of the family it says, as long as the list lives.
        unsafe {
            let addr = (*at).ifa_addr;
            if !addr.is_null() {
                match i32::from((*addr).sa_family) {
                    libc::AF_INET => {
                        let v4 = &*(addr as *const libc::sockaddr_in);
                        let bytes = v4.sin_addr.s_addr.to_ne_bytes();
                        out.push(std::net::IpAddr::from(bytes));
                    }
                    libc::AF_INET6 => {
                        let v6 = &*(addr as *const libc::sockaddr_in6);
                        out.push(std::net::IpAddr::from(v6.sin6_addr.s6_addr));
                    }
                    _ => {}
                }
            }
            at = (*at).ifa_next;
        }
    }
    // SAFETY: the list getifaddrs made, freed once.
    unsafe { libc::freeifaddrs(list) };
    out
}

/// `ip`, an IPv4-mapped IPv6 address made IPv4 again.
fn canonical(ip: std::net::IpAddr) -> std::net::IpAddr {
    match ip {
        std::net::IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, std::net::IpAddr::V4),
        v4 => v4,
    }
}

/// Whether `host` (already [`normal`]) is an address, or a name that no resolver reads as a
/// number: labels of letters, digits, `-` and `_`, not all of them numbers (decimal or `0x`).
fn is_host(host: &str) -> bool {
    if host.parse::<std::net::IpAddr>().is_ok() {
        return true;
    }
    let numeric = |label: &str| {
        let hex = label
            .strip_prefix("0x")
            .is_some_and(|h| h.chars().all(|c| c.is_ascii_hexdigit()));
        hex || (!label.is_empty() && label.chars().all(|c| c.is_ascii_digit()))
    };
    let label_ok = |l: &str| {
        !l.is_empty()
            && l.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    };
    !host.is_empty()
        && host.len() <= MAX_HOST_CHARS
        && host.split('.').all(label_ok)
        && !host.split('.').all(numeric)
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

/// Lower case, without a final dot or IPv6 brackets; an address in its one written form.
fn normal(host: &str) -> String {
    let host = host.trim();
    let host = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    let host = host.trim_end_matches('.').to_ascii_lowercase();
    match host.parse::<std::net::IpAddr>() {
        Ok(ip) => canonical(ip).to_string(),
        Err(_) => host,
    }
}

/// A pattern is a host name, an IP address, or `*.` and a name.
pub fn valid(pattern: &str) -> bool {
    let name = pattern.strip_prefix("*.").unwrap_or(pattern);
    is_host(&normal(name))
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
            ("", Verdict::NotAHost),
            ("3221225986", Verdict::NotAHost),
            ("0xc0.0.2.2", Verdict::NotAHost),
            ("192.0.514", Verdict::NotAHost),
            ("a..b", Verdict::NotAHost),
            ("[::ffff:10.0.0.1]", Verdict::Allowed),
            ("2024.example", Verdict::NotAllowed),
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
