//! The Unix sockets (and their folders) no confined command may reach, which the mount layer
//! hides: servers that run what they are sent. Also the check that a file lies in one of those
//! folders, for secrets oml keeps beside its sockets (the listener's token).
//!
//! It knows where such sockets live, not how a folder is hidden.

use std::path::PathBuf;

use super::mounts;

/// Where the Unix sockets of servers that run what they are sent live, for the mount layer to
/// hide from commands: Landlock (before its Unix-socket rights) does not restrict connecting to
/// a socket file, and the user's tmux, screen, session bus, systemd and Docker would run a
/// confined command's request unconfined. The user's runtime folder (`$XDG_RUNTIME_DIR`: the
/// session bus, `systemd --user`, oml's own sockets), tmux's and screen's socket folders, the
/// system bus, systemd's private socket and Docker's; oml's own runtime folder wherever it is;
/// with the network off, the ssh agent's too.
pub(super) fn hidden_sockets(network: bool) -> Vec<PathBuf> {
    let var = |name| std::env::var_os(name).map(PathBuf::from);
    let mut hidden: Vec<PathBuf> = HIDDEN_SOCKETS.iter().map(PathBuf::from).collect();
    hidden.extend(var("XDG_RUNTIME_DIR"));
    // Without `XDG_RUNTIME_DIR` oml's sockets (the live REPL, `oml ask`'s owners) are in
    // `<state>/run`, which the read-only view of the state folder does not keep a command from
    // connecting to. It is made now if missing, so that a socket made there later is hidden too.
    let own = crate::paths::Paths::from_env().runtime;
    if crate::paths::ensure_private_dir(&own).is_ok() {
        hidden.push(own);
    }
    // SAFETY: getuid takes no arguments.
    let uid = unsafe { libc::getuid() };
    let tmux = std::env::var("TMUX_TMPDIR").unwrap_or_else(|_| "/tmp".to_owned());
    hidden.push(PathBuf::from(format!("{tmux}/tmux-{uid}")));
    // Emacs's server socket where no runtime folder holds it: `emacsclient --eval` runs Lisp.
    hidden.push(PathBuf::from(format!("/tmp/emacs{uid}")));
    if let Some(tmux) = std::env::var("TMUX").ok().and_then(|t| {
        let socket = t.split(',').next().map(PathBuf::from)?;
        socket.parent().map(std::path::Path::to_path_buf)
    }) {
        hidden.push(tmux);
    }
    if !network {
        hidden.extend(var("SSH_AUTH_SOCK").and_then(|s| s.parent().map(|p| p.to_path_buf())));
    }
    let mut hidden: Vec<PathBuf> = hidden
        .iter()
        .filter(|h| h.exists())
        .filter_map(|h| std::fs::canonicalize(h).ok())
        .filter(|h| h != std::path::Path::new("/tmp") && h != std::path::Path::new("/"))
        .collect();
    hidden.sort();
    hidden.dedup();
    // A folder inside one already hidden is hidden with it (and cannot be mounted over).
    let mut outer: Vec<PathBuf> = Vec::new();
    for h in hidden {
        if !outer.iter().any(|o| mounts::within(&h, o)) {
            outer.push(h);
        }
    }
    outer
}

/// Why a file is not out of confined commands' reach.
#[derive(Debug, thiserror::Error)]
pub enum NotHidden {
    /// The mount layer, which hides folders, cannot be used here: every file a command may read
    /// is readable.
    #[error("this system cannot hide folders from confined commands ({0})")]
    CannotHide(#[from] super::mounts::NoNamespace),
    /// The file is in no folder the sandbox hides.
    #[error("it is in no folder the sandbox hides from confined commands (such as {runtime})")]
    Outside { runtime: PathBuf },
    #[error("{0}")]
    Unreadable(std::io::Error),
}

/// `Ok` when `path` lies in a folder the sandbox hides from every confined command (oml's
/// runtime folder, `$XDG_RUNTIME_DIR`, …: [`hidden_sockets`]'s, whatever the network setting),
/// so that no command it confines can read the file.
pub fn hidden_from_commands(path: &std::path::Path) -> Result<(), NotHidden> {
    mounts::available()?;
    let real = std::fs::canonicalize(path).map_err(NotHidden::Unreadable)?;
    if hidden_sockets(true)
        .iter()
        .any(|h| mounts::within(&real, h))
    {
        return Ok(());
    }
    Err(NotHidden::Outside {
        runtime: crate::paths::Paths::from_env().runtime,
    })
}

/// Sockets (and their folders) hidden from every confined command: the X server's, screen's,
/// the system bus, systemd's private socket, Docker's.
const HIDDEN_SOCKETS: &[&str] = &[
    // The X server takes keystrokes for any window, a terminal's included.
    "/tmp/.X11-unix",
    "/run/screen",
    "/run/dbus",
    "/run/systemd/private",
    "/run/docker.sock",
    "/var/run/docker.sock",
];
