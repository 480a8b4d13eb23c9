//! A pseudo-terminal for driving a program as a person would in a real terminal, and reading what
//! it shows through a terminal emulator (`vt100`).
//!
//! [`Term::spawn`] runs a command as the session leader of a new pseudo-terminal of a given size,
//! with `TERM=xterm-256color` unless the command sets `TERM` itself. A thread reads everything the
//! program writes into a [`vt100::Parser`] and keeps the raw bytes too; it answers the cursor
//! position query (`ESC [ 6 n`) as a terminal does, since line editors such as rustyline ask it at
//! each prompt. The test types ([`Term::write`], [`Term::type_line`], [`Term::ctrl_c`], ...),
//! resizes the window ([`Term::resize`], which delivers `SIGWINCH`), and waits for what the screen
//! shows ([`Term::wait_for`], [`Term::wait_until`]) on a condition variable the reader signals
//! after each read, never by sleeping. Dropping a [`Term`] kills the program's process group.
//!
//! Rows that scroll off the top of the main screen are kept as text ([`Term::text`]), because
//! vt100 0.15 cannot show more than one screen of its own scrollback: `set_scrollback` with an
//! offset above the screen's height panics (an overflow in `Grid::visible_rows`, fixed in 0.16).
//! Text erased in place (a cleared screen, a redrawn line) is gone, as it is on a real terminal.

use std::collections::VecDeque;
use std::ffi::OsStr;
use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

/// Generous: a debug binary on a loaded 2-core machine. Only a hang ever reaches it.
pub const DEADLINE: Duration = Duration::from_secs(60);

/// Rows kept once they scroll off the screen: the emulator's scrollback and [`Term::text`]'s.
const SCROLLBACK: usize = 10_000;

/// The cursor position query a terminal answers with `ESC [ row ; col R`.
const CURSOR_QUERY: &[u8] = b"\x1b[6n";

/// A program running on a pseudo-terminal, and the screen it has drawn.
pub struct Term {
    /// The terminal's master side: what is written to it is typed.
    master: File,
    child: Mutex<Child>,
    shared: Arc<Shared>,
}

/// The attributes of one cell of the screen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CellAttrs {
    pub bold: bool,
    pub italic: bool,
    pub underline: bool,
    pub inverse: bool,
    pub fg: vt100::Color,
    pub bg: vt100::Color,
}

impl CellAttrs {
    /// Whether the cell has a foreground or background colour other than the default.
    pub fn coloured(&self) -> bool {
        self.fg != vt100::Color::Default || self.bg != vt100::Color::Default
    }

    fn of(cell: &vt100::Cell) -> CellAttrs {
        CellAttrs {
            bold: cell.bold(),
            italic: cell.italic(),
            underline: cell.underline(),
            inverse: cell.inverse(),
            fg: cell.fgcolor(),
            bg: cell.bgcolor(),
        }
    }
}

/// What the reader thread and the test share.
struct Shared {
    state: Mutex<State>,
    /// Signalled after each read, and when the terminal closes.
    changed: Condvar,
}

