//! Skills and markdown commands as the ecosystem writes them: a skill is a folder holding a
//! `SKILL.md` (front matter with `name` and `description`, then instructions, with scripts and
//! references beside it); a markdown command is a `NAME.md` in a `commands` folder (front matter
//! `description` and `argument-hint`, then the prompt, with `$ARGUMENTS` and `$1`…`$9`).
//!
//! Discovery reads the folders it is given, in precedence order (the caller puts the user's
//! before the project's, nearest first): the first of a name wins, later ones are listed as
//! shadowed. A file that cannot be read as one is a [`Problem`] naming its line, and is skipped.
//! A project's file that is a link leading out of the project is not read. What was read is
//! kept while the file is unchanged (`skill_index`), so discovering again costs an `lstat` per
//! file.
//! It knows nothing of Lisp, prompts or trust: whether a skill's `skill.fnl` may run is the
//! caller's decision.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::front_matter::{self, FrontMatterError, MAX_FILE_BYTES};
use super::skill_index::{self, Stamp, memo};

/// The file that makes a folder a skill.
pub const SKILL_FILE: &str = "SKILL.md";
/// The Lisp file a skill folder may hold (loaded only from trusted places).
pub const SKILL_LISP: &str = "skill.fnl";
/// A project's skill folders, in precedence order, at each level from the working directory up
/// to the project root.
pub const PROJECT_SKILL_DIRS: [&str; 3] = [".oml/skills", ".agents/skills", ".claude/skills"];
/// A project's markdown command folders, likewise.
pub const PROJECT_COMMAND_DIRS: [&str; 2] = [".oml/commands", ".claude/commands"];
/// Folder levels below a skills folder searched for `SKILL.md` (a skill's own folder is not
/// searched further), and below a commands folder for `*.md`.
pub const MAX_DEPTH: usize = 3;
/// Skills or commands one discovery keeps at most.
pub const MAX_FOUND: usize = 1000;
/// Characters of a description kept (the Agent Skills format allows 1024).
pub const MAX_DESCRIPTION_CHARS: usize = 1024;

/// One folder to search, and whether it belongs to the project (whose files must not lead out
/// of `root`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Folder {
    pub dir: PathBuf,
    pub project_root: Option<PathBuf>,
}

/// A skill found on disk.
#[derive(Clone, Debug, PartialEq, serde::Serialize, Deserialize)]
pub struct Skill {
    pub name: String,
    pub description: String,
    /// Its `SKILL.md`.
    pub file: PathBuf,
    /// The skills folder it was found in.
    pub source: PathBuf,
    pub project: bool,
}

/// A markdown command found on disk.
#[derive(Clone, Debug, PartialEq, serde::Serialize, Deserialize)]
pub struct PromptCommand {
    /// The file name without `.md`; in a subfolder, `sub:name`.
    pub name: String,
    pub description: Option<String>,
    pub hint: Option<String>,
    pub file: PathBuf,
    pub source: PathBuf,
    pub project: bool,
}

/// A file that could not be read as a skill or a command.
#[derive(Clone, Debug, PartialEq, serde::Serialize, Deserialize)]
pub struct Problem {
    pub file: PathBuf,
    pub line: usize,
    pub message: String,
}

/// What a discovery found: the winners, those a winner shadows, and the problems.
#[derive(Clone, Debug, PartialEq)]
pub struct Found<T> {
    pub found: Vec<T>,
    pub shadowed: Vec<T>,
    pub problems: Vec<Problem>,
}

impl<T> Default for Found<T> {
    fn default() -> Self {
        Found {
            found: Vec::new(),
            shadowed: Vec::new(),
            problems: Vec::new(),
        }
    }
}

#[derive(Deserialize, Default)]
struct SkillFront {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    description: Option<String>,
}

#[derive(Deserialize, Default)]
struct CommandFront {
    #[serde(default)]
    description: Option<String>,
    #[serde(default, rename = "argument-hint")]
    argument_hint: Option<String>,
}

