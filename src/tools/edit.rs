//! The `edit` tool: replace exact, unique pieces of one text file and show the change as a
//! unified diff.
//!
//! The original's contract holds for a single edit, message for message: `old_text` must occur
//! exactly once (counted without overlaps, whitespace-sensitive), otherwise the file is left
//! untouched and the error says whether it matched 0 or n times. Beyond the original:
//! - **Several edits in one call** (`edits: [{old_text, new_text}, ...]`). Each `old_text` must
//!   match exactly once in the *original* text, no two may overlap, and they are applied
//!   together; if any one fails, nothing is written. Errors name the edit ("edit 2: ...").
//! - **Line endings are kept.** Matching happens with line endings normalised to `\n`: in the
//!   file (`\r\n` becomes `\n`) and in `old_text` and `new_text`. Text outside the replaced
//!   pieces keeps its bytes exactly; the inserted text gets the file's dominant line ending
//!   (`\r\n` when at least half of the file's line breaks are `\r\n`). So an edit written with
//!   `\n` works on a CRLF file, and a CRLF file stays CRLF.
//! - **A UTF-8 byte-order mark is kept** and never has to be part of `old_text`.
//! - **The write is atomic** (see `atomic.rs`), and the result carries a unified diff in its
//!   text and a [`FileDiff`] for ACP.
//! - **Cost follows the edits**, not the file: matching is a substring search, and the diff is
//!   computed only around the replaced pieces.
//!
//! It deliberately does not know about fuzzy matching (whitespace or quote normalisation),
//! `replace_all`, encodings other than UTF-8, or permissions.
//!
//! Compare with pi: `packages/coding-agent/src/core/tools/edit.ts` and `edit-diff.ts`.
//! Compare with oml.clj: `oml.tools/edit`.

use std::borrow::Cow;
use std::fmt::Write as _;
use std::fs;
use std::path::Path;
use std::time::Duration;

use serde_json::Value;
use similar::{Algorithm, ChangeTag, TextDiff};

use super::truncate::cap_head;
use super::{FileDiff, ToolError, ToolOutput, atomic};

/// Lines of unchanged context around each change in the diff shown to the model.
pub const EDIT_DIFF_CONTEXT: usize = 3;

/// Characters of diff shown to the model after "Edited <f>"; the **head** is kept. The full
/// change still travels in [`ToolOutput::diff`].
pub const EDIT_DIFF_MAX_CHARS: usize = 20_000;

/// One replacement: `old_text` (exact, unique in the file) becomes `new_text`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Edit {
    /// The text to replace; must occur exactly once.
    pub old_text: String,
    /// The replacement; may be empty (a deletion).
    pub new_text: String,
}

/// Turn the tool's JSON arguments into edits: either the single form `{old_text, new_text}` or
/// the list form `{edits: [{old_text, new_text}, ...]}` (the list may also arrive as a JSON
/// string, as some models send it).
///
/// Errors are the original's messages: "old_text must be a non-empty string", "new_text is
/// required" (prefixed with "edit N: " in a list of several).
pub fn parse_edit_args(args: &Value) -> Result<Vec<Edit>, ToolError> {
    let edits = match args.get("edits") {
        None | Some(Value::Null) => return Ok(vec![parse_one(args, None)?]),
        Some(edits) => edits,
    };
    if args.get("old_text").is_some() || args.get("new_text").is_some() {
        return Err(ToolError::EditFormsMixed);
    }
    let list: Cow<'_, Value> = match edits {
        Value::String(json) => {
            Cow::Owned(serde_json::from_str(json).map_err(|_| ToolError::EditsRequired)?)
        }
        other => Cow::Borrowed(other),
    };
    let items = match list.as_ref() {
        Value::Array(items) if !items.is_empty() => items,
        _ => return Err(ToolError::EditsRequired),
    };
    let several = items.len() > 1;
    items
        .iter()
        .enumerate()
        .map(|(i, item)| parse_one(item, several.then_some(i + 1)))
        .collect()
}

/// Apply `edits` to the file at `path` (already resolved by [`super::resolve_real`]; no link
/// among its folders is followed) and return "Edited <f>" followed by a
/// unified diff, with a [`FileDiff`] attached.
///
/// Never panics; on any failure the file is untouched and the result is an error
/// [`ToolOutput`].
pub fn edit(path: &Path, edits: &[Edit]) -> ToolOutput {
    match try_edit(path, edits) {
        Ok(output) => output,
        Err(error) => error.into(),
    }
}

