//! Command-line modes: parse arguments with clap, boot the Lisp host, run the chosen mode.
//!
//! Every mode returns an exit status to `main.rs`, the only place that exits. Modes:
//! `oml` (the interactive REPL), `oml eval EXPR`, `oml run FILE [ARGS…]`, `oml trust [DIR]`,
//! `oml untrust [DIR]`, `oml agents`, `oml repl --connect [SOCKET]`, `oml repl --listen`, and print mode
//! (`oml -p TEXT`, `oml prompt TEXT`, see `front::print`).
//!
//! This module wires things together; it holds no behaviour of its own beyond argument handling
//! and the messages a terminal user sees.

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use clap::{Parser, Subcommand};

use crate::agent::Agent;
use crate::cancel::CancelToken;
use crate::front::print::SessionChoice;
use crate::front::repl::server::{self, ReplServer};
use crate::front::repl::terminal;
use crate::lisp::init::{self, InitReport, TrustStore};
use crate::lisp::{Lisp, LispOptions, Output};
use crate::paths::Paths;
use crate::session::store::Store;

/// `println!` that ignores a closed stdout: `oml eval ... | head` is not an error.
macro_rules! out {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout().lock(), $($arg)*);
    }};
}

/// Exit statuses (see docs/src/getting-started.md).
pub mod status {
    pub const OK: i32 = 0;
    pub const ERROR: i32 = 1;
    pub const USAGE: i32 = 2;
    pub const INTERRUPTED: i32 = crate::front::print::INTERRUPTED;
}

#[derive(Parser, Debug)]
#[command(
    name = "oml",
    version,
    about = "A programmable coding-agent harness, extended in Fennel",
    long_about = "A programmable coding-agent harness, extended in Fennel.\n\n\
                  With no command, oml opens an interactive Fennel REPL."
)]
pub struct Cli {
    /// Do not load the user init file (~/.config/oml/init.fnl) or any project init file.
    #[arg(long, global = true)]
    pub no_init: bool,

    /// Run one prompt, print the answer and exit ('-' reads the prompt from stdin).
    #[arg(
        short = 'p',
        long = "print",
        value_name = "TEXT",
        allow_hyphen_values = true
    )]
    pub print: Option<String>,

    /// Print mode: write one JSON event per line instead of text.
    #[arg(long, global = true)]
    pub json: bool,

    /// Print mode: the permission mode (default: the setting agent.print-mode-permission).
    #[arg(long, global = true, value_parser = ["ask", "accept-edits", "yolo", "read-only"])]
    pub mode: Option<String>,

    /// Print mode: show the model's reasoning too.
    #[arg(long, global = true)]
    pub show_thinking: bool,

    /// Never ask anything at start-up (the offer to configure a discovered agent), even on a
    /// terminal.
    #[arg(long, global = true)]
    pub no_input: bool,

    /// Print mode: go on with the latest session in this directory (a new one if there is none).
    #[arg(short = 'c', long = "continue", conflicts_with_all = ["session", "no_session"])]
    pub continue_: bool,

    /// Print mode: go on with the stored session ID.
    #[arg(long, value_name = "ID", conflicts_with = "no_session")]
    pub session: Option<String>,

    /// Print mode: do not store the session.
    #[arg(long)]
    pub no_session: bool,

    #[command(subcommand)]
    pub command: Option<Command>,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Run one prompt and print the answer (like -p); the words are joined with spaces.
    Prompt {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        text: Vec<String>,
    },
    /// Evaluate a Fennel expression and print its value.
    Eval {
        /// The expression, e.g. '(+ 1 2)'.
        expr: String,
    },
    /// Run a Fennel program; its arguments are in the `arg` table, (os.exit n) sets the status.
    Run {
        file: PathBuf,
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Trust DIR (default: the current directory): its .oml/init.fnl may run, as it is now.
    Trust { dir: Option<PathBuf> },
    /// Stop trusting DIR (default: the current directory).
    Untrust { dir: Option<PathBuf> },
    /// List the stored sessions of this directory (--all: of every directory), latest first.
    Sessions {
        #[arg(long)]
        all: bool,
    },
    /// Serve the Agent Client Protocol (ACP v1) on stdin/stdout, for editors (Zed, Emacs, ...).
    ///
    /// stdout carries only protocol; logs and Lisp output go to stderr. The line cap is
    /// $OML_ACP_MAX_LINE_BYTES (default 64 MiB).
    Acp,
    /// List the known ACP agents, which are on PATH, and the Fennel that would configure them.
    ///
    /// Looks on PATH for the catalog's command names only; installs, downloads and changes
    /// nothing. --json prints one JSON object for scripts.
    Agents {
        /// Print the catalog as the Markdown table of docs/src/agents.md.
        #[arg(long, conflicts_with = "json")]
        markdown: bool,
    },
    /// Connect to, or serve, the live REPL of a running oml process.
    Repl {
        /// Connect to SOCKET (default: the most recently started server).
        #[arg(long, value_name = "SOCKET", num_args = 0..=1, default_missing_value = "")]
        connect: Option<String>,
        /// Serve a REPL socket from this process until stdin closes; prints the socket path.
        #[arg(long, conflicts_with = "connect")]
        listen: bool,
        /// With --listen: the socket path (default: $XDG_RUNTIME_DIR/oml/repl-<pid>.sock).
        #[arg(long, requires = "listen")]
        socket: Option<PathBuf>,
    },
}

