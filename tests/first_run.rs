//! The first run without a model, as a person meets it: `oml` on a terminal offers the
//! providers whose key is in the environment, then a model from the chosen one's own list
//! (served by the fake model over real TCP), appends reviewable Lisp to the user init file and
//! chats with the model chosen, at once and on the next start.

mod support;

use support::chat::exit;
use support::fake_model::{FakeModel, Reply, text_chunks};
use support::home::Env;
use support::pty::{DEADLINE, Term};

#[test]
fn the_chat_offers_a_provider_and_a_model_and_writes_them_to_the_init_file() {
    let env = Env::new();
    let fake = FakeModel::start([
        Reply::Stream(text_chunks(&["hello from b"])),
        Reply::Stream(text_chunks(&["hello again"])),
    ]);
    fake.serve_models(&["fake-a", "fake-b"]);
    let start = || {
        let mut cmd = env.command(None, &[]);
        cmd.env("OPENROUTER_API_KEY", "sk-or-test")
            .env("OPENROUTER_BASE_URL", fake.base_url());
        Term::spawn(cmd, 40, 110)
    };
    let term = start();
    term.wait_for("Use which? [number, Enter to skip]", DEADLINE);
    let screen = term.screen();
    assert!(
        screen.contains("1. OpenRouter at http://127.0.0.1:"),
        "{screen}"
    );
    term.type_line("1");
    term.wait_for("Which model? [number or id, Enter to skip]", DEADLINE);
    assert!(term.screen().contains("2. fake-b"), "{}", term.screen());
    term.type_line("2");
    term.wait_for("Added to", DEADLINE);
    term.wait_for("› ", DEADLINE);
    term.type_line("hi");
    term.wait_for("hello from b", DEADLINE);
    exit(&term);

    let init = std::fs::read_to_string(env.home.user_init()).expect("the init file");
    assert!(init.contains("llm.model \"fake-b\""), "{init}");
    assert!(
        init.contains("(os.getenv \"OPENROUTER_API_KEY\")"),
        "{init}"
    );
    assert!(
        !init.contains("sk-or-test"),
        "the key stays in its variable: {init}"
    );
    let sent = &fake.requests()[0];
    assert_eq!(sent.body["model"], "fake-b");
    assert_eq!(sent.header("authorization"), Some("Bearer sk-or-test"));

    // The next start has a model: nothing is asked.
    let term = start();
    term.wait_for("› ", DEADLINE);
    assert!(!term.text().contains("Use which?"), "{}", term.text());
    term.type_line("hi");
    term.wait_for("hello again", DEADLINE);
    exit(&term);
}

/// Headless, nothing is asked: the first model call fails naming the providers found and how to
/// choose, and the key is not shown.
#[test]
fn print_mode_without_a_model_says_what_it_found_and_asks_nothing() {
    let env = Env::new();
    let out = env
        .command(None, &["-p", "hi"])
        .env("ANTHROPIC_API_KEY", "sk-ant-hidden")
        .output()
        .expect("run oml");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_ne!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("No model configured (found: Anthropic): run `oml` in a terminal"),
        "{stderr}"
    );
    assert!(!stderr.contains("sk-ant-hidden"), "{stderr}");
    assert!(
        !env.home.user_init().exists(),
        "nothing is written headless"
    );
}

/// A person who types their question before the dialog is done: a line that is no model id is
/// asked again, an id the server does not list is confirmed first, and nothing is written to the
/// init file until a model is chosen.
#[test]
fn a_question_typed_at_the_model_offer_is_not_taken_for_a_model() {
    let env = Env::new();
    let fake = FakeModel::start(Vec::<Reply>::new());
    fake.serve_models(&["fake-a", "fake-b"]);
    let mut cmd = env.command(None, &[]);
    cmd.env("OPENROUTER_API_KEY", "sk-or-test")
        .env("OPENROUTER_BASE_URL", fake.base_url());
    let term = Term::spawn(cmd, 40, 110);
    term.wait_for("Use which? [number, Enter to skip]", DEADLINE);
    term.type_line("1");
    term.wait_for("Which model? [number or id, Enter to skip]", DEADLINE);
    term.type_line("Say hi in three words");
    term.wait_for("That is not a model id", DEADLINE);
    term.type_line("fake-z");
    term.wait_for(
        "The server does not list \"fake-z\". Use it anyway? [y/N]",
        DEADLINE,
    );
    term.type_line("n");
    term.type_line("");
    term.wait_for("Skipped.", DEADLINE);
    term.wait_for("› ", DEADLINE);
    exit(&term);
    let init = std::fs::read_to_string(env.home.user_init()).unwrap_or_default();
    assert!(
        !init.contains("llm.model"),
        "nothing chosen, nothing written: {init}"
    );
    assert!(!init.contains("Say hi"), "{init}");
}