// --- private helpers

const BOM: char = '\u{FEFF}';
const BOM_BYTES: &[u8] = b"\xEF\xBB\xBF";

/// How long the diff algorithm may search before settling for a coarser diff.
const DIFF_TIMEOUT: Duration = Duration::from_millis(500);

fn parse_one(args: &Value, edit: Option<usize>) -> Result<Edit, ToolError> {
    let old_text = args
        .get("old_text")
        .and_then(Value::as_str)
        .filter(|text| !text.is_empty())
        .ok_or(ToolError::OldTextRequired { edit })?;
    let new_text = args
        .get("new_text")
        .and_then(Value::as_str)
        .ok_or(ToolError::NewTextRequired { edit })?;
    Ok(Edit {
        old_text: old_text.to_owned(),
        new_text: new_text.to_owned(),
    })
}

/// One edit located in the normalised text.
struct Located {
    /// 0-based position in the caller's list.
    index: usize,
    /// Byte range in the normalised old text.
    start: usize,
    end: usize,
    /// The replacement, normalised to `\n`.
    new_text: String,
}

fn try_edit(path: &Path, edits: &[Edit]) -> Result<ToolOutput, ToolError> {
    let _lock = atomic::file_lock();
    let plan = plan(path, edits)?;
    let bom_bytes = if plan.bom { BOM_BYTES } else { b"" };
    atomic::write_atomic(path, &[bom_bytes, plan.new_text.as_bytes()], false)?;
    Ok(plan.into_output(path))
}

/// The change `edits` would make to the file at `path`, computed as [`edit`] computes it but
/// written nowhere: what a permission question shows before the edit runs. The same errors as
/// [`edit`] (no match, several matches, not text, ...).
pub fn preview_edit(path: &Path, edits: &[Edit]) -> Result<FileDiff, ToolError> {
    let plan = plan(path, edits)?;
    Ok(FileDiff {
        path: path.to_path_buf(),
        old_text: Some(plan.old_text),
        new_text: plan.new_text,
    })
}

/// An edit worked out: the file's text before (without its BOM) and after, whether it had a
/// BOM, and the unified diff of the change.
struct Plan {
    old_text: String,
    new_text: String,
    bom: bool,
    diff: String,
}

/// [`edit`] of `text` given for the file at `path` (an editor's unsaved buffer), writing
/// nothing: the new text (with the BOM `text` had) and the tool's result, message and diff, for
/// the caller to write wherever the text lives.
pub fn edit_text(
    path: &Path,
    text: &str,
    edits: &[Edit],
) -> Result<(String, ToolOutput), ToolError> {
    check_edits(edits)?;
    let plan = plan_text(path, text.to_owned(), edits)?;
    let written = if plan.bom {
        format!("{BOM}{}", plan.new_text)
    } else {
        plan.new_text.clone()
    };
    let output = plan.into_output(path);
    Ok((written, output))
}

impl Plan {
    /// The tool's result for this edit of `path`: "Edited path", the diff (capped), and the
    /// change.
    fn into_output(self, path: &Path) -> ToolOutput {
        let mut message = format!("Edited {}", path.display());
        if !self.diff.is_empty() {
            message.push('\n');
            message.push_str(&cap_head(
                self.diff.trim_end_matches('\n'),
                EDIT_DIFF_MAX_CHARS,
            ));
        }
        ToolOutput::ok(message).with_diff(FileDiff {
            path: path.to_path_buf(),
            old_text: Some(self.old_text),
            new_text: self.new_text,
        })
    }
}

fn check_edits(edits: &[Edit]) -> Result<(), ToolError> {
    if edits.is_empty() {
        return Err(ToolError::EditsRequired);
    }
    let label = |i: usize| (edits.len() > 1).then_some(i + 1);
    if let Some(i) = edits.iter().position(|e| e.old_text.is_empty()) {
        return Err(ToolError::OldTextRequired { edit: label(i) });
    }
    Ok(())
}

fn plan(path: &Path, edits: &[Edit]) -> Result<Plan, ToolError> {
    check_edits(edits)?;
    if !fs::metadata(path).is_ok_and(|meta| meta.is_file()) {
        return Err(ToolError::NotFound(path.to_path_buf()));
    }
    let bytes = crate::regular::read_regular(path).map_err(|e| ToolError::io("read", path, e))?;
    let text = String::from_utf8(bytes).map_err(|_| ToolError::NotText(path.to_path_buf()))?;
    plan_text(path, text, edits)
}

