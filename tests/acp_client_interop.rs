//! Interop of oml's ACP client with an agent this project did not write the protocol code of: a
//! small agent built on the official Python SDK (`tests/interop/acp_python_agent.py`), driven
//! from Lisp through `oml run`: initialize, authentication (by itself, from a set variable, and
//! on request), session/new, a prompt with streamed updates and a permission request answered by
//! the Lisp handler, a prompt cancelled from another coroutine, and a clean close.

mod support;

use std::path::Path;

use support::home::Home;

#[tokio::test]
async fn omls_client_drives_an_agent_built_on_the_python_sdk() {
    let home = Home::new();
    let venv_dir = tempfile::tempdir().expect("temp dir");
    let python = match support::home::python_sdk_venv(venv_dir.path()) {
        Ok(p) => p,
        Err(why) => return support::home::skip(&why, support::home::INSTALL_PYTHON_SDK),
    };
    let agent = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/interop/acp_python_agent.py");
    let script = venv_dir.path().join("drive.fnl");
    support::home::write(
        &script,
        r#"(var asked nil)
;; Asked to log in on request: session/new is refused until client.authenticate.
(local plain (client.connect (. arg 1) [(. arg 2)] {:env {:ECHO_TOKEN "t"} :authenticate? false}))
(print "refused" (. [(pcall client.new-session plain)] 2 :code))
(client.authenticate plain "echo-token")
(print "after login" (not= nil (. (client.new-session plain) :session-id)))
(print "plain closed" (client.close plain))
;; With the variable set, connect logs in by itself.
(local conn (client.connect (. arg 1) [(. arg 2)]
                            {:env {:ECHO_TOKEN "t"}
                             :on-permission (fn [req] (set asked req.tool-call.title) :allow)}))
(print "version" (. (client.capabilities conn) :protocol-version)
       (. (client.capabilities conn) :authenticated))
(local s (client.new-session conn (os.getenv "PWD")))
(local r (client.prompt conn s.session-id "hello permission"))
(print r.stop-reason)
(print (table.concat (icollect [_ u (ipairs r.updates)]
                       (when (= u.kind :agent-message-chunk) u.content.text)) ""))
(print "asked" asked)
(var started false)
(local h (client.spawn (fn [] (client.prompt conn s.session-id "wait"
                                             {:on-update (fn [u] (set started true))}))))
;; Poll the flag the update handler sets once the turn runs; oml.sleep yields to it.
(while (not started) (oml.sleep 5))
(client.cancel conn s.session-id)
(print (. (client.join h) :stop-reason))
(print "closed" (client.close conn))
"#,
    );
    let script = script.display().to_string();
    let python = python.display().to_string();
    let agent = agent.display().to_string();
    let out = home
        .oml(&["--no-init", "run", &script, &python, &agent])
        .await;
    assert_eq!(out.code, 0, "{out:?}");
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert_eq!(
        lines,
        [
            "refused\t-32000",
            "after login\ttrue",
            "plain closed\ttrue",
            "version\t1\techo-token",
            "end-turn",
            "echo: hello permission chose yes",
            "asked\tWrite notes.txt",
            "cancelled",
            "closed\ttrue",
        ],
        "{out:?}"
    );
}
