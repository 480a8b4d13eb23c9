//! Text that others wrote, made safe to show on a terminal: a repository's skill and command
//! descriptions, an agent's answer, a model's reply. An escape sequence in such text would drive
//! the terminal (`ESC [2J` wipes the screen, an OSC sequence sets the window title, writes the
//! clipboard or makes a link that says one thing and opens another), and a carriage return or a
//! backspace can hide what was written before it on the line. [`printable`] keeps the text and
//! the line breaks and tabs, and drops the rest: whole escape sequences (CSI, OSC, and the
//! two-character ones), every other C0 control character, DEL and the C1 controls (which some
//! terminals read as `ESC [`). Used wherever such text is written for a person: the chat, print
//! mode's text output and `oml ask`'s. Knows nothing of where the text came from.

use std::borrow::Cow;

/// `text` without escape sequences or control characters, except `\n` and `\t` (borrowed when
/// it holds none).
pub fn printable(text: &str) -> Cow<'_, str> {
    if is_printable(text) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\n' | '\t' => out.push(c),
            '\x1b' => skip_escape(&mut chars),
            c if c.is_control() => {}
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// Whether [`printable`] would change `text` (a cheap test for the common case).
pub fn is_printable(text: &str) -> bool {
    !text
        .chars()
        .any(|c| c.is_control() && c != '\n' && c != '\t')
}

/// Skip the rest of an escape sequence whose ESC was just read: CSI (`ESC [` … final byte),
/// OSC, DCS, SOS, PM and APC (`ESC ]`, `ESC P`, `ESC X`, `ESC ^`, `ESC _` … BEL or `ESC \`),
/// or one more character.
fn skip_escape(chars: &mut std::iter::Peekable<std::str::Chars<'_>>) {
    match chars.next() {
        Some('[') => {
            for c in chars.by_ref() {
                if ('\x40'..='\x7e').contains(&c) {
                    break;
                }
            }
        }
        Some(']' | 'P' | 'X' | '^' | '_') => {
            while let Some(c) = chars.next() {
                if c == '\x07' || (c == '\x1b' && chars.next_if_eq(&'\\').is_some()) {
                    break;
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn printable_text_cannot_drive_the_terminal() {
        let cases = [
            ("plain\ntext", "plain\ntext"),
            ("\x1b[31mred\x1b[0m", "red"),
            ("a\x1b]0;title\x07b", "ab"),
            ("a\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\b", "alinkb"),
            ("a\x1bPq#0;1\x1b\\b", "ab"),
            ("bell\x07 back\x08 cr\r", "bell back cr"),
            ("tab\there", "tab\there"),
            ("c1\u{9b}2J del\x7f", "c12J del"),
            ("\x1b[2J\x1b[Hwiped", "wiped"),
            ("unfinished \x1b[", "unfinished "),
        ];
        for (input, want) in cases {
            assert_eq!(printable(input), want, "{input:?}");
            assert_eq!(is_printable(input), input == want, "{input:?}");
        }
    }
}
