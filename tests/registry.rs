//! oml and the ACP agent registry, through the real binary: oml's own `agent.json` and every entry
//! of the embedded registry snapshot are valid against the registry's schema (vendored in
//! `catalog/registry/`); `initialize` offers the terminal auth method the registry requires and
//! `authenticate` answers by whether a model is configured; `oml setup` (what that method runs);
//! and the requests the registry's daily probe sends (`session/list`, `session/resume`,
//! `session/fork`, the legacy `session/set_model`) answered as docs/src/conformance.md says.

mod support;

use std::path::Path;

use serde_json::{Value, json};
use support::acp::Client;
use support::fake_model::{FakeModel, Reply, text_chunks};
use support::home::Env;

/// The session id the registry's probe uses for a session that does not exist.
const PROBE_SESSION: &str = "sess_matrix_probe";
/// The model id the registry's probe asks `session/set_model` for.
const PROBE_MODEL: &str = "matrix-model";

fn read_json(relative: &str) -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(relative);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{relative}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{relative}: {e}"))
}

/// The vendored schema, with formats (`uri`) checked.
fn agent_schema() -> jsonschema::Validator {
    jsonschema::options()
        .should_validate_formats(true)
        .build(&read_json("catalog/registry/agent.schema.json"))
        .expect("the vendored agent.schema.json is a schema")
}

fn errors(validator: &jsonschema::Validator, instance: &Value) -> Vec<String> {
    validator
        .iter_errors(instance)
        .map(|e| format!("{}: {e}", e.instance_path()))
        .collect()
}

#[test]
fn oml_s_agent_json_is_valid_against_the_registry_schema_and_names_this_release() {
    let schema = agent_schema();
    let agent = read_json("agent.json");
    assert_eq!(errors(&schema, &agent), Vec::<String>::new());
    let version = env!("CARGO_PKG_VERSION");
    assert_eq!(agent["id"], "oml");
    assert_eq!(agent["version"], version);
    assert_eq!(agent["license"], "MIT");
    assert!(
        agent["repository"]
            .as_str()
            .unwrap()
            .starts_with("https://")
    );
    for (platform, triple) in [
        ("linux-x86_64", "x86_64-unknown-linux-gnu"),
        ("linux-aarch64", "aarch64-unknown-linux-gnu"),
    ] {
        let target = &agent["distribution"]["binary"][platform];
        let archive = target["archive"].as_str().unwrap();
        assert!(
            archive.ends_with(&format!("/v{version}/oml-{version}-{triple}.tar.gz")),
            "{platform}: {archive}"
        );
        assert_eq!(target["cmd"], "./oml");
        assert_eq!(target["args"], json!(["acp"]));
    }
    // A wrong entry is caught: the schema is really applied.
    let mut broken = agent.clone();
    broken["distribution"]["binary"]["linux-riscv"] = json!({"archive": "x", "cmd": "oml"});
    assert!(!errors(&schema, &broken).is_empty());
}

#[test]
fn every_entry_of_the_embedded_snapshot_is_valid_against_the_schema() {
    let schema = agent_schema();
    let registry = read_json("catalog/registry/registry.json");
    let agents = registry["agents"].as_array().unwrap();
    assert!(agents.len() >= 30, "{}", agents.len());
    for agent in agents {
        assert_eq!(
            errors(&schema, agent),
            Vec::<String>::new(),
            "{}",
            agent["id"]
        );
    }
}

/// The `error` of `c`'s answer to `method` (panics on a result).
fn error_of(c: &mut Client, method: &str, params: Value) -> Value {
    let answer = c.call(method, params);
    assert!(answer.get("result").is_none(), "{method}: {answer}");
    answer["error"].clone()
}

/// `initialize` with these client capabilities: its result.
fn initialize_with(c: &mut Client, capabilities: Value) -> Value {
    let answer = c.call(
        "initialize",
        json!({"protocolVersion": 1, "clientCapabilities": capabilities,
               "clientInfo": {"name": "ACP Registry Validator", "version": "1.0.0"}}),
    );
    answer["result"].clone()
}

#[test]
fn initialize_offers_terminal_auth_and_authenticate_needs_a_model() {
    // No model. A client that cannot run terminal auth is offered nothing (the protocol says so);
    // one that can (the capability, or the registry validator's marker) is offered oml-setup.
    let env = Env::new();
    let mut c = Client::start(&env, None);
    let plain = initialize_with(&mut c, json!({"terminal": true}));
    assert_eq!(plain["authMethods"], json!([]), "{plain}");
    let legacy = initialize_with(&mut c, json!({"_meta": {"terminal-auth": true}}));
    assert_eq!(legacy["authMethods"][0]["id"], "oml-setup", "{legacy}");
    let init = initialize_with(&mut c, json!({"auth": {"terminal": true}}));
    let methods = init["authMethods"].as_array().unwrap();
    assert_eq!(methods.len(), 1, "{init}");
    assert_eq!(methods[0]["type"], "terminal");
    assert_eq!(methods[0]["id"], "oml-setup");
    assert_eq!(methods[0]["args"], json!(["setup"]));
    assert_eq!(methods[0]["env"], json!({}));
    assert!(methods[0]["name"].as_str().is_some_and(|n| !n.is_empty()));
    let error = error_of(&mut c, "authenticate", json!({"methodId": "oml-setup"}));
    assert_eq!(error["code"], -32000, "{error}");
    assert!(
        error["data"].as_str().unwrap().contains("oml setup"),
        "{error}"
    );
    let error = error_of(&mut c, "authenticate", json!({"methodId": "other"}));
    assert_eq!(error["code"], -32602, "{error}");
    drop(c);

    // A model configured: success.
    let fake = FakeModel::start([Reply::from(text_chunks(&["hi"]))]);
    let mut c = Client::start(&env, Some(&fake));
    initialize_with(&mut c, json!({"auth": {"terminal": true}}));
    let answer = c.call("authenticate", json!({"methodId": "oml-setup"}));
    assert_eq!(answer["result"], json!({}), "{answer}");
}

