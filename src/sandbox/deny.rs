//! Paths no confined command may read (`Policy::deny_read`): secrets the sandbox covers in the
//! command's mount view, so that a read finds nothing (an empty read-only folder, or an empty
//! file) and neither the model provider nor, with the network on, anyone else gets them through
//! a command's output.
//!
//! It decides which of the listed paths exist (made real: a link to a secret hides its target),
//! whether a workspace lies inside one (then no command runs there: the workspace would be
//! hidden from its own commands, or the secret left readable), and what to say where the mount
//! layer cannot be had. The covering itself is `super::mounts`'.

use std::path::PathBuf;

use super::Policy;
use super::mounts::within;

/// The listed paths that exist, made real (links followed), each once. Most of the defaults do
/// not exist on a given machine: one `stat` says so, where making a path real reads every
/// folder on its way (the list is made real for every command).
pub(super) fn existing(policy: &Policy) -> Vec<PathBuf> {
    let mut paths: Vec<PathBuf> = policy
        .deny_read
        .iter()
        .filter(|p| p.exists())
        .filter_map(|p| std::fs::canonicalize(p).ok())
        .collect();
    paths.sort();
    paths.dedup();
    paths
}

/// Why no command may run under `policy` as `super::plan` leaves it (writable and denied paths
/// made real, only the denied ones that exist): a writable path (the workspace) lies inside a
/// path that must not be read. `None` when there is no such conflict.
pub(super) fn conflict(policy: &Policy) -> Option<String> {
    policy.writable.iter().find_map(|w| {
        policy.deny_read.iter().find(|d| within(w, d)).map(|d| {
            format!(
                "the workspace {} is inside {}, which sandbox.deny-read keeps from commands: \
                 work elsewhere, or remove it from sandbox.deny-read",
                w.display(),
                d.display()
            )
        })
    })
}

/// What is not enforced when the mount layer cannot be had (`why`): the paths stay readable.
pub(super) fn unenforced(denied: &[PathBuf], why: &str) -> String {
    let names: Vec<String> = denied.iter().map(|p| p.display().to_string()).collect();
    format!(
        "sandbox.deny-read is not enforced, {} stay readable: {why}",
        names.join(", ")
    )
}