struct State {
    parser: vt100::Parser,
    /// The rows that scrolled off the top of the main screen, oldest first.
    history: VecDeque<String>,
    raw: Vec<u8>,
    /// The last bytes seen, to spot a [`CURSOR_QUERY`] split across reads.
    tail: Vec<u8>,
    /// Every descriptor of the terminal's slave side is closed: no more output will come.
    closed: bool,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Term {
    /// Run `cmd` on a new `rows` x `cols` pseudo-terminal: its stdin, stdout and stderr are the
    /// terminal, which is its controlling terminal, and it leads its own session and process group.
    pub fn spawn(mut cmd: Command, rows: u16, cols: u16) -> Term {
        check_size(rows, cols);
        let (master, slave) = open_pty(rows, cols);
        if !cmd.get_envs().any(|(key, _)| key == OsStr::new("TERM")) {
            cmd.env("TERM", "xterm-256color");
        }
        let side = |fd: &OwnedFd| Stdio::from(fd.try_clone().expect("dup the terminal"));
        cmd.stdin(side(&slave))
            .stdout(side(&slave))
            .stderr(side(&slave));
        // SAFETY: the hook runs in the child between fork and exec and makes only the
        // async-signal-safe system calls setsid and ioctl; it allocates nothing and takes no lock.
        unsafe { cmd.pre_exec(take_the_terminal) };
        let child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {:?}: {e}", cmd.get_program()));
        // Only the child holds the slave side now, so the reader sees the end when it ends.
        drop(cmd);
        drop(slave);
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                parser: vt100::Parser::new(rows, cols, SCROLLBACK),
                history: VecDeque::new(),
                raw: Vec::new(),
                tail: Vec::new(),
                closed: false,
            }),
            changed: Condvar::new(),
        });
        let reader = File::from(master.try_clone().expect("dup the terminal"));
        let for_reader = Arc::clone(&shared);
        std::thread::Builder::new()
            .name("pty reader".into())
            .spawn(move || read_terminal(reader, &for_reader))
            .expect("start the terminal's reader");
        Term {
            master: File::from(master),
            child: Mutex::new(child),
            shared,
        }
    }

    /// The program's process id (also its process group and session id).
    pub fn pid(&self) -> u32 {
        self.child
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .id()
    }

    /// Type `bytes` as they are.
    pub fn write(&self, bytes: &[u8]) {
        (&self.master)
            .write_all(bytes)
            .unwrap_or_else(|e| panic!("type {:?}: {e}", String::from_utf8_lossy(bytes)));
    }

    /// Type `text` and press Enter (a carriage return, as a keyboard sends).
    pub fn type_line(&self, text: &str) {
        self.write(format!("{text}\r").as_bytes());
    }

    /// Press Ctrl-C: the terminal sends `SIGINT` to its foreground process group.
    pub fn ctrl_c(&self) {
        self.write(b"\x03");
    }

    /// Press Ctrl-D: end of input for a program reading lines.
    pub fn ctrl_d(&self) {
        self.write(b"\x04");
    }

    /// Resize the window to `rows` x `cols`: the emulator's screen, then the terminal's size,
    /// which sends `SIGWINCH` to its foreground process group.
    pub fn resize(&self, rows: u16, cols: u16) {
        check_size(rows, cols);
        self.shared.lock().parser.set_size(rows, cols);
        let size = window_size(rows, cols);
        // SAFETY: TIOCSWINSZ reads one winsize through the pointer, valid for the whole call.
        let done = unsafe { libc::ioctl(self.master.as_raw_fd(), libc::TIOCSWINSZ, &size) };
        assert_eq!(
            done,
            0,
            "resize the terminal: {}",
            std::io::Error::last_os_error()
        );
    }

    /// Look at the screen as it is now.
    pub fn with_screen<R>(&self, look: impl FnOnce(&vt100::Screen) -> R) -> R {
        look(self.shared.lock().parser.screen())
    }

    /// The text on the screen now, row by row (trailing blanks and empty last rows dropped).
    pub fn screen(&self) -> String {
        self.with_screen(vt100::Screen::contents)
    }

    /// The rows that have scrolled off the top of the screen (the last [`SCROLLBACK`]), then the
    /// screen: the whole session as it would read scrolled back on a terminal.
    pub fn text(&self) -> String {
        self.shared.lock().text()
    }

    /// Every byte the program has written to the terminal so far.
    pub fn raw(&self) -> Vec<u8> {
        self.shared.lock().raw.clone()
    }

    /// Wait until `needle` is shown, on the screen or in the rows scrolled off it; returns the
    /// screen then. Panics with the screen when it is not there within `within`, or when the
    /// terminal closed without it. Text shown earlier counts too: wait for text that is new.
    pub fn wait_for(&self, needle: &str, within: Duration) -> String {
        self.wait(&format!("{needle:?}"), within, |state| {
            state.parser.screen().contents().contains(needle) || state.text().contains(needle)
        })
    }

    /// Wait until `ready` holds of the screen; returns the screen's text then. Panics, saying
    /// `what` was awaited and with the screen, when it does not hold within `within`, or when the
    /// terminal closed before.
    pub fn wait_until(
        &self,
        what: &str,
        within: Duration,
        mut ready: impl FnMut(&vt100::Screen) -> bool,
    ) -> String {
        self.wait(what, within, |state| ready(state.parser.screen()))
    }

    /// The attributes of the cells of the first place `needle` is shown on the screen (a row's
    /// text read left to right, with a blank for an empty cell). Panics when it is not shown.
    pub fn cell_attrs(&self, needle: &str) -> Vec<CellAttrs> {
        let state = self.shared.lock();
        let screen = state.parser.screen();
        let Some((row, cols)) = find_on_screen(screen, needle) else {
            panic!(
                "{needle:?} is not on the screen:\n{}",
                state.report("no such text")
            );
        };
        cols.into_iter()
            .map(|col| CellAttrs::of(screen.cell(row, col).expect("a cell of the screen")))
            .collect()
    }

    /// Whether every cell of `needle` ([`Term::cell_attrs`]) is bold.
    pub fn is_bold(&self, needle: &str) -> bool {
        self.cell_attrs(needle).iter().all(|a| a.bold)
    }

    /// Whether any cell of `needle` ([`Term::cell_attrs`]) has a colour.
    pub fn is_coloured(&self, needle: &str) -> bool {
        self.cell_attrs(needle).iter().any(CellAttrs::coloured)
    }

    /// Whether any cell of the screen has a colour (what `NO_COLOR` must prevent).
    pub fn screen_has_colour(&self) -> bool {
        self.with_screen(|screen| {
            let (rows, cols) = screen.size();
            (0..rows).any(|row| {
                (0..cols).any(|col| {
                    screen
                        .cell(row, col)
                        .is_some_and(|c| CellAttrs::of(c).coloured())
                })
            })
        })
    }

    /// Wait for the program to exit, at most `within`, then for the reader to have taken all it
    /// wrote; its exit code (128 + the signal's number when a signal ended it), or `None` if it
    /// still runs then.
    pub fn wait_exit(&self, within: Duration) -> Option<i32> {
        let deadline = Instant::now() + within;
        let status = loop {
            let mut child = self.child.lock().unwrap_or_else(PoisonError::into_inner);
            if let Some(status) = child.try_wait().expect("try_wait") {
                break status;
            }
            drop(child);
            if Instant::now() >= deadline {
                return None;
            }
            // No event to wait on short of a pidfd: look again shortly.
            std::thread::sleep(Duration::from_millis(10));
        };
        // Its last output may still be in the terminal's buffer; the reader ends once it has it
        // all. A grandchild that kept the terminal open delays this up to the deadline.
        let _ = self.wait_state(deadline.saturating_duration_since(Instant::now()), |s| {
            s.closed
        });
        Some(exit_code(status))
    }

    /// Wait on the reader until `ready` holds; panics with the screen if it does not in time.
    fn wait(&self, what: &str, within: Duration, ready: impl FnMut(&State) -> bool) -> String {
        match self.wait_state(within, ready) {
            Ok(screen) => screen,
            Err(report) => panic!("waited for {what}:\n{report}"),
        }
    }

    /// Wait on the reader until `ready` holds (the screen then), or why not (the report).
    fn wait_state(
        &self,
        within: Duration,
        mut ready: impl FnMut(&State) -> bool,
    ) -> Result<String, String> {
        let deadline = Instant::now() + within;
        let mut state = self.shared.lock();
        loop {
            if ready(&state) {
                return Ok(state.parser.screen().contents());
            }
            if state.closed {
                return Err(state.report("the terminal closed (the program ended) first"));
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(state.report(&format!("not within {within:?}")));
            }
            state = self
                .shared
                .changed
                .wait_timeout(state, left)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
    }
}