fn plan_text(path: &Path, mut text: String, edits: &[Edit]) -> Result<Plan, ToolError> {
    let bom = text.starts_with(BOM);
    if bom {
        text.drain(..BOM.len_utf8());
    }
    // Memory: the old text, the new text, and (only for a file with CRLF) their normalised
    // forms; nothing else is proportional to the file.
    let endings = LineEndings::of(&text);
    let located = locate(path, &endings.normalized, edits)?;
    let new_text = apply(
        &text,
        &located,
        |at| endings.original(at),
        |t| endings.restore(t),
    );
    let new_normalized = if endings.removed_cr.is_empty() {
        Cow::Borrowed(new_text.as_str())
    } else {
        Cow::Owned(apply(&endings.normalized, &located, |at| at, Cow::Borrowed))
    };
    let diff = unified_diff(&endings.normalized, &new_normalized, &located);
    drop(new_normalized);
    drop(endings);
    Ok(Plan {
        old_text: text,
        new_text,
        bom,
        diff,
    })
}

/// Find each edit's unique match in `normalized` and check that no two overlap; the edits
/// sorted by position.
fn locate(path: &Path, normalized: &str, edits: &[Edit]) -> Result<Vec<Located>, ToolError> {
    let label = |i: usize| (edits.len() > 1).then_some(i + 1);
    let mut located = Vec::with_capacity(edits.len());
    for (i, edit) in edits.iter().enumerate() {
        let old = to_lf(&edit.old_text);
        let mut matches = normalized.match_indices(old.as_ref());
        let Some((start, _)) = matches.next() else {
            return Err(ToolError::NoMatch {
                edit: label(i),
                path: path.to_path_buf(),
            });
        };
        let others = matches.count();
        if others > 0 {
            return Err(ToolError::ManyMatches {
                edit: label(i),
                count: others + 1,
                path: path.to_path_buf(),
            });
        }
        located.push(Located {
            index: i,
            start,
            end: start + old.len(),
            new_text: to_lf(&edit.new_text).into_owned(),
        });
    }
    located.sort_by_key(|l| l.start);
    for pair in located.windows(2) {
        if pair[0].end > pair[1].start {
            let (a, b) = (pair[0].index, pair[1].index);
            return Err(ToolError::EditsOverlap {
                first: a.min(b) + 1,
                second: a.max(b) + 1,
                path: path.to_path_buf(),
            });
        }
    }
    Ok(located)
}

/// `text` with the `located` replacements made: `position` maps a normalised position into
/// `text`, `restore` gives a replacement the line endings of `text`.
fn apply<'t>(
    text: &str,
    located: &'t [Located],
    position: impl Fn(usize) -> usize,
    restore: impl Fn(&'t str) -> Cow<'t, str>,
) -> String {
    let mut out = String::with_capacity(text.len());
    let mut copied = 0;
    for l in located {
        out.push_str(&text[copied..position(l.start)]);
        out.push_str(&restore(&l.new_text));
        copied = position(l.end);
    }
    out.push_str(&text[copied..]);
    out
}

/// `text` with every `\r\n` made `\n`.
fn to_lf(text: &str) -> Cow<'_, str> {
    if text.contains("\r\n") {
        Cow::Owned(text.replace("\r\n", "\n"))
    } else {
        Cow::Borrowed(text)
    }
}

/// A text's line endings, and its `\n`-normalised form with the way back.
struct LineEndings<'a> {
    /// The text with `\r\n` made `\n`.
    normalized: Cow<'a, str>,
    /// Positions in `normalized` of the `\n`s that were `\r\n`, ascending.
    removed_cr: Vec<usize>,
    /// Whether inserted text gets `\r\n`.
    crlf: bool,
}

impl<'a> LineEndings<'a> {
    fn of(text: &'a str) -> Self {
        let bytes = text.as_bytes();
        let mut removed_cr = Vec::new();
        let mut breaks = 0usize;
        for at in memchr::memchr_iter(b'\n', bytes) {
            breaks += 1;
            if at > 0 && bytes[at - 1] == b'\r' {
                // Each earlier `\r\n` shifts this `\n` one byte left in the normalised text.
                removed_cr.push(at - 1 - removed_cr.len());
            }
        }
        if removed_cr.is_empty() {
            return Self {
                normalized: Cow::Borrowed(text),
                removed_cr,
                crlf: false,
            };
        }
        let crlf = removed_cr.len() * 2 >= breaks;
        Self {
            normalized: Cow::Owned(text.replace("\r\n", "\n")),
            removed_cr,
            crlf,
        }
    }

