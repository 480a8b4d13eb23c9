//! How long things may grow: functions (Rust and Fennel), source files and test files. A longer
//! one holds more than one concern and is split along its seams, not squeezed.

use crate::tree::{self, File, assert_none, before_unit_tests, ident, planted};

/// Functions longer than this many lines (signature to closing brace, before a file's unit
/// tests) must be data tables listed in `LONG_TABLES`. Fennel's top-level functions too.
const MAX_FN_LINES: usize = 80;

/// Functions that are data tables, not logic: (file, function).
const LONG_TABLES: &[(&str, &str)] = &[("src/bind/llm.rs", "settings")];

/// The functions of `text` with more than `max` lines: (name, first line, length). Braces are
/// counted per line, outside `//` comments and string and character literals (`code_of`); good
/// enough for rustfmt'd code.
fn long_functions(text: &str, max: usize) -> Vec<(String, usize, usize)> {
    let lines: Vec<&str> = before_unit_tests(text).collect();
    let mut found = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let trimmed = lines[i].trim_start();
        let after_fn = trimmed
            .split_once("fn ")
            .filter(|(before, _)| {
                before.is_empty()
                    || before.split_whitespace().all(|w| {
                        matches!(w, "pub" | "async" | "const" | "unsafe") || w.starts_with("pub(")
                    })
            })
            .map(|(_, rest)| ident(rest));
        let Some(name) = after_fn.filter(|n| !n.is_empty() && !trimmed.starts_with("//")) else {
            i += 1;
            continue;
        };
        let (mut depth, mut opened, mut j) = (0i64, false, i);
        let mut literal = Literal::None;
        while j < lines.len() {
            let code = code_of(lines[j], &mut literal);
            for c in code.chars() {
                match c {
                    '{' => {
                        depth += 1;
                        opened = true;
                    }
                    '}' => depth -= 1,
                    _ => {}
                }
            }
            if (opened && depth <= 0) || (!opened && code.trim_end().ends_with(';')) {
                break;
            }
            j += 1;
        }
        let len = j - i + 1;
        if opened && len > max {
            found.push((name, i + 1, len));
        }
        i = if opened { j + 1 } else { i + 1 };
    }
    found
}

/// The string literal a line of Rust ends inside, if any: a plain one, or a raw one closed by
/// `"` and this many `#`.
#[derive(Clone, Copy, PartialEq)]
enum Literal {
    None,
    Plain,
    Raw(usize),
}

/// The code of `line` without its `//` comment and without what is inside string and character
/// literals (so `format!("{{")` and `'}'` count no brace). `literal` is the string the previous
/// line left open, and is left as this line leaves it. Lifetimes (`'a`) stay code.
fn code_of(line: &str, literal: &mut Literal) -> String {
    let chars: Vec<char> = line.chars().collect();
    let mut code = String::new();
    let mut k = 0;
    while k < chars.len() {
        let c = chars[k];
        match *literal {
            Literal::Plain => match c {
                '\\' => k += 1,
                '"' => *literal = Literal::None,
                _ => {}
            },
            Literal::Raw(hashes) => {
                if c == '"' && chars[k + 1..].iter().take_while(|&&h| h == '#').count() >= hashes {
                    *literal = Literal::None;
                    k += hashes;
                }
            }
            Literal::None => {
                let hashes = chars[k + 1..].iter().take_while(|&&h| h == '#').count();
                let ident_before = k > 0 && (chars[k - 1].is_alphanumeric() || chars[k - 1] == '_');
                if c == '/' && chars.get(k + 1) == Some(&'/') {
                    break;
                } else if c == '"' {
                    *literal = Literal::Plain;
                } else if c == 'r' && !ident_before && chars.get(k + 1 + hashes) == Some(&'"') {
                    *literal = Literal::Raw(hashes);
                    k += 1 + hashes;
                } else if c == '\'' && chars.get(k + 1) == Some(&'\\') {
                    // An escaped character: '\n', '\'', '\u{7b}'.
                    k += 2;
                    while k < chars.len() && chars[k] != '\'' {
                        k += 1;
                    }
                } else if c == '\'' && chars.get(k + 2) == Some(&'\'') {
                    k += 2;
                } else {
                    code.push(c);
                }
            }
        }
        k += 1;
    }
    code
}