#[test]
fn oml_setup_is_what_the_method_runs_and_changes_nothing_once_a_model_is_set() {
    let env = Env::new();
    // The method's arguments replacing the command (`oml setup`) or appended to it
    // (`oml acp setup`) run the same set-up.
    for args in [&["setup"][..], &["acp", "setup"][..]] {
        // Headless without a model: the advice, nothing written, a failure status.
        let run = env.run(None, args);
        assert_eq!(run.code, 1, "{args:?}: {run:?}");
        assert!(!env.home.user_init().exists(), "{run:?}");
        // With a model: said, and success.
        let fake = FakeModel::start(Vec::<Reply>::new());
        let run = env.run(Some(&fake), args);
        assert_eq!(run.code, 0, "{args:?}: {run:?}");
        assert!(run.stdout.contains("A model is configured"), "{run:?}");
        assert!(!env.home.user_init().exists(), "{run:?}");
    }
    assert_ne!(env.run(None, &["acp", "other"]).code, 0);
}

#[test]
fn the_registry_s_daily_probes_answer_as_documented() {
    let env = Env::new();
    let fake = FakeModel::start([Reply::from(text_chunks(&["hello"]))]);
    let mut c = Client::start(&env, Some(&fake));
    c.initialize();
    let cwd = env.project.display().to_string();
    let unknown = json!({"sessionId": PROBE_SESSION, "cwd": cwd, "mcpServers": []});

    // Sessions that do not exist: an invalid-params error each, never a crash or silence.
    let list = c.call("session/list", json!({}));
    assert!(list["result"]["sessions"].is_array(), "{list}");
    for method in ["session/resume", "session/fork"] {
        let error = error_of(&mut c, method, unknown.clone());
        assert_eq!(error["code"], -32602, "{method}: {error}");
    }
    // The legacy session/set_model is not offered: the model is a config option.
    let error = error_of(
        &mut c,
        "session/set_model",
        json!({"sessionId": PROBE_SESSION, "modelId": PROBE_MODEL}),
    );
    assert_eq!(error["code"], -32601, "{error}");

    // With a session of its own, as the probe also does.
    let (sid, _) = c.new_session(&env.project);
    c.turn(&sid, "hi");
    let list = c.call("session/list", json!({"cwd": cwd}));
    let ids: Vec<&str> = list["result"]["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s["sessionId"].as_str())
        .collect();
    assert!(ids.contains(&sid.as_str()), "{list}");
    let session = json!({"sessionId": sid, "cwd": cwd, "mcpServers": []});
    let fork = c.call("session/fork", session.clone());
    let forked = fork["result"]["sessionId"].as_str().unwrap_or_default();
    assert!(!forked.is_empty() && forked != sid, "{fork}");
    let resume = c.call("session/resume", session);
    assert!(resume["result"].is_object(), "{resume}");
    let error = error_of(
        &mut c,
        "session/set_model",
        json!({"sessionId": sid, "modelId": PROBE_MODEL}),
    );
    assert_eq!(error["code"], -32601, "{error}");
}

/// `scripts/refresh-registry.sh --from DIR` builds `registry.json` as the registry publishes it:
/// a checkout made of the snapshot's own entries (plus what the registry's build leaves out)
/// gives back the snapshot.
#[test]
fn the_refresh_script_builds_the_snapshot_from_a_checkout_of_the_registry() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let snapshot = std::fs::read_to_string(root.join("catalog/registry/registry.json")).unwrap();
    let env = Env::new();
    let checkout = env.root.join("registry");
    let dest = env.root.join("out");
    std::fs::create_dir_all(&checkout).unwrap();
    std::fs::copy(
        root.join("catalog/registry/agent.schema.json"),
        checkout.join("agent.schema.json"),
    )
    .unwrap();
    let v: Value = serde_json::from_str(&snapshot).unwrap();
    for agent in v["agents"].as_array().unwrap() {
        let dir = checkout.join(agent["id"].as_str().unwrap());
        std::fs::create_dir_all(&dir).unwrap();
        let text = serde_json::to_string_pretty(agent).unwrap();
        std::fs::write(dir.join("agent.json"), text).unwrap();
        std::fs::write(dir.join("icon.svg"), "<svg/>").unwrap();
    }
    // Not agents: a folder the registry keeps aside, a hidden one, one without agent.json.
    for aside in ["_not_yet_unsupported/x", ".github/y", "docs"] {
        std::fs::create_dir_all(checkout.join(aside)).unwrap();
    }
    std::fs::write(checkout.join("_not_yet_unsupported/x/agent.json"), "{}").unwrap();
    let out = std::process::Command::new(root.join("scripts/refresh-registry.sh"))
        .arg("--from")
        .arg(&checkout)
        .env("OML_REGISTRY_DEST", &dest)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let built: Value =
        serde_json::from_str(&std::fs::read_to_string(dest.join("registry.json")).unwrap())
            .unwrap();
    // The same index, agents in the same order (keys are compared as sets: the checkout's files
    // were written with sorted keys).
    let ids = |v: &Value| -> Vec<String> {
        v["agents"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a["id"].to_string())
            .collect()
    };
    assert_eq!(ids(&built), ids(&v));
    assert!(built == v, "the built index differs from the snapshot");
    assert!(dest.join("agent.schema.json").is_file());
}
