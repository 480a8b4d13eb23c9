//! The chat's screen: inline drawing on stdout that keeps the terminal's scrollback usable. It
//! owns the few places drawn in place — the spinner on the current line, and the live tail of a
//! running command under its card — and erases them before anything else is written.
//!
//! Without cursor movement (`TERM=dumb`, not a terminal) nothing is redrawn: no spinner, no tail,
//! and a card is simply printed again when it ends. It knows nothing of events or Lisp.

use std::io::Write as _;
use std::time::Duration;

use super::term::Caps;

/// The frames of the spinner shown while waiting.
const SPINNER_FRAMES: [&str; 10] = ["⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"];

/// Bytes of drawing gathered before they are written in one call.
const FLUSH_BYTES: usize = 64 * 1024;

/// The screen, and what is drawn in place on it.
pub struct Screen {
    caps: Caps,
    width: usize,
    buf: Vec<u8>,
    /// The cursor is at the start of a line.
    at_line_start: bool,
    spinner: bool,
    /// Rows of live tail drawn above the cursor (each one row: lines are cut to the width).
    tail_rows: usize,
    /// A card's header is the line above the tail, so it can be rewritten when the card ends.
    header_live: bool,
}

impl Screen {
    pub fn new(caps: Caps, width: usize) -> Screen {
        Screen {
            caps,
            width: width.max(20),
            buf: Vec::with_capacity(FLUSH_BYTES),
            at_line_start: true,
            spinner: false,
            tail_rows: 0,
            header_live: false,
        }
    }

    pub fn caps(&self) -> Caps {
        self.caps
    }

    pub fn set_width(&mut self, width: usize) {
        self.width = width.max(20);
    }

    /// Write text as it comes (the answer): it may end mid-line.
    pub fn text(&mut self, text: &str) {
        if text.is_empty() {
            return;
        }
        self.settle();
        self.buf.extend_from_slice(text.as_bytes());
        self.at_line_start = text.ends_with('\n');
        if self.buf.len() >= FLUSH_BYTES {
            self.flush();
        }
    }

    /// Write `text` as whole lines, starting on a fresh line.
    pub fn lines(&mut self, text: &str) {
        self.settle();
        if !self.at_line_start {
            self.buf.push(b'\n');
        }
        self.buf.extend_from_slice(text.as_bytes());
        if !text.ends_with('\n') {
            self.buf.push(b'\n');
        }
        self.at_line_start = true;
    }

    /// Write a card's header line: it may be rewritten by [`Screen::end_card`] while nothing
    /// else is written after it.
    pub fn card_header(&mut self, line: &str) {
        let fitted = fit(line, self.width - 1);
        self.lines(&fitted);
        self.header_live = self.caps.cursor;
    }

    /// Draw the live tail of the running card: the last lines of its output, dimmed, each cut
    /// to one row. Only with cursor movement, right under the card's header.
    pub fn tail(&mut self, lines: &[String]) {
        if !self.caps.cursor || !self.header_live {
            return;
        }
        self.clear_spinner();
        self.erase_tail();
        for line in lines {
            let cut = fit(&format!("  │ {line}"), self.width - 1);
            if self.caps.color {
                self.buf.extend_from_slice(b"\x1b[2m");
            }
            self.buf.extend_from_slice(cut.as_bytes());
            if self.caps.color {
                self.buf.extend_from_slice(b"\x1b[0m");
            }
            self.buf.push(b'\n');
        }
        self.tail_rows = lines.len();
    }

    /// End the running card: its final header (rewritten in place when it is still the last
    /// thing drawn) and its body, each line cut to the width like the header and the tail, so
    /// that a card keeps one row per line on a narrow terminal.
    pub fn end_card(&mut self, header: &str, body: Option<&str>) {
        self.clear_spinner();
        if self.header_live {
            self.erase_tail();
            // Up to the header's row, and clear it.
            self.buf.extend_from_slice(b"\x1b[1A\r\x1b[2K");
            self.at_line_start = true;
        }
        self.header_live = false;
        let fitted = fit(header, self.width - 1);
        self.lines(&fitted);
        if let Some(body) = body.filter(|b| !b.is_empty()) {
            let rows: Vec<String> = body.lines().map(|l| fit(l, self.width - 1)).collect();
            self.lines(&rows.join("\n"));
        }
    }