/// The Rust functions over `max` lines that are not among `tables`, and the `tables` that are
/// no longer long (or no longer there), so the list cannot outlive its reason.
fn long_rust_functions(files: &[File], max: usize, tables: &[(&str, &str)]) -> Vec<String> {
    let mut offenders = Vec::new();
    for (rel, text) in files {
        for (name, line, len) in long_functions(text, max) {
            if !tables.contains(&(rel.as_str(), name.as_str())) {
                offenders.push(format!("{rel}:{line}: fn {name} has {len} lines"));
            }
        }
    }
    for (file, name) in tables {
        let long = files
            .iter()
            .filter(|(rel, _)| rel == file)
            .any(|(_, text)| long_functions(text, max).iter().any(|(n, _, _)| n == name));
        if !long {
            offenders.push(format!(
                "{file}: fn {name} is listed in LONG_TABLES but is no longer long; drop it from the list"
            ));
        }
    }
    offenders
}

#[test]
fn functions_are_short_unless_they_are_tables() {
    assert_none(
        &long_rust_functions(&tree::rust_sources(), MAX_FN_LINES, LONG_TABLES),
        &format!(
            "functions over {MAX_FN_LINES} lines (cut them into named steps, or list a data \
             table in LONG_TABLES)"
        ),
    );
}

#[test]
fn the_function_length_check_finds_a_planted_violation() {
    let body = |n: usize| "    step(); // { a brace in a comment\n".repeat(n);
    let long = format!(
        "/// fn in a doc\npub(crate) async fn long() {{\n{}}}\nfn short() {{\n{}}}\n\
         fn declared();\n#[cfg(test)]\nmod tests {{\n    fn long_test() {{\n{}}}\n}}",
        body(4),
        body(3),
        body(9),
    );
    let table = format!("fn table() {{\n{}}}\nfn gone() {{}}", body(9));
    let files = planted(&[("src/a.rs", &long), ("src/b.rs", &table)]);
    assert_eq!(
        long_rust_functions(&files, 5, &[("src/b.rs", "table"), ("src/b.rs", "gone")]),
        [
            "src/a.rs:2: fn long has 6 lines",
            "src/b.rs: fn gone is listed in LONG_TABLES but is no longer long; drop it from the list",
        ]
    );
}

#[test]
fn the_function_length_check_counts_no_brace_inside_a_literal() {
    let body = |n: usize| "    step();\n".repeat(n);
    let text = [
        "fn literals() {",
        "    let open = format!(\"{{ {} {{\", '{');",
        "    let raw = r#\"a \"{\" in a raw string\"#;",
        "    let s = \"a string over",
        "        two lines { with a brace\";",
        "    let c = ['\\'', '\\\\', '\\u{7b}', '}'];",
        "    let url = \"https://example.org/{\"; // a comment {",
        "    fn inner<'a>(x: &'a str) -> &'a str { x }",
        "}",
    ]
    .join("\n");
    let long = format!("{text}\nfn after() {{\n{}}}\n", body(9));
    let files = planted(&[("src/a.rs", &long)]);
    assert_eq!(
        long_rust_functions(&files, 8, &[]),
        [
            "src/a.rs:1: fn literals has 9 lines",
            "src/a.rs:10: fn after has 11 lines"
        ]
    );
}

/// Lines a source file (Rust before its unit tests, or Fennel) may have: a longer file holds
/// more than one concern.
const MAX_FILE_LINES: usize = 600;

/// The source files with more than `max` lines before their unit tests.
fn long_files(files: &[File], max: usize) -> Vec<String> {
    files
        .iter()
        .filter_map(|(rel, text)| {
            let lines = before_unit_tests(text).count();
            (lines > max).then(|| format!("{rel}: {lines} lines"))
        })
        .collect()
}

#[test]
fn files_hold_one_concern() {
    let mut files = tree::rust_sources();
    files.extend(tree::fennel_sources());
    assert_none(
        &long_files(&files, MAX_FILE_LINES),
        &format!("files over {MAX_FILE_LINES} lines (split them along their seams)"),
    );
}

