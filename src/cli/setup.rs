//! The first run without a model: on a terminal, offer the providers and local servers this
//! machine can reach (`llm::setup`), then a model from the chosen one's own list, and append the
//! reviewable Lisp that configures them to the user init file (which is then loaded); headless,
//! say what was found and how to choose, and ask nothing.
//!
//! A model list is data from a server, and a local port can be anyone's: an id with control
//! characters is not shown, and the id chosen goes into the init file as an escaped string
//! literal (`llm::setup::snippet`), never as code.
//!
//! `oml setup` runs the dialog on its own (see [`run`]).
//!
//! It knows the dialog and the init file; what counts as a candidate is `llm::setup`'s.

use std::io::{self, BufRead, Write};
use std::path::{Path, PathBuf};

use crate::llm::LlmClient;
use crate::llm::setup::{self, Candidate};

/// Models shown in the dialog at most (the rest can be typed).
const MODELS_SHOWN: usize = 30;

/// What the dialog did.
#[derive(Debug, PartialEq)]
pub enum Setup {
    /// Nothing was found to offer; the advice was shown.
    NothingFound,
    /// The user chose nothing.
    Skipped,
    /// `snippet` was appended to `file`.
    Wrote { file: PathBuf, snippet: String },
}

/// Every candidate on this machine: the hosted providers of the environment, then the local
/// servers that list models.
pub async fn candidates(client: &LlmClient) -> Vec<Candidate> {
    let mut found = setup::hosted(|name| std::env::var(name).ok());
    found.extend(setup::local(client, &setup::LOCAL).await);
    found
}

/// `oml setup`: the dialog, on its own, for a user without a model (an editor runs it in a
/// terminal for the ACP auth method `oml-setup`). With a model configured it says so and
/// changes nothing. Exits 0 when a model is configured at the end, 1 when none is.
pub(super) async fn run(paths: &crate::paths::Paths, no_init: bool) -> anyhow::Result<i32> {
    use super::status;
    let (lisp, _) = super::boot::boot(paths, no_init, crate::lisp::Output::Stdout).await?;
    let model: Option<String> = lisp.setting("llm.model").unwrap_or(None);
    if let Some(model) = model.filter(|m| !m.is_empty()) {
        crate::front::stdio::out!("A model is configured ({model}); nothing to set up.");
        return Ok(status::OK);
    }
    let client = LlmClient::new();
    let found = candidates(&client).await;
    let init = paths.user_init();
    let result = {
        let stdin = std::io::stdin();
        let mut input = stdin.lock();
        let mut output = std::io::stdout();
        dialog(&client, &found, &init, &mut input, &mut output).await
    };
    Ok(match result? {
        Setup::Wrote { .. } => status::OK,
        Setup::NothingFound | Setup::Skipped => status::ERROR,
    })
}

/// Offer `found` and write the choice to `init` (appended; created with its folder when new).
pub async fn dialog(
    client: &LlmClient,
    found: &[Candidate],
    init: &Path,
    input: &mut dyn BufRead,
    out: &mut dyn Write,
) -> io::Result<Setup> {
    if found.is_empty() {
        writeln!(out, "{}", setup::advice(found))?;
        return Ok(Setup::NothingFound);
    }
    writeln!(out, "No model is configured. Found:")?;
    for (i, candidate) in found.iter().enumerate() {
        writeln!(out, "  {}. {}", i + 1, candidate.name)?;
    }
    let Some(candidate) = pick(found, "Use which? [number, Enter to skip] ", input, out)? else {
        writeln!(out, "Skipped. {}", setup::advice(found))?;
        return Ok(Setup::Skipped);
    };
    let key = candidate.key_env.and_then(|name| std::env::var(name).ok());
    let listed = client
        .list_models(&setup::config(candidate, key), setup::LIST_WAIT)
        .await;
    let models = match listed {
        // A server's list is data from outside: an id with control characters (a terminal
        // escape sequence) is neither shown nor offered.
        Ok(models) => models
            .into_iter()
            .filter(|id| !id.chars().any(char::is_control))
            .collect::<Vec<_>>(),
        Err(error) => {
            writeln!(
                out,
                "Its model list did not come ({error}); type the model id."
            )?;
            Vec::new()
        }
    };
    for (i, model) in models.iter().take(MODELS_SHOWN).enumerate() {
        writeln!(out, "  {}. {model}", i + 1)?;
    }
    if models.len() > MODELS_SHOWN {
        writeln!(
            out,
            "  … and {} more (type the id)",
            models.len() - MODELS_SHOWN
        )?;
    }
    let Some(model) = pick_model(&models, input, out)? else {
        writeln!(out, "Skipped. {}", setup::advice(found))?;
        return Ok(Setup::Skipped);
    };
    let snippet = setup::snippet(candidate, &model);
    append(init, &snippet)?;
    writeln!(out, "Added to {}:\n\n{snippet}", init.display())?;
    Ok(Setup::Wrote {
        file: init.to_path_buf(),
        snippet,
    })
}

