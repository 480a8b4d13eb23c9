//! The Lisp surface, in process: settings and `setq`, advice, introspection of user code, JSON
//! across the boundary, interruption, the compiled-Fennel cache and reloading init files. Each
//! test builds its own `Lisp` host, so no state leaks between tests.

use std::path::Path;

use oml::cancel::CancelToken;
use oml::lisp::init;
use oml::lisp::{Lisp, LispError, LispOptions, Output, SettingDecl};
use oml::paths::Paths;
use serde_json::json;

fn lisp() -> Lisp {
    lisp_with_cache(None)
}

fn lisp_with_cache(cache_dir: Option<&Path>) -> Lisp {
    Lisp::new(LispOptions {
        output: Output::Stderr,
        cache_dir: cache_dir.map(Path::to_path_buf),
    })
    .expect("the Lisp host starts")
}

/// Evaluate `src` and render its values as `oml eval` does.
async fn view(lisp: &Lisp, src: &str) -> String {
    lisp.eval_to_string(src, "test", &CancelToken::new())
        .await
        .unwrap_or_else(|e| panic!("{src:?} failed: {e}"))
}

/// Evaluate `src`, which must fail; returns the message (`Display` leaves out Lua's traceback).
async fn error_of(lisp: &Lisp, src: &str) -> String {
    match lisp.eval(src, "test").await {
        Ok(v) => panic!("{src:?} should fail, returned {v:?}"),
        Err(e) => e.to_string(),
    }
}

