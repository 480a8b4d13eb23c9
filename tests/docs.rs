//! The documentation is checked against the code it describes.
//!
//! - Every oml Lisp name the docs mention in a code span (`json.encode`, `init.project-init`)
//!   exists in a freshly started Lisp image, as a value or as a declared setting. Planned
//!   features are described in prose, so a name in backticks is a promise that it works today.
//! - Every ```` ```fennel tested ```` block evaluates without error, each in a fresh image.
//! - `SUMMARY.md` lists every page of `docs/src`, and every relative link in the site points at
//!   a file that exists.
//! - ARCHITECTURE.md's code map names every folder of `src/`, and its layer table and
//!   `src/lib.rs` every front end.
//!
//! The pages checked are `docs/src/**/*.md`, plus `ARCHITECTURE.md` and `CONTEXT.md`, which the
//! site includes.

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use mlua::{Table, Value};
use oml::cancel::CancelToken;
use oml::lisp::{Lisp, Output};
use oml::paths::Paths;

/// The namespaces whose dotted names are checked: `ns.name` in a code span, where `ns` is one of
/// these, must exist.
const NAMESPACES: &[&str] = &[
    "llm", "agent", "tools", "commands", "session", "acp", "client", "catalog", "init", "repl",
    "json", "oml", "sandbox", "flow", "proxy",
];

/// Names the docs may mention before they exist (a feature documented in the same change that
/// builds it on another branch). Empty today. The test fails once a name here exists, so the list
/// cannot outlive its reason.
const PENDING_NAMES: &[&str] = &[];

/// A dotted token whose last part is one of these is a file name (`init.fnl`, `repl.rs`), not a
/// Lisp name.
const FILE_EXTENSIONS: &[&str] = &[
    "clj", "el", "fnl", "html", "json", "lua", "md", "rs", "sh", "sock", "toml", "txt",
];

/// How long one tested block may run before it is interrupted and reported.
const BLOCK_TIMEOUT: Duration = Duration::from_secs(10);

#[test]
fn every_lisp_name_the_docs_mention_exists() {
    let runtime = runtime();
    let lisp = runtime.block_on(host());
    let registry = match lisp.lookup("oml.settings-registry").expect("lookup") {
        Value::Table(t) => t,
        other => panic!("oml.settings-registry is not a table: {other:?}"),
    };

    let mut problems = Vec::new();
    let mut mentioned = BTreeSet::new();
    for page in pages() {
        let text = read(&page);
        for (line, span) in code_spans(&text) {
            for name in lisp_names(&span) {
                mentioned.insert(name.clone());
                if PENDING_NAMES.contains(&name.as_str()) {
                    continue;
                }
                if !exists(&lisp, &registry, &name) {
                    problems.push(format!(
                        "{}:{line}: `{name}` is not defined in a fresh oml image (nor a declared \
                         setting). Fix the name, or describe the planned feature in prose \
                         without backticks.",
                        rel(&page)
                    ));
                }
            }
        }
    }
    for name in PENDING_NAMES {
        if exists(&lisp, &registry, name) {
            problems.push(format!(
                "`{name}` now exists: remove it from PENDING_NAMES in tests/docs.rs"
            ));
        }
    }
    assert!(
        problems.is_empty(),
        "the docs name Lisp things that do not exist:\n{}",
        problems.join("\n")
    );
    assert!(
        !mentioned.is_empty(),
        "no Lisp names found in the docs at all; is the scanner broken?"
    );
}