    /// The position in the original text of position `at` in the normalised one. A `\r` removed
    /// right before `at` stays outside: a range ending at a line break ends before its `\r\n`,
    /// and a range starting at one starts with its `\r`.
    fn original(&self, at: usize) -> usize {
        at + self.removed_cr.partition_point(|&cr| cr < at)
    }

    /// `text` (normalised) in the file's dominant line ending.
    fn restore<'t>(&self, text: &'t str) -> Cow<'t, str> {
        if self.crlf && text.contains('\n') {
            Cow::Owned(text.replace('\n', "\r\n"))
        } else {
            Cow::Borrowed(text)
        }
    }
}

/// The unified diff (hunks only, no file header) between `old` and `new`, which differ only in
/// the `located` ranges. Each cluster of nearby edits is diffed on its own region of lines, so
/// the cost follows the edits, not the file.
fn unified_diff(old: &str, new: &str, located: &[Located]) -> String {
    // Regions of whole lines around each edit, with context, in old-text bytes, plus the change
    // in length each edit makes.
    let mut regions: Vec<(usize, usize, isize)> = Vec::new();
    for l in located {
        let start = back_lines(old, line_start(old, l.start), EDIT_DIFF_CONTEXT);
        let end = forward_lines(old, line_end(old, l.end), EDIT_DIFF_CONTEXT);
        let delta = l.new_text.len() as isize - (l.end - l.start) as isize;
        match regions.last_mut() {
            Some(last) if start <= last.1 => {
                last.1 = last.1.max(end);
                last.2 += delta;
            }
            _ => regions.push((start, end, delta)),
        }
    }

    let mut out = String::new();
    let mut shift = 0isize; // new position minus old position before the current region
    let (mut old_line, mut old_counted) = (0usize, 0usize);
    let (mut new_line, mut new_counted) = (0usize, 0usize);
    for (start, end, delta) in regions {
        let new_start = start.saturating_add_signed(shift);
        let new_end = end.saturating_add_signed(shift + delta);
        old_line += count_lines(&old[old_counted..start]);
        old_counted = start;
        new_line += count_lines(&new[new_counted..new_start]);
        new_counted = new_start;
        render_region(
            &mut out,
            &old[start..end],
            &new[new_start..new_end],
            old_line,
            new_line,
        );
        shift += delta;
    }
    out
}

/// Append the hunks of one region, whose first lines are `old_line` and `new_line` (0-based).
fn render_region(out: &mut String, old: &str, new: &str, old_line: usize, new_line: usize) {
    let diff = TextDiff::configure()
        .algorithm(Algorithm::Myers)
        .timeout(DIFF_TIMEOUT)
        .diff_lines(old, new);
    for group in diff.grouped_ops(EDIT_DIFF_CONTEXT) {
        let (Some(first), Some(last)) = (group.first(), group.last()) else {
            continue;
        };
        let old_range = (first.old_range().start, last.old_range().end);
        let new_range = (first.new_range().start, last.new_range().end);
        let _ = writeln!(
            out,
            "@@ -{} +{} @@",
            hunk_range(old_line + old_range.0, old_range.1 - old_range.0),
            hunk_range(new_line + new_range.0, new_range.1 - new_range.0),
        );
        for op in &group {
            for change in diff.iter_changes(op) {
                let tag = match change.tag() {
                    ChangeTag::Equal => ' ',
                    ChangeTag::Delete => '-',
                    ChangeTag::Insert => '+',
                };
                out.push(tag);
                out.push_str(change.value());
                if !change.value().ends_with('\n') {
                    out.push_str("\n\\ No newline at end of file\n");
                }
            }
        }
    }
}

/// A hunk header range: `start,len` with 1-based `start`, `start` alone for one line, and the
/// line before for an empty range (the unified diff convention).
fn hunk_range(start: usize, len: usize) -> String {
    match len {
        1 => format!("{}", start + 1),
        0 => format!("{start},0"),
        _ => format!("{},{len}", start + 1),
    }
}

