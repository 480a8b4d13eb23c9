//! The `oml` binary as a user runs it: `oml eval`, `oml run`, the REPL on piped stdin, `oml trust`
//! and `oml untrust`, and the init files (user and project) with their errors. Every test gets
//! fresh XDG directories and a fresh project directory as its working directory.

#![allow(clippy::print_stdout, clippy::print_stderr)] // test and tool output

mod support;

use support::home::{Home, write};

// ---------------------------------------------------------------------------------------------
// oml eval, the REPL on a pipe and oml run: one table of command lines and what they give

/// What one of a run's streams must be.
#[derive(Clone, Copy, Debug)]
enum Text {
    Is(&'static str),
    Starts(&'static str),
    Has(&'static str),
    Ends(&'static str),
    Lacks(&'static str),
}

impl Text {
    fn holds(self, text: &str) -> bool {
        match self {
            Text::Is(t) => text == t,
            Text::Starts(t) => text.starts_with(t),
            Text::Has(t) => text.contains(t),
            Text::Ends(t) => text.ends_with(t),
            Text::Lacks(t) => !text.contains(t),
        }
    }
}

/// A command line: the files it finds in the project, its arguments and stdin, and what it must
/// give: its exit status and what its stdout and stderr must be.
struct Case {
    files: Vec<(&'static str, &'static str)>,
    args: Vec<&'static str>,
    stdin: &'static str,
    code: i32,
    stdout: Vec<Text>,
    stderr: Vec<Text>,
}

/// `oml eval EXPR`, which prints VALUE and nothing on stderr.
fn eval(expr: &'static str, value: &'static str) -> Case {
    Case {
        files: vec![],
        args: vec!["eval", expr],
        stdin: "",
        code: 0,
        stdout: vec![Text::Is(value)],
        stderr: vec![Text::Is("")],
    }
}

/// `oml eval EXPR`, which fails with status 1 and an error on stderr starting with ERROR.
fn eval_fails(expr: &'static str, error: &'static str) -> Case {
    Case {
        files: vec![],
        args: vec!["eval", expr],
        stdin: "",
        code: 1,
        stdout: vec![Text::Is("")],
        stderr: vec![Text::Starts(error)],
    }
}

/// `oml run exit.fnl` with SRC in it, which exits with CODE, quietly, and never prints `after`.
fn exits(src: &'static str, code: i32) -> Case {
    Case {
        files: vec![("exit.fnl", src)],
        args: vec!["run", "exit.fnl"],
        stdin: "",
        code,
        stdout: vec![Text::Lacks("after")],
        stderr: vec![Text::Is("")],
    }
}

fn cases() -> Vec<Case> {
    vec![
        eval("(+ 1 2)", "3\n"),
        eval("\"text\"", "\"text\"\n"),
        eval("[1 2 3]", "[1 2 3]\n"),
        eval("{:a 1}", "{:a 1}\n"),
        eval("(values 1 :two)", "1\t\"two\"\n"),
        eval("nil", "nil\n"),
        eval("(let [x 20] (+ x 22))", "42\n"),
        // The one character-counted truncation, as Lisp reaches it: never a split character.
        eval(r#"(oml.keep-tail "ééé" 2)"#, "\"éé\"\n"),
        eval(r#"(oml.keep-tail "abc" 5)"#, "\"abc\"\n"),
        eval(
            r#"(oml.cap-head "日本語です" 2)"#,
            "\"日本\n[output truncated: 3 more characters]\"\n",
        ),
        eval(r#"(oml.cap-head "ab" 2)"#, "\"ab\"\n"),
        // setq sets several settings and returns the last value.
        eval(
            "[(setq repl.history-size 5 init.project-init :never) repl.history-size init.project-init]",
            "[\"never\" 5 \"never\"]\n",
        ),
        eval_fails("(error \"boom\")", "error: eval:1: boom"),
        Case {
            stderr: vec![
                Text::Starts("error: eval:1:"),
                Text::Has("Parse error: unexpected closing delimiter )"),
            ],
            ..eval_fails("(+ 1 2))", "")
        },
        eval_fails(
            "(setq agent.no-such-setting 5)",
            "error: eval:1: setq: unknown setting agent.no-such-setting\n",
        ),
        eval_fails(
            "(setq repl.history-size \"many\")",
            "error: eval:1: setq: repl.history-size expects an integer, got string \"many\"\n",
        ),
        // The REPL on a pipe: each value printed, forms over several lines, an error reported and
        // the next form read, end of input the end.
        Case {
            files: vec![],
            args: vec!["repl"],
            stdin: "(+ 1 2)\n",
            code: 0,
            stdout: vec![Text::Is("3\n")],
            stderr: vec![Text::Is("")],
        },
        Case {
            files: vec![],
            args: vec!["repl"],
            stdin: "(fn _G.twice [x]\n  \"Double X.\"\n  (* 2 x))\n(twice\n  21)\n(print \"side\n effect\")\n(+ 1 1)\n",
            code: 0,
            // The fn form's value is the function itself; then the call, the print and the sum.
            stdout: vec![
                Text::Starts("#<function: "),
                Text::Ends(">\n42\nside\n effect\n2\n"),
            ],
            stderr: vec![Text::Is("")],
        },
        Case {
            files: vec![],
            args: vec!["repl"],
            stdin: "(error \"boom\")\n(+ 1 2)\n",
            code: 0,
            stdout: vec![Text::Starts("Runtime error: "), Text::Ends("boom\n3\n")],
            stderr: vec![Text::Is("")],
        },
        // oml run: the arguments in `arg`, os.exit's status, a failure's file and line.
        Case {
            files: vec![(
                "prog.fnl",
                "(print (length arg) (. arg 1) (. arg 2) (. arg 3))\n(print (= (. arg 0) \"prog.fnl\"))\n",
            )],
            args: vec!["run", "prog.fnl", "one", "--two", "3"],
            stdin: "",
            code: 0,
            stdout: vec![Text::Is("3\tone\t--two\t3\ntrue\n")],
            stderr: vec![Text::Is("")],
        },
        exits("(os.exit 3)", 3),
        exits("(os.exit 0)", 0),
        exits("(os.exit true)", 0),
        exits("(os.exit false)", 1),
        exits("(print :before)\n(os.exit 7)\n(print :after)", 7),
        // From inside a function called by the program.
        exits("(fn stop [] (os.exit 4))\n(stop)", 4),
        Case {
            files: vec![("fails.fnl", "(print :start)\n\n(error \"went wrong\")\n")],
            args: vec!["run", "fails.fnl"],
            stdin: "",
            code: 1,
            stdout: vec![Text::Is("start\n")],
            stderr: vec![Text::Starts("error: fails.fnl:3: went wrong")],
        },
        Case {
            files: vec![],
            args: vec!["run", "nowhere.fnl"],
            stdin: "",
            code: 1,
            stdout: vec![Text::Is("")],
            stderr: vec![Text::Starts("error: nowhere.fnl: ")],
        },
    ]
}

#[tokio::test]
async fn each_command_line_gives_its_status_and_output() {
    let home = Home::new();
    let mut failures = Vec::new();
    for case in cases() {
        for (path, text) in &case.files {
            write(&home.project.join(path), text);
        }
        let out = home.oml_with_stdin(&case.args, case.stdin).await;
        let wrong: Vec<String> = (case.stdout.iter().map(|t| ("stdout", t, &out.stdout)))
            .chain(case.stderr.iter().map(|t| ("stderr", t, &out.stderr)))
            .filter(|(_, t, text)| !t.holds(text))
            .map(|(stream, t, _)| format!("{stream} is not {t:?}"))
            .collect();
        if out.code != case.code || !wrong.is_empty() {
            failures.push(format!(
                "oml {:?} (stdin {:?}): want status {}, {wrong:?}; got {out:?}",
                case.args, case.stdin, case.code
            ));
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

// ---------------------------------------------------------------------------------------------
// The user init file

#[tokio::test]
async fn user_init_runs_and_finds_modules_in_its_lisp_dir() {
    let home = Home::new();
    write(
        &home.config.join("oml/lisp/my/ext.fnl"),
        "(local M {})\n(fn M.greet [name] \"Greet NAME.\" (.. \"hello \" name))\nM\n",
    );
    write(
        &home.user_init(),
        "(local ext (require :my.ext))\n(set _G.greeting (ext.greet \"init\"))\n(setq repl.history-size 7)\n",
    );
    assert_eq!(
        home.eval("[greeting repl.history-size]").await,
        "[\"hello init\" 7]"
    );
    // The module stays reachable from the command's own code too.
    assert_eq!(
        home.eval("((. (require :my.ext) :greet) \"eval\")").await,
        "\"hello eval\""
    );
}

#[tokio::test]
async fn no_init_skips_the_user_init_file() {
    let home = Home::new();
    write(&home.user_init(), "(set _G.init-ran true)\n");
    assert_eq!(home.eval("(= true _G.init-ran)").await, "true");
    let out = home
        .oml(&["--no-init", "eval", "(= true _G.init-ran)"])
        .await;
    assert_eq!((out.code, out.stdout.as_str()), (0, "false\n"));
}

/// More bad init files: `(what, source, the message after "oml: error in FILE")`.
/// Init files that fail, each run as the user's and as a (trusted) project's: what is wrong,
/// the file, and what the report says after the file name.
const BAD_INIT_FILES: &[(&str, &str, &str)] = &[
    (
        "syntax error: a closing delimiter too many",
        "(set _G.before true)\n\n(print :x))\n",
        ":3:10: Parse error: unexpected closing delimiter )",
    ),
    (
        "runtime error: an error raised",
        "(set _G.before true)\n\n\n(error \"init exploded\")\n(set _G.after true)\n",
        ":4: init exploded",
    ),
    (
        "syntax error: an unclosed form",
        "(set _G.before true)\n(fn f []\n",
        ":3:0: Parse error: expected closing delimiter )",
    ),
    (
        "compile error: an unknown special form use",
        "(set _G.before true)\n(local)\n",
        ":2:0: Compile error: expected name and value",
    ),
    (
        "runtime error: indexing nil",
        "(set _G.before true)\n(local t nil)\n(print (. t :field))\n",
        ":3: attempt to index a nil value (local 't')",
    ),
    (
        "setq of an unknown setting",
        "(set _G.before true)\n(setq agent.nope 1)\n",
        ":2: setq: unknown setting agent.nope",
    ),
    (
        "setq of a wrong type, as the last form",
        "(set _G.before true)\n\n(setq repl.history-size :lots)",
        ":3: setq: repl.history-size expects an integer, got string \"lots\"",
    ),
    (
        "advice for a function that does not exist, as the last form",
        "(set _G.before true)\n(advise! agent.no-such-step :log (fn [f ...] (f ...)))",
        ":2: advise!: agent.no-such-step is not a function",
    ),
    (
        "defsetting with a default of the wrong type, as the last form",
        "(set _G.before true)\n\n(defsetting my.limit :many :integer \"A limit.\")",
        ":3: defsetting: the default of my.limit is not an integer",
    ),
];

/// Which init file a bad-input test writes.
#[derive(Clone, Copy, Debug)]
enum InitFile {
    User,
    /// The project's `.oml/init.fnl`, trusted after it is written.
    Project,
}

/// Write `src` as the init file, run `oml eval '(+ 1 2)'`, and check that it still prints 3 and
/// exits 0 while stderr reports the error once, starting `oml: error in FILE` + `message`.
async fn assert_bad_init_reported(which: InitFile, src: &str, message: &str) {
    let home = Home::new();
    let init = match which {
        InitFile::User => home.user_init(),
        InitFile::Project => home.project_init(),
    };
    write(&init, src);
    if let InitFile::Project = which {
        assert_eq!(home.oml(&["trust"]).await.code, 0);
    }
    let out = home.oml(&["eval", "(+ 1 2)"]).await;
    assert_eq!(
        (out.code, out.stdout.as_str()),
        (0, "3\n"),
        "{which:?} {src:?}: {out:?}"
    );
    let expected = format!("oml: error in {}{message}", init.display());
    assert!(
        out.stderr.starts_with(&expected),
        "{which:?} {src:?}:\n expected {expected:?}\n got {:?}",
        out.stderr
    );
    assert_eq!(
        out.stderr.matches("oml: error in").count(),
        1,
        "{which:?} {src:?}: one report: {:?}",
        out.stderr
    );
}

#[tokio::test]
async fn a_bad_init_file_is_reported_with_file_and_line_and_oml_keeps_working() {
    for (what, src, message) in BAD_INIT_FILES {
        for which in [InitFile::User, InitFile::Project] {
            println!("{which:?}: {what}");
            assert_bad_init_reported(which, src, message).await;
        }
    }
}

#[tokio::test]
async fn what_a_failing_user_init_did_before_the_error_stays_done() {
    let home = Home::new();
    write(
        &home.user_init(),
        "(set _G.before true)\n(error \"stop\")\n(set _G.after true)\n",
    );
    let out = home
        .oml(&["eval", "[(= true _G.before) (= true _G.after)]"])
        .await;
    assert_eq!(
        (out.code, out.stdout.as_str()),
        (0, "[true false]\n"),
        "{out:?}"
    );
}

#[tokio::test]
async fn a_failing_module_required_by_the_user_init_names_the_module_file() {
    let home = Home::new();
    let module = home.config.join("oml/lisp/broken.fnl");
    write(&module, "{:ok true\n :bad (\n");
    write(&home.user_init(), "(require :broken)\n");
    let out = home.oml(&["eval", "(+ 1 2)"]).await;
    assert_eq!((out.code, out.stdout.as_str()), (0, "3\n"), "{out:?}");
    assert!(
        out.stderr
            .starts_with(&format!("oml: error in {}", home.user_init().display()))
            && out.stderr.contains(&format!("{}:3:", module.display())),
        "{:?}",
        out.stderr
    );
}

#[tokio::test]
async fn introspection_works_on_functions_of_the_user_init_and_its_modules() {
    let home = Home::new();
    let module = home.config.join("oml/lisp/my/ext.fnl");
    write(
        &module,
        "(local M {})\n\n(fn M.greet [name]\n  \"Greet NAME politely.\"\n  (.. \"hello \" name))\n\nM\n",
    );
    let init = home.user_init();
    write(
        &init,
        "(set _G.my {})\n(set my.greet (. (require :my.ext) :greet))\n\n(fn my.double [x]\n  \"Double X.\n\nWorks on integers.\"\n  (* 2 x))\n(defsetting my.limit 200 :integer \"How many lines to keep.\")\n",
    );
    // `doc` and `source` print and return no value, which `oml eval` prints as an empty line;
    // `apropos` returns nil.
    let out = home.oml(&["eval", "(doc my.double)"]).await;
    assert_eq!(
        out.stdout,
        format!(
            "(my.double x)\n  Double X.\n  \n  Works on integers.\n  Defined in {}:4\n\n",
            init.display()
        )
    );
    let out = home.oml(&["eval", "(source my.double)"]).await;
    assert_eq!(
        out.stdout,
        format!(
            "{}:4\n(fn my.double [x]\n  \"Double X.\n\nWorks on integers.\"\n  (* 2 x))\n\n",
            init.display()
        )
    );
    let out = home.oml(&["eval", "(source my.greet)"]).await;
    assert_eq!(
        out.stdout,
        format!(
            "{}:3\n(fn M.greet [name]\n  \"Greet NAME politely.\"\n  (.. \"hello \" name))\n\n",
            module.display()
        )
    );
    let out = home.oml(&["eval", "(apropos \"^my%.\")"]).await;
    assert_eq!(
        out.stdout,
        "my.double  Double X.\nmy.greet  Greet NAME politely.\nmy.limit  How many lines to keep.\nnil\n"
    );
    let out = home.oml(&["eval", "(settings)"]).await;
    assert!(
        out.stdout.contains("\nmy.limit = 200\n"),
        "{:?}",
        out.stdout
    );
    let out = home.oml(&["eval", "(source my.limit)"]).await;
    assert_eq!(
        out.stdout,
        format!(
            "{}:9\n(defsetting my.limit 200 :integer \"How many lines to keep.\")\n\n",
            init.display()
        )
    );
}

// ---------------------------------------------------------------------------------------------
// The compiled-Fennel cache

#[tokio::test]
async fn compiled_init_files_are_cached_by_content_and_a_changed_file_is_recompiled() {
    let home = Home::new();
    write(&home.user_init(), "(set _G.version 1)\n");
    assert!(home.cached_files().is_empty());
    assert_eq!(home.eval("version").await, "1");
    let first = home.cached_files();
    assert_eq!(first.len(), 1, "one compiled file: {first:?}");
    let compiled = std::fs::read_to_string(&first[0]).expect("read the cache");
    assert!(compiled.contains("version"), "{compiled:?}");

    // The same content again: the cache is reused, nothing new is written.
    assert_eq!(home.eval("version").await, "1");
    assert_eq!(home.cached_files(), first);

    // Changed content: recompiled, the new code runs.
    write(&home.user_init(), "(set _G.version 2)\n");
    assert_eq!(home.eval("version").await, "2");
    let second = home.cached_files();
    assert_eq!(second.len(), 2, "{second:?}");
    assert!(second.contains(&first[0]));
}

#[tokio::test]
async fn the_cached_compilation_is_what_runs_for_unchanged_content() {
    let home = Home::new();
    write(&home.user_init(), "(set _G.version :compiled)\n");
    assert_eq!(home.eval("version").await, "\"compiled\"");
    let files = home.cached_files();
    assert_eq!(files.len(), 1);
    // Tamper with the cached Lua (its first line, naming the source, kept): an unchanged
    // source file must be loaded from the cache.
    let cached = std::fs::read_to_string(&files[0]).expect("read the cache");
    let header = cached.lines().next().unwrap_or_default();
    std::fs::write(&files[0], format!("{header}\nversion = \"from-cache\"\n")).expect("tamper");
    assert_eq!(home.eval("version").await, "\"from-cache\"");
}

// ---------------------------------------------------------------------------------------------
// Project init files and trust

/// A project init whose side effects are a global and a file next to it.
const PROJECT_INIT: &str =
    "(set _G.project-ran true)\n(with-open [f (io.open \".oml/ran\" :w)] (f:write :yes))\n";

#[tokio::test]
async fn an_untrusted_project_init_file_does_not_run_and_says_how_to_trust_it() {
    let home = Home::new();
    write(&home.project_init(), PROJECT_INIT);
    let out = home.oml(&["eval", "(= true _G.project-ran)"]).await;
    assert_eq!((out.code, out.stdout.as_str()), (0, "false\n"), "{out:?}");
    assert!(
        !home.project.join(".oml/ran").exists(),
        "the file did not run"
    );
    assert_eq!(
        out.stderr,
        format!(
            "oml: not loading {}: this directory is not trusted. Review the file, then run `oml trust {}`.\n",
            home.project_init().display(),
            home.project.display()
        )
    );
}

#[tokio::test]
async fn oml_trust_records_the_directory_and_the_file_hash_and_the_file_then_runs() {
    let home = Home::new();
    write(&home.project_init(), PROJECT_INIT);
    let out = home.oml(&["trust"]).await;
    assert_eq!(out.code, 0, "{out:?}");
    let hash = sha256_hex(PROJECT_INIT.as_bytes());
    assert_eq!(
        out.stdout,
        format!(
            "trusted {} ({} sha256 {})\n",
            home.project.display(),
            home.project_init().display(),
            &hash[..12]
        )
    );
    let record: serde_json::Value = serde_json::from_slice(
        &std::fs::read(home.state.join("oml/trusted.json")).expect("trust record"),
    )
    .expect("JSON");
    assert_eq!(
        record,
        serde_json::json!({ home.project.display().to_string(): hash })
    );

    let out = home.oml(&["eval", "(= true _G.project-ran)"]).await;
    assert_eq!(
        (out.code, out.stdout.as_str(), out.stderr.as_str()),
        (0, "true\n", "")
    );
    assert!(home.project.join(".oml/ran").exists());
}

#[tokio::test]
async fn oml_trust_takes_a_directory_argument() {
    let home = Home::new();
    let other = home.root.join("other");
    write(&other.join(".oml/init.fnl"), "(set _G.other-ran true)\n");
    let out = home.oml(&["trust", other.to_str().expect("utf-8")]).await;
    assert_eq!(out.code, 0, "{out:?}");
    let out = home
        .oml_in(&other, &["eval", "(= true _G.other-ran)"])
        .await;
    assert_eq!((out.code, out.stdout.as_str()), (0, "true\n"), "{out:?}");
    // Trusting one directory does not trust another.
    write(&home.project_init(), PROJECT_INIT);
    assert_eq!(home.eval("(= true _G.project-ran)").await, "false");
}

#[tokio::test]
async fn a_trusted_project_init_file_that_changed_does_not_run_until_trusted_again() {
    let home = Home::new();
    write(&home.project_init(), PROJECT_INIT);
    assert_eq!(home.oml(&["trust"]).await.code, 0);
    write(
        &home.project_init(),
        &format!("{PROJECT_INIT}(set _G.changed true)\n"),
    );
    let out = home
        .oml(&["eval", "[(= true _G.project-ran) (= true _G.changed)]"])
        .await;
    assert_eq!(
        (out.code, out.stdout.as_str()),
        (0, "[false false]\n"),
        "{out:?}"
    );
    assert!(
        !home.project.join(".oml/ran").exists(),
        "the file did not run"
    );
    assert_eq!(
        out.stderr,
        format!(
            "oml: not loading {}: it or a file of .oml/lisp/ changed since you trusted it. Review them, then run `oml trust {}` again.\n",
            home.project_init().display(),
            home.project.display()
        )
    );

    assert_eq!(home.oml(&["trust", "."]).await.code, 0);
    let out = home
        .oml(&["eval", "[(= true _G.project-ran) (= true _G.changed)]"])
        .await;
    assert_eq!(
        (out.code, out.stdout.as_str(), out.stderr.as_str()),
        (0, "[true true]\n", "")
    );
}

#[tokio::test]
async fn oml_untrust_stops_the_project_init_file_from_running() {
    let home = Home::new();
    write(&home.project_init(), PROJECT_INIT);
    assert_eq!(home.oml(&["trust"]).await.code, 0);
    assert_eq!(home.eval("(= true _G.project-ran)").await, "true");
    let out = home.oml(&["untrust"]).await;
    assert_eq!(
        (out.code, out.stdout.as_str()),
        (
            0,
            format!("untrusted {}\n", home.project.display()).as_str()
        )
    );
    let out = home.oml(&["eval", "(= true _G.project-ran)"]).await;
    assert_eq!(out.stdout, "false\n");
    assert!(out.stderr.contains("`oml trust "), "{:?}", out.stderr);
    let out = home.oml(&["untrust"]).await;
    assert_eq!(
        (out.code, out.stdout.as_str()),
        (
            0,
            format!("{} was not trusted\n", home.project.display()).as_str()
        )
    );
}

#[tokio::test]
async fn trusting_a_directory_without_an_init_file_does_not_trust_one_added_later() {
    let home = Home::new();
    let out = home.oml(&["trust"]).await;
    assert_eq!(out.code, 0, "{out:?}");
    assert!(
        out.stdout.contains("has no .oml/init.fnl yet"),
        "{:?}",
        out.stdout
    );
    write(&home.project_init(), PROJECT_INIT);
    let out = home.oml(&["eval", "(= true _G.project-ran)"]).await;
    assert_eq!(out.stdout, "false\n");
    assert!(
        out.stderr.contains("changed since you trusted it"),
        "{:?}",
        out.stderr
    );
}

#[tokio::test]
async fn project_init_setting_always_runs_an_untrusted_file_and_never_skips_a_trusted_one() {
    let home = Home::new();
    write(&home.project_init(), PROJECT_INIT);

    write(&home.user_init(), "(setq init.project-init :always)\n");
    let out = home.oml(&["eval", "(= true _G.project-ran)"]).await;
    assert_eq!(
        (out.code, out.stdout.as_str(), out.stderr.as_str()),
        (0, "true\n", "")
    );
    std::fs::remove_file(home.project.join(".oml/ran")).expect("it ran");

    assert_eq!(home.oml(&["trust"]).await.code, 0);
    write(&home.user_init(), "(setq init.project-init :never)\n");
    let out = home.oml(&["eval", "(= true _G.project-ran)"]).await;
    assert_eq!(
        (out.code, out.stdout.as_str(), out.stderr.as_str()),
        (0, "false\n", "")
    );
    assert!(!home.project.join(".oml/ran").exists());
}

#[tokio::test]
async fn a_trusted_project_init_finds_modules_in_its_lisp_dir() {
    let home = Home::new();
    write(
        &home.project.join(".oml/lisp/proj/util.fnl"),
        "{:answer (fn [] 42)}\n",
    );
    write(
        &home.project_init(),
        "(set _G.answer ((. (require :proj.util) :answer)))\n",
    );
    assert_eq!(home.oml(&["trust"]).await.code, 0);
    assert_eq!(home.eval("answer").await, "42");
}

#[tokio::test]
async fn errors_in_both_init_files_are_each_reported_and_oml_keeps_working() {
    let home = Home::new();
    write(
        &home.user_init(),
        "(set _G.user true)\n(error \"user broke\")\n",
    );
    write(
        &home.project_init(),
        "(set _G.proj true)\n\n(error \"project broke\")\n",
    );
    assert_eq!(home.oml(&["trust"]).await.code, 0);
    let out = home
        .oml(&["eval", "[(= true _G.user) (= true _G.proj)]"])
        .await;
    assert_eq!(
        (out.code, out.stdout.as_str()),
        (0, "[true true]\n"),
        "{out:?}"
    );
    assert_eq!(
        out.stderr,
        format!(
            "oml: error in {}:2: user broke\noml: error in {}:3: project broke\n",
            home.user_init().display(),
            home.project_init().display()
        )
    );
}

fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest as _;
    sha2::Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// `oml sessions --all | head -1` closes stdout after one line: the next write fails, and oml
/// ends normally instead of panicking with "failed printing to stdout" (exit 101).
#[test]
fn a_closed_stdout_is_not_a_panic() {
    use std::io::Read as _;
    let home = Home::new();
    // More listing than a pipe buffers (64 KiB), so oml is still writing when the reader goes.
    let store = oml::session::store::Store::new(home.state.join("oml/sessions"));
    for i in 0..1500 {
        let log = store
            .create(&format!("s{i:05}"), &home.project)
            .expect("create a session file");
        log.message(&serde_json::json!({"role": "user", "content": "a title long enough to fill the listing quickly"}));
    }
    let mut child = home
        .blocking_command(&["sessions", "--all"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn oml");
    let mut stdout = child.stdout.take().unwrap();
    let mut head = [0u8; 16];
    stdout.read_exact(&mut head).unwrap();
    drop(stdout);
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(out.status.code(), Some(0), "{stderr}");
}

/// Run from a subdirectory of a repository, oml finds the project's `.oml/init.fnl` at the
/// root (the nearest folder with `.git` or `.oml/`), and `oml trust` there trusts the root.
#[test]
fn the_project_init_is_found_from_a_subdirectory() {
    let home = Home::new();
    std::fs::create_dir_all(home.project.join(".git")).unwrap();
    write(&home.project_init(), "(set _G.project-ran true)\n");
    let deeper = home.project.join("src/deeper");
    std::fs::create_dir_all(&deeper).unwrap();
    let run = |args: &[&str]| {
        let out = home
            .blocking_command(args)
            .current_dir(&deeper)
            .output()
            .expect("run oml");
        (
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (stdout, stderr) = run(&["eval", "(= true _G.project-ran)"]);
    assert_eq!(stdout, "false\n");
    assert!(
        stderr.contains(&format!("run `oml trust {}`", home.project.display())),
        "{stderr}"
    );
    let (stdout, _) = run(&["trust"]);
    assert!(
        stdout.starts_with(&format!("trusted {} (", home.project.display())),
        "{stdout}"
    );
    let (stdout, stderr) = run(&["eval", "(= true _G.project-ran)"]);
    assert_eq!(stdout, "true\n", "{stderr}");
}

#[tokio::test]
async fn trust_covers_the_modules_the_project_init_requires() {
    let home = Home::new();
    let module = home.project.join(".oml/lisp/proj/util.fnl");
    write(&module, "{:answer (fn [] 42)}\n");
    write(
        &home.project_init(),
        "(set _G.answer ((. (require :proj.util) :answer)))\n",
    );
    assert_eq!(home.oml(&["trust"]).await.code, 0);
    assert_eq!(home.eval("_G.answer").await, "42");
    // A `git pull` changes the module: nothing runs until it is trusted again.
    write(
        &module,
        "{:answer (fn [] (os.execute \"touch pwned\") 666)}\n",
    );
    let out = home.oml(&["eval", "_G.answer"]).await;
    assert_eq!(out.stdout, "nil\n", "{out:?}");
    assert!(
        out.stderr.contains("a file of .oml/lisp/ changed"),
        "{out:?}"
    );
    assert!(!home.project.join("pwned").exists());
    // A new file in the tree counts too.
    assert_eq!(home.oml(&["trust"]).await.code, 0);
    assert_eq!(home.eval("_G.answer").await, "666");
    write(&home.project.join(".oml/lisp/extra.fnl"), "{}\n");
    assert_eq!(home.oml(&["eval", "_G.answer"]).await.stdout, "nil\n");
}