/// The candidate the user numbers, or `None` for an empty answer (or end of input).
fn pick<'a>(
    found: &'a [Candidate],
    question: &str,
    input: &mut dyn BufRead,
    out: &mut dyn Write,
) -> io::Result<Option<&'a Candidate>> {
    loop {
        let answer = ask(question, input, out)?;
        if answer.is_empty() {
            return Ok(None);
        }
        match answer
            .parse::<usize>()
            .ok()
            .and_then(|n| found.get(n.wrapping_sub(1)))
        {
            Some(candidate) => return Ok(Some(candidate)),
            None => writeln!(out, "Type a number from 1 to {}.", found.len())?,
        }
    }
}

/// The model the user numbers or types, or `None` for an empty answer (or the end of input).
///
/// Nothing is taken by accident: a line with spaces (a question typed too early) is no model id
/// and is asked again, and an id the server does not list (or any id, when the list did not
/// come) is used only once the user confirms it.
fn pick_model(
    models: &[String],
    input: &mut dyn BufRead,
    out: &mut dyn Write,
) -> io::Result<Option<String>> {
    loop {
        let answer = ask("Which model? [number or id, Enter to skip] ", input, out)?;
        if answer.is_empty() {
            return Ok(None);
        }
        let shown = models.len().min(MODELS_SHOWN);
        if let Ok(n) = answer.parse::<usize>() {
            match models.iter().take(MODELS_SHOWN).nth(n.wrapping_sub(1)) {
                Some(model) => return Ok(Some(model.clone())),
                None if shown > 0 => {
                    writeln!(out, "Type a number from 1 to {shown}, or a model id.")?;
                    continue;
                }
                None => {}
            }
        }
        if answer.chars().any(|c| c.is_whitespace() || c.is_control()) {
            writeln!(
                out,
                "That is not a model id (an id has no spaces). Type one, or Enter to skip."
            )?;
            continue;
        }
        if models.contains(&answer) || confirm_unlisted(&answer, models, input, out)? {
            return Ok(Some(answer));
        }
    }
}

/// Whether the user wants `id`, which `models` does not hold, all the same.
fn confirm_unlisted(
    id: &str,
    models: &[String],
    input: &mut dyn BufRead,
    out: &mut dyn Write,
) -> io::Result<bool> {
    let question = if models.is_empty() {
        format!("Use the model \"{id}\"? It could not be checked against a list. [y/N] ")
    } else {
        format!("The server does not list \"{id}\". Use it anyway? [y/N] ")
    };
    let answer = ask(&question, input, out)?;
    Ok(matches!(answer.to_ascii_lowercase().as_str(), "y" | "yes"))
}

/// One answer, trimmed; empty at the end of input.
fn ask(question: &str, input: &mut dyn BufRead, out: &mut dyn Write) -> io::Result<String> {
    write!(out, "{question}")?;
    out.flush()?;
    let mut line = String::new();
    input.read_line(&mut line)?;
    Ok(line.trim().to_owned())
}

/// Append `text` to `file`, after a blank line when the file has content.
fn append(file: &Path, text: &str) -> io::Result<()> {
    if let Some(dir) = file.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let existing = std::fs::read_to_string(file).unwrap_or_default();
    let separator = match existing.as_str() {
        "" => "",
        s if s.ends_with('\n') => "\n",
        _ => "\n\n",
    };
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(file)?;
    f.write_all(format!("{separator}{text}").as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::Api;

    fn local(base_url: &str) -> Candidate {
        Candidate {
            name: "A server".into(),
            api: Api::Chat,
            base_url: base_url.into(),
            key_env: None,
        }
    }

    #[tokio::test]
    async fn a_typed_model_is_written_when_the_list_does_not_come() {
        let dir = tempfile::tempdir().unwrap();
        let init = dir.path().join("oml/init.fnl");
        std::fs::create_dir_all(init.parent().unwrap()).unwrap();
        std::fs::write(&init, "(setq agent.max-turns 9)").unwrap();
        let found = [local("http://127.0.0.1:9/v1")];
        let mut out = Vec::new();
        let mut input = "7\n1\nmy model\nmy-model\nn\nmy-model\ny\n".as_bytes();
        let done = dialog(&LlmClient::new(), &found, &init, &mut input, &mut out)
            .await
            .unwrap();
        assert!(
            matches!(&done, Setup::Wrote { file, .. } if *file == init),
            "{done:?}"
        );
        let text = String::from_utf8(out).unwrap();
        assert!(text.contains("Type a number from 1 to 1."), "{text}");
        assert!(text.contains("That is not a model id"), "{text}");
        assert!(text.contains("Use the model \"my-model\"?"), "{text}");
        let written = std::fs::read_to_string(&init).unwrap();
        assert!(
            written.starts_with("(setq agent.max-turns 9)\n\n;; The model"),
            "{written}"
        );
        assert!(written.contains("llm.model \"my-model\")"), "{written}");
    }

    #[tokio::test]
    async fn nothing_found_or_nothing_chosen_writes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let init = dir.path().join("init.fnl");
        let mut out = Vec::new();
        let none = dialog(
            &LlmClient::new(),
            &[],
            &init,
            &mut "1\n".as_bytes(),
            &mut out,
        )
        .await;
        assert_eq!(none.unwrap(), Setup::NothingFound);
        let found = [local("http://127.0.0.1:9/v1")];
        let skipped = dialog(
            &LlmClient::new(),
            &found,
            &init,
            &mut "".as_bytes(),
            &mut out,
        )
        .await;
        assert_eq!(skipped.unwrap(), Setup::Skipped);
        assert!(!init.exists());
    }
}
