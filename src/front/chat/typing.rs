//! Typing while the agent works: the terminal in raw mode for the length of a turn, its keys
//! read on a thread of their own and handed to the turn's screen as [`Typed`] keys, so that a
//! line typed meanwhile can be queued (Enter) or steered into the running turn ([`STEER_KEY`]),
//! and Ctrl-C, which raw mode delivers as a key rather than a signal, still cancels the turn.
//! The permission questions of the turn read their key from the same stream.
//!
//! It decodes keys; what a line does is the screen's and the chat's business.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use rustix::event::{PollFd, PollFlags, Timespec, poll};
use rustix::io::Errno;
use rustix::stdio;
use tokio::sync::mpsc;

use super::term::RawInput;

/// The key that steers the line typed during a turn into it: Ctrl-S ("send now"; raw mode
/// turns flow control off, so it arrives as a key).
pub const STEER_KEY: u8 = 0x13;

/// How often the reading thread looks whether the turn has ended.
const POLL_EVERY: Duration = Duration::from_millis(50);

/// A key typed during a turn.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Typed {
    Char(char),
    Backspace,
    /// Enter (Alt-Enter too): queue the line, or answer a question with its first key.
    Enter,
    /// [`STEER_KEY`]: steer the line into the running turn.
    Steer,
    /// Ctrl-C: cancel the turn (twice: stop the Lisp code).
    Interrupt,
    /// Esc alone: cancels a question.
    Escape,
}

/// The reading thread; dropping it (or [`Typing::stop`]) ends it and restores the terminal.
pub struct Typing {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Typing {
    /// Raw mode on stdin (what was typed ahead kept: it is the start of a line) and the thread
    /// reading it, with the keys it sends; `None` when stdin is not a terminal.
    pub fn start() -> Option<(Typing, mpsc::UnboundedReceiver<Typed>)> {
        let raw = RawInput::start_keeping()?;
        let (tx, rx) = mpsc::unbounded_channel();
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = stop.clone();
        let thread = std::thread::Builder::new()
            .name("oml-chat-typing".into())
            .spawn(move || read_keys(&raw, &stopped, &tx))
            .ok()?;
        Some((
            Typing {
                stop,
                thread: Some(thread),
            },
            rx,
        ))
    }

    /// End the thread and put the terminal back as it was.
    pub fn stop(mut self) {
        self.end();
    }

    fn end(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for Typing {
    fn drop(&mut self) {
        self.end();
    }
}

/// Read stdin until `stop`, sending each key; the terminal is restored when `_raw` drops with
/// the thread.
fn read_keys(_raw: &RawInput, stop: &AtomicBool, tx: &mpsc::UnboundedSender<Typed>) {
    let mut pending = Vec::new();
    let timeout = Timespec::try_from(POLL_EVERY).unwrap_or(Timespec {
        tv_sec: 0,
        tv_nsec: 50_000_000,
    });
    while !stop.load(Ordering::Relaxed) {
        let stdin = stdio::stdin();
        let mut fds = [PollFd::new(&stdin, PollFlags::IN)];
        match poll(&mut fds, Some(&timeout)) {
            Ok(0) | Err(Errno::INTR) => continue,
            Ok(_) => {}
            Err(_) => return,
        }
        let mut buf = [0u8; 256];
        match rustix::io::read(stdin, &mut buf) {
            Err(Errno::INTR | Errno::AGAIN) => continue,
            Ok(0) | Err(_) => return,
            Ok(n) => pending.extend_from_slice(&buf[..n]),
        }
        for key in decode(&mut pending) {
            if tx.send(key).is_err() {
                return;
            }
        }
    }
}

/// The keys in `bytes`, which keeps an incomplete UTF-8 character at its end for the next read.
/// Escape sequences (arrows, function keys) are skipped, as are other control characters.
fn decode(bytes: &mut Vec<u8>) -> Vec<Typed> {
    let mut keys = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        let key = match b {
            3 => Some(Typed::Interrupt),
            STEER_KEY => Some(Typed::Steer),
            b'\r' | b'\n' => Some(Typed::Enter),
            0x7f | 0x08 => Some(Typed::Backspace),
            0x1b => {
                let (key, len) = escape(&bytes[i..]);
                i += len;
                if let Some(key) = key {
                    keys.push(key);
                }
                continue;
            }
            _ if b < 0x20 => None,
            _ => {
                let rest = &bytes[i..];
                let text = match std::str::from_utf8(rest) {
                    Ok(text) => text,
                    Err(e) if e.error_len().is_none() && e.valid_up_to() == 0 => {
                        // An incomplete character: wait for the rest.
                        break;
                    }
                    Err(e) if e.valid_up_to() == 0 => {
                        i += 1;
                        continue;
                    }
                    Err(e) => std::str::from_utf8(&rest[..e.valid_up_to()]).unwrap_or(""),
                };
                let Some(c) = text.chars().next() else {
                    break;
                };
                i += c.len_utf8();
                keys.push(Typed::Char(c));
                continue;
            }
        };
        i += 1;
        if let Some(key) = key {
            keys.push(key);
        }
    }
    bytes.drain(..i);
    keys
}

/// The key an escape sequence at the start of `bytes` makes (Alt-Enter is Enter, Esc alone is
/// Escape, the rest nothing), and its length.
fn escape(bytes: &[u8]) -> (Option<Typed>, usize) {
    match bytes.get(1) {
        None => (Some(Typed::Escape), 1),
        Some(b'\r' | b'\n') => (Some(Typed::Enter), 2),
        Some(b'[' | b'O') => {
            let end = bytes[2..]
                .iter()
                .position(|b| (0x40..=0x7e).contains(b))
                .map_or(bytes.len(), |at| at + 3);
            (None, end)
        }
        Some(_) => (None, 2),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_decoded_and_an_incomplete_character_waits() {
        let mut bytes = b"ab\x7f\r\x13\x03\x1b[A\x1b\rx".to_vec();
        let keys = decode(&mut bytes);
        use Typed::*;
        assert_eq!(
            keys,
            [
                Char('a'),
                Char('b'),
                Backspace,
                Enter,
                Steer,
                Interrupt,
                Enter,
                Char('x')
            ]
        );
        assert!(bytes.is_empty());
        let mut bytes = "é".as_bytes()[..1].to_vec();
        assert!(decode(&mut bytes).is_empty());
        bytes.extend_from_slice(&"é".as_bytes()[1..]);
        assert_eq!(decode(&mut bytes), [Char('é')]);
        let mut bytes = b"\x1b".to_vec();
        assert_eq!(decode(&mut bytes), [Escape]);
    }
}
