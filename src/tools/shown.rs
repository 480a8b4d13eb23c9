//! Text as a terminal shows it: what a command wrote to a pseudo-terminal, with the line ends
//! and carriage returns a terminal acts on applied, so the model reads what the user saw in the
//! editor's terminal and not the control characters behind it.
//!
//! A pty turns every `\n` into `\r\n`, and progress bars rewrite their line after a bare `\r`
//! (`10%\r20%\r100%`). Each line is replayed as a terminal would: a `\r` moves back to the
//! start of the line and what follows overwrites what was there. Escape sequences are kept as
//! they are. A pure function; it knows nothing of where the text came from.

/// `text` as a terminal would show it (see the module doc).
pub fn as_shown(text: &str) -> String {
    if !text.contains('\r') {
        return text.to_owned();
    }
    let mut out = String::with_capacity(text.len());
    for (i, line) in text.split('\n').enumerate() {
        if i > 0 {
            out.push('\n');
        }
        out.push_str(&overwrite(line));
    }
    out
}

/// One line (no `\n`) with each `\r` sending the cursor back to its start.
fn overwrite(line: &str) -> String {
    if !line.contains('\r') {
        return line.to_owned();
    }
    let mut cells: Vec<char> = Vec::with_capacity(line.len());
    let mut cursor = 0;
    for c in line.chars() {
        if c == '\r' {
            cursor = 0;
        } else if cursor < cells.len() {
            cells[cursor] = c;
            cursor += 1;
        } else {
            cells.push(c);
            cursor += 1;
        }
    }
    cells.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_reads_as_a_terminal_shows_it() {
        let cases = [
            ("plain\ntext", "plain\ntext"),
            ("early\r\nlate", "early\nlate"),
            ("a\r\nb\r\n", "a\nb\n"),
            ("10%\r20%\r100%\ndone", "100%\ndone"),
            ("downloading\rok", "okwnloading"),
            ("progress 50%\r            \rfinished", "finished    "),
            ("\r", ""),
            ("é\rx", "x"),
        ];
        for (raw, shown) in cases {
            assert_eq!(as_shown(raw), shown, "{raw:?}");
        }
    }
}