fn count_lines(text: &str) -> usize {
    memchr::memchr_iter(b'\n', text.as_bytes()).count()
}

/// The start of the line containing byte `at`.
fn line_start(text: &str, at: usize) -> usize {
    memchr::memrchr(b'\n', &text.as_bytes()[..at]).map_or(0, |i| i + 1)
}

/// The end (after its `\n`) of the line containing the byte before `at`, the last byte of a
/// non-empty range ending at `at`.
fn line_end(text: &str, at: usize) -> usize {
    let from = at.saturating_sub(1);
    memchr::memchr(b'\n', &text.as_bytes()[from..]).map_or(text.len(), |i| from + i + 1)
}

/// Move `start` (a line start) back by `n` lines.
fn back_lines(text: &str, mut start: usize, n: usize) -> usize {
    for _ in 0..n {
        if start == 0 {
            break;
        }
        start = line_start(text, start - 1);
    }
    start
}

/// Move `end` (a line end) forward by `n` lines.
fn forward_lines(text: &str, mut end: usize, n: usize) -> usize {
    for _ in 0..n {
        if end >= text.len() {
            break;
        }
        end = memchr::memchr(b'\n', &text.as_bytes()[end..]).map_or(text.len(), |i| end + i + 1);
    }
    end
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn edit_arguments_parse_in_both_forms_with_the_original_messages() {
        let one = |old: &str, new: &str| Edit {
            old_text: old.into(),
            new_text: new.into(),
        };
        let cases: Vec<(Value, Result<Vec<Edit>, &str>)> = vec![
            (
                json!({"old_text": "a", "new_text": "b"}),
                Ok(vec![one("a", "b")]),
            ),
            (
                json!({"old_text": "a", "new_text": ""}),
                Ok(vec![one("a", "")]),
            ),
            (
                json!({"old_text": "", "new_text": "b"}),
                Err("old_text must be a non-empty string"),
            ),
            (
                json!({"new_text": "b"}),
                Err("old_text must be a non-empty string"),
            ),
            (
                json!({"old_text": 3, "new_text": "b"}),
                Err("old_text must be a non-empty string"),
            ),
            (json!({"old_text": "a"}), Err("new_text is required")),
            (
                json!({"old_text": "a", "new_text": null}),
                Err("new_text is required"),
            ),
            (
                json!({"edits": [{"old_text": "a", "new_text": "b"}, {"old_text": "c", "new_text": "d"}]}),
                Ok(vec![one("a", "b"), one("c", "d")]),
            ),
            (
                json!({"edits": "[{\"old_text\": \"a\", \"new_text\": \"b\"}]"}),
                Ok(vec![one("a", "b")]),
            ),
            (
                json!({"edits": [{"old_text": "a", "new_text": "b"}, {"old_text": "c"}]}),
                Err("edit 2: new_text is required"),
            ),
            (
                json!({"edits": [{"old_text": "", "new_text": "b"}]}),
                Err("old_text must be a non-empty string"),
            ),
            (
                json!({"edits": []}),
                Err("edits must be a non-empty list of {old_text, new_text} objects"),
            ),
            (
                json!({"edits": "nonsense"}),
                Err("edits must be a non-empty list of {old_text, new_text} objects"),
            ),
            (
                json!({"old_text": "a", "new_text": "b", "edits": []}),
                Err("give either old_text and new_text, or edits, not both"),
            ),
        ];
        for (args, expected) in cases {
            let got = parse_edit_args(&args).map_err(|e| e.to_string());
            assert_eq!(got, expected.map_err(str::to_owned), "for {args}");
        }
    }

    #[test]
    fn normalised_positions_map_back_around_crlf() {
        let endings = LineEndings::of("a\r\nb\r\nc");
        assert_eq!(endings.normalized, "a\nb\nc");
        assert!(endings.crlf);
        // "b" is at 2 normalised, 3 original; the "\n" after it at 3 and 5 (after its "\r").
        assert_eq!(endings.original(2), 3);
        assert_eq!(endings.original(3), 4);
        assert_eq!(endings.original(4), 6);
        assert_eq!(endings.restore("x\ny"), "x\r\ny");
    }

    #[test]
    fn hunk_ranges_follow_the_unified_convention() {
        assert_eq!(hunk_range(0, 3), "1,3");
        assert_eq!(hunk_range(4, 1), "5");
        assert_eq!(hunk_range(4, 0), "4,0");
    }
}
