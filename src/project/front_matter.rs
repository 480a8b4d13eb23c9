//! YAML front matter of markdown files (`SKILL.md`, markdown commands): a first line `---`, YAML,
//! a line `---`, then the body. Parsed with a real YAML parser ([`yaml_serde`]); an error names
//! its line in the file. It knows nothing of what the fields mean.
//!
//! Such files come from any repository, and the parser's time grows faster than the square of
//! the nesting of flow collections (`[[[[…` or `{a: {a: …`: 40,000 levels take seconds, 80,000
//! most of a minute, and every session's start-up reads them). So before parsing, a front matter
//! is refused when it is over [`MAX_FRONT_MATTER_BYTES`] or holds more than
//! [`MAX_FLOW_OPENERS`] `[` and `{` (which bounds the nesting, wherever they are); together they
//! bound the parse to a few milliseconds. Block nesting (indentation, `- - -`) costs linear time.

use serde::de::DeserializeOwned;

/// Bytes of a markdown file read at most: a skill or a command is instructions, not data.
pub const MAX_FILE_BYTES: u64 = 1 << 20;

/// Bytes of one front matter (between its `---` lines) parsed at most: names, a description,
/// a few settings.
pub const MAX_FRONT_MATTER_BYTES: usize = 64 * 1024;

/// `[` and `{` one front matter may hold, counted anywhere (a quoted one too): more than any
/// front matter written by hand, and few enough that no nesting of flow collections is costly.
pub const MAX_FLOW_OPENERS: usize = 256;

/// A front matter that could not be read, with the 1-based line of the file it is about.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {message}")]
pub struct FrontMatterError {
    pub line: usize,
    pub message: String,
}

/// The front matter of `text` read as `T` (an empty `T`, from `{}`, when there is none), and
/// the body after it.
pub fn split<T: DeserializeOwned>(text: &str) -> Result<(T, &str), FrontMatterError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let Some(rest) = text
        .strip_prefix("---\n")
        .or_else(|| text.strip_prefix("---\r\n"))
    else {
        return Ok((from_yaml("{}", 1)?, text));
    };
    let (yaml, body) = match find_end(rest) {
        Some((end, after)) => (&rest[..end], &rest[after..]),
        None => {
            return Err(FrontMatterError {
                line: 1,
                message: "the front matter that starts here has no closing `---` line".into(),
            });
        }
    };
    bounded(yaml)?;
    let yaml = if yaml.trim().is_empty() { "{}" } else { yaml };
    Ok((from_yaml(yaml, 2)?, body))
}

/// Where the closing `---` line of a front matter starts in `rest`, and where the body begins.
fn find_end(rest: &str) -> Option<(usize, usize)> {
    let mut at = 0;
    for line in rest.split_inclusive('\n') {
        if line.trim_end() == "---" {
            return Some((at, at + line.len()));
        }
        at += line.len();
    }
    None
}

/// Why the front matter `yaml` (which starts on the file's line 2) is not parsed at all, if it
/// is over [`MAX_FRONT_MATTER_BYTES`] or [`MAX_FLOW_OPENERS`].
fn bounded(yaml: &str) -> Result<(), FrontMatterError> {
    if yaml.len() > MAX_FRONT_MATTER_BYTES {
        return Err(FrontMatterError {
            line: 1,
            message: format!(
                "not read: the front matter is {} bytes, over {MAX_FRONT_MATTER_BYTES}",
                yaml.len()
            ),
        });
    }
    let opener = memchr::memchr2_iter(b'[', b'{', yaml.as_bytes()).nth(MAX_FLOW_OPENERS);
    match opener {
        Some(at) => Err(FrontMatterError {
            line: 2 + memchr::memchr_iter(b'\n', &yaml.as_bytes()[..at]).count(),
            message: format!(
                "not read: the front matter holds more than {MAX_FLOW_OPENERS} `[` and `{{` \
                 (deeply nested lists or maps take the YAML parser too long)"
            ),
        }),
        None => Ok(()),
    }
}

/// `yaml` read as `T`; an error's line counted from `first_line` of the file.
fn from_yaml<T: DeserializeOwned>(yaml: &str, first_line: usize) -> Result<T, FrontMatterError> {
    yaml_serde::from_str(yaml).map_err(|e| FrontMatterError {
        line: e
            .location()
            .map_or(first_line, |l| first_line + l.line() - 1),
        message: e.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    type Map = BTreeMap<String, yaml_serde::Value>;

    #[test]
    fn front_matter_variants() {
        let (m, body) = split::<Map>("---\nname: a\ndescription: \"b: c\"\n---\nBody\n").unwrap();
        assert_eq!(m["description"].as_str(), Some("b: c"));
        assert_eq!(body, "Body\n");
        let (m, body) = split::<Map>("No front matter\n").unwrap();
        assert!(m.is_empty());
        assert_eq!(body, "No front matter\n");
        let (_, body) = split::<Map>("---\r\nname: a\r\n---\r\nBody").unwrap();
        assert_eq!(body, "Body");
        let (m, _) = split::<Map>("---\ndescription: >\n  folded\n  text\n---\n").unwrap();
        assert_eq!(m["description"].as_str(), Some("folded text\n"));
        let (m, _) = split::<Map>("---\n---\nx").unwrap();
        assert!(m.is_empty());
    }

    #[test]
    fn a_front_matter_too_large_or_too_nested_is_refused_before_parsing() {
        let deep = format!(
            "---\nname: a\nx: {}{}\n---\n",
            "[".repeat(10_000),
            "]".repeat(10_000)
        );
        let e = split::<Map>(&deep).unwrap_err();
        assert_eq!(e.line, 3, "{e}");
        assert!(e.message.contains("more than 256"), "{e}");
        let nested_maps = format!("---\nx: {}1{}\n---\n", "{a: ".repeat(300), "}".repeat(300));
        assert!(split::<Map>(&nested_maps).is_err());
        let big = format!(
            "---\ndescription: {}\n---\n",
            "x".repeat(MAX_FRONT_MATTER_BYTES)
        );
        let e = split::<Map>(&big).unwrap_err();
        assert_eq!(e.line, 1, "{e}");
        let fine = format!("---\nx: {}1{}\n---\n", "[".repeat(20), "]".repeat(20));
        assert!(split::<Map>(&fine).is_ok());
    }

    #[test]
    fn errors_name_the_line_of_the_file() {
        let e = split::<Map>("---\nname: a\ndescription: [unclosed\n---\n").unwrap_err();
        assert!(e.line >= 3, "{e}");
        let e = split::<Map>("---\nname: a\n").unwrap_err();
        assert_eq!(e.line, 1);
    }
}