/// The project folders named `names`, at each level from `cwd` up to `root` (nearest first).
pub fn project_folders(root: &Path, cwd: &Path, names: &[&str]) -> Vec<Folder> {
    let mut out = Vec::new();
    for dir in cwd.ancestors() {
        if !dir.starts_with(root) {
            break;
        }
        for name in names {
            out.push(Folder {
                dir: dir.join(name),
                project_root: Some(root.to_path_buf()),
            });
        }
    }
    out
}

/// The skills of `folders`, in precedence order.
pub fn skills(folders: &[Folder]) -> Found<Skill> {
    let mut out = Found::default();
    let mut names = HashSet::new();
    for folder in folders {
        let mut files = Vec::new();
        skill_files(&folder.dir, 0, leads_out(folder), &mut files);
        files.sort_by(|a, b| a.0.cmp(&b.0));
        for (file, linked, seen) in files {
            if out.found.len() + out.shadowed.len() >= MAX_FOUND {
                return out;
            }
            match read_skill(folder, &file, linked, seen) {
                Ok(skill) if names.insert(skill.name.clone()) => out.found.push(skill),
                Ok(skill) => out.shadowed.push(skill),
                Err(p) => out.problems.push(p),
            }
        }
    }
    out
}

/// Whether a project folder is itself reached through a link (whose target must be checked).
pub(super) fn leads_out(folder: &Folder) -> bool {
    folder.project_root.as_ref().is_some_and(|root| {
        super::escapes(&folder.dir, root).is_some()
            || std::fs::symlink_metadata(&folder.dir).is_ok_and(|m| m.file_type().is_symlink())
    })
}

/// A `SKILL.md` found: its path, whether a link lies on its way, and its stamp when none does.
type SkillFile = (PathBuf, bool, Option<Stamp>);

/// The `SKILL.md` files beneath `dir` (from the folder's entries and one `lstat` per skill): a
/// folder holding one is a skill, not searched further.
fn skill_files(dir: &Path, depth: usize, linked: bool, out: &mut Vec<SkillFile>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        if entry.file_name().as_encoded_bytes().starts_with(b".") {
            continue;
        }
        let path = entry.path();
        let link = kind.is_symlink();
        if !(kind.is_dir() || (link && path.is_dir())) {
            continue;
        }
        let file = path.join(SKILL_FILE);
        match std::fs::symlink_metadata(&file) {
            Ok(m) => {
                let linked = linked || link || m.file_type().is_symlink();
                // Without a link on the way, this `lstat` is the file's stamp.
                let seen = (!linked).then(|| Stamp::of(&m));
                out.push((file, linked, seen));
            }
            Err(_) if depth + 1 < MAX_DEPTH => skill_files(&path, depth + 1, linked || link, out),
            Err(_) => {}
        }
    }
}

/// The text of `file`, unless it leads out of the project (checked when a link lies on its
/// way) or is too large.
pub(super) fn read_text(folder: &Folder, file: &Path, linked: bool) -> Result<String, Problem> {
    use std::io::Read as _;
    let problem = |message: String| Problem {
        file: file.to_path_buf(),
        line: 0,
        message,
    };
    if linked
        && let Some(root) = &folder.project_root
        && let Some(real) = super::escapes(file, root)
    {
        let to = real.display();
        return Err(problem(format!(
            "not read: it leads out of the project, to {to}"
        )));
    }
    // Only a regular file, opened without blocking: a FIFO planted here would hang discovery.
    let mut f =
        crate::regular::open_regular(file).map_err(|e| problem(format!("cannot be read: {e}")))?;
    let len = f.metadata().map(|m| m.len()).unwrap_or(0);
    if len > MAX_FILE_BYTES {
        return Err(problem(format!(
            "not read: {len} bytes, over {MAX_FILE_BYTES}"
        )));
    }
    let mut text = String::with_capacity(len as usize);
    f.read_to_string(&mut text)
        .map_err(|e| problem(format!("cannot be read: {e}")))?;
    Ok(text)
}