/// Parse the arguments and run; returns the process exit status.
pub fn main() -> i32 {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() {
                status::USAGE
            } else {
                status::OK
            };
        }
    };
    init_logging();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("oml: cannot start the async runtime: {e}");
            return status::ERROR;
        }
    };
    let code = runtime.block_on(async {
        match run(cli).await {
            Ok(code) => code,
            Err(e) => {
                eprintln!("oml: {e:#}");
                status::ERROR
            }
        }
    });
    runtime.shutdown_background();
    // Agents a program started and never closed go with it, launchers' children included.
    crate::acp_client::process::kill_remaining_groups();
    code
}

fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("OML_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .without_time()
        .try_init();
}

async fn run(cli: Cli) -> anyhow::Result<i32> {
    let paths = Paths::from_env();
    if let Some(text) = cli.print.clone() {
        return print(&paths, &cli, text).await;
    }
    match cli.command {
        Some(Command::Prompt { ref text }) => {
            let text = text.join(" ");
            print(&paths, &cli, text).await
        }
        None => {
            let (lisp, _) = boot(&paths, cli.no_init, Output::Stdout).await?;
            let size: i64 = lisp.setting("repl.history-size").unwrap_or(1000);
            if is_terminal() && !cli.no_init && !cli.no_input {
                offer_agents(&lisp, &paths).await;
            }
            if is_terminal() {
                out!("{}", terminal::banner());
                // Agents driven from this REPL without a permission handler ask here.
                crate::bind::client::ask_on_terminal(true);
            }
            terminal::interactive(&lisp, Some(paths.history_file()), size.max(0) as usize).await?;
            Ok(status::OK)
        }
        Some(Command::Acp) => acp(&paths, cli.no_init).await,
        Some(Command::Agents { markdown }) => Ok(agents(cli.json, markdown)),
        Some(Command::Sessions { all }) => Ok(list_sessions(&paths, all, cli.json)),
        Some(Command::Eval { expr }) => {
            let (lisp, _) = boot(&paths, cli.no_init, Output::Stdout).await?;
            match lisp
                .eval_to_string(&expr, "eval", &CancelToken::new())
                .await
            {
                Ok(text) => {
                    out!("{text}");
                    Ok(status::OK)
                }
                Err(e) => Ok(report_lisp_error(&e)),
            }
        }
        Some(Command::Run { file, args }) => {
            let (lisp, _) = boot(&paths, cli.no_init, Output::Stdout).await?;
            set_arg_table(&lisp, &file, &args)?;
            match lisp.load_file(&file, &CancelToken::new()).await {
                Ok(()) => Ok(status::OK),
                Err(e) => Ok(report_lisp_error(&e)),
            }
        }
        Some(Command::Trust { dir }) => {
            let dir = absolute_dir(dir)?;
            let hash = TrustStore::new(paths.trust_file())
                .trust(&dir)
                .context("cannot record the trusted directory")?;
            let init = crate::paths::project_init(&dir);
            if init.is_file() {
                out!(
                    "trusted {} ({} sha256 {})",
                    dir.display(),
                    init.display(),
                    &hash[..12]
                );
            } else {
                out!(
                    "trusted {} (it has no .oml/init.fnl yet; trust it again once it has one)",
                    dir.display()
                );
            }
            Ok(status::OK)
        }
        Some(Command::Untrust { dir }) => {
            let dir = absolute_dir(dir)?;
            let was = TrustStore::new(paths.trust_file())
                .untrust(&dir)
                .context("cannot update the trusted directories")?;
            if was {
                out!("untrusted {}", dir.display());
            } else {
                out!("{} was not trusted", dir.display());
            }
            Ok(status::OK)
        }
        Some(Command::Repl {
            connect: Some(socket),
            ..
        }) => {
            let socket = if socket.is_empty() {
                server::default_socket(&paths).context(
                    "no running oml REPL server found; start one (oml acp starts one, as does oml repl --listen) or name its socket",
                )?
            } else {
                PathBuf::from(socket)
            };
            server::connect(&socket).await?;
            Ok(status::OK)
        }
        Some(Command::Repl {
            listen: true,
            socket,
            ..
        }) => {
            let (lisp, _) = boot(&paths, cli.no_init, Output::Stdout).await?;
            let server = match socket {
                Some(path) => ReplServer::start_at(lisp, &path)?,
                None => ReplServer::start(lisp, &paths).await?,
            };
            out!("{}", server.path().display());
            wait_for_stdin_eof_or_signal().await;
            drop(server);
            Ok(status::OK)
        }
        Some(Command::Repl { .. }) => {
            eprintln!(
                "oml repl: say --connect [SOCKET] or --listen (plain `oml` opens a local REPL)"
            );
            Ok(status::USAGE)
        }
    }
}