/// The catalog table in docs/src/agents.md is the one the code generates
/// (`oml agents --markdown`, `oml::catalog::markdown_table`).
#[test]
fn the_agents_page_shows_the_catalog_the_code_has() {
    let page = read(&Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/src/agents.md"));
    let begin = page
        .find("<!-- catalog:begin")
        .expect("docs/src/agents.md has a <!-- catalog:begin ... --> marker");
    let start = begin + page[begin..].find("-->").expect("the marker ends") + 3;
    let end = page
        .find("<!-- catalog:end -->")
        .expect("docs/src/agents.md has a <!-- catalog:end --> marker");
    let shown = page[start..end].trim();
    let generated = oml::catalog::markdown_table();
    assert_eq!(
        shown,
        generated.trim(),
        "the catalog table in docs/src/agents.md is stale: replace it with the output of \
         `oml agents --markdown`"
    );
}

/// The permission modes table in docs/src/editors.md, the setting's doc and the ACP mode list
/// are all made from `agent.permission-modes`: the page's table is the one the data gives, and
/// the other two say what it says.
#[test]
fn the_permission_modes_are_described_by_one_table() {
    let runtime = runtime();
    let lisp = runtime.block_on(host());
    let json_of = |expr: &str| -> serde_json::Value {
        let src = format!("(json.encode {expr})");
        let values = runtime
            .block_on(lisp.eval(&src, "modes"))
            .expect("evaluates");
        let text: String = match values.into_iter().next() {
            Some(Value::String(s)) => s.to_str().expect("UTF-8").to_owned(),
            other => panic!("{expr} gave {other:?}"),
        };
        serde_json::from_str(&text).expect("JSON")
    };
    let modes = json_of("agent.permission-modes");
    let modes = modes.as_array().expect("a list of modes");
    let field = |m: &serde_json::Value, k: &str| m[k].as_str().unwrap_or_default().to_owned();
    let mut table = String::from("| Mode | Name | What it does |\n|---|---|---|\n");
    for m in modes {
        let (id, name, what) = (field(m, "id"), field(m, "name"), field(m, "description"));
        writeln!(table, "| `{id}` | {name} | {what} |").unwrap();
    }
    let page = read(&docs_src().join("editors.md"));
    let begin = page
        .find("<!-- modes:begin")
        .expect("a <!-- modes:begin ... --> marker");
    let start = begin + page[begin..].find("-->").expect("the marker ends") + 3;
    let end = page
        .find("<!-- modes:end -->")
        .expect("a <!-- modes:end --> marker");
    assert_eq!(
        page[start..end].trim(),
        table.trim(),
        "the modes table in docs/src/editors.md is stale: make it from agent.permission-modes"
    );
    assert_eq!(
        &json_of("acp.modes"),
        &serde_json::Value::from(modes.clone())
    );
    let doc = json_of(r#"(. oml.settings-registry "agent.permission-mode" :doc)"#);
    let doc = doc.as_str().expect("the setting has a doc");
    for m in modes {
        let said = format!(":{}: {}.", field(m, "id"), field(m, "description"));
        assert!(
            doc.contains(&said),
            "the setting's doc lacks {said:?}: {doc}"
        );
    }
}

#[test]
fn every_tested_fennel_block_evaluates() {
    let runtime = runtime();
    let mut failures = Vec::new();
    let mut count = 0;
    for page in pages() {
        let text = read(&page);
        for (line, src) in tested_blocks(&text) {
            count += 1;
            if let Err(message) = runtime.block_on(evaluate(&page, line, &src)) {
                failures.push(format!(
                    "{}:{line}: this ```fennel tested block fails:\n{}",
                    rel(&page),
                    indent(&message)
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    assert!(
        count > 0,
        "no ```fennel tested blocks found; is the scanner broken?"
    );
}

#[test]
fn the_summary_lists_every_page_and_every_link_resolves() {
    let src = docs_src();
    let summary_path = src.join("SUMMARY.md");
    let summary = read(&summary_path);
    let mut problems = Vec::new();

    let listed: BTreeSet<PathBuf> = links(&summary)
        .into_iter()
        .filter(|(_, target)| is_local(target))
        .map(|(_, target)| normalise(&src.join(strip_anchor(&target))))
        .collect();
    for page in markdown_files(&src) {
        if page.file_name().is_some_and(|n| n == "SUMMARY.md") {
            continue;
        }
        if !listed.contains(&normalise(&page)) {
            problems.push(format!(
                "{} is not linked from docs/src/SUMMARY.md",
                rel(&page)
            ));
        }
    }

    for page in markdown_files(&src) {
        let text = read(&page);
        let dir = page.parent().expect("a page has a folder");
        for (line, target) in links(&text) {
            if !is_local(&target) {
                continue;
            }
            let path = strip_anchor(&target);
            if path.is_empty() {
                continue;
            }
            if !dir.join(path).exists() {
                problems.push(format!(
                    "{}:{line}: the link target {target} does not exist",
                    rel(&page)
                ));
            }
        }
        for (line, target) in includes(&text) {
            if !dir.join(&target).is_file() {
                problems.push(format!(
                    "{}:{line}: the included file {target} does not exist",
                    rel(&page)
                ));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

// --- the code map

#[test]
fn the_code_map_names_every_folder_and_every_front_end() {
    let architecture = read(&root().join("ARCHITECTURE.md"));
    let lib = read(&root().join("src/lib.rs"));
    let folders = src_folders(&root().join("src"), "");
    let front_ends: Vec<String> = folders
        .iter()
        .filter_map(|f| f.strip_prefix("front/"))
        .filter(|f| !f.contains('/'))
        .map(str::to_owned)
        .collect();
    assert!(front_ends.len() > 5, "front ends: {front_ends:?}");
    let mut problems: Vec<String> = folders_missing_from_the_code_map(&architecture, &folders)
        .into_iter()
        .map(|f| format!("ARCHITECTURE.md's code map does not name src/{f}/"))
        .collect();
    problems.extend(front_ends_unnamed(&architecture, &lib, &front_ends));
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn the_code_map_check_finds_a_planted_omission() {
    let architecture = "# A\n\n## Code map\n\n### Layer 2: `src/llm/`, `src/tools/`\n\n\
                        `anthropic/` and\n\n#### `src/llm/`\n\n`client/wire.rs`; gemini/ is \
                        not a code span.\n\n#### `src/tools/`\n\n`responses/`\n\n\
                        ## Cross-cutting\n\n`src/gone/`\n\n\
                        | 6. the front ends | `front` (`acp`) | x |\n";
    let folders = [
        "llm",
        "llm/anthropic",
        "llm/client",
        "llm/gemini",
        "llm/responses",
        "tools",
        "gone",
        "gone/deeper",
    ]
    .map(String::from);
    assert_eq!(
        folders_missing_from_the_code_map(architecture, &folders),
        ["llm/gemini", "llm/responses", "gone", "gone/deeper"]
    );
    let lib = "//! 6. `front`: `front::acp` (`oml acp`), chat";
    assert_eq!(
        front_ends_unnamed(architecture, lib, &["acp".into(), "chat".into()]),
        [
            "ARCHITECTURE.md's layer table does not name the front end chat",
            "src/lib.rs does not name the front end front::chat",
        ]
    );
}

/// The folders under `dir`, at any depth, relative to the `src/` it is in (`llm`,
/// `llm/anthropic`), sorted.
fn src_folders(dir: &Path, prefix: &str) -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).expect("readable source folder") {
        let path = entry.expect("dir entry").path();
        if path.is_dir() {
            let name = path.file_name().expect("a name").to_string_lossy();
            let rel = format!("{prefix}{name}");
            found.extend(src_folders(&path, &format!("{rel}/")));
            found.push(rel);
        }
    }
    found.sort();
    found
}

/// The folders of `src/` (relative to it: `llm`, `llm/anthropic`) that the code map of
/// ARCHITECTURE.md does not name. A top-level folder `src/x/` names the heading of its part of
/// the map; a folder below it is named in that part (up to the next heading) by a code span
/// that starts with its name and a slash (`anthropic/`, `client/wire.rs`).
fn folders_missing_from_the_code_map(architecture: &str, folders: &[String]) -> Vec<String> {
    let map = architecture
        .split_once("## Code map")
        .and_then(|(_, rest)| rest.split_once("\n## "))
        .map(|(map, _)| map)
        .expect("ARCHITECTURE.md has a code map followed by another section");
    // Every part under a heading that names `src/x/` (a layer's heading may name it too).
    let part = |top: &str| -> Option<String> {
        let heading = format!("`src/{top}/`");
        let mut text = String::new();
        let mut inside = false;
        for line in map.lines() {
            if line.starts_with('#') {
                inside = line.contains(&heading);
            }
            if inside {
                text.push_str(line);
                text.push('\n');
            }
        }
        (!text.is_empty()).then_some(text)
    };
    folders
        .iter()
        .filter(|folder| {
            let top = folder.split('/').next().unwrap_or(folder);
            let Some(text) = part(top) else {
                return true;
            };
            let Some((_, name)) = folder.rsplit_once('/') else {
                return false;
            };
            let named = format!("{name}/");
            !code_spans(&text)
                .iter()
                .any(|(_, span)| span.starts_with(&named))
        })
        .cloned()
        .collect()
}

/// The front ends (the folders of `src/front/`) that ARCHITECTURE.md's layer table (its row of
/// the front ends) or `src/lib.rs`'s list of the layers does not name.
fn front_ends_unnamed(architecture: &str, lib: &str, front_ends: &[String]) -> Vec<String> {
    let row = architecture
        .lines()
        .find(|l| l.starts_with("| 6."))
        .unwrap_or_default();
    let mut problems = Vec::new();
    for front in front_ends {
        if !row.contains(&format!("`{front}`")) {
            problems.push(format!(
                "ARCHITECTURE.md's layer table does not name the front end {front}"
            ));
        }
    }
    for front in front_ends {
        if !lib.contains(&format!("`front::{front}`")) {
            problems.push(format!(
                "src/lib.rs does not name the front end front::{front}"
            ));
        }
    }
    problems
}

// --- the Lisp image

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("tokio runtime")
}

/// A fresh image, built the way `oml acp --no-init` builds it (the host, the agent's steps,
/// tools and commands, the client functions, the ACP layer's `acp.*` surface and `oml proxy`'s
/// `proxy.*`), with its folders in a throw-away directory.
async fn host() -> Lisp {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let paths = Paths::under(dir.path());
    let (lisp, _) = oml::cli::boot(&paths, true, Output::Stderr)
        .await
        .expect("the Lisp image starts");
    oml::front::acp::install(&lisp).expect("the ACP layer installs");
    // `oml proxy`'s namespace too (its queues are dropped: nothing is served).
    drop(oml::front::proxy::install(&lisp, false).expect("the proxy's steps install"));
    lisp
}

/// Whether `name` is a value in the image or a declared setting (whose value may be nil).
fn exists(lisp: &Lisp, registry: &Table, name: &str) -> bool {
    let value = lisp.lookup(name).unwrap_or(Value::Nil);
    !value.is_nil() || registry.raw_get::<Value>(name).is_ok_and(|v| !v.is_nil())
}

/// Evaluate one block in a fresh image. `print` is captured (and shown on failure) rather than
/// written to the test's stderr. Lines are padded so that error messages carry the page's own
/// line numbers.
async fn evaluate(page: &Path, line: usize, src: &str) -> Result<(), String> {
    let lisp = host().await;
    lisp.eval(CAPTURE_PRINT, "capture-print")
        .await
        .map_err(|e| format!("cannot capture print: {e}"))?;
    let padded = format!("{}{src}", "\n".repeat(line));
    let cancel = CancelToken::new();
    // A watchdog: cancels the block when it runs longer than BLOCK_TIMEOUT, and ends at once
    // when `finished` is dropped.
    let (finished, watched) = std::sync::mpsc::channel::<()>();
    let timer = {
        let cancel = cancel.clone();
        std::thread::spawn(move || {
            let _ = watched.recv_timeout(BLOCK_TIMEOUT);
            cancel.cancel();
        })
    };
    let result = match lisp.compile(&padded, &rel(page)) {
        Ok(f) => lisp.run::<()>(f, (), &cancel).await,
        Err(e) => Err(e),
    };
    drop(finished);
    let _ = timer.join();
    let Err(e) = result else { return Ok(()) };
    let printed = lisp
        .eval("(table.concat _G.docs-printed \"\")", "printed")
        .await
        .ok()
        .and_then(|v| v.into_iter().next())
        .and_then(|v| v.to_string().ok())
        .unwrap_or_default();
    let mut message = e.to_string();
    if let Some(i) = message.find("\nstack traceback:") {
        message.truncate(i);
    }
    if !printed.is_empty() {
        let _ = write!(message, "\nit printed:\n{printed}");
    }
    Err(message)
}

/// Replaces `print` with a collector, so the docs' examples do not write into test output.
const CAPTURE_PRINT: &str = r#"
(set _G.docs-printed [])
(set _G.print (fn [...]
                (let [parts (icollect [_ v (ipairs [...])] (tostring v))]
                  (table.insert _G.docs-printed (.. (table.concat parts "\t") "\n")))))
"#;

// --- reading the pages

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn docs_src() -> PathBuf {
    root().join("docs").join("src")
}

/// Every page whose names are checked.
fn pages() -> Vec<PathBuf> {
    let mut pages = markdown_files(&docs_src());
    pages.push(root().join("ARCHITECTURE.md"));
    pages.push(root().join("CONTEXT.md"));
    pages
}

fn markdown_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let entries = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()));
        for entry in entries {
            let path = entry.expect("a directory entry").path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "md") {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
}

fn rel(path: &Path) -> String {
    path.strip_prefix(root())
        .unwrap_or(path)
        .display()
        .to_string()
}

/// The text with the content of fenced code blocks blanked out (line count kept), so that
/// spans and links are looked for in prose only.
fn prose(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut fence: Option<&str> = None;
    for line in text.lines() {
        let trimmed = line.trim_start();
        match fence {
            Some(marker) => {
                if trimmed.starts_with(marker) && trimmed.trim_end() == marker {
                    fence = None;
                }
            }
            None => {
                if let Some(marker) = fence_marker(trimmed) {
                    fence = Some(marker);
                } else {
                    out.push_str(line);
                }
            }
        }
        out.push('\n');
    }
    out
}

/// The fence a line opens (its run of backticks or tildes), if it opens one.
fn fence_marker(trimmed: &str) -> Option<&str> {
    for c in ['`', '~'] {
        let n = trimmed.chars().take_while(|&x| x == c).count();
        if n >= 3 {
            return Some(&trimmed[..n]);
        }
    }
    None
}

/// Inline code spans outside fenced blocks, with the line each starts on (1-based).
fn code_spans(text: &str) -> Vec<(usize, String)> {
    let prose = prose(text);
    let bytes = prose.as_bytes();
    let mut spans = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] != b'`' {
            i += 1;
            continue;
        }
        let start = i;
        while i < bytes.len() && bytes[i] == b'`' {
            i += 1;
        }
        let run = i - start;
        // Find the closing run of exactly the same length.
        let mut j = i;
        let mut close = None;
        while j < bytes.len() {
            if bytes[j] == b'`' {
                let k = j;
                while j < bytes.len() && bytes[j] == b'`' {
                    j += 1;
                }
                if j - k == run {
                    close = Some(k);
                    break;
                }
            } else {
                j += 1;
            }
        }
        match close {
            Some(k) => {
                let line = prose[..start].matches('\n').count() + 1;
                spans.push((line, prose[i..k].to_string()));
                i = k + run;
            }
            None => i = start + run,
        }
    }
    spans
}

/// The `ns.name` tokens of a code span whose namespace is one of [`NAMESPACES`].
fn lisp_names(span: &str) -> Vec<String> {
    let is_name_char = |c: char| c.is_ascii_alphanumeric() || "-_?!*<>=+.".contains(c);
    span.split(|c: char| !is_name_char(c))
        .filter_map(|token| {
            let parts: Vec<&str> = token.split('.').collect();
            if parts.len() < 2 || parts.iter().any(|p| p.is_empty()) {
                return None;
            }
            if !NAMESPACES.contains(&parts[0]) {
                return None;
            }
            let last = parts[parts.len() - 1];
            if FILE_EXTENSIONS.contains(&last)
                || !last.starts_with(|c: char| c.is_ascii_alphabetic())
            {
                return None;
            }
            Some(token.to_string())
        })
        .collect()
}

/// The ```` ```fennel tested ```` blocks: the line of each opening fence (1-based) and the
/// source.
fn tested_blocks(text: &str) -> Vec<(usize, String)> {
    enum State {
        Prose,
        Tested {
            start: usize,
            marker: String,
            src: String,
        },
        Other {
            marker: String,
        },
    }
    let mut blocks = Vec::new();
    let mut state = State::Prose;
    for (index, line) in text.lines().enumerate() {
        let trimmed = line.trim();
        state = match state {
            State::Prose => match fence_marker(trimmed) {
                Some(marker) => {
                    let info: Vec<&str> = trimmed[marker.len()..].split_whitespace().collect();
                    if info.first() == Some(&"fennel") && info.contains(&"tested") {
                        State::Tested {
                            start: index + 1,
                            marker: marker.to_string(),
                            src: String::new(),
                        }
                    } else {
                        State::Other {
                            marker: marker.to_string(),
                        }
                    }
                }
                None => State::Prose,
            },
            State::Tested { start, marker, src } if trimmed == marker => {
                blocks.push((start, src));
                State::Prose
            }
            State::Tested {
                start,
                marker,
                mut src,
            } => {
                src.push_str(line);
                src.push('\n');
                State::Tested { start, marker, src }
            }
            State::Other { marker } if trimmed == marker => State::Prose,
            other @ State::Other { .. } => other,
        };
    }
    blocks
}

/// Markdown links `[text](target)` in prose, with their line numbers.
fn links(text: &str) -> Vec<(usize, String)> {
    let prose = prose(text);
    let mut out = Vec::new();
    let mut rest = prose.as_str();
    let mut offset = 0;
    while let Some(i) = rest.find("](") {
        let after = &rest[i + 2..];
        let Some(end) = after.find(')') else { break };
        let target = after[..end].trim();
        let target = target.split_whitespace().next().unwrap_or("");
        let line = prose[..offset + i].matches('\n').count() + 1;
        out.push((line, target.to_string()));
        offset += i + 2 + end;
        rest = &prose[offset..];
    }
    out
}

/// mdBook `{{#include path}}` directives (with any `:anchor` or line range removed).
fn includes(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    for (index, line) in text.lines().enumerate() {
        let mut rest = line;
        while let Some(i) = rest.find("{{#include ") {
            let after = &rest[i + "{{#include ".len()..];
            let Some(end) = after.find("}}") else { break };
            let target = after[..end].trim();
            let path = target.split(':').next().unwrap_or(target);
            out.push((index + 1, path.to_string()));
            rest = &after[end..];
        }
    }
    out
}

fn is_local(target: &str) -> bool {
    !(target.is_empty()
        || target.starts_with('#')
        || target.contains("://")
        || target.starts_with("mailto:"))
}

fn strip_anchor(target: &str) -> &str {
    target.split('#').next().unwrap_or(target)
}

fn normalise(path: &Path) -> PathBuf {
    std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf())
}

fn indent(text: &str) -> String {
    text.lines()
        .map(|l| format!("    {l}"))
        .collect::<Vec<_>>()
        .join("\n")
}

// --- the scanners themselves

#[test]
fn the_scanners_find_names_blocks_and_links() {
    let page = "Use `json.encode` and `(setq repl.history-size 10)`, not `init.fnl`.\n\
                ```fennel tested\n(+ 1 2)\n```\n\
                ```fennel\n`agent.not-checked`\n```\n\
                See [the guide](customising.md#settings) and [a site](https://example.org).\n";
    let names: Vec<String> = code_spans(page)
        .into_iter()
        .flat_map(|(_, span)| lisp_names(&span))
        .collect();
    assert_eq!(names, ["json.encode", "repl.history-size"]);
    assert_eq!(tested_blocks(page), [(2, "(+ 1 2)\n".to_string())]);
    assert_eq!(
        links(page),
        [
            (8, "customising.md#settings".to_string()),
            (8, "https://example.org".to_string())
        ]
    );
}