#[test]
fn the_file_length_check_finds_a_planted_violation() {
    let lines = |n: usize| "x\n".repeat(n);
    let tested = format!("{}#[cfg(test)]\n{}", lines(3), lines(50));
    let files = planted(&[
        ("src/long.rs", &lines(4)),
        ("src/tested.rs", &tested),
        ("src/short.fnl", &lines(3)),
        ("src/long.fnl", &lines(5)),
    ]);
    assert_eq!(
        long_files(&files, 3),
        ["src/long.rs: 4 lines", "src/long.fnl: 5 lines"]
    );
}

/// The top-level `(fn …)` forms of a Fennel text longer than `max` lines: (line, length, name).
/// Strings (docstrings with brackets) and `;` comments do not count towards the nesting.
fn long_fennel_functions(text: &str, max: usize) -> Vec<(usize, usize, String)> {
    let lines: Vec<&str> = text.lines().collect();
    let mut found = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        if !lines[i].starts_with("(fn ") {
            i += 1;
            continue;
        }
        let (mut depth, mut in_string, mut escaped) = (0i32, false, false);
        let mut end = i;
        'form: for (j, line) in lines.iter().enumerate().skip(i) {
            end = j;
            for c in line.chars() {
                match (in_string, escaped, c) {
                    (true, true, _) => escaped = false,
                    (true, false, '\\') => escaped = true,
                    (true, false, '"') => in_string = false,
                    (true, false, _) => {}
                    (false, _, ';') => break,
                    (false, _, '"') => in_string = true,
                    (false, _, '(' | '[' | '{') => depth += 1,
                    (false, _, ')' | ']' | '}') => depth -= 1,
                    _ => {}
                }
            }
            if depth <= 0 {
                break 'form;
            }
        }
        let length = end - i + 1;
        if length > max {
            let name = lines[i].split_whitespace().nth(1).unwrap_or("?").to_owned();
            found.push((i + 1, length, name));
        }
        i = end + 1;
    }
    found
}

#[test]
fn fennel_functions_are_short() {
    let mut offenders = Vec::new();
    for (rel, text) in tree::fennel_sources() {
        for (line, length, name) in long_fennel_functions(&text, MAX_FN_LINES) {
            offenders.push(format!("{rel}:{line}: {name} is {length} lines"));
        }
    }
    assert_none(
        &offenders,
        &format!("Fennel functions over {MAX_FN_LINES} lines (cut them at their seams)"),
    );
}

#[test]
fn the_fennel_length_check_finds_a_planted_violation() {
    let body = "  (print \"(unbalanced in a string\") ; ) in a comment\n".repeat(5);
    let planted =
        format!("(fn short [] nil)\n(fn long []\n  \"doc [\"\n{body}  nil)\n(fn after [] nil)");
    assert_eq!(
        long_fennel_functions(&planted, 5),
        vec![(2, 8, "long".to_owned())],
        "{planted}"
    );
}

/// The most lines a test file holds: tests read as tables and share their helpers
/// (`tests/support/`), so a file over this is two concerns.
const MAX_TEST_FILE_LINES: usize = 1000;

/// The test files with more than `max` lines, unit tests and all.
fn long_test_files(files: &[File], max: usize) -> Vec<String> {
    files
        .iter()
        .filter_map(|(rel, text)| {
            let lines = text.lines().count();
            (lines > max).then(|| format!("{rel}: {lines} lines"))
        })
        .collect()
}

#[test]
fn test_files_hold_one_concern() {
    assert_none(
        &long_test_files(&tree::files("tests", "rs"), MAX_TEST_FILE_LINES),
        &format!("test files over {MAX_TEST_FILE_LINES} lines (split them by what they test)"),
    );
}

#[test]
fn the_test_file_length_check_finds_a_planted_violation() {
    let files = planted(&[
        ("tests/long.rs", "#[test]\nfn a() {}\n#[cfg(test)]\nx\n"),
        ("tests/short.rs", "#[test]\nfn a() {}\n"),
    ]);
    assert_eq!(long_test_files(&files, 3), ["tests/long.rs: 4 lines"]);
}
