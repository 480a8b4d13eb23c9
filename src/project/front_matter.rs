//! YAML front matter of markdown files (`SKILL.md`, markdown commands): a first line `---`, YAML,
//! a line `---`, then the body. Parsed with a real YAML parser ([`yaml_serde`]); an error names
//! its line in the file. It knows nothing of what the fields mean.

use serde::de::DeserializeOwned;

/// Bytes of a markdown file read at most: a skill or a command is instructions, not data.
pub const MAX_FILE_BYTES: u64 = 1 << 20;

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
    fn errors_name_the_line_of_the_file() {
        let e = split::<Map>("---\nname: a\ndescription: [unclosed\n---\n").unwrap_err();
        assert!(e.line >= 3, "{e}");
        let e = split::<Map>("---\nname: a\n").unwrap_err();
        assert_eq!(e.line, 1);
    }
}
