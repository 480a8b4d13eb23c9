//! The one-time offer, at interactive start-up, to write the proposed agent configuration to a
//! new `agents.fnl`. The caller decides whether a terminal is there; this module only asks, with
//! its input and output injected so that tests can drive it.

use std::io::{self, BufRead, Write};
use std::path::PathBuf;

use super::{Found, proposed_config};
use crate::paths::Paths;

/// What the offer did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Offer {
    /// A default agent is configured, or no agent other than oml was found: nothing to offer.
    NotNeeded,
    /// The question was answered before (the state directory remembers it).
    AlreadyAsked,
    /// `agents.fnl` already exists: the snippet was shown, the file left alone.
    ShownExisting,
    /// The user said no (or gave no answer).
    Declined,
    /// The user said yes and the new file was written.
    Wrote(PathBuf),
}

/// Offer once to write the configuration for `found` (every found agent, oml included) to
/// `paths.agents_file()`. `default_configured`: whether `client.default-agent` is set.
pub fn offer(
    paths: &Paths,
    default_configured: bool,
    found: &[Found],
    input: &mut dyn BufRead,
    out: &mut dyn Write,
) -> io::Result<Offer> {
    if default_configured || !found.iter().any(|f| f.entry.id != super::OML_ID) {
        return Ok(Offer::NotNeeded);
    }
    let record = paths.agents_offer_record();
    if record.exists() {
        return Ok(Offer::AlreadyAsked);
    }
    let file = paths.agents_file();
    let snippet = proposed_config(found);
    let names: Vec<&str> = found
        .iter()
        .filter(|f| f.entry.id != super::OML_ID)
        .map(|f| f.entry.id)
        .collect();
    writeln!(
        out,
        "No default ACP agent is configured; found on PATH: {}.",
        names.join(", ")
    )?;
    writeln!(out, "Proposed configuration:\n\n{snippet}")?;
    let outcome = if file.exists() {
        writeln!(
            out,
            "{} already exists; oml does not change it. Add the lines above yourself if you want them.",
            file.display()
        )?;
        Offer::ShownExisting
    } else {
        ask_and_write(file, &snippet, input, out)?
    };
    crate::paths::ensure_private_dir(&paths.state)?;
    let word = match &outcome {
        Offer::Wrote(_) => "yes",
        Offer::ShownExisting => "shown",
        _ => "no",
    };
    std::fs::write(&record, format!("{word}\n"))?;
    Ok(outcome)
}

/// Ask whether to write `snippet` to the new `file`, and write it when the answer is yes (never
/// over a file that appeared meanwhile).
fn ask_and_write(
    file: PathBuf,
    snippet: &str,
    input: &mut dyn BufRead,
    out: &mut dyn Write,
) -> io::Result<Offer> {
    write!(
        out,
        "Write this to {} (loaded at start-up, before init.fnl)? [y/N] ",
        file.display()
    )?;
    out.flush()?;
    let mut answer = String::new();
    input.read_line(&mut answer)?;
    let yes = matches!(answer.trim().to_ascii_lowercase().as_str(), "y" | "yes");
    if !yes {
        writeln!(
            out,
            "Not written. `oml agents` prints this configuration again; you will not be asked again."
        )?;
        return Ok(Offer::Declined);
    }
    if let Some(dir) = file.parent() {
        std::fs::create_dir_all(dir)?;
    }
    // create_new: never overwrite a file that appeared meanwhile.
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&file)?;
    f.write_all(snippet.as_bytes())?;
    writeln!(out, "Wrote {}.", file.display())?;
    Ok(Offer::Wrote(file))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::find;

    fn found() -> Vec<Found> {
        vec![
            Found {
                entry: find("codex").unwrap(),
                path: "/x/codex-acp".into(),
            },
            Found {
                entry: find("oml").unwrap(),
                path: "/x/oml".into(),
            },
        ]
    }

    fn ask(paths: &Paths, answer: &str) -> (Offer, String) {
        let mut out = Vec::new();
        let r = offer(paths, false, &found(), &mut answer.as_bytes(), &mut out).unwrap();
        (r, String::from_utf8(out).unwrap())
    }

    #[test]
    fn yes_writes_the_file_and_is_asked_once() {
        let dir = tempfile::tempdir().unwrap();
        let paths = Paths::under(dir.path());
        let (r, text) = ask(&paths, "y\n");
        assert_eq!(r, Offer::Wrote(paths.agents_file()));
        assert!(text.contains("[y/N]"), "{text}");
        let written = std::fs::read_to_string(paths.agents_file()).unwrap();
        assert!(written.contains("(setq client.default-agent :codex)"));
        assert_eq!(ask(&paths, "y\n").0, Offer::AlreadyAsked);
    }

    #[test]
    fn no_or_nothing_writes_nothing() {
        for answer in ["n\n", "\n", ""] {
            let dir = tempfile::tempdir().unwrap();
            let paths = Paths::under(dir.path());
            assert_eq!(ask(&paths, answer).0, Offer::Declined);
            assert!(!paths.agents_file().exists());
            assert_eq!(ask(&paths, "y\n").0, Offer::AlreadyAsked);
        }
    }

    #[test]
    fn an_existing_file_is_only_shown() {
        let dir = tempfile::tempdir().unwrap();
        let paths = Paths::under(dir.path());
        std::fs::create_dir_all(&paths.config).unwrap();
        std::fs::write(paths.agents_file(), ";; mine\n").unwrap();
        let (r, text) = ask(&paths, "y\n");
        assert_eq!(r, Offer::ShownExisting);
        assert!(text.contains("(client.defagent :codex"), "{text}");
        assert!(!text.contains("[y/N]"), "{text}");
        assert_eq!(
            std::fs::read_to_string(paths.agents_file()).unwrap(),
            ";; mine\n"
        );
    }

    #[test]
    fn nothing_is_offered_with_a_default_or_without_an_external_agent() {
        let dir = tempfile::tempdir().unwrap();
        let paths = Paths::under(dir.path());
        let mut out = Vec::new();
        let r = offer(&paths, true, &found(), &mut "y\n".as_bytes(), &mut out).unwrap();
        assert_eq!(r, Offer::NotNeeded);
        let r = offer(
            &paths,
            false,
            &found()[1..],
            &mut "y\n".as_bytes(),
            &mut out,
        )
        .unwrap();
        assert_eq!(r, Offer::NotNeeded);
        assert!(out.is_empty());
        assert!(!paths.agents_offer_record().exists());
    }
}
