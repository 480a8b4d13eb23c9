//! Starting a command in a [`Prepared`] sandbox: through the spawn helper ([`super::helper`])
//! when it can take the command, else by forking oml as [`Prepared::confine`] does. Either way
//! the command gets the same steps (a new session, PDEATHSIG, the watcher, the mount view,
//! Landlock), stdin from `/dev/null`, and oml's environment without the sandbox's secrets.
//!
//! It knows how to start a command, not what the command is for: the caller gives the program,
//! its arguments, the working directory and where its output goes, and waits on [`Launched`].

use std::ffi::OsString;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::PathBuf;
use std::process::ExitStatus;

use super::helper::{self, Request, SpawnError};
use super::{Mode, Prepared, SandboxError, Status};

/// What to start.
#[derive(Debug)]
pub struct Launch {
    pub program: OsString,
    pub args: Vec<OsString>,
    pub cwd: PathBuf,
    pub stdout: OwnedFd,
    pub stderr: OwnedFd,
}

/// Why a command did not start.
#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    #[error(transparent)]
    Sandbox(#[from] SandboxError),
    #[error(transparent)]
    Io(#[from] io::Error),
    #[error(transparent)]
    Helper(#[from] SpawnError),
}

/// A started command. Dropping it before the command ended kills the command's first process
/// (`kill_on_drop`); its group is the caller's to kill.
#[derive(Debug)]
pub enum Launched {
    /// Forked by the spawn helper.
    Helper(helper::Child),
    /// Forked by oml (the helper could not take it).
    Direct(tokio::process::Child),
}

impl Launched {
    /// The first process's id (the command's process group); `None` once a directly forked
    /// command has been reaped.
    pub fn id(&self) -> Option<u32> {
        match self {
            Launched::Helper(child) => Some(child.id()),
            Launched::Direct(child) => child.id(),
        }
    }

    /// Wait for the first process to end (cancel-safe).
    pub async fn wait(&mut self) -> io::Result<ExitStatus> {
        match self {
            Launched::Helper(child) => child.wait().await,
            Launched::Direct(child) => child.wait().await,
        }
    }

    /// How the first process ended, if it has.
    pub fn try_wait(&mut self) -> io::Result<Option<ExitStatus>> {
        match self {
            Launched::Helper(child) => child.try_wait(),
            Launched::Direct(child) => child.try_wait(),
        }
    }
}

impl Prepared {
    /// Start `launch` in this sandbox. Refuses, like [`Prepared::confine`], when the sandbox is
    /// [`Status::Unavailable`].
    pub async fn launch(self, launch: Launch) -> Result<Launched, LaunchError> {
        if let Status::Unavailable(reason) = &self.status {
            return Err(SandboxError::Unavailable(reason.clone()).into());
        }
        let lifeline = super::child::own_lifeline();
        if let (Some(request), Some(lifeline)) = (self.request(&launch), lifeline) {
            // SAFETY: the lifeline's read end lives as long as this process (a static).
            let lifeline = unsafe { BorrowedFd::borrow_raw(lifeline) };
            let mut fds = vec![launch.stdout.as_fd(), launch.stderr.as_fd(), lifeline];
            fds.extend(self.ruleset.as_deref().map(AsFd::as_fd));
            if let Some(proxy) = &self.proxy {
                fds.extend(proxy.borrowed());
            }
            match helper::spawn(request, &fds).await {
                Ok(child) => return Ok(Launched::Helper(child)),
                Err(SpawnError::Failed(e)) => return Err(e.into()),
                // Sent, and perhaps started: never started a second time.
                Err(SpawnError::Lost) => return Err(SpawnError::Lost.into()),
                Err(why @ (SpawnError::NotRunning | SpawnError::Unsent(_))) => {
                    tracing::debug!("forking the command here: {why}");
                }
            }
        }
        self.launch_here(launch)
    }

    /// The helper's request for `launch`; `None` when something in it is not UTF-8.
    fn request(&self, launch: &Launch) -> Option<Request> {
        let utf8 = |s: &std::ffi::OsStr| s.to_str().map(str::to_owned);
        let set = |name: &std::ffi::OsStr| self.set_env.iter().any(|(n, _)| n == name);
        let base: Vec<(OsString, OsString)> = match &self.only_env {
            Some(vars) => vars.clone(),
            None => std::env::vars_os().collect(),
        };
        let env = base
            .into_iter()
            .filter(|(name, _)| !self.remove_env.contains(name) && !set(name))
            .chain(self.set_env.iter().cloned())
            .map(|(name, value)| Some((utf8(&name)?, utf8(&value)?)))
            .collect::<Option<Vec<_>>>()?;
        Some(Request::Spawn {
            id: 0,
            program: utf8(&launch.program)?,
            args: launch.args.iter().map(|a| utf8(a)).collect::<Option<_>>()?,
            env,
            cwd: utf8(launch.cwd.as_os_str())?,
            confined: self.mode != Mode::Off,
            deny_inet: self.deny_inet,
            mounts: self.mounts.as_deref().cloned(),
            ruleset: self.ruleset.is_some(),
            namespaces: self.proxy.as_ref().map_or(0, |p| p.borrowed().len() as u8),
        })
    }

    /// Fork the command from oml itself.
    fn launch_here(self, launch: Launch) -> Result<Launched, LaunchError> {
        let mut cmd = tokio::process::Command::new(&launch.program);
        cmd.args(&launch.args)
            .current_dir(&launch.cwd)
            .stdout(launch.stdout)
            .stderr(launch.stderr)
            .kill_on_drop(true);
        self.confine(cmd.as_std_mut())?;
        let child = cmd.spawn()?;
        Ok(Launched::Direct(child))
    }
}