pub(super) fn front_problem(file: &Path, e: FrontMatterError) -> Problem {
    Problem {
        file: file.to_path_buf(),
        line: e.line,
        message: e.message,
    }
}

fn read_skill(
    folder: &Folder,
    file: &Path,
    linked: bool,
    seen: Option<Stamp>,
) -> Result<Skill, Problem> {
    let read = || read_skill_now(folder, file, linked);
    memo(&skill_index::skills(), &folder.dir, file, seen, read)
}

fn read_skill_now(folder: &Folder, file: &Path, linked: bool) -> Result<Skill, Problem> {
    let text = read_text(folder, file, linked)?;
    let (front, _) =
        front_matter::split::<SkillFront>(&text).map_err(|e| front_problem(file, e))?;
    let dir_name = file
        .parent()
        .and_then(Path::file_name)
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let name = front
        .name
        .filter(|n| !n.trim().is_empty())
        .unwrap_or(dir_name);
    let problem = |message: &str| Problem {
        file: file.to_path_buf(),
        line: 1,
        message: message.to_owned(),
    };
    if !valid_name(&name) {
        return Err(problem(
            "the name may hold letters, digits, `-`, `_`, `.` and `:` only",
        ));
    }
    let description = front
        .description
        .map(|d| d.split_whitespace().collect::<Vec<_>>().join(" "))
        .filter(|d| !d.is_empty())
        .ok_or_else(|| {
            problem("no `description` in the front matter: the model could not know when to use it")
        })?;
    Ok(Skill {
        name,
        description: description.chars().take(MAX_DESCRIPTION_CHARS).collect(),
        file: file.to_path_buf(),
        source: folder.dir.clone(),
        project: folder.project_root.is_some(),
    })
}

pub(super) fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | '.' | ':'))
}

/// The body of the skill or command `file` (its front matter left out).
pub fn body(file: &Path) -> Result<String, Problem> {
    let folder = Folder {
        dir: PathBuf::new(),
        project_root: None,
    };
    let text = read_text(&folder, file, false)?;
    let (_, body) =
        front_matter::split::<yaml_serde::Value>(&text).map_err(|e| front_problem(file, e))?;
    Ok(body.to_owned())
}

/// The markdown commands of `folders`, in precedence order.
pub fn commands(folders: &[Folder]) -> Found<PromptCommand> {
    let mut out = Found::default();
    let mut names = HashSet::new();
    for folder in folders {
        let mut files = Vec::new();
        command_files(&folder.dir, "", 0, leads_out(folder), &mut files);
        files.sort_by(|a, b| a.1.cmp(&b.1));
        for (name, file, linked, seen) in files {
            if out.found.len() + out.shadowed.len() >= MAX_FOUND {
                return out;
            }
            match read_command(folder, &file, name, linked, seen) {
                Ok(c) if names.insert(c.name.clone()) => out.found.push(c),
                Ok(c) => out.shadowed.push(c),
                Err(p) => out.problems.push(p),
            }
        }
    }
    out
}

/// The `*.md` files beneath `dir`, each with its command name (`sub:name` in a subfolder) and
/// whether a link lies on its way.
fn command_files(
    dir: &Path,
    prefix: &str,
    depth: usize,
    linked: bool,
    out: &mut Vec<(String, PathBuf, bool, Option<Stamp>)>,
) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') {
            continue;
        }
        let path = entry.path();
        let link = kind.is_symlink();
        if kind.is_dir() || (link && path.is_dir()) {
            if depth + 1 < MAX_DEPTH {
                let prefix = format!("{prefix}{name}:");
                command_files(&path, &prefix, depth + 1, linked || link, out);
            }
        } else if let Some(stem) = name.strip_suffix(".md") {
            let linked = linked || link;
            let seen = (!linked)
                .then(|| entry.metadata().ok().map(|m| Stamp::of(&m)))
                .flatten();
            out.push((format!("{prefix}{stem}"), path, linked, seen));
        }
    }
}

