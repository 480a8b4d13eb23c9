//! What a line typed in the chat is, decided once: a Fennel form (it starts with `(`), a slash
//! command (`/name`), a chat command (`,name`), or a prompt for the agent; when an input needs
//! more lines (an unbalanced form, a trailing `\`); and the `@path` mentions that attach a file
//! to a prompt.
//!
//! It knows nothing of the terminal or of how each kind is run.

use std::path::Path;

use crate::lisp::repl::forms_complete;

/// Bytes of one file an `@path` mention attaches at most; a larger file is named, not pasted.
pub const MENTION_MAX_BYTES: usize = 256 * 1024;

/// One input, parsed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Input {
    /// Nothing but blanks.
    Empty,
    /// Fennel source, evaluated in the live image.
    Lisp(String),
    /// A chat command: `,help`, `,exit`, ... (`name`, then the rest of the line).
    Chat { name: String, args: String },
    /// Text for the agent; a slash command when it starts with `/`.
    Prompt(String),
}

/// Classify a complete input (continuation lines already joined by [`join`]).
pub fn classify(text: &str) -> Input {
    let trimmed = text.trim();
    if trimmed.is_empty() {
        return Input::Empty;
    }
    if trimmed.starts_with('(') {
        return Input::Lisp(trimmed.to_owned());
    }
    if let Some(rest) = trimmed.strip_prefix(',')
        && rest.starts_with(|c: char| c.is_ascii_alphabetic())
    {
        let (name, args) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
        return Input::Chat {
            name: name.to_owned(),
            args: args.trim().to_owned(),
        };
    }
    Input::Prompt(text.trim_end_matches('\n').to_owned())
}

/// Whether `text` (the lines read so far) needs another line: a form that does not balance yet,
/// or a last line ending in `\`.
pub fn needs_more(text: &str) -> bool {
    let text = text.trim_end_matches('\n');
    if text.ends_with('\\') && !text.ends_with("\\\\") {
        return true;
    }
    let trimmed = text.trim_start();
    trimmed.starts_with('(') && !forms_complete(trimmed)
}

/// The input the lines read make: each `\` that ended a line is dropped (its newline stays).
pub fn join(text: &str) -> String {
    text.lines()
        .map(|line| line.strip_suffix('\\').unwrap_or(line))
        .collect::<Vec<_>>()
        .join("\n")
}

/// A file an `@path` mention attached, or why it did not.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mention {
    pub path: String,
    /// `Ok(lines)` when attached, else the reason it was not.
    pub outcome: Result<usize, String>,
}

/// The prompt with the file of each `@path` mention (relative to `cwd`) attached after it, as
/// `<file path="…">…</file>` blocks, and what happened to each mention. A word that names no
/// file stays text and is not reported.
pub fn attach_mentions(prompt: &str, cwd: &Path) -> (String, Vec<Mention>) {
    let mut attached = String::new();
    let mut mentions = Vec::new();
    for word in prompt.split_whitespace() {
        let Some(path) = word.strip_prefix('@') else {
            continue;
        };
        let path = path.trim_end_matches([',', '.', ';', ':', ')', '?', '!']);
        if path.is_empty() || mentions.iter().any(|m: &Mention| m.path == path) {
            continue;
        }
        let full = cwd.join(path);
        if !full.is_file() {
            continue;
        }
        let outcome = read_mention(&full).map(|text| {
            attached.push_str(&format!("\n\n<file path=\"{path}\">\n{text}"));
            if !text.ends_with('\n') {
                attached.push('\n');
            }
            attached.push_str("</file>");
            text.lines().count()
        });
        mentions.push(Mention {
            path: path.to_owned(),
            outcome,
        });
    }
    (format!("{prompt}{attached}"), mentions)
}

fn read_mention(path: &Path) -> Result<String, String> {
    let size = std::fs::metadata(path).map_err(|e| e.to_string())?.len();
    if size > MENTION_MAX_BYTES as u64 {
        return Err(format!(
            "{size} bytes, over the {MENTION_MAX_BYTES}-byte limit; the agent can read it"
        ));
    }
    let bytes = crate::regular::read_regular(path).map_err(|e| e.to_string())?;
    if bytes.contains(&0) {
        return Err("a binary file".to_owned());
    }
    String::from_utf8(bytes).map_err(|_| "not UTF-8 text".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inputs_are_classified_by_their_first_character() {
        let chat = |name: &str, args: &str| Input::Chat {
            name: name.into(),
            args: args.into(),
        };
        let cases = [
            ("", Input::Empty),
            ("   \n", Input::Empty),
            ("(+ 1 2)", Input::Lisp("(+ 1 2)".into())),
            ("  (print 1)\n", Input::Lisp("(print 1)".into())),
            ("/model gpt", Input::Prompt("/model gpt".into())),
            (",help", chat("help", "")),
            (",doc agent.prompt", chat("doc", "agent.prompt")),
            (", not a command", Input::Prompt(", not a command".into())),
            (
                "explain this repo",
                Input::Prompt("explain this repo".into()),
            ),
            ("why (this)?", Input::Prompt("why (this)?".into())),
        ];
        for (text, want) in cases {
            assert_eq!(classify(text), want, "{text:?}");
        }
    }

    #[test]
    fn forms_and_backslashes_ask_for_more_lines() {
        let cases = [
            ("(+ 1", true),
            ("(+ 1\n 2)", false),
            ("first line \\", true),
            ("a literal \\\\", false),
            ("why (this", false),
            ("done", false),
        ];
        for (text, want) in cases {
            assert_eq!(needs_more(text), want, "{text:?}");
        }
        assert_eq!(join("one \\\ntwo"), "one \ntwo");
    }

    #[test]
    fn mentions_attach_files_that_exist() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("a.txt"), "alpha\nbeta\n").expect("write");
        std::fs::write(dir.path().join("bin"), b"\0\x01").expect("write");
        let (text, mentions) = attach_mentions("look at @a.txt, @bin and @missing", dir.path());
        assert_eq!(
            text,
            "look at @a.txt, @bin and @missing\n\n<file path=\"a.txt\">\nalpha\nbeta\n</file>"
        );
        assert_eq!(mentions.len(), 2);
        assert_eq!(mentions[0].outcome, Ok(2));
        assert_eq!(mentions[1].outcome, Err("a binary file".into()));
    }
}
