//! How code tells things apart: errors by their type, never by their text, and tests by what
//! happened, never by how long it took.

use crate::tree::{self, File, assert_none, code, planted, production_code};

/// The calls that judge an error by its text: `contains`, `starts_with`, `ends_with` or `find`
/// on a value named like an error (`e`, `err`, `error`, their `to_string()`, a `.message`), in
/// Rust, and `string.find`/`:find`/`:match` on one in Fennel.
fn error_text_tests(code: &str) -> Vec<String> {
    const NAMES: [&str; 5] = ["e", "err", "error", "e.message", "error.message"];
    const CALLS: [&str; 4] = [".contains(", ".starts_with(", ".ends_with(", ".find("];
    let mut found = Vec::new();
    for line in code.lines() {
        let hit = NAMES.iter().any(|name| {
            [name.to_string(), format!("{name}.to_string()")]
                .iter()
                .any(|receiver| {
                    CALLS.iter().any(|call| {
                        line.match_indices(&format!("{receiver}{call}"))
                            .any(|(i, _)| i == 0 || !is_ident(line.as_bytes()[i - 1]))
                    })
                })
        }) || [
            "(string.find err",
            "(string.match err",
            "(: err :find",
            "(: err :match",
        ]
        .iter()
        .any(|f| line.contains(f));
        if hit {
            found.push(line.trim().to_owned());
        }
    }
    found
}

fn is_ident(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b'.'
}

/// The lines of production code, Rust or Fennel, that judge an error by its text.
fn errors_judged_by_text(files: &[File]) -> Vec<String> {
    let mut offenders = Vec::new();
    for (rel, text) in files {
        let code = if rel.ends_with(".rs") {
            production_code(text)
        } else {
            text.lines()
                .filter(|l| !l.trim_start().starts_with(';'))
                .collect::<Vec<_>>()
                .join("\n")
        };
        for line in error_text_tests(&code) {
            offenders.push(format!("{rel}: {line}"));
        }
    }
    offenders
}

#[test]
fn errors_are_told_apart_by_type_not_by_their_text() {
    let mut files = tree::rust_sources();
    files.extend(tree::fennel_sources());
    assert_none(
        &errors_judged_by_text(&files),
        "errors judged by their text (give the error a kind and match on it)",
    );
}

#[test]
fn the_error_text_check_finds_a_planted_violation() {
    let planted = "let gone = e.to_string().ends_with(\"interrupted\");\n\
                   if err.contains(\"timed out\") {}\n\
                   (when (string.find err \"interrupted\") nil)\n\
                   let fine = line.contains(\"e.\") && self.error_count > 0;";
    assert_eq!(error_text_tests(planted).len(), 3, "{planted}");
}

#[test]
fn the_error_text_check_reads_production_code_of_both_languages() {
    let files = planted(&[
        (
            "src/a.rs",
            "if err.contains(\"gone\") {}\n// err.contains(\"x\")\n#[cfg(test)]\n\
             mod tests { fn t() { assert!(err.contains(\"gone\")); } }",
        ),
        (
            "src/a.fnl",
            "(when (: err :match \"gone\") nil)\n;; (string.find err \"x\")",
        ),
    ]);
    assert_eq!(
        errors_judged_by_text(&files),
        [
            "src/a.rs: if err.contains(\"gone\") {}",
            "src/a.fnl: (when (: err :match \"gone\") nil)",
        ]
    );
}

/// The most `Result<_, String>` in production code. Each left is a message shown as is (a usage
/// line, the text of a tool result, a Lisp program's reason); any other failure is a type that
/// callers can match on.
const MAX_STRING_ERRORS: usize = 15;

/// Whether `line` names a `Result` whose error is a bare `String`.
fn names_a_string_error(line: &str) -> bool {
    line.match_indices("Result<").any(|(i, _)| {
        let rest = &line[i..];
        let end = rest.find([';', '{']).unwrap_or(rest.len());
        let rest = &rest[..end];
        rest.contains(", String>") || rest.contains(",String>")
    })
}

