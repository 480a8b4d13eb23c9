//! Secrets taken out of what a session stores: each known secret value (an API key, a variable
//! the sandbox keeps from commands) is replaced, wherever it occurs in a line about to be
//! written, by `[redacted NAME]`, so a key the user evaluated or a tool read never reaches the
//! session file.
//!
//! It works on the encoded JSON line, so every field of every entry is covered, and looks for
//! each value as JSON writes it inside a string. It knows nothing of where the secrets come
//! from: `crate::bind::session` gathers them from the settings and the environment.

use memchr::memmem;

/// Values shorter than this many bytes are not redacted: they would match ordinary text
/// (`KEYTIMEOUT=1`), and a secret that short protects little. Longer values are always
/// redacted.
pub const REDACT_MIN_BYTES: usize = 8;

/// The secrets to replace, each as JSON writes it inside a string, with its replacement.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Redactions {
    /// (the value escaped, `[redacted NAME]` escaped), longest value first, so a secret that
    /// contains another is replaced whole.
    pairs: Vec<(String, String)>,
}

impl Redactions {
    /// The redactions of `secrets`, each a (value, name) pair; values shorter than
    /// [`REDACT_MIN_BYTES`] are left out, and a value named twice is replaced by its first name.
    pub fn new(secrets: impl IntoIterator<Item = (String, String)>) -> Redactions {
        let mut pairs: Vec<(String, String)> = Vec::new();
        for (value, name) in secrets {
            if value.len() < REDACT_MIN_BYTES {
                continue;
            }
            let value = escaped(&value);
            if pairs.iter().any(|(v, _)| *v == value) {
                continue;
            }
            pairs.push((value, escaped(&format!("[redacted {name}]"))));
        }
        pairs.sort_by_key(|(v, _)| std::cmp::Reverse(v.len()));
        Redactions { pairs }
    }

    /// Whether there is nothing to redact.
    pub fn is_empty(&self) -> bool {
        self.pairs.is_empty()
    }

    /// `line` with every secret replaced; the line itself when it holds none (no copy).
    pub fn apply(&self, mut line: Vec<u8>) -> Vec<u8> {
        for (value, replacement) in &self.pairs {
            let finder = memmem::Finder::new(value.as_bytes());
            if finder.find(&line).is_none() {
                continue;
            }
            let mut out = Vec::with_capacity(line.len());
            let mut rest = 0;
            for at in finder.find_iter(&line) {
                out.extend_from_slice(&line[rest..at]);
                out.extend_from_slice(replacement.as_bytes());
                rest = at + value.len();
            }
            out.extend_from_slice(&line[rest..]);
            line = out;
        }
        line
    }
}

/// `text` as JSON writes it between the quotes of a string.
fn escaped(text: &str) -> String {
    let quoted = serde_json::Value::String(text.to_owned()).to_string();
    quoted[1..quoted.len() - 1].to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_occurrence_of_a_secret_is_replaced_by_its_name() {
        let r = Redactions::new([
            ("sk-secret-123".to_owned(), "OPENAI_API_KEY".to_owned()),
            ("pa\"ss\\word!".to_owned(), "DB_PASSWORD".to_owned()),
            ("short".to_owned(), "TINY_TOKEN".to_owned()),
        ]);
        let line = serde_json::json!({"a": "key sk-secret-123 and sk-secret-123",
                                      "b": "pa\"ss\\word!", "c": "short"})
        .to_string();
        let out = String::from_utf8(r.apply(line.into_bytes())).unwrap();
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(
            v["a"],
            "key [redacted OPENAI_API_KEY] and [redacted OPENAI_API_KEY]"
        );
        assert_eq!(v["b"], "[redacted DB_PASSWORD]");
        assert_eq!(v["c"], "short", "too short to redact");
    }

    #[test]
    fn a_secret_that_contains_another_is_replaced_whole() {
        let r = Redactions::new([
            ("abcdefgh".to_owned(), "INNER_KEY".to_owned()),
            ("xx-abcdefgh-yy".to_owned(), "OUTER_KEY".to_owned()),
        ]);
        let out = r.apply(b"\"xx-abcdefgh-yy abcdefgh\"".to_vec());
        assert_eq!(
            out,
            b"\"[redacted OUTER_KEY] [redacted INNER_KEY]\"".to_vec()
        );
        assert!(Redactions::new([]).is_empty());
    }
}