fn read_command(
    folder: &Folder,
    file: &Path,
    name: String,
    linked: bool,
    seen: Option<Stamp>,
) -> Result<PromptCommand, Problem> {
    let read = || read_command_now(folder, file, name, linked);
    memo(&skill_index::commands(), &folder.dir, file, seen, read)
}

fn read_command_now(
    folder: &Folder,
    file: &Path,
    name: String,
    linked: bool,
) -> Result<PromptCommand, Problem> {
    if !valid_name(&name) {
        return Err(Problem {
            file: file.to_path_buf(),
            line: 0,
            message: "the file name may hold letters, digits, `-`, `_` and `.` only".into(),
        });
    }
    let text = read_text(folder, file, linked)?;
    let (front, _) =
        front_matter::split::<CommandFront>(&text).map_err(|e| front_problem(file, e))?;
    Ok(PromptCommand {
        name,
        description: front.description.filter(|d| !d.trim().is_empty()),
        hint: front.argument_hint.filter(|h| !h.trim().is_empty()),
        file: file.to_path_buf(),
        source: folder.dir.clone(),
        project: folder.project_root.is_some(),
    })
}

/// A markdown command's `body` with its arguments: `$ARGUMENTS` is the whole `input`, `$1` to
/// `$9` its words (empty past the last).
pub fn expand(body: &str, input: &str) -> String {
    let words: Vec<&str> = input.split_whitespace().collect();
    let mut out = String::with_capacity(body.len() + input.len());
    let mut rest = body;
    while let Some(i) = rest.find('$') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        if let Some(tail) = after.strip_prefix("ARGUMENTS") {
            out.push_str(input);
            rest = tail;
        } else if let Some(d) = after.chars().next().filter(|c| ('1'..='9').contains(c)) {
            let n = d as usize - '1' as usize;
            out.push_str(words.get(n).copied().unwrap_or(""));
            rest = &after[1..];
        } else {
            out.push('$');
            rest = after;
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_are_substituted() {
        assert_eq!(expand("Fix $ARGUMENTS now", "issue 12"), "Fix issue 12 now");
        assert_eq!(
            expand("$1 then $2, not $3; $HOME $", "a b"),
            "a then b, not ; $HOME $"
        );
        assert_eq!(expand("no args", "x"), "no args");
    }

    #[test]
    fn a_changed_file_is_read_again_and_a_damaged_index_is_ignored() {
        let dir = tempfile::tempdir().expect("temp dir");
        let file = dir.path().join("skills/a/SKILL.md");
        std::fs::create_dir_all(file.parent().expect("folder")).expect("mkdir");
        let folders = [Folder {
            dir: dir.path().join("skills"),
            project_root: None,
        }];
        let write = |text: &str, secs: u64| {
            std::fs::write(&file, text).expect("write");
            let f = std::fs::File::options()
                .write(true)
                .open(&file)
                .expect("open");
            let t = std::time::UNIX_EPOCH + std::time::Duration::from_secs(secs);
            f.set_modified(t).expect("mtime");
        };
        write("---\ndescription: first\n---\n", 1_000);
        assert_eq!(skills(&folders).found[0].description, "first");
        write("---\ndescription: other\n---\n", 2_000);
        assert_eq!(skills(&folders).found[0].description, "other");
        let index = dir.path().join("index.json");
        skill_index::save(&index, &skill_index::skills());
        assert!(index.is_file());
        std::fs::write(&index, b"{not json").expect("damage");
        skill_index::load(&index, &skill_index::skills());
        assert_eq!(skills(&folders).found[0].description, "other");
    }

    #[test]
    fn names_are_checked() {
        assert!(valid_name("pdf-tools"));
        assert!(valid_name("frontend:review"));
        assert!(!valid_name("a b"));
        assert!(!valid_name("../x"));
    }
}
