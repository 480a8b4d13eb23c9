//! The whole Lisp surface of a booted image, as a user reaches it: every function of every
//! namespace has a docstring that `(doc …)` prints, the built-in files' functions included.

use std::path::Path;

use oml::cancel::CancelToken;
use oml::lisp::{Lisp, Output};
use oml::paths::Paths;

// ---------------------------------------------------------------------------------------------
// Documentation of the whole surface

/// The namespace tables whose every function must be documented.
const DOCUMENTED_NAMESPACES: &[&str] = &[
    "oml", "json", "session", "llm", "agent", "tools", "commands", "acp", "client", "catalog",
    "project", "chat",
];

/// The value of `src` in `lisp`, as `oml eval` prints it.
async fn printed(lisp: &Lisp, src: &str) -> String {
    match lisp.eval_to_string(src, "docs", &CancelToken::new()).await {
        Ok(text) => text,
        Err(e) => panic!("{src:?} failed: {e}"),
    }
}

/// A fully booted image, as `oml acp --no-init` builds it plus the chat's surface (each is
/// installed only by its own front end), with its folders in `dir`.
async fn booted(dir: &Path) -> Lisp {
    let paths = Paths::under(dir);
    let (lisp, _) = oml::cli::boot(&paths, true, Output::Stderr)
        .await
        .expect("the Lisp image starts");
    oml::front::acp::surface::install(&lisp).expect("the ACP layer installs");
    oml::front::chat::surface::install(&lisp).expect("the chat layer installs");
    lisp
}

#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn every_function_of_every_namespace_has_a_docstring() {
    let dir = tempfile::tempdir().unwrap();
    let lisp = booted(dir.path()).await;
    let namespaces = DOCUMENTED_NAMESPACES
        .iter()
        .map(|ns| format!("{ns:?}"))
        .collect::<Vec<_>>()
        .join(" ");
    let undocumented = printed(
        &lisp,
        &format!(
            "(let [out []]
               (each [_ ns (ipairs [{namespaces}])]
                 (each [k v (pairs (. _G ns))]
                   (when (and (= :function (type v))
                              (not (fennel.metadata:get (oml.original v) :fnl/docstring)))
                     (table.insert out (.. ns \".\" k)))))
               (table.sort out)
               (table.concat out \" \"))"
        ),
    )
    .await;
    assert_eq!(undocumented, "\"\"", "functions without a docstring");
    // The walk saw the Rust-defined functions of each namespace.
    let counted = printed(
        &lisp,
        "(accumulate [n 0 _ f (ipairs [client.connect client.prompt json.decode session.emit!
                                       llm.chat catalog.find acp.request! oml.sleep
                                       oml.tool-bash oml.reload chat.ask-key!
                                       chat.diff-lines])]
           (+ n (if (fennel.metadata:get f :fnl/docstring) 1 0)))",
    )
    .await;
    assert_eq!(counted, "12");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn doc_of_a_rust_defined_function_prints_its_arglist_and_docstring() {
    let dir = tempfile::tempdir().unwrap();
    let lisp = booted(dir.path()).await;
    let described = printed(&lisp, "(describe client.new-session)").await;
    assert!(
        described
            .starts_with("\"(client.new-session conn ?cwd ?opts)\n  session/new in the absolute"),
        "{described}"
    );
    let described = printed(&lisp, "(describe json.decode)").await;
    assert!(
        described.starts_with("\"(json.decode text)\n  The Lisp value of the JSON TEXT"),
        "{described}"
    );
}

#[test]
fn doc_client_connect_prints_its_arglist_and_docstring() {
    let home = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_oml"))
        .args(["--no-init", "eval", "(doc client.connect)"])
        .env("HOME", home.path())
        .env("XDG_CONFIG_HOME", home.path().join("config"))
        .env("XDG_STATE_HOME", home.path().join("state"))
        .env("XDG_CACHE_HOME", home.path().join("cache"))
        .output()
        .expect("oml runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    assert!(
        stdout.starts_with("(client.connect what args opts)\n  Start an ACP agent and negotiate"),
        "{stdout}"
    );
}