/// The lines of production Rust code that fail with a bare `String`.
fn string_errors(files: &[File]) -> Vec<String> {
    files
        .iter()
        .filter(|(rel, _)| rel.ends_with(".rs"))
        .flat_map(|(rel, text)| {
            production_code(text)
                .lines()
                .filter(|l| names_a_string_error(l))
                .map(|l| format!("{rel}: {}", l.trim()))
                .collect::<Vec<_>>()
        })
        .collect()
}

#[test]
fn failures_are_types_but_for_a_few_messages() {
    let found = string_errors(&tree::rust_sources());
    assert!(
        found.len() <= MAX_STRING_ERRORS,
        "{} Result<_, String> in production code, more than {MAX_STRING_ERRORS}; give the \
         failure a type (thiserror) unless the string is the message shown as is:\n{}",
        found.len(),
        found.join("\n")
    );
}

#[test]
fn the_string_error_check_counts_a_planted_one() {
    let files = planted(&[(
        "src/a.rs",
        "fn f() -> Result<(), String> {}\nfn g() -> Result<u8, Typed> {}\n\
         type H = Box<dyn Fn() -> Result<Value, String> + Send>;\n\
         #[cfg(test)]\nmod tests { fn t() -> Result<(), String> { Ok(()) } }",
    )]);
    assert_eq!(
        string_errors(&files),
        [
            "src/a.rs: fn f() -> Result<(), String> {}",
            "src/a.rs: type H = Box<dyn Fn() -> Result<Value, String> + Send>;",
        ]
    );
}

/// Assertions about how long something took: a statement from `assert!`/`assert_eq!`/… to its
/// `;` that reads `.elapsed()` or a variable named `took`/`elapsed`. (A bounded wait's
/// `Instant::now() < deadline` is a guard against a hang, not a measurement.)
fn timed_assertions(code: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut rest = code;
    while let Some(i) = rest.find("assert") {
        let statement = &rest[i..];
        let end = statement.find(';').unwrap_or(statement.len());
        let statement = &statement[..end];
        let is_macro = statement["assert".len()..]
            .trim_start_matches(|c: char| c.is_ascii_alphanumeric() || c == '_')
            .starts_with('!');
        if is_macro
            && [".elapsed()", "took", "elapsed"]
                .iter()
                .any(|clock| statement.contains(clock))
        {
            found.push(
                statement
                    .lines()
                    .next()
                    .unwrap_or_default()
                    .trim()
                    .to_owned(),
            );
        }
        rest = &rest[i + "assert".len()..];
    }
    found
}

/// The assertions, in tests and sources, about how long something took. Tidy's own files are
/// left out: their planted violations are strings.
fn timed_tests(files: &[File]) -> Vec<String> {
    files
        .iter()
        .filter(|(rel, _)| rel != "tests/tidy.rs" && !rel.starts_with("tests/tidy/"))
        .flat_map(|(rel, text)| {
            timed_assertions(&code(text))
                .into_iter()
                .map(move |line| format!("{rel}: {line}"))
        })
        .collect()
}

#[test]
fn tests_assert_what_happened_not_how_long_it_took() {
    let mut files = tree::files("tests", "rs");
    files.extend(tree::rust_sources());
    assert_none(
        &timed_tests(&files),
        "speed is measured in the benchmarks, not asserted in tests; check what happened \
         (exited, killed, answered) instead",
    );
}

#[test]
fn the_timing_check_finds_a_planted_violation() {
    let planted = "assert!(started.elapsed() < Duration::from_secs(5));\n\
                   assert!(took < LIMIT, \"took {took:?}\");\n\
                   assert_eq!(out.code, 0);";
    assert_eq!(timed_assertions(planted).len(), 2, "{planted}");
}

#[test]
fn the_timing_check_reads_tests_and_sources_but_its_own_plants() {
    let timed = "// assert!(t.elapsed() < MAX);\nassert!(t.elapsed() < MAX);";
    let files = planted(&[
        ("tests/chat.rs", timed),
        ("src/llm/quiet.rs", timed),
        ("tests/tidy/judging.rs", timed),
    ]);
    assert_eq!(
        timed_tests(&files),
        [
            "tests/chat.rs: assert!(t.elapsed() < MAX)",
            "src/llm/quiet.rs: assert!(t.elapsed() < MAX)",
        ]
    );
}
