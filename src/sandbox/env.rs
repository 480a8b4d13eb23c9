//! Secrets kept out of a command's environment: which variable names count as secrets.
//!
//! A name is a secret when it contains one of [`SECRET_PATTERNS`] (ignoring case), or is one of
//! [`Secrets::also`] (the caller passes the variable the model's API key came from, typically
//! `OPENAI_API_KEY`) or [`Secrets::drop`]; [`Secrets::keep`] wins over all of these. Names are
//! compared exactly (and case-sensitively) in the lists, as the environment does.
//!
//! This module knows nothing of where the lists come from (the `sandbox.*` settings); it picks
//! names, and `Prepared::scrub_env` removes them from a command.

use std::ffi::{OsStr, OsString};

/// Substrings that make a variable's name a secret, matched ignoring case.
pub const SECRET_PATTERNS: &[&str] = &["KEY", "TOKEN", "SECRET", "PASSWORD"];

/// Which variables to remove besides those matching [`SECRET_PATTERNS`], and which to keep.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Secrets {
    /// Names that are secrets whatever they look like (the API key's variable).
    pub also: Vec<String>,
    /// Names kept even though they match.
    pub keep: Vec<String>,
    /// Further names removed (a user's own list).
    pub drop: Vec<String>,
}

/// The names among `names` to remove from a command's environment under `secrets`.
pub fn secret_names(names: impl IntoIterator<Item = OsString>, secrets: &Secrets) -> Vec<OsString> {
    let listed = |list: &[String], name: &OsStr| list.iter().any(|n| OsStr::new(n) == name);
    names
        .into_iter()
        .filter(|name| {
            !listed(&secrets.keep, name)
                && (matches_pattern(name)
                    || listed(&secrets.also, name)
                    || listed(&secrets.drop, name))
        })
        .collect()
}

/// Whether `name` contains one of [`SECRET_PATTERNS`], ignoring case.
fn matches_pattern(name: &OsStr) -> bool {
    let upper = name.to_string_lossy().to_ascii_uppercase();
    SECRET_PATTERNS.iter().any(|p| upper.contains(p))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn picked(names: &[&str], secrets: &Secrets) -> Vec<String> {
        let names = names.iter().map(OsString::from);
        secret_names(names, secrets)
            .into_iter()
            .map(|n| n.to_string_lossy().into_owned())
            .collect()
    }

    #[test]
    fn patterns_lists_and_keep_decide_together() {
        let secrets = Secrets {
            also: vec!["LLM_CREDS".into()],
            keep: vec!["GIT_SSH_KEY_PATH".into()],
            drop: vec!["DATABASE_URL".into()],
        };
        let names = [
            "OPENAI_API_KEY",
            "my_token",
            "AWS_SECRET_ACCESS_KEY",
            "DB_PASSWORD",
            "LLM_CREDS",
            "DATABASE_URL",
            "GIT_SSH_KEY_PATH",
            "PATH",
            "HOME",
        ];
        assert_eq!(
            picked(&names, &secrets),
            [
                "OPENAI_API_KEY",
                "my_token",
                "AWS_SECRET_ACCESS_KEY",
                "DB_PASSWORD",
                "LLM_CREDS",
                "DATABASE_URL"
            ]
        );
        assert!(picked(&["PATH", "TERM", "LANG"], &Secrets::default()).is_empty());
    }
}