/// Run `(form, expected view)` steps in order on one host; `None` ignores the value.
async fn script(lisp: &Lisp, steps: &[(&str, Option<&str>)]) {
    for (i, (form, expected)) in steps.iter().enumerate() {
        let got = view(lisp, form).await;
        if let Some(expected) = expected {
            assert_eq!(&got, expected, "step {i}: {form}");
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Settings

#[tokio::test]
async fn setq_of_an_unknown_setting_names_it() {
    let lisp = lisp();
    assert_eq!(
        error_of(&lisp, "(setq agent.no-such-thing 1)").await,
        "test:1: setq: unknown setting agent.no-such-thing"
    );
    // A name in no table at all.
    assert_eq!(
        error_of(&lisp, "\n(setq nowhere.at-all true)").await,
        "test:2: setq: unknown setting nowhere.at-all"
    );
}

#[tokio::test]
async fn setq_of_a_wrong_type_names_the_setting_and_the_expected_type_and_changes_nothing() {
    let lisp = lisp();
    view(
        &lisp,
        r#"(defsetting my.name "x" :string "A name.")
           (defsetting my.maybe nil :string? "An optional name.")
           (defsetting my.ratio 0.5 :number "A ratio.")
           (defsetting my.flag false :boolean "A flag.")
           (defsetting my.opts {} :table "Options.")
           (defsetting my.hook print :function "A hook.")
           (defsetting my.mode :fast [:fast :slow] "A mode.")"#,
    )
    .await;
    let cases = [
        (
            r#"(setq repl.history-size "ten")"#,
            r#"repl.history-size expects an integer, got string "ten""#,
        ),
        (
            "(setq repl.history-size 1.5)",
            "repl.history-size expects an integer, got number",
        ),
        (
            "(setq repl.history-size nil)",
            "repl.history-size expects an integer, got nil",
        ),
        (
            "(setq init.project-init :sometimes)",
            r#"init.project-init expects one of "trusted", "always", "never", got string "sometimes""#,
        ),
        ("(setq my.name 5)", "my.name expects a string, got integer"),
        (
            "(setq my.maybe [])",
            "my.maybe expects a string or nil, got table",
        ),
        (
            "(setq my.ratio :half)",
            r#"my.ratio expects a number, got string "half""#,
        ),
        ("(setq my.flag 0)", "my.flag expects a boolean, got integer"),
        (
            "(setq my.opts true)",
            "my.opts expects a table, got boolean",
        ),
        (
            "(setq my.hook 1)",
            "my.hook expects a function, got integer",
        ),
        (
            "(setq my.mode :medium)",
            r#"my.mode expects one of "fast", "slow", got string "medium""#,
        ),
        (
            "(setq my.flag json.null)",
            "my.flag expects a boolean, got null",
        ),
    ];
    for (form, message) in cases {
        assert_eq!(
            error_of(&lisp, form).await,
            format!("test:1: setq: {message}"),
            "{form}"
        );
    }
    assert_eq!(
        view(
            &lisp,
            "[repl.history-size init.project-init my.name (tostring my.maybe) my.ratio my.flag my.mode]"
        )
        .await,
        r#"[1000 "trusted" "x" "nil" 0.5 false "fast"]"#,
        "no failed setq changed anything"
    );
}

#[tokio::test]
async fn setq_accepts_values_of_the_declared_type_and_the_new_value_is_live() {
    let lisp = lisp();
    script(
        &lisp,
        &[
            (
                r#"(defsetting my.maybe nil :string? "Optional.")
                   (defsetting my.ratio 1 :number "Any number.")
                   (defsetting my.hook nil :function? "A hook.")"#,
                None,
            ),
            (
                "(setq repl.history-size 5 my.maybe :x my.ratio 0.25)",
                Some("0.25"),
            ),
            ("(setq my.maybe nil)", Some("nil")),
            // A callable table is a function too.
            (
                "(setq my.hook (setmetatable {} {:__call (fn [] :called)}))",
                None,
            ),
            (
                "[repl.history-size (tostring my.maybe) my.ratio (my.hook)]",
                Some(r#"[5 "nil" 0.25 "called"]"#),
            ),
            ("(oml.setting :repl.history-size)", Some("5")),
        ],
    )
    .await;
    assert_eq!(lisp.setting::<i64>("repl.history-size").expect("read"), 5);
}

#[tokio::test]
async fn settings_from_rust_are_validated_the_same_way() {
    let lisp = lisp();
    lisp.set_setting("repl.history-size", &json!(20))
        .expect("a valid value");
    assert_eq!(lisp.setting::<i64>("repl.history-size").expect("read"), 20);
    let err = lisp
        .set_setting("repl.history-size", &json!("many"))
        .expect_err("a string is not an integer");
    assert!(
        err.to_string()
            .contains(r#"setq: repl.history-size expects an integer, got string "many""#),
        "{err}"
    );
    let err = lisp
        .set_setting("agent.nope", &json!(1))
        .expect_err("unknown");
    assert!(
        err.to_string().contains("setq: unknown setting agent.nope"),
        "{err}"
    );
    match lisp.setting::<i64>("agent.nope") {
        Err(LispError::Setting(m)) => assert_eq!(m, "unknown setting agent.nope"),
        other => panic!("{other:?}"),
    }
    // A plain `set` bypasses setq's check; reading the setting from Rust still catches it.
    view(&lisp, r#"(set repl.history-size "oops")"#).await;
    match lisp.setting::<i64>("repl.history-size") {
        Err(LispError::Setting(m)) => assert_eq!(
            m,
            r#"repl.history-size expects an integer, got string "oops""#
        ),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn a_setting_declared_from_rust_has_doc_default_type_and_a_hidden_secret() {
    let lisp = lisp();
    lisp.declare_setting(&SettingDecl {
        name: "llm.test-key",
        doc: "The API key used in tests.",
        ty: json!("string?"),
        default: json!(null),
        secret: true,
        file: "src/test.rs",
        line: 7,
    })
    .expect("declare");
    lisp.declare_setting(&SettingDecl {
        name: "llm.test-retries",
        doc: "How often to retry.\n\nMore detail.",
        ty: json!("integer"),
        default: json!(3),
        secret: false,
        file: "src/test.rs",
        line: 9,
    })
    .expect("declare");
    view(&lisp, r#"(setq llm.test-key "sk-very-secret")"#).await;

    assert_eq!(
        lisp.setting::<String>("llm.test-key").expect("read"),
        "sk-very-secret",
        "Rust still reads the secret"
    );
    let described = view(&lisp, "(describe llm.test-key)").await;
    assert_eq!(
        described,
        r#""llm.test-key  (setting, a string or nil)
  The API key used in tests.
  Value: <hidden>
  Default: nil
  Defined in src/test.rs:7""#
    );
    let listed = view(
        &lisp,
        "(icollect [_ s (ipairs (oml.settings-list))] (when (s.name:match \"^llm%.test\") [s.name s.type s.value s.default s.secret]))",
    )
    .await;
    assert_eq!(
        listed,
        r#"[["llm.test-key" "string?" "<hidden>" "nil" true]
 ["llm.test-retries" "integer" "3" "3" false]]"#
    );
    assert!(!listed.contains("sk-very-secret"));
    assert_eq!(
        view(&lisp, "(. (oml.apropos-list \"test%-retries\") 1 :summary)").await,
        "\"How often to retry.\""
    );
}

#[tokio::test]
async fn defsetting_rejects_a_default_of_the_wrong_type_and_a_name_without_namespace() {
    let lisp = lisp();
    assert_eq!(
        error_of(&lisp, r#"(defsetting my.count "x" :integer "A count.")"#).await,
        "test:1: defsetting: the default of my.count is not an integer"
    );
    assert_eq!(
        error_of(&lisp, r#"(defsetting count 1 :integer "A count.")"#).await,
        "test:1: defsetting: count needs a namespace, e.g. my.count"
    );
}

#[tokio::test]
async fn declaring_a_setting_again_keeps_its_value_and_updates_its_documentation() {
    let lisp = lisp();
    script(
        &lisp,
        &[
            (r#"(defsetting my.limit 200 :integer "Old doc.")"#, None),
            ("(setq my.limit 50)", None),
            (r#"(defsetting my.limit 200 :integer "New doc.")"#, None),
            ("my.limit", Some("50")),
            (
                "(describe my.limit)",
                Some(
                    r#""my.limit  (setting, an integer)
  New doc.
  Value: 50
  Default: 200
  Defined in test:1""#,
                ),
            ),
        ],
    )
    .await;
}

// ---------------------------------------------------------------------------------------------
// Advice

/// `my.f` records each call in `my.log` and returns its argument plus one; `my.trace` builds an
/// advice that records entering and leaving under a tag; `my.run` calls `my.f` and returns its
/// value with the log of that call.
const ADVICE_SETUP: &str = r#"
(set _G.my {:log []})
(fn my.f [x]
  "Add one to X."
  (table.insert my.log (.. "f" x))
  (+ x 1))
(fn my.trace [tag]
  (fn [original x]
    (table.insert my.log (.. tag ">"))
    (let [r (original x)]
      (table.insert my.log (.. "<" tag))
      r)))
(fn my.run [x]
  (set my.log [])
  (let [r (my.f x)]
    [r (table.concat my.log " ")]))
"#;

#[tokio::test]
async fn advice_is_called_with_the_original_and_the_arguments() {
    let lisp = lisp();
    script(
        &lisp,
        &[
            (ADVICE_SETUP, None),
            (
                "(advise! my.f :double (fn [original x] (* 2 (original (+ x 10)))))",
                Some(r#""my.f""#),
            ),
            ("(my.run 1)", Some(r#"[24 "f11"]"#)),
            // Every argument and every return value passes through.
            (
                "(fn my.pair [a b c] (values c b a))
                 (advise! my.pair :pass (fn [original ...] (original ...)))
                 (my.pair 1 nil 3)",
                Some("3\tnil\t1"),
            ),
        ],
    )
    .await;
}

#[tokio::test]
async fn advice_keys_order_replacement_and_removal() {
    let lisp = lisp();
    script(
        &lisp,
        &[
            (ADVICE_SETUP, None),
            ("(advice-keys my.f)", Some("{}")),
            ("(advise! my.f :a (my.trace :a))", None),
            ("(my.run 1)", Some(r#"[2 "a> f1 <a"]"#)),
            // A new key wraps outermost; keys are listed innermost first.
            ("(advise! my.f :b (my.trace :b))", None),
            ("(advice-keys my.f)", Some(r#"["a" "b"]"#)),
            ("(my.run 1)", Some(r#"[2 "b> a> f1 <a <b"]"#)),
            ("(advise! my.f :c (my.trace :c))", None),
            ("(my.run 1)", Some(r#"[2 "c> b> a> f1 <a <b <c"]"#)),
            // The same key replaces that advice in place: :a stays innermost.
            ("(advise! my.f :a (my.trace :A))", None),
            ("(advice-keys my.f)", Some(r#"["a" "b" "c"]"#)),
            ("(my.run 1)", Some(r#"[2 "c> b> A> f1 <A <b <c"]"#)),
            // Replacing the outermost keeps it outermost.
            ("(advise! my.f :c (my.trace :C))", None),
            ("(my.run 1)", Some(r#"[2 "C> b> A> f1 <A <b <C"]"#)),
            // unadvise! with a key removes that one only.
            ("(unadvise! my.f :b)", Some(r#""my.f""#)),
            ("(advice-keys my.f)", Some(r#"["a" "c"]"#)),
            ("(my.run 1)", Some(r#"[2 "C> A> f1 <A <C"]"#)),
            // A key that is not there changes nothing.
            ("(unadvise! my.f :zzz)", None),
            ("(advice-keys my.f)", Some(r#"["a" "c"]"#)),
            // Without a key, all advice goes and the original is back in the table.
            ("(unadvise! my.f)", None),
            ("(advice-keys my.f)", Some("{}")),
            ("(my.run 1)", Some(r#"[2 "f1"]"#)),
            ("(= my.f (oml.original my.f))", Some("true")),
            // Advising works again afterwards.
            ("(advise! my.f :z (my.trace :z))", None),
            ("(my.run 2)", Some(r#"[3 "z> f2 <z"]"#)),
        ],
    )
    .await;
}

#[tokio::test]
async fn removing_the_last_advice_by_key_restores_the_original() {
    let lisp = lisp();
    script(
        &lisp,
        &[
            (ADVICE_SETUP, None),
            ("(set _G.original my.f)", None),
            ("(advise! my.f :a (my.trace :a))", None),
            ("(= my.f original)", Some("false")),
            ("(unadvise! my.f :a)", None),
            ("(= my.f original)", Some("true")),
        ],
    )
    .await;
}

#[tokio::test]
async fn redefining_an_advised_function_drops_its_advice() {
    let lisp = lisp();
    script(
        &lisp,
        &[
            (ADVICE_SETUP, None),
            ("(advise! my.f :a (my.trace :a))", None),
            ("(advise! my.f :b (my.trace :b))", None),
            (
                "(fn my.f [x] \"Add two.\" (table.insert my.log (.. \"g\" x)) (+ x 2))",
                None,
            ),
            ("(advice-keys my.f)", Some("{}")),
            ("(my.run 1)", Some(r#"[3 "g1"]"#)),
            // New advice wraps the new definition, and only the new advice runs.
            ("(advise! my.f :a (my.trace :a))", None),
            ("(advice-keys my.f)", Some(r#"["a"]"#)),
            ("(my.run 1)", Some(r#"[3 "a> g1 <a"]"#)),
            ("(unadvise! my.f)", None),
            ("(my.run 1)", Some(r#"[3 "g1"]"#)),
        ],
    )
    .await;
}

#[tokio::test]
async fn the_caller_sees_advice_added_after_it_was_defined() {
    // Late binding: my.run looks my.f up at call time, so it sees advice added later.
    let lisp = lisp();
    script(
        &lisp,
        &[
            (ADVICE_SETUP, None),
            ("(my.run 5)", Some(r#"[6 "f5"]"#)),
            ("(advise! my.f :late (my.trace :late))", None),
            ("(my.run 5)", Some(r#"[6 "late> f5 <late"]"#)),
        ],
    )
    .await;
    // And so does Rust, which calls by name.
    view(&lisp, "(set my.log [])").await;
    assert_eq!(
        lisp.call_json("my.f", &[json!(5)], &CancelToken::new())
            .await
            .expect("call"),
        json!(6)
    );
    assert_eq!(
        view(&lisp, "(table.concat my.log \" \")").await,
        r#""late> f5 <late""#
    );
}

#[tokio::test]
async fn an_advised_function_keeps_its_documentation_and_says_it_is_advised() {
    let lisp = lisp();
    view(&lisp, ADVICE_SETUP).await;
    view(
        &lisp,
        "(advise! my.f :a (my.trace :a)) (advise! my.f :b (my.trace :b))",
    )
    .await;
    assert_eq!(
        view(&lisp, "(describe my.f)").await,
        r#""(my.f x)
  Add one to X.
  Advised: [\"a\" \"b\"]
  Defined in test:3""#
    );
}

#[tokio::test]
async fn advising_what_is_not_a_function_is_an_error_that_names_it() {
    let lisp = lisp();
    view(&lisp, ADVICE_SETUP).await;
    let cases = [
        (
            "(advise! my.log :a (fn [f] f))",
            "advise!: my.log is not a function",
        ),
        (
            "(advise! nowhere.f :a (fn [f] f))",
            "advise!: nothing named nowhere.f",
        ),
        (
            "(advise! my.f :a 42)",
            "advise!: the advice for my.f must be a function",
        ),
    ];
    for (form, message) in cases {
        assert_eq!(
            error_of(&lisp, form).await,
            format!("test:1: {message}"),
            "{form}"
        );
    }
    assert_eq!(view(&lisp, "(advice-keys my.f)").await, "{}");
}

// ---------------------------------------------------------------------------------------------
// Introspection of user code

const USER_MODULE: &str = r#"(local M {})

(fn M.greet [name ?punct]
  "Greet NAME.

Adds ?PUNCT, or a full stop."
  (.. "hello " name (or ?punct ".")))

(fn M.undocumented [] nil)

M
"#;

#[tokio::test]
async fn doc_source_and_apropos_work_on_a_module_on_the_load_path() {
    let dir = tempfile::tempdir().expect("temp dir");
    let module = dir.path().join("my/greeter.fnl");
    std::fs::create_dir_all(module.parent().expect("parent")).expect("mkdir");
    std::fs::write(&module, USER_MODULE).expect("write");
    let lisp = lisp();
    lisp.install_searcher().expect("searcher");
    lisp.add_load_path(dir.path()).expect("load path");
    view(
        &lisp,
        "(set _G.greeter (require :my.greeter)) (set _G.my {:greet greeter.greet :quiet greeter.undocumented})",
    )
    .await;
    assert_eq!(view(&lisp, "(my.greet :you)").await, r#""hello you.""#);
    let m = module.display();
    assert_eq!(
        view(&lisp, "(describe my.greet)").await,
        format!(
            "\"(my.greet name ?punct)\n  Greet NAME.\n  \n  Adds ?PUNCT, or a full stop.\n  Defined in {m}:3\""
        )
    );
    assert_eq!(
        view(&lisp, "(describe greeter.undocumented)").await,
        format!("\"(greeter.undocumented)\n  Undocumented.\n  Defined in {m}:9\"")
    );
    assert_eq!(
        view(&lisp, "(oml.source-of :my.greet)").await,
        format!(
            "\"{m}:3\n(fn M.greet [name ?punct]\n  \\\"Greet NAME.\n\nAdds ?PUNCT, or a full stop.\\\"\n  (.. \\\"hello \\\" name (or ?punct \\\".\\\")))\""
        )
    );
    // apropos lists documented functions only, with the first sentence of their doc.
    assert_eq!(
        view(&lisp, "(oml.apropos-list :greet)").await,
        r#"[{:name "greeter.greet" :summary "Greet NAME."}
 {:name "my.greet" :summary "Greet NAME."}]"#
    );
    // An unqualified name is looked up in the namespaces.
    assert_eq!(
        view(&lisp, "(describe nothing-here)").await,
        "\"Nothing named nothing-here\""
    );
}

#[tokio::test]
async fn describe_covers_tables_plain_values_and_built_in_functions() {
    let lisp = lisp();
    view(&lisp, "(set _G.my {:n 5 :t {:b 1 :a 2}})").await;
    assert_eq!(view(&lisp, "(describe my.n)").await, "\"my.n = 5\"");
    assert_eq!(
        view(&lisp, "(describe my.t)").await,
        "\"my.t  (table)\n  a b\""
    );
    let described = view(&lisp, "(describe oml.describe)").await;
    assert!(
        described.starts_with("\"(oml.describe name)\n  The documentation of NAME")
            && described.contains("Defined in src/lisp/prelude/core.fnl:"),
        "{described}"
    );
    let source = view(&lisp, "(oml.source-of :oml.summary)").await;
    assert!(
        source.contains("src/lisp/prelude/core.fnl:") && source.contains("(fn oml.summary [doc]"),
        "{source}"
    );
}

// ---------------------------------------------------------------------------------------------
// JSON across the boundary

#[tokio::test]
async fn json_keeps_empty_objects_empty_arrays_and_null_apart() {
    let lisp = lisp();
    view(&lisp, "(fn _G.identity [x] x)").await;
    let cases = [
        json!({}),
        json!([]),
        json!(null),
        json!({"obj": {}, "arr": [], "nul": null}),
        json!([[], {}, null, 1, "two", 2.5, true]),
        json!({"deep": {"a": [{"b": []}, {"c": {}}], "n": null}}),
        json!("text"),
        json!(-3),
    ];
    for case in cases {
        // Rust -> Lisp -> Rust.
        assert_eq!(
            lisp.call_json("identity", std::slice::from_ref(&case), &CancelToken::new())
                .await
                .expect("call"),
            case,
            "through call_json"
        );
        // Text -> Lisp -> text, inside Lisp.
        let text = case.to_string();
        let src = format!("(json.encode (json.decode {}))", lua_string(&text));
        let round: String =
            serde_json::from_str(&view(&lisp, &src).await).expect("a Fennel string is JSON");
        let round: serde_json::Value = serde_json::from_str(&round).expect("json.encode output");
        assert_eq!(round, case, "through json.decode/json.encode");
    }
}

#[tokio::test]
async fn json_values_built_in_lisp_have_the_expected_kind() {
    let lisp = lisp();
    let cases = [
        ("(json.encode {})", "{}"),
        ("(json.encode (json.object))", "{}"),
        ("(json.encode (json.array))", "[]"),
        ("(json.encode (json.array 1 :a))", r#"[1,"a"]"#),
        ("(json.encode [1 2])", "[1,2]"),
        ("(json.encode json.null)", "null"),
        ("(json.encode {:a json.null})", r#"{"a":null}"#),
        ("(json.encode {:f (fn [] 1) :n 1})", r#"{"n":1}"#),
    ];
    for (src, expected) in cases {
        let got: String = serde_json::from_str(&view(&lisp, src).await).expect("a string");
        assert_eq!(got, expected, "{src}");
    }
    let checks = [
        (
            "(= json.null (. (json.decode \"{\\\"a\\\": null}\") :a))",
            "true",
        ),
        ("(json.array? (json.decode \"[]\"))", "true"),
        ("(json.array? (json.decode \"{}\"))", "false"),
        ("(json.array? (json.array))", "true"),
        ("(json.array? [])", "false"),
        ("(length (json.decode \"[1, 2, 3]\"))", "3"),
    ];
    for (src, expected) in checks {
        assert_eq!(view(&lisp, src).await, expected, "{src}");
    }
}

#[tokio::test]
async fn a_lisp_result_converts_to_json_for_rust() {
    let lisp = lisp();
    view(
        &lisp,
        "(fn _G.build [] {:empty-obj {} :empty-arr (json.array) :nothing json.null :list [1 2] :n 1.5})",
    )
    .await;
    assert_eq!(
        lisp.call_json("build", &[], &CancelToken::new())
            .await
            .expect("call"),
        json!({"empty-obj": {}, "empty-arr": [], "nothing": null, "list": [1, 2], "n": 1.5})
    );
    let err = lisp
        .call_json("no.such.function", &[], &CancelToken::new())
        .await
        .expect_err("not a function");
    assert_eq!(err.to_string(), "no.such.function is not a function");
}

#[tokio::test]
async fn json_decode_of_bad_text_is_an_error_that_says_so() {
    let lisp = lisp();
    let message = error_of(&lisp, "(json.decode \"{not json\")").await;
    assert!(message.contains("json.decode: "), "{message}");
}

/// `text` as a Fennel string literal.
fn lua_string(text: &str) -> String {
    format!("\"{}\"", text.replace('\\', "\\\\").replace('"', "\\\""))
}

// ---------------------------------------------------------------------------------------------
// Interruption

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_form_that_loops_forever_is_interrupted_by_its_cancel_token() {
    let lisp = lisp();
    let (started_tx, started_rx) = std::sync::mpsc::channel::<()>();
    let started = lisp
        .lua()
        .create_function(move |_, ()| {
            let _ = started_tx.send(());
            Ok(())
        })
        .expect("function");
    lisp.lua()
        .globals()
        .set("started", started)
        .expect("global");
    let cancel = CancelToken::new();
    let canceller = {
        let cancel = cancel.clone();
        std::thread::spawn(move || {
            started_rx.recv().expect("the loop starts");
            cancel.cancel();
        })
    };
    let f = lisp
        .compile("(started) (while true nil)", "loop")
        .expect("compile");
    let result = tokio::time::timeout(
        std::time::Duration::from_secs(60),
        lisp.run::<()>(f, (), &cancel),
    )
    .await
    .expect("the loop is interrupted");
    assert!(matches!(result, Err(LispError::Interrupted)), "{result:?}");
    canceller.join().expect("canceller");
    // The state is usable afterwards.
    assert_eq!(view(&lisp, "(+ 1 2)").await, "3");
}

// ---------------------------------------------------------------------------------------------
// The compiled-Fennel cache

#[tokio::test]
async fn compile_file_caches_by_content_and_recompiles_a_changed_file() {
    let cache = tempfile::tempdir().expect("cache dir");
    let src_dir = tempfile::tempdir().expect("source dir");
    let file = src_dir.path().join("prog.fnl");
    let lisp = lisp_with_cache(Some(cache.path()));
    let cached = || -> Vec<std::path::PathBuf> {
        let mut v: Vec<_> = std::fs::read_dir(cache.path())
            .map(|rd| rd.map(|e| e.expect("entry").path()).collect())
            .unwrap_or_default();
        v.sort();
        v
    };
    let run = |lisp: &Lisp| {
        let f = lisp.compile_file(&file).expect("compile");
        let lisp = lisp.clone();
        async move {
            let v: i64 = lisp.run(f, (), &CancelToken::new()).await.expect("run");
            v
        }
    };

    std::fs::write(&file, "(+ 1 2)").expect("write");
    assert_eq!(run(&lisp).await, 3);
    let first = cached();
    assert_eq!(first.len(), 1, "{first:?}");
    assert!(first[0].extension().is_some_and(|e| e == "lua"));

    // The cache is read for unchanged content: a tampered entry (its first line, naming the
    // source, kept) is what runs.
    let entry = std::fs::read_to_string(&first[0]).expect("read the cache");
    let header = entry.lines().next().unwrap_or_default();
    std::fs::write(&first[0], format!("{header}\nreturn 99")).expect("tamper");
    assert_eq!(run(&lisp).await, 99);
    // Another host with the same cache dir uses it too.
    assert_eq!(run(&lisp_with_cache(Some(cache.path()))).await, 99);

    // Changed content gets its own entry.
    std::fs::write(&file, "(+ 2 2)").expect("write");
    assert_eq!(run(&lisp).await, 4);
    assert_eq!(cached().len(), 2);
}

#[tokio::test]
async fn a_file_that_does_not_compile_is_not_cached() {
    let cache = tempfile::tempdir().expect("cache dir");
    let src_dir = tempfile::tempdir().expect("source dir");
    let file = src_dir.path().join("bad.fnl");
    std::fs::write(&file, "(+ 1 2").expect("write");
    let lisp = lisp_with_cache(Some(cache.path()));
    let err = lisp.compile_file(&file).expect_err("does not compile");
    assert!(matches!(err, LispError::Compile(_)), "{err:?}");
    assert!(
        err.to_string()
            .starts_with(&format!("{}:1:", file.display())),
        "{err}"
    );
    let entries = std::fs::read_dir(cache.path())
        .map(|rd| rd.count())
        .unwrap_or(0);
    assert_eq!(entries, 0);
}

// ---------------------------------------------------------------------------------------------
// Reloading init files

#[tokio::test]
async fn loading_the_init_files_again_is_idempotent() {
    let root = tempfile::tempdir().expect("root");
    let paths = Paths::under(root.path());
    let project = root.path().join("project");
    std::fs::create_dir_all(project.join(".oml")).expect("mkdir");
    std::fs::create_dir_all(paths.config.join("lisp")).expect("mkdir");
    std::fs::write(
        paths.config.join("lisp/counter.fnl"),
        "(set _G.module-loads (+ 1 (or _G.module-loads 0)))\n{:bump (fn [n] (+ n 1))}\n",
    )
    .expect("write");
    std::fs::write(
        paths.user_init(),
        r#"(set _G.my (or _G.my {}))
(local counter (require :counter))
(defsetting my.limit 10 :integer "A limit.")
(setq repl.history-size 77)
(fn my.f [x] "Add one." (+ x 1))
(advise! my.f :twice (fn [f x] (* 2 (f x))))
(advise! my.f :bump (fn [f x] (counter.bump (f x))))
"#,
    )
    .expect("write");
    std::fs::write(
        project.join(".oml/init.fnl"),
        "(setq my.limit 20)\n(advise! my.f :project (fn [f x] (+ 100 (f x))))\n",
    )
    .expect("write");
    let lisp = lisp();
    lisp.install_searcher().expect("searcher");
    view(&lisp, "(setq init.project-init :always)").await;

    let mut results = Vec::new();
    for _ in 0..3 {
        let report = init::load_all(&lisp, &paths, Some(&project), true).await;
        assert!(report.errors.is_empty(), "{:?}", report.errors);
        assert_eq!(report.loaded.len(), 2, "{:?}", report.loaded);
        results.push(
            view(
                &lisp,
                "[(my.f 1) (advice-keys my.f) my.limit repl.history-size _G.module-loads (length oml.load-path)]",
            )
            .await,
        );
    }
    assert_eq!(results[0], r#"[105 ["twice" "bump" "project"] 20 77 1 2]"#);
    assert_eq!(results[1], results[0]);
    assert_eq!(results[2], results[0]);
}

#[tokio::test]
async fn init_errors_are_collected_with_file_and_line() {
    let root = tempfile::tempdir().expect("root");
    let paths = Paths::under(root.path());
    std::fs::create_dir_all(&paths.config).expect("mkdir");
    std::fs::write(paths.user_init(), "(set _G.ok true)\n\n(undefined)\n").expect("write");
    let lisp = lisp();
    let report = init::load_all(&lisp, &paths, None, true).await;
    assert!(report.loaded.is_empty());
    assert_eq!(report.errors.len(), 1);
    let e = &report.errors[0];
    assert_eq!(e.file, paths.user_init());
    assert_eq!(
        e.to_string(),
        format!(
            "error in {}:3: attempt to call a nil value (global 'undefined')",
            paths.user_init().display()
        )
    );
    assert_eq!(view(&lisp, "_G.ok").await, "true");
}

// ---------------------------------------------------------------------------------------------
// Structured errors

#[tokio::test]
async fn lisp_reads_the_category_and_message_of_a_caught_rust_error() {
    let lisp = lisp();
    let cancelled = lisp
        .lua()
        .create_function(|_, ()| -> mlua::Result<()> {
            Err(LispError::Cancelled {
                what: "session/request_permission".into(),
            }
            .into_lua())
        })
        .unwrap();
    lisp.lua().globals().set("cancelled", cancelled).unwrap();
    script(
        &lisp,
        &[
            (
                "(let [(ok e) (pcall _G.cancelled)] [ok (oml.error-category e) (oml.error-message e)])",
                Some(r#"[false "cancelled" "Cancelled while waiting for session/request_permission"]"#),
            ),
            (
                "(let [(ok e) (pcall json.decode \"{\")] [(oml.error-category e) (oml.error-message e)])",
                Some(r#"["runtime" "json.decode: EOF while parsing an object at line 1 column 1"]"#),
            ),
            (
                "(let [(ok e) (pcall error \"  plain  \")] [(oml.error-category e) (oml.error-message e)])",
                Some(r#"["runtime" "plain"]"#),
            ),
            ("(oml.error-category {:category :agent})", Some(r#""agent""#)),
        ],
    )
    .await;
    // Out of Lisp, the error keeps its kind, and Display leaves the traceback out.
    match lisp.eval("(_G.cancelled)", "test").await {
        Err(LispError::Cancelled { what }) => assert_eq!(what, "session/request_permission"),
        other => panic!("{other:?}"),
    }
    let e = lisp.eval("(error \"boom\")", "test").await.unwrap_err();
    assert_eq!(e.to_string(), "test:1: boom");
    assert!(
        e.traceback()
            .is_some_and(|t| t.starts_with("stack traceback:")),
        "{e:?}"
    );
}
