//! oml's terminal chat as the tests drive it on a pseudo-terminal ([`super::pty::Term`]):
//! waiting until it reads input, and ending it.

use super::pty::{DEADLINE, Term};

/// Wait until the chat reads input: the cursor right after an empty `› ` prompt. Only after
/// something new has been seen since the last input: an empty prompt is also what the screen
/// shows the moment a line is typed, before its echo.
pub fn wait_ready(term: &Term) -> String {
    term.wait_until("the empty prompt `› `", DEADLINE, |screen| {
        let (row, col) = screen.cursor_position();
        let line = screen
            .rows(0, screen.size().1)
            .nth(usize::from(row))
            .unwrap_or_default();
        line.trim_end() == "›" && col == 2
    })
}

/// End the chat with Ctrl-D and check that it exits with status 0.
pub fn exit(term: &Term) {
    // At the prompt: typed during a turn, with the terminal in cooked mode, Ctrl-D is an end
    // of file nobody reads, and is gone once the line editor takes the terminal.
    wait_ready(term);
    term.ctrl_d();
    assert_eq!(term.wait_exit(DEADLINE), Some(0), "{}", term.text());
}
