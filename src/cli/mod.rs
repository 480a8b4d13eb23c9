//! Command-line modes: parse arguments with clap, boot the Lisp host, run the chosen mode.
//!
//! Every mode returns an exit status to `main.rs`, the only place that exits. Modes:
//! `oml` (the interactive REPL), `oml eval EXPR`, `oml run FILE [ARGS…]`, `oml trust [DIR]`,
//! `oml untrust [DIR]`, `oml repl --connect [SOCKET]` and `oml repl --listen`.
//!
//! This module wires things together; it holds no behaviour of its own beyond argument handling
//! and the messages a terminal user sees.

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use clap::{Parser, Subcommand};

use crate::cancel::CancelToken;
use crate::lisp::init::{self, InitReport, TrustStore};
use crate::lisp::server::{self, ReplServer};
use crate::lisp::{Lisp, LispOptions, Output, repl};
use crate::paths::Paths;

/// Exit statuses (see docs/src/getting-started.md).
pub mod status {
    pub const OK: i32 = 0;
    pub const ERROR: i32 = 1;
    pub const USAGE: i32 = 2;
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

    #[command(subcommand)]
    pub command: Option<Command>,
}

#[derive(Subcommand, Debug)]
pub enum Command {
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
    match cli.command {
        None => {
            let (lisp, _) = boot(&paths, cli.no_init, Output::Stdout).await?;
            let size: i64 = lisp.setting("repl.history-size").unwrap_or(1000);
            if is_terminal() {
                println!("{}", repl::banner());
            }
            repl::interactive(&lisp, Some(paths.history_file()), size.max(0) as usize).await?;
            Ok(status::OK)
        }
        Some(Command::Eval { expr }) => {
            let (lisp, _) = boot(&paths, cli.no_init, Output::Stdout).await?;
            match lisp
                .eval_to_string(&expr, "eval", &CancelToken::new())
                .await
            {
                Ok(text) => {
                    println!("{text}");
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
                println!(
                    "trusted {} ({} sha256 {})",
                    dir.display(),
                    init.display(),
                    &hash[..12]
                );
            } else {
                println!(
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
                println!("untrusted {}", dir.display());
            } else {
                println!("{} was not trusted", dir.display());
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
            println!("{}", server.path().display());
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

/// Build the Lisp host and load the init files (user, then the current directory's project
/// file). Init errors are reported on stderr and never stop oml.
pub async fn boot(
    paths: &Paths,
    no_init: bool,
    output: Output,
) -> anyhow::Result<(Lisp, InitReport)> {
    let lisp = Lisp::new(LispOptions {
        output,
        cache_dir: Some(paths.fennel_cache()),
    })
    .context("cannot start the Lisp runtime")?;
    lisp.install_searcher()?;
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
    if let Some(code) = e.exit_status() {
        return code;
    }
    eprintln!("error: {e}");
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