/// `oml agents`: the catalog, what is on PATH, and the proposed configuration.
fn agents(json: bool, markdown: bool) -> i32 {
    use crate::catalog;
    if markdown {
        out!("{}", catalog::markdown_table().trim_end());
        return status::OK;
    }
    let discovered = catalog::discover_env();
    let found: Vec<catalog::Found> = discovered.iter().filter_map(|(_, f)| f.clone()).collect();
    let proposal = catalog::proposed_config(&found);
    if json {
        let agents: Vec<serde_json::Value> = discovered
            .iter()
            .map(|(e, f)| {
                serde_json::json!({
                    "id": e.id,
                    "name": e.name,
                    "commands": e.commands,
                    "args": e.args,
                    "env": e.env.iter().map(|(k, v)| (k.to_string(), serde_json::json!(v)))
                        .collect::<serde_json::Map<String, serde_json::Value>>(),
                    "auth": e.auth.as_str(),
                    "homepage": e.homepage,
                    "found": f.is_some(),
                    "path": f.as_ref().map(|f| f.path.display().to_string()),
                })
            })
            .collect();
        out!(
            "{}",
            serde_json::json!({"agents": agents, "proposal": proposal})
        );
        return status::OK;
    }
    out!("Known ACP agents (looked for on PATH; nothing is installed or changed):");
    for (e, f) in &discovered {
        match f {
            Some(f) => out!(
                "  {:<11} {:<20} found      {}",
                e.id,
                e.name,
                f.path.display()
            ),
            None => out!(
                "  {:<11} {:<20} not found  ({})",
                e.id,
                e.name,
                e.commands.join(", ")
            ),
        }
    }
    out!(
        "\nProposed configuration (review it, then add it to ~/.config/oml/agents.fnl or init.fnl):\n"
    );
    out!("{}", proposal.trim_end());
    status::OK
}

/// Interactive start-up: offer once to write the configuration of the agents found on PATH.
async fn offer_agents(lisp: &Lisp, paths: &Paths) {
    let default: Option<String> = lisp.setting("client.default-agent").unwrap_or(None);
    let found: Vec<crate::catalog::Found> = crate::catalog::discover_env()
        .into_iter()
        .filter_map(|(_, f)| f)
        .collect();
    let result = {
        let stdin = std::io::stdin();
        let mut input = stdin.lock();
        let mut output = std::io::stdout();
        crate::catalog::offer::offer(paths, default.is_some(), &found, &mut input, &mut output)
    };
    match result {
        Ok(crate::catalog::offer::Offer::Wrote(file)) => {
            if let Err(e) = lisp.load_file(&file, &CancelToken::new()).await {
                eprintln!("oml: {}: {e}", file.display());
            }
        }
        Ok(_) => {}
        Err(e) => eprintln!("oml: cannot offer the agent configuration: {e}"),
    }
}

/// Print mode: `oml -p TEXT` and `oml prompt TEXT`.
async fn print(paths: &Paths, cli: &Cli, text: String) -> anyhow::Result<i32> {
    let text = if text == "-" {
        use tokio::io::AsyncReadExt as _;
        let mut buf = String::new();
        tokio::io::stdin()
            .read_to_string(&mut buf)
            .await
            .context("cannot read the prompt from stdin")?;
        buf
    } else {
        text
    };
    if text.trim().is_empty() {
        eprintln!("usage: oml -p <text>   (or: oml prompt <text>; -p - reads stdin)");
        return Ok(status::USAGE);
    }
    let (lisp, _) = boot(paths, cli.no_init, Output::Stderr).await?;
    let agent = Agent::of(&lisp).context("the agent is not installed")?;
    let options = crate::front::print::PrintOptions {
        text,
        json: cli.json,
        mode: cli.mode.clone(),
        show_thinking: cli.show_thinking,
        session: if cli.no_session {
            SessionChoice::None
        } else if cli.continue_ {
            SessionChoice::Continue
        } else if let Some(id) = &cli.session {
            SessionChoice::Id(id.clone())
        } else {
            SessionChoice::New
        },
    };
    if !cli.no_session {
        agent
            .sessions()
            .set_store(Some(Store::new(paths.sessions_dir())));
    }
    Ok(crate::front::print::run(&agent, options).await)
}