    /// Show the spinner on the current line (only at a line's start, with cursor movement),
    /// with `typed`, the line typed while the agent works, when there is one.
    pub fn spin(&mut self, frame: usize, elapsed: Duration, label: &str, typed: &str) {
        if !self.caps.cursor || !self.at_line_start {
            return;
        }
        let spinner = SPINNER_FRAMES[frame % SPINNER_FRAMES.len()];
        let secs = elapsed.as_secs();
        // What is typed meanwhile shows here, with what its keys do.
        let line = if typed.is_empty() {
            format!("{spinner} {label} {secs}s · Ctrl-C interrupts")
        } else {
            format!("{spinner} {label} {secs}s · Enter queues, Ctrl-S steers › {typed}")
        };
        let line = fit(&line, self.width - 1);
        self.buf.extend_from_slice(b"\r\x1b[2K");
        if self.caps.color {
            self.buf.extend_from_slice(b"\x1b[2m");
        }
        self.buf.extend_from_slice(line.as_bytes());
        if self.caps.color {
            self.buf.extend_from_slice(b"\x1b[0m");
        }
        self.spinner = true;
        self.flush();
    }

    /// A line drawn in place on the current row, replaced by the next one (the folded
    /// reasoning); `None` clears it.
    pub fn status_row(&mut self, line: Option<&str>) {
        if !self.caps.cursor {
            return;
        }
        self.clear_spinner();
        self.header_live = false;
        if !self.at_line_start {
            self.buf.push(b'\n');
            self.at_line_start = true;
        }
        self.buf.extend_from_slice(b"\r\x1b[2K");
        if let Some(line) = line {
            self.buf
                .extend_from_slice(fit(line, self.width - 1).as_bytes());
            self.spinner = true;
        }
    }

    /// Erase what is drawn in place and write everything out.
    pub fn finish(&mut self) {
        self.clear_spinner();
        if !self.at_line_start {
            self.buf.push(b'\n');
            self.at_line_start = true;
        }
        self.tail_rows = 0;
        self.header_live = false;
        self.flush();
    }

    pub fn flush(&mut self) {
        if self.buf.is_empty() {
            return;
        }
        let mut out = std::io::stdout().lock();
        // A closed stdout is not worth reporting mid-answer.
        let _ = out.write_all(&self.buf);
        let _ = out.flush();
        self.buf.clear();
    }

    /// Before ordinary output: the spinner goes, and a card's header and tail are no longer the
    /// last thing drawn.
    fn settle(&mut self) {
        self.clear_spinner();
        self.tail_rows = 0;
        self.header_live = false;
    }

    fn clear_spinner(&mut self) {
        if self.spinner {
            self.buf.extend_from_slice(b"\r\x1b[2K");
            self.spinner = false;
        }
    }

    /// Up to the first row of the tail (cursor up, then to the row's start: VT100's own
    /// sequences, where `ESC [ n F` is not known to every terminal) and erase to the end.
    fn erase_tail(&mut self) {
        if self.tail_rows > 0 {
            self.buf
                .extend_from_slice(format!("\x1b[{}A\r\x1b[J", self.tail_rows).as_bytes());
            self.tail_rows = 0;
        }
    }
}

/// `line` cut to `width` visible characters (SGR sequences take no room and are kept), with
/// `…` where it was cut and, when it had styles, the styles reset.
pub fn fit(line: &str, width: usize) -> String {
    let line = line.lines().next().unwrap_or("");
    let styled = line.contains('\x1b');
    let mut visible = 0;
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\x1b' {
            out.push(c);
            for c in chars.by_ref() {
                out.push(c);
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
            continue;
        }
        if visible + 1 == width && more_visible(&chars) {
            out.push('…');
            if styled {
                out.push_str("\x1b[0m");
            }
            return out;
        }
        out.push(c);
        visible += 1;
    }
    out
}

/// Whether visible characters remain (not only escape sequences).
fn more_visible(chars: &std::iter::Peekable<std::str::Chars<'_>>) -> bool {
    let mut rest = chars.clone();
    while let Some(c) = rest.next() {
        if c == '\x1b' {
            for c in rest.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            return true;
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::fit;

    #[test]
    fn fit_cuts_visible_characters_and_keeps_styles() {
        assert_eq!(fit("short", 10), "short");
        assert_eq!(fit("0123456789abc", 10), "012345678…");
        assert_eq!(fit("\x1b[1mbold\x1b[0m", 4), "\x1b[1mbold\x1b[0m");
        assert_eq!(fit("\x1b[1mbolder\x1b[0m", 4), "\x1b[1mbol…\x1b[0m");
        assert_eq!(fit("two\nlines", 10), "two");
        assert_eq!(fit("exactly10!", 10), "exactly10!");
    }
}
