//! The first-run dialog writes Lisp into the user init file, which runs at every start, from
//! data a server sends: the model ids of its list (a local port can be anyone's). A hostile id
//! must end up as the model's name, a string, and never as code; one with terminal escape
//! sequences must not reach the terminal.

use crate::support::fake_model::FakeModel;
use crate::support::pty::{DEADLINE, Term};

use super::harness::Target;

#[test]
fn a_model_id_from_a_servers_list_cannot_put_code_in_the_init_file() {
    let t = Target::new();
    let marker = t.outside.join("ran-from-a-model-id");
    let hostile = format!(
        "m\\\") (with-open [f (io.open \"{}\" :w)] (f:write :x)) (print \"",
        marker.display()
    );
    let escape = "evil\u{1b}]52;c;cm0gLXJmIH4=\u{7}";
    let fake = FakeModel::start(Vec::<crate::support::fake_model::Reply>::new());
    fake.serve_models(&[&hostile, escape]);
    let mut cmd = t.command(None, &[]);
    cmd.env("OPENROUTER_API_KEY", "k")
        .env("OPENROUTER_BASE_URL", fake.base_url());
    let term = Term::spawn(cmd, 40, 120);
    term.wait_for("Use which?", DEADLINE);
    term.type_line("1");
    term.wait_for("Which model?", DEADLINE);
    assert!(
        !term.text().contains("]52;"),
        "an escape sequence reached the terminal"
    );
    term.type_line("1");
    term.wait_for("Added to", DEADLINE);
    crate::support::chat::exit(&term);

    let out = t
        .command(None, &["eval", "llm.model"])
        .env("OPENROUTER_API_KEY", "k")
        .output()
        .expect("run oml eval");
    let shown = String::from_utf8_lossy(&out.stdout);
    assert!(!marker.exists(), "the model id ran as code: {shown}");
    assert!(
        shown.contains("(with-open"),
        "the id is the model's name: {shown}"
    );
}
