//! The line editor the terminal front ends share (the chat, `oml repl`, the live REPL's
//! client): rustyline with oml's settings (a bounded history that only non-blank lines join),
//! the history kept in a file in a private folder, and one read that tells a line, Ctrl-C and
//! the end of input apart.
//!
//! It knows rustyline and the history file; not what a line means, nor when the input is
//! complete (each front end's helper says).

use std::path::Path;

use rustyline::history::FileHistory;
use rustyline::{Editor, Helper};

/// The history a live REPL client keeps for the length of its connection.
pub const CLIENT_HISTORY: usize = 1000;

/// What one read gave.
#[derive(Debug, PartialEq, Eq)]
pub enum Read {
    Line(String),
    /// Ctrl-C at the prompt (what was typed is dropped).
    Interrupted,
    /// Ctrl-D on an empty line, or the terminal gone.
    Eof,
}

/// An editor with `helper` keeping at most `history_size` lines, with the file `history` read
/// when there is one; `None`, said on stderr, when the terminal cannot be edited.
pub fn editor<H: Helper>(
    helper: Option<H>,
    history_size: usize,
    history: Option<&Path>,
) -> Option<Editor<H, FileHistory>> {
    let config = rustyline::Config::builder()
        .max_history_size(history_size)
        .map(|b| b.auto_add_history(false).build())
        .unwrap_or_default();
    let mut editor = match Editor::with_config(config) {
        Ok(e) => e,
        Err(e) => {
            crate::front::stdio::err!("oml: cannot start line editing: {e}");
            return None;
        }
    };
    editor.set_helper(helper);
    if let Some(path) = history {
        let _ = editor.load_history(path);
    }
    Some(editor)
}

/// Read one line at `prompt`; a line that is not blank joins the history.
pub fn read<H: Helper>(editor: &mut Editor<H, FileHistory>, prompt: &str) -> Read {
    read_with(editor, prompt, None)
}

/// [`read`] with the line already holding `initial` (the text before the cursor, and after).
pub fn read_with<H: Helper>(
    editor: &mut Editor<H, FileHistory>,
    prompt: &str,
    initial: Option<(&str, &str)>,
) -> Read {
    let read = match initial {
        Some(initial) => editor.readline_with_initial(prompt, initial),
        None => editor.readline(prompt),
    };
    match read {
        Ok(line) => {
            if !line.trim().is_empty() {
                let _ = editor.add_history_entry(line.as_str());
            }
            Read::Line(line)
        }
        // A SIGINT while rustyline waits inside a completion or a search comes as the signal.
        Err(
            rustyline::error::ReadlineError::Interrupted
            | rustyline::error::ReadlineError::Signal(rustyline::error::Signal::Interrupt),
        ) => Read::Interrupted,
        Err(_) => Read::Eof,
    }
}

/// Write the history to the file `path`, creating its folder private to this user.
pub fn save_history<H: Helper>(editor: &mut Editor<H, FileHistory>, path: &Path) {
    if let Some(dir) = path.parent() {
        let _ = crate::paths::ensure_private_dir(dir);
    }
    let _ = editor.save_history(path);
}
