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
    // The llm.* settings and llm.chat, before the agent (whose call-model uses llm.chat) and
    // before the init files, which may setq them.
    crate::bind::llm::install(&lisp).context("cannot install the model client functions")?;
    // The agent's steps, tools and commands exist before the init files run, so that they can
    // redefine and advise them.
    Agent::install(&lisp).context("cannot install the agent")?;
    crate::bind::session::install_reload(&lisp, paths.clone())?;
    crate::bind::catalog::install(&lisp).context("cannot install the agent catalog")?;
    crate::bind::client::install(&lisp).context("cannot install the ACP client functions")?;
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
    let report = if no_init {
        InitReport::default()
    } else {
        let cwd = std::env::current_dir().ok();
        init::load_all(&lisp, paths, cwd.as_deref(), true).await
    };
    for line in report.messages() {
        err!("oml: {line}");
    }
    Ok((lisp, report))
}

pub(super) fn report_lisp_error(e: &crate::lisp::LispError) -> i32 {
    if let Some(code) = e.exit_status() {
        return code;
    }
    // Lua's stack traceback only helps when debugging oml itself (OML_LOG=debug shows it).
    let text = e.to_string();
    let shown = match text.find("\nstack traceback:") {
        Some(i) if !tracing::enabled!(tracing::Level::DEBUG) => &text[..i],
        _ => &text,
    };
    err!("error: {shown}");
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
