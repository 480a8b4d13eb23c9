//! The command line's grammar: clap's derive definitions of every flag and subcommand. Parsing
//! only; what each mode does is in `modes`.

use std::path::PathBuf;

use clap::{Parser, Subcommand};

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
