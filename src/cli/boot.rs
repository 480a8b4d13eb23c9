//! Building the image every mode runs in: the host, every namespace, the agent, then the init
//! files; and how a Lisp error ends a mode (its message on stderr, `os.exit`'s status).

use std::path::Path;

use anyhow::Context as _;

use super::status;
use crate::agent::Agent;
use crate::front::stdio::err;
use crate::lisp::init::{self, InitReport};
use crate::lisp::{Lisp, LispOptions, Output};
use crate::paths::Paths;

/// The Lisp host with the agent installed, before any init file.
pub(super) fn new_host(paths: &Paths, output: Output) -> anyhow::Result<Lisp> {
    let lisp = Lisp::new(LispOptions {
        output,
        cache_dir: Some(paths.fennel_cache()),
    })
    .context("cannot start the Lisp runtime")?;
    lisp.install_searcher()?;
    // Every namespace exists before the init files run, so that they can setq, redefine and
    // advise: the Lisp surface (llm.*, catalog.*, client.*, oml.reload), then the agent's steps,
    // tools and commands (whose call-model uses llm.chat).
    crate::bind::install(&lisp, paths)?;
    Agent::install(&lisp).context("cannot install the agent")?;
    Ok(lisp)
}

/// Build the Lisp host and load the init files (user, then the current directory's project
/// file). Init errors are reported on stderr and never stop oml.
pub async fn boot(
    paths: &Paths,
    no_init: bool,
    output: Output,
) -> anyhow::Result<(Lisp, InitReport)> {
    let lisp = new_host(paths, output)?;
    let report = load_inits(&lisp, paths, no_init).await;
    Ok((lisp, report))
}

/// Load the init files (user, then the current directory's project file) unless `no_init`,
/// reporting their errors on stderr: the second half of [`boot`], for modes that install more
/// of the surface first (the chat).
pub(super) async fn load_inits(lisp: &Lisp, paths: &Paths, no_init: bool) -> InitReport {
    let report = if no_init {
        InitReport::default()
    } else {
        let cwd = std::env::current_dir().ok();
        init::load_all(lisp, paths, cwd.as_deref(), true).await
    };
    for line in report.messages() {
        err!("oml: {line}");
    }
    report
}

pub(super) fn report_lisp_error(e: &crate::lisp::LispError) -> i32 {
    if let crate::lisp::LispError::Exit(code) = e {
        return *code;
    }
    err!("error: {e}");
    // Lua's stack traceback only helps when debugging oml itself (OML_LOG=debug shows it).
    if let Some(traceback) = e.traceback()
        && tracing::enabled!(tracing::Level::DEBUG)
    {
        err!("{traceback}");
    }
    status::ERROR
}

pub(super) fn set_arg_table(lisp: &Lisp, file: &Path, args: &[String]) -> anyhow::Result<()> {
    let lua = lisp.lua();
    let arg = lua.create_table()?;
    arg.set(0, file.display().to_string())?;
    for (i, a) in args.iter().enumerate() {
        arg.set(i + 1, a.as_str())?;
    }
    lua.globals().set("arg", arg)?;
    Ok(())
}
