//! How a policy's network switch is held on this machine: a network namespace (the one for
//! commands with the network off, or the domain proxy's), else the system-call filter's refusal
//! of IPv4 and IPv6 sockets, else nothing; and what of it the status must say.
//!
//! It knows the layers and what the kernel offers, not how a command is started.

use super::{Mode, Policy, mounts, seccomp};

/// With the network off (or held to domains), whether commands get a network namespace
/// ([`mounts::network_available`]); when they cannot, what is then not restricted is added to
/// `limits`: only TCP is refused (by Landlock, where its ABI has TCP rules).
pub(super) fn network_limit(policy: &Policy, limits: &mut Vec<String>) -> bool {
    let available = mounts::available().and_then(|()| mounts::network_available());
    if let (Err(why), Some(domains)) = (&available, policy.held()) {
        limits.push(format!(
            "{} needs a network namespace, which cannot be made here ({why}): commands get \
             no network",
            domains.allowed_from
        ));
    }
    match available {
        Ok(()) => true,
        Err(why) => {
            limits.push(format!(
                "with the network off, IPv4 and IPv6 sockets are refused by the system-call \
                 filter instead of a network namespace (the host's abstract Unix sockets are \
                 not kept out): {why}"
            ));
            false
        }
    }
}

/// How a policy's network switch is enforced here: a namespace of the command's own, or
/// Landlock's TCP rules alone, or nothing; or the network is on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NetworkLayer {
    /// The policy lets the command use the network.
    Open,
    /// A network namespace of the command's own: nothing reaches out, whatever the protocol.
    Namespace,
    /// The network is on but held to named domains: a namespace whose one way out is the
    /// domain proxy.
    Proxy,
    /// No namespace here: the system-call filter refuses IPv4 and IPv6 sockets of every type,
    /// and Landlock TCP `bind` and `connect`.
    Seccomp,
    /// Nothing restricts the network here.
    Unrestricted,
}

impl NetworkLayer {
    /// The name `oml.sandbox-status` shows.
    pub fn name(self) -> &'static str {
        match self {
            NetworkLayer::Open => "open",
            NetworkLayer::Namespace => "namespace",
            NetworkLayer::Proxy => "proxy",
            NetworkLayer::Seccomp => "seccomp",
            NetworkLayer::Unrestricted => "unrestricted",
        }
    }
}

/// What keeps `policy`'s command off the network on this machine.
pub fn network_layer(policy: &Policy) -> NetworkLayer {
    if policy.open() {
        return NetworkLayer::Open;
    }
    if policy.mode == Mode::Off {
        return NetworkLayer::Unrestricted;
    }
    if mounts::available().is_ok() && mounts::network_available().is_ok() {
        return match policy.held() {
            Some(_) => NetworkLayer::Proxy,
            None => NetworkLayer::Namespace,
        };
    }
    match seccomp::programs(true) {
        Ok(_) => NetworkLayer::Seccomp,
        Err(_) => NetworkLayer::Unrestricted,
    }
}
