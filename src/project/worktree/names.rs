//! The names of oml's worktrees, pure: a wanted name made safe as a folder and a branch, the
//! numbered alternatives, a repository's id, and `git worktree list --porcelain -z` read back
//! into oml's worktrees. Knows nothing of git processes or the disk.

use std::path::{Path, PathBuf};

use sha2::{Digest as _, Sha256};

/// Characters kept of a wanted name (the rest of it is dropped).
pub const MAX_NAME_CHARS: usize = 48;

/// The highest number tried after a name to make it unique (`name-2` … `name-100`).
pub const MAX_SUFFIX: usize = 100;

/// The name used when nothing of the wanted one is left.
pub const FALLBACK_NAME: &str = "task";

/// `wanted` as a folder and branch name: each run of characters other than ASCII letters,
/// digits, `.`, `_` and `-` becomes one `-`; no leading `-` or `.`, no trailing `.` or `-`,
/// no `..`, no `.lock` ending, at most [`MAX_NAME_CHARS`]; [`FALLBACK_NAME`] when nothing is
/// left. So no name is a path of more than one part, an option, or a branch git refuses.
pub fn sanitise(wanted: &str) -> String {
    let mut out = String::new();
    for c in wanted.chars() {
        let keep = c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-');
        let c = if keep { c } else { '-' };
        let repeat = matches!(c, '-' | '.') && out.ends_with(c);
        if !repeat {
            out.push(c);
        }
    }
    let mut name: String = out.chars().take(MAX_NAME_CHARS).collect();
    loop {
        let before = name.len();
        name = name
            .trim_start_matches(['-', '.'])
            .trim_end_matches(['-', '.'])
            .to_owned();
        if let Some(stem) = name.strip_suffix(".lock") {
            name = stem.to_owned();
        }
        if name.len() == before {
            break;
        }
    }
    if name.is_empty() {
        FALLBACK_NAME.to_owned()
    } else {
        name
    }
}

/// The `n`th candidate for a sanitised name: the name itself, then `name-2`, `name-3`, …
pub fn numbered(name: &str, n: usize) -> String {
    if n <= 1 {
        name.to_owned()
    } else {
        format!("{name}-{n}")
    }
}

/// The id of a repository among oml's worktree folders: the name of the folder that holds its
/// git folder (`<repo>/.git`; the git folder's own name for a bare one), sanitised, and 8 hex
/// digits of the hash of the git folder's path — the same from any of its worktrees, and
/// different for two clones named alike.
pub fn repo_id(common_dir: &Path) -> String {
    let named = if common_dir.file_name().is_some_and(|n| n == ".git") {
        common_dir.parent().unwrap_or(common_dir)
    } else {
        common_dir
    };
    let stem = sanitise(&named.file_name().unwrap_or_default().to_string_lossy());
    let digest = Sha256::digest(common_dir.as_os_str().as_encoded_bytes());
    let hex: String = digest[..4].iter().map(|b| format!("{b:02x}")).collect();
    format!("{stem}-{hex}")
}

/// Whether `s` is a commit id (4 to 64 hexadecimal digits): never an option or a range.
pub fn is_commit_id(s: &str) -> bool {
    (4..=64).contains(&s.len()) && s.bytes().all(|b| b.is_ascii_hexdigit())
}

/// oml's worktrees in `git worktree list --porcelain -z`'s output: those whose folder is
/// directly in one of `folders` (the same folder, as given and as its real path) and whose
/// branch is `refs/heads/oml/<the folder's name>`, as (name, path).
pub fn parse_list(porcelain: &str, folders: &[&Path]) -> Vec<(String, PathBuf)> {
    let mut found = Vec::new();
    for record in porcelain.split("\0\0") {
        let mut path = None;
        let mut branch = None;
        for field in record.split('\0') {
            if let Some(p) = field.strip_prefix("worktree ") {
                path = Some(PathBuf::from(p));
            } else if let Some(b) = field.strip_prefix("branch ") {
                branch = Some(b);
            }
        }
        let (Some(path), Some(branch)) = (path, branch) else {
            continue;
        };
        let Some(name) = path.file_name().map(|n| n.to_string_lossy().into_owned()) else {
            continue;
        };
        let in_folder = path.parent().is_some_and(|p| folders.contains(&p));
        let expected = format!("refs/heads/{}{name}", super::BRANCH_PREFIX);
        if in_folder && branch == expected && sanitise(&name) == name {
            found.push((name, path));
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_from_outside_become_one_harmless_part() {
        for (wanted, name) in [
            ("review", "review"),
            ("../../x", "x"),
            ("--upload-pack=touch /tmp/p", "upload-pack-touch-tmp-p"),
            ("-b", "b"),
            ("a..b", "a.b"),
            ("x.lock", "x"),
            ("a.lock.lock", "a"),
            ("/", FALLBACK_NAME),
            ("", FALLBACK_NAME),
            ("...", FALLBACK_NAME),
            ("héllo wörld", "h-llo-w-rld"),
            ("HEAD@{0}", "HEAD-0"),
        ] {
            assert_eq!(sanitise(wanted), name, "{wanted:?}");
        }
        assert_eq!(sanitise(&"a".repeat(200)).len(), MAX_NAME_CHARS);
    }

    #[test]
    fn a_repository_has_one_id_named_after_its_folder() {
        let id = repo_id(Path::new("/src/my repo/.git"));
        assert!(
            id.starts_with("my-repo-") && id.len() == "my-repo-".len() + 8,
            "{id}"
        );
        assert!(repo_id(Path::new("/srv/bare.git")).starts_with("bare.git-"));
        assert_ne!(id, repo_id(Path::new("/other/my repo/.git")));
    }

    #[test]
    fn candidates_are_numbered_after_the_first() {
        assert_eq!(numbered("oml", 1), "oml");
        assert_eq!(numbered("oml", 2), "oml-2");
    }

    #[test]
    fn commit_ids_are_hex_only() {
        assert!(is_commit_id("0123abcd"));
        assert!(!is_commit_id("--output=/tmp/x"));
        assert!(!is_commit_id("HEAD"));
        assert!(!is_commit_id("a..b"));
        assert!(!is_commit_id(""));
    }

    #[test]
    fn only_oml_branches_in_oml_folders_are_listed() {
        let dir = Path::new("/s/worktrees/r-1");
        let porcelain = "worktree /repo\0HEAD 1\0branch refs/heads/main\0\0\
            worktree /s/worktrees/r-1/a\0HEAD 1\0branch refs/heads/oml/a\0\0\
            worktree /s/worktrees/r-1/b\0HEAD 1\0branch refs/heads/other\0\0\
            worktree /elsewhere/c\0HEAD 1\0branch refs/heads/oml/c\0\0\
            worktree /s/worktrees/r-1/d\0HEAD 1\0detached\0\0";
        assert_eq!(
            parse_list(porcelain, &[dir]),
            vec![("a".to_owned(), dir.join("a"))]
        );
    }
}