impl Drop for Term {
    /// Kill the program and its process group, unless it has already ended and been reaped.
    fn drop(&mut self) {
        let child = self.child.get_mut().unwrap_or_else(PoisonError::into_inner);
        if let Ok(None) = child.try_wait() {
            if let Ok(pid) = i32::try_from(child.id()) {
                // SAFETY: kill takes a process group (negated) and a signal number; no memory. The
                // group is the unreaped child's own, so its id cannot have been reused.
                unsafe { libc::kill(-pid, libc::SIGKILL) };
            }
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl State {
    /// [`Term::text`].
    fn text(&self) -> String {
        let mut text = String::new();
        for row in &self.history {
            text.push_str(row);
            text.push('\n');
        }
        text.push_str(&self.parser.screen().contents());
        text
    }

    /// The screen and the last rows scrolled off it, for a failure message.
    fn report(&self, why: &str) -> String {
        let before: Vec<&str> = self
            .history
            .iter()
            .rev()
            .take(10)
            .rev()
            .map(String::as_str)
            .collect();
        format!(
            "{why}\n--- the last {} rows scrolled off the screen\n{}\n--- the screen\n{}\n---",
            before.len(),
            before.join("\n"),
            self.parser.screen().contents()
        )
    }

    /// Take `bytes` from the program; returns what the terminal answers (to its queries).
    fn feed(&mut self, bytes: &[u8]) -> Vec<u8> {
        self.raw.extend_from_slice(bytes);
        let mut answer = Vec::new();
        for &byte in bytes {
            self.feed_byte(byte);
            self.tail.push(byte);
            if self.tail.len() > CURSOR_QUERY.len() {
                self.tail.remove(0);
            }
            if self.tail == CURSOR_QUERY {
                let (row, col) = self.parser.screen().cursor_position();
                answer.extend_from_slice(format!("\x1b[{};{}R", row + 1, col + 1).as_bytes());
            }
        }
        answer
    }

    /// Process one byte, keeping the rows it scrolls off the main screen (at most a screenful:
    /// vt100 scrolls by at most the screen's height at once).
    ///
    /// vt100 0.15 does not say how many rows are in its scrollback, but a scrollback offset above
    /// zero grows by one with each row scrolled off, so with the offset at 1 beforehand it tells
    /// how many scrolled; while the scrollback is still empty the offset stays 0 and the count is
    /// the scrollback's length, which the offset is clamped to.
    fn feed_byte(&mut self, byte: u8) {
        let alternate = self.parser.screen().alternate_screen();
        self.parser.set_scrollback(1);
        let marked = self.parser.screen().scrollback() == 1;
        self.parser.process(&[byte]);
        let scrolled = if alternate || self.parser.screen().alternate_screen() {
            0 // the alternate screen has no scrollback; the main one is unchanged meanwhile
        } else if marked {
            self.parser.screen().scrollback() - 1
        } else {
            self.parser.set_scrollback(usize::MAX);
            self.parser.screen().scrollback()
        };
        let (rows, cols) = self.parser.screen().size();
        let scrolled = scrolled.min(usize::from(rows));
        if scrolled > 0 {
            // The newest `scrolled` rows of the scrollback are now the top of the view.
            self.parser.set_scrollback(scrolled);
            let rows: Vec<String> = self.parser.screen().rows(0, cols).take(scrolled).collect();
            self.history.extend(rows);
            while self.history.len() > SCROLLBACK {
                self.history.pop_front();
            }
        }
        self.parser.set_scrollback(0);
    }
}

/// The reader thread: feed the program's output to the emulator until the terminal closes (every
/// slave descriptor closed: the read fails with EIO), answering its queries.
fn read_terminal(mut master: File, shared: &Shared) {
    let mut buf = [0u8; 4096];
    loop {
        let n = match master.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => break,
        };
        let answer = shared.lock().feed(&buf[..n]);
        shared.changed.notify_all();
        if !answer.is_empty() {
            // The program may have ended meanwhile; then nobody is asking.
            let _ = master.write_all(&answer);
        }
    }
    shared.lock().closed = true;
    shared.changed.notify_all();
}

/// A new pseudo-terminal of the given size: (master, slave), both close-on-exec (the child gets
/// the slave as its stdio through `dup2`, which clears the flag).
pub fn open_pty(rows: u16, cols: u16) -> (OwnedFd, OwnedFd) {
    let size = window_size(rows, cols);
    let (mut master, mut slave) = (-1, -1);
    // SAFETY: openpty writes one descriptor through each of the two valid pointers; the name and
    // termios pointers may be null (default settings), and it only reads the winsize.
    let done = unsafe {
        libc::openpty(
            &mut master,
            &mut slave,
            std::ptr::null_mut(),
            std::ptr::null(),
            &size,
        )
    };
    assert_eq!(done, 0, "openpty: {}", std::io::Error::last_os_error());
    // SAFETY: openpty succeeded, so both descriptors are open, new and ours alone.
    let fds = unsafe { (OwnedFd::from_raw_fd(master), OwnedFd::from_raw_fd(slave)) };
    for fd in [&fds.0, &fds.1] {
        // SAFETY: F_SETFD on a descriptor we own, with an integer flag argument; no memory. (A
        // child another test forks in between still inherits them: openpty has no O_CLOEXEC.)
        let done = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_SETFD, libc::FD_CLOEXEC) };
        assert_eq!(done, 0, "fcntl: {}", std::io::Error::last_os_error());
    }
    fds
}

