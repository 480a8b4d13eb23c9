//! What the chat needs to know of its terminal, and the one thing it does to it besides writing:
//! whether stdin and stdout are terminals, whether to draw colour and move the cursor
//! (`NO_COLOR`, `TERM=dumb`), the width in columns, and reading a single key in raw mode for the
//! permission question.
//!
//! It knows nothing of what is drawn. Line editing (rustyline) manages the terminal on its own
//! while it reads a line; [`RawInput`] is only used while no line is being read.

use std::io::IsTerminal as _;
use std::os::fd::BorrowedFd;

use rustix::io::Errno;
use rustix::stdio;
use rustix::termios::{
    self, InputModes, LocalModes, OptionalActions, QueueSelector, SpecialCodeIndex, Termios,
};

/// Columns assumed when the width cannot be read (not a terminal, or the ioctl fails).
pub const DEFAULT_WIDTH: usize = 80;

/// How the chat may draw.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Caps {
    /// stdin and stdout are both terminals: line editing, the welcome, one-key questions.
    pub interactive: bool,
    /// Colours and styles (stdout is a terminal, `NO_COLOR` unset or empty, `TERM` not `dumb`).
    pub color: bool,
    /// Cursor movement: the spinner, live output tails and cards redrawn in place (stdout is a
    /// terminal and `TERM` is not `dumb`).
    pub cursor: bool,
}

impl Caps {
    /// The capabilities of this process's stdin and stdout and environment.
    pub fn detect() -> Caps {
        let stdout = std::io::stdout().is_terminal();
        let interactive = stdout && std::io::stdin().is_terminal();
        let dumb = std::env::var("TERM").map_or(true, |t| t == "dumb" || t.is_empty());
        let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
        Caps {
            interactive,
            color: stdout && !dumb && !no_color,
            cursor: stdout && !dumb,
        }
    }
}

/// The width of the terminal on stdout in columns, [`DEFAULT_WIDTH`] when unknown.
pub fn width() -> usize {
    // TIOCGWINSZ; on a descriptor that is not a terminal it fails.
    match termios::tcgetwinsize(stdio::stdout()) {
        Ok(size) if size.ws_col > 0 => usize::from(size.ws_col),
        _ => DEFAULT_WIDTH,
    }
}

/// A key read by [`RawInput::read_key`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Key {
    Char(char),
    Enter,
    /// Ctrl-C or Esc.
    Cancel,
    /// stdin closed or could not be put in raw mode.
    Gone,
}

/// The terminal on stdin in raw mode (no echo, no signals, so Ctrl-C is a key here), what was
/// typed before dropped; the terminal is restored when it is dropped.
///
/// Start it before the question is drawn: a key pressed once the question shows is then read,
/// never flushed with the keys typed ahead.
pub struct RawInput {
    saved: Termios,
}

impl RawInput {
    /// Raw mode on stdin, or `None` when stdin is not a terminal.
    pub fn start() -> Option<RawInput> {
        raw_mode(stdio::stdin(), true).map(|saved| RawInput { saved })
    }

    /// Raw mode on stdin keeping what was typed ahead (the keys typed while a turn starts are
    /// the line the user is typing, see `super::typing`), or `None` when stdin is not a
    /// terminal.
    pub fn start_keeping() -> Option<RawInput> {
        raw_mode(stdio::stdin(), false).map(|saved| RawInput { saved })
    }

    /// Read one key. Escape sequences (arrow keys) are skipped. Blocks: call it from a blocking
    /// thread.
    pub fn read_key(&self) -> Key {
        loop {
            let mut buf = [0u8; 16];
            let n = match rustix::io::read(stdio::stdin(), &mut buf) {
                Err(Errno::INTR) => continue,
                Ok(0) | Err(_) => return Key::Gone,
                Ok(n) => n,
            };
            match &buf[..n] {
                [3] | [0x1b] => return Key::Cancel,
                [b'\r'] | [b'\n'] => return Key::Enter,
                [0x1b, ..] => continue,
                bytes => {
                    if let Some(c) = std::str::from_utf8(bytes)
                        .ok()
                        .and_then(|s| s.chars().next())
                    {
                        return Key::Char(c);
                    }
                }
            }
        }
    }
}

impl Drop for RawInput {
    fn drop(&mut self) {
        let _ = termios::tcsetattr(stdio::stdin(), OptionalActions::Now, &self.saved);
    }
}

/// The terminal's modes on stdin as they were when the chat started, to put back when a signal
/// ends the chat while the line editor has the terminal in raw mode.
pub struct SavedModes(Option<Termios>);

impl SavedModes {
    /// The modes of stdin now (nothing when it is not a terminal).
    pub fn save() -> SavedModes {
        SavedModes(termios::tcgetattr(stdio::stdin()).ok())
    }

    /// Put the saved modes back.
    pub fn restore(&self) {
        if let Some(saved) = &self.0 {
            let _ = termios::tcsetattr(stdio::stdin(), OptionalActions::Now, saved);
        }
    }
}

/// Put `fd` in raw mode, after flushing pending input when `flush`; the attributes to restore,
/// or `None` when `fd` is not a terminal.
fn raw_mode(fd: BorrowedFd<'_>, flush: bool) -> Option<Termios> {
    let saved = termios::tcgetattr(fd).ok()?;
    let mut raw = saved.clone();
    raw.local_modes &=
        !(LocalModes::ICANON | LocalModes::ECHO | LocalModes::ISIG | LocalModes::IEXTEN);
    raw.input_modes &= !(InputModes::IXON | InputModes::ICRNL);
    raw.special_codes[SpecialCodeIndex::VMIN] = 1;
    raw.special_codes[SpecialCodeIndex::VTIME] = 0;
    // Typed-ahead keys are dropped so that they cannot answer a question the user has not seen.
    if flush {
        let _ = termios::tcflush(fd, QueueSelector::IFlush);
    }
    termios::tcsetattr(fd, OptionalActions::Now, &raw).ok()?;
    Some(saved)
}