/// `oml sessions`: one line per stored session (id, last update, title), latest first.
fn list_sessions(paths: &Paths, all: bool, json: bool) -> i32 {
    let store = Store::new(paths.sessions_dir());
    let cwd = std::env::current_dir().ok();
    let list = store.list(if all { None } else { cwd.as_deref() });
    for s in &list {
        if json {
            println!(
                "{}",
                serde_json::json!({"id": s.id, "cwd": s.cwd.display().to_string(),
                                   "title": s.title, "updated": s.updated_at})
            );
        } else if all {
            println!(
                "{}  {}  {}  {}",
                s.id,
                s.updated_at,
                s.cwd.display(),
                s.title.as_deref().unwrap_or("")
            );
        } else {
            println!(
                "{}  {}  {}",
                s.id,
                s.updated_at,
                s.title.as_deref().unwrap_or("")
            );
        }
    }
    if list.is_empty() && !json {
        eprintln!("no sessions{}", if all { "" } else { " in this directory" });
    }
    status::OK
}

/// `oml acp`: the ACP agent on stdio, with the live REPL beside it.
async fn acp(paths: &Paths, no_init: bool) -> anyhow::Result<i32> {
    let lisp = new_host(paths, Output::Stderr)?;
    let hub = crate::front::acp::install(&lisp).context("cannot install the ACP agent")?;
    // Project init files run per session, in the session's directory.
    let report = if no_init {
        InitReport::default()
    } else {
        init::load_all(&lisp, paths, None, true).await
    };
    for line in report.messages() {
        tracing::info!("{line}");
    }
    let agent = Agent::of(&lisp).context("the agent is not installed")?;
    let repl = if lisp.setting::<bool>("repl.server?").unwrap_or(true) {
        match ReplServer::start(lisp.clone(), paths).await {
            Ok(server) => Some(server),
            Err(e) => {
                tracing::warn!("cannot start the live REPL server: {e}");
                None
            }
        }
    } else {
        None
    };
    let options = crate::front::acp::ServeOptions {
        paths: paths.clone(),
        no_init,
        startup_messages: report.messages(),
        max_line_bytes: crate::front::acp::max_line_bytes_from_env(),
    };
    let code = crate::front::acp::serve(agent, hub, options).await;
    drop(repl);
    Ok(code)
}

/// The Lisp host with the agent installed, before any init file.
fn new_host(paths: &Paths, output: Output) -> anyhow::Result<Lisp> {
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
    let report = if no_init {
        InitReport::default()
    } else {
        let cwd = std::env::current_dir().ok();
        init::load_all(&lisp, paths, cwd.as_deref(), true).await
    };
    for line in report.messages() {
        eprintln!("oml: {line}");
    }
    Ok((lisp, report))
}

fn report_lisp_error(e: &crate::lisp::LispError) -> i32 {
    if let crate::lisp::LispError::Exit(code) = e {
        return *code;
    }
    eprintln!("error: {e}");
    // Lua's stack traceback only helps when debugging oml itself (OML_LOG=debug shows it).
    if let Some(traceback) = e.traceback()
        && tracing::enabled!(tracing::Level::DEBUG)
    {
        eprintln!("{traceback}");
    }
    status::ERROR
}

fn set_arg_table(lisp: &Lisp, file: &Path, args: &[String]) -> anyhow::Result<()> {
    let lua = lisp.lua();
    let arg = lua.create_table()?;
    arg.set(0, file.display().to_string())?;
    for (i, a) in args.iter().enumerate() {
        arg.set(i + 1, a.as_str())?;
    }
    lua.globals().set("arg", arg)?;
    Ok(())
}

fn absolute_dir(dir: Option<PathBuf>) -> anyhow::Result<PathBuf> {
    let cwd = std::env::current_dir().context("cannot read the current directory")?;
    let dir = match dir {
        Some(d) if d.is_absolute() => d,
        Some(d) => cwd.join(d),
        None => cwd,
    };
    anyhow::ensure!(dir.is_dir(), "{} is not a directory", dir.display());
    Ok(std::fs::canonicalize(&dir).unwrap_or(dir))
}

fn is_terminal() -> bool {
    use std::io::IsTerminal as _;
    std::io::stdin().is_terminal() && std::io::stdout().is_terminal()
}

async fn wait_for_stdin_eof_or_signal() {
    use tokio::io::AsyncReadExt as _;
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).ok();
    let mut stdin = tokio::io::stdin();
    let mut buf = [0u8; 256];
    let eof = async {
        loop {
            match stdin.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
        }
    };
    tokio::select! {
        _ = eof => {}
        _ = async { match term.as_mut() { Some(t) => { t.recv().await; } None => std::future::pending().await } } => {}
        _ = tokio::signal::ctrl_c() => {}
    }
}