/// In the child before exec: lead a new session (so no controlling terminal), then make the
/// terminal on stdin (the slave, already `dup2`'d there) the controlling one.
pub fn take_the_terminal() -> std::io::Result<()> {
    // SAFETY: setsid takes no arguments and touches no memory of ours.
    if unsafe { libc::setsid() } < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: TIOCSCTTY takes an integer argument (0: do not steal it from another session).
    if unsafe { libc::ioctl(0, libc::TIOCSCTTY, 0) } < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// A window the emulator can be: not empty, and shorter than [`SCROLLBACK`] (see
/// [`State::feed_byte`]).
fn check_size(rows: u16, cols: u16) {
    assert!(
        rows > 0 && cols > 0 && usize::from(rows) < SCROLLBACK,
        "no terminal is {rows} x {cols}"
    );
}

fn window_size(rows: u16, cols: u16) -> libc::winsize {
    libc::winsize {
        ws_row: rows,
        ws_col: cols,
        ws_xpixel: 0,
        ws_ypixel: 0,
    }
}

/// The exit code, or 128 + the signal's number, as a shell reports it.
fn exit_code(status: ExitStatus) -> i32 {
    match (status.code(), status.signal()) {
        (Some(code), _) => code,
        (None, Some(signal)) => 128 + signal,
        (None, None) => panic!("neither exited nor signalled: {status:?}"),
    }
}

/// The row and the columns of the cells of the first place `needle` is shown on `screen`.
fn find_on_screen(screen: &vt100::Screen, needle: &str) -> Option<(u16, Vec<u16>)> {
    let (rows, cols) = screen.size();
    for row in 0..rows {
        let mut line = String::new();
        // Where each cell's text starts in `line`, and its column.
        let mut starts: Vec<(usize, u16)> = Vec::new();
        for col in 0..cols {
            let Some(cell) = screen.cell(row, col) else {
                break;
            };
            if cell.is_wide_continuation() {
                continue;
            }
            starts.push((line.len(), col));
            if cell.has_contents() {
                line.push_str(&cell.contents());
            } else {
                line.push(' ');
            }
        }
        if let Some(at) = line.find(needle) {
            let end = at + needle.len();
            let cells = starts
                .iter()
                .filter(|(start, _)| (at..end).contains(start))
                .map(|&(_, col)| col)
                .collect();
            return Some((row, cells));
        }
    }
    None
}
