//! Init files, the load path, and the trust record of project directories.
//!
//! Start-up loads `$XDG_CONFIG_HOME/oml/init.fnl` with `lisp/` beside it on the load path. A
//! project's `.oml/init.fnl` (with `.oml/lisp/`) runs when a session starts in that directory,
//! but only when the setting `init.project-init` allows it: `:trusted` (the default) runs it only
//! if `oml trust DIR` recorded the directory *and the file's current content hash*, like direnv;
//! `:always` and `:never` do what they say.
//!
//! Files stay where they belong: a project's `init.fnl`, or a module of its `.oml/lisp/`, whose
//! real path leaves the project root is not loaded (a notice, or the `require` error, says so),
//! nor a module of the user's `lisp/` that leaves oml's config folder.
//!
//! An error in an init file is collected as an `InitError` (with `file:line:col` as Fennel or Lua
//! report it) and never stops oml. Loading again is idempotent as long as the files use the
//! idempotent forms (`setq`, `fn`, keyed `advise!`, `defsetting`).
//!
//! This module does not decide how errors are shown; callers print them or send them to a client.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use crate::cancel::CancelToken;
use crate::paths::{self, Paths};

use super::{Lisp, LispError, SettingDecl, sha256_hex, write_atomically};

/// The setting that decides whether a project's init file runs.
const PROJECT_INIT: &str = "init.project-init";

/// Declare the settings this module reads. `Lisp::new` calls it after the prelude.
pub(super) fn declare_settings(lisp: &Lisp) -> Result<(), LispError> {
    lisp.declare_setting(&SettingDecl::new(
        PROJECT_INIT,
        serde_json::json!(["trusted", "always", "never"]),
        "trusted",
        "Whether a project's .oml/init.fnl runs: :trusted (only in directories recorded with `oml trust`), :always or :never.",
    ))
}

/// One init file that failed to load.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InitError {
    pub file: PathBuf,
    /// Fennel's or Lua's message, which starts with `file:line[:col]:`.
    pub message: String,
}

impl fmt::Display for InitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let file = self.file.display().to_string();
        if self.message.starts_with(&file) {
            write!(f, "error in {}", self.message)
        } else {
            write!(f, "error in {file}: {}", self.message)
        }
    }
}

/// What loading the init files did.
#[derive(Clone, Debug, Default)]
pub struct InitReport {
    pub loaded: Vec<PathBuf>,
    pub errors: Vec<InitError>,
    /// Things the user should know that are not errors (an untrusted project init file).
    pub notices: Vec<String>,
}

impl InitReport {
    fn absorb(&mut self, other: InitReport) {
        self.loaded.extend(other.loaded);
        self.errors.extend(other.errors);
        self.notices.extend(other.notices);
    }

    /// Every error and notice as the lines a terminal user sees.
    pub fn messages(&self) -> Vec<String> {
        self.errors
            .iter()
            .map(|e| e.to_string())
            .chain(self.notices.iter().cloned())
            .collect()
    }
}

/// Load one file, turning failure into an `InitError`.
async fn load_one(lisp: &Lisp, file: &Path, report: &mut InitReport) {
    match lisp.load_file(file, &CancelToken::new()).await {
        Ok(()) => report.loaded.push(file.to_path_buf()),
        Err(e) => report.errors.push(InitError {
            file: file.to_path_buf(),
            message: e.to_string(),
        }),
    }
}

/// Put the user's `lisp/` on the load path and run the user init file, if it exists.
pub async fn load_user_init(lisp: &Lisp, paths: &Paths) -> InitReport {
    let mut report = InitReport::default();
    let lisp_dir = paths.user_lisp();
    if let Err(e) = lisp.add_load_path_within(&lisp_dir, &paths.config) {
        report.errors.push(InitError {
            file: lisp_dir,
            message: e.to_string(),
        });
    }
    // The agents oml configured on request load first, so init.fnl can change them.
    let agents = paths.agents_file();
    if agents.is_file() {
        load_one(lisp, &agents, &mut report).await;
    }
    let init = paths.user_init();
    if init.is_file() {
        load_one(lisp, &init, &mut report).await;
    }
    report
}

/// Run the `.oml/init.fnl` of the project `dir` is in (its root: the nearest directory with
/// `.git` or `.oml/`, else `dir`) when `init.project-init` and the trust record allow it.
pub async fn load_project_init(lisp: &Lisp, paths: &Paths, dir: &Path) -> InitReport {
    let root = crate::project::find_root(dir).unwrap_or_else(|| dir.to_path_buf());
    let dir = root.as_path();
    let mut report = InitReport::default();
    let init = paths::project_init(dir);
    if !init.is_file() {
        return report;
    }
    let policy: String = match lisp.setting(PROJECT_INIT) {
        Ok(p) => p,
        Err(e) => {
            report.errors.push(InitError {
                file: init.clone(),
                message: format!("not loaded: {e}"),
            });
            return report;
        }
    };
    let allowed = match policy.as_str() {
        "never" => false,
        "always" => true,
        _ => match TrustStore::new(paths.trust_file()).status(dir) {
            TrustStatus::Trusted => true,
            TrustStatus::Untrusted => {
                report.notices.push(format!(
                    "not loading {}: this directory is not trusted. Review the file, then run `oml trust {}`.",
                    init.display(),
                    dir.display()
                ));
                false
            }
            TrustStatus::Changed => {
                report.notices.push(format!(
                    "not loading {}: it or a file of .oml/lisp/ changed since you trusted it. Review them, then run `oml trust {}` again.",
                    init.display(),
                    dir.display()
                ));
                false
            }
        },
    };
    if !allowed {
        return report;
    }
    if let Some(real) = crate::project::escapes(&init, dir) {
        report.notices.push(format!(
            "not loading {}: it is a link to {}, outside the project {}",
            init.display(),
            real.display(),
            dir.display()
        ));
        return report;
    }
    if let Err(e) = lisp.add_load_path_within(&paths::project_lisp(dir), dir) {
        report.errors.push(InitError {
            file: init.clone(),
            message: e.to_string(),
        });
    }
    load_one(lisp, &init, &mut report).await;
    report
}

/// The user init, then the project init of `dir` (when given): what start-up and `reload` run.
pub async fn load_all(lisp: &Lisp, paths: &Paths, dir: Option<&Path>, user: bool) -> InitReport {
    let mut report = InitReport::default();
    if user {
        report.absorb(load_user_init(lisp, paths).await);
    }
    if let Some(dir) = dir {
        report.absorb(load_project_init(lisp, paths, dir).await);
    }
    report
}

/// Whether a directory's project init file may run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TrustStatus {
    Trusted,
    Untrusted,
    /// Trusted once, but the init file or a file of `.oml/lisp/` is no longer what was trusted.
    Changed,
}

/// The record of trusted directories: `{ "/abs/dir": "<hash>" }` as JSON in the state directory,
/// the hash covering `.oml/init.fnl` and the `.oml/lisp/` tree.
pub struct TrustStore {
    file: PathBuf,
}

/// The hash recorded for a directory that has no init file yet.
const NO_INIT_FILE: &str = "none";

impl TrustStore {
    pub fn new(file: PathBuf) -> TrustStore {
        TrustStore { file }
    }

    fn read(&self) -> BTreeMap<String, String> {
        std::fs::read(&self.file)
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or_default()
    }

    fn write(&self, map: &BTreeMap<String, String>) -> std::io::Result<()> {
        let dir = self.file.parent().unwrap_or(Path::new("."));
        paths::ensure_private_dir(dir)?;
        let json = serde_json::to_vec_pretty(map).map_err(std::io::Error::other)?;
        write_atomically(dir, &self.file, &json)
    }

    /// What trust covers: the init file, every file of `.oml/lisp/` (which the init file can
    /// `require`), every `skill.fnl` of `.oml/skills/` (which runs when its skill is loaded)
    /// every file of `.oml/agents/` (whose sub-agents may start MCP servers) and the settings
    /// files of [`paths::PROJECT_SETUP_FILES`] (hooks, rules, MCP servers), each named by its
    /// path. Without any of these it is the init file's hash alone,
    /// as it always was, so existing records stay valid.
    fn hash_of(dir: &Path) -> String {
        Self::hash_given(dir, &[])
    }

    /// [`Self::hash_of`], with the bytes of some setup files as `given` (a name of
    /// [`paths::PROJECT_SETUP_FILES`] and what a reader read from it) rather than read again:
    /// so trust is checked on the very bytes that will be used, and a file that changes in
    /// between cannot pass as the one trusted.
    fn hash_given(dir: &Path, given: &[(&str, &[u8])]) -> String {
        let agents = dir.join(".oml/agents");
        let mut agent_files = Vec::new();
        collect_files(&agents, &agents, &mut agent_files);
        // The settings files another agent's users keep their hooks, rules and MCP servers in.
        let setup_files: Vec<(String, Vec<u8>)> = paths::PROJECT_SETUP_FILES
            .iter()
            .filter_map(|name| {
                if let Some((_, bytes)) = given.iter().find(|(n, _)| n == name) {
                    return Some((format!("../../{name}"), bytes.to_vec()));
                }
                let path = dir.join(name);
                // Present but unreadable (a FIFO, a folder) counts, empty, as collect_files does.
                std::fs::symlink_metadata(&path).is_ok().then(|| {
                    let bytes = crate::regular::read_regular(&path).unwrap_or_default();
                    (format!("../../{name}"), bytes)
                })
            })
            .collect();
        // Without an init file, the sub-agents and settings (when there are any) are what
        // trust covers.
        let init = match crate::regular::read_regular(&paths::project_init(dir)) {
            Ok(init) => init,
            Err(_) if agent_files.is_empty() && setup_files.is_empty() => {
                return NO_INIT_FILE.to_string();
            }
            Err(_) => Vec::new(),
        };
        let lisp = paths::project_lisp(dir);
        let skills = dir.join(".oml/skills");
        let mut files = Vec::new();
        collect_files(&lisp, &lisp, &mut files);
        let mut skill_files = Vec::new();
        collect_files(&skills, &skills, &mut skill_files);
        skill_files.retain(|(name, _)| name.ends_with("skill.fnl"));
        if files.is_empty()
            && skill_files.is_empty()
            && agent_files.is_empty()
            && setup_files.is_empty()
            && !lisp.is_dir()
        {
            return sha256_hex(&init);
        }
        files.extend(
            skill_files
                .into_iter()
                .map(|(name, bytes)| (format!("../skills/{name}"), bytes)),
        );
        files.extend(
            agent_files
                .into_iter()
                .map(|(name, bytes)| (format!("../agents/{name}"), bytes)),
        );
        files.extend(setup_files);
        files.sort();
        // Every file, the init file too, with its length: no bytes can move from one file
        // into the next and leave the hash as it was.
        let mut covered = Vec::with_capacity(init.len());
        covered.extend_from_slice(format!("init.fnl\0{}\0", init.len()).as_bytes());
        covered.extend_from_slice(&init);
        for (name, bytes) in files {
            covered.extend_from_slice(format!("\0lisp/{name}\0{}\0", bytes.len()).as_bytes());
            covered.extend_from_slice(&bytes);
        }
        format!("tree-{}", sha256_hex(&covered))
    }

    pub fn status(&self, dir: &Path) -> TrustStatus {
        let key = canonical(dir);
        match self.read().get(&key) {
            None => TrustStatus::Untrusted,
            Some(h) if *h == Self::hash_of(dir) => TrustStatus::Trusted,
            Some(_) => TrustStatus::Changed,
        }
    }

    /// [`Self::status`], checked on the `given` bytes of setup files (see
    /// [`Self::hash_given`]).
    pub fn status_given(&self, dir: &Path, given: &[(&str, &[u8])]) -> TrustStatus {
        match self.read().get(&canonical(dir)) {
            None => TrustStatus::Untrusted,
            Some(h) if *h == Self::hash_given(dir, given) => TrustStatus::Trusted,
            Some(_) => TrustStatus::Changed,
        }
    }

    /// Record `dir` with its init file's current hash; returns that hash.
    pub fn trust(&self, dir: &Path) -> std::io::Result<String> {
        let mut map = self.read();
        let hash = Self::hash_of(dir);
        map.insert(canonical(dir), hash.clone());
        self.write(&map)?;
        Ok(hash)
    }

    /// Forget `dir`; returns whether it was trusted.
    pub fn untrust(&self, dir: &Path) -> std::io::Result<bool> {
        let mut map = self.read();
        let was = map.remove(&canonical(dir)).is_some();
        self.write(&map)?;
        Ok(was)
    }
}

/// Every file under `dir` (links followed, as `require` follows them) with its path relative to
/// `root`; unreadable ones (and a FIFO or a device, which is never opened blocking) count with
/// empty content, so they still change the hash.
fn collect_files(root: &Path, dir: &Path, out: &mut Vec<(String, Vec<u8>)>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            collect_files(root, &path, out);
        } else {
            let name = path
                .strip_prefix(root)
                .unwrap_or(&path)
                .display()
                .to_string();
            out.push((
                name,
                crate::regular::read_regular(&path).unwrap_or_default(),
            ));
        }
    }
}

/// The absolute, symlink-free form of `dir` (as given when it cannot be resolved).
pub fn canonical(dir: &Path) -> String {
    std::fs::canonicalize(dir)
        .unwrap_or_else(|_| dir.to_path_buf())
        .display()
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trust_covers_the_setup_files_so_a_changed_or_new_one_ends_it() {
        let home = tempfile::tempdir().unwrap();
        let dir = tempfile::tempdir().unwrap();
        let store = TrustStore::new(home.path().join("trusted.json"));
        std::fs::create_dir_all(dir.path().join(".claude")).unwrap();
        std::fs::write(dir.path().join(".claude/settings.json"), "{}").unwrap();
        store.trust(dir.path()).unwrap();
        assert_eq!(store.status(dir.path()), TrustStatus::Trusted);
        std::fs::write(dir.path().join(".claude/settings.json"), r#"{"hooks":{}}"#).unwrap();
        assert_eq!(store.status(dir.path()), TrustStatus::Changed);
        store.trust(dir.path()).unwrap();
        // A settings file that was not there when trust was recorded ends it too.
        std::fs::write(dir.path().join(".mcp.json"), "{}").unwrap();
        assert_eq!(store.status(dir.path()), TrustStatus::Changed);
        // Checked on bytes read earlier: what was read, not what is there now, is what counts.
        store.trust(dir.path()).unwrap();
        let now = std::fs::read(dir.path().join(".claude/settings.json")).unwrap();
        std::fs::write(dir.path().join(".claude/settings.json"), r#"{"evil":1}"#).unwrap();
        let read = [(".claude/settings.json", now.as_slice())];
        assert_eq!(store.status_given(dir.path(), &read), TrustStatus::Trusted);
        let evil = [(".claude/settings.json", &br#"{"evil":1}"#[..])];
        assert_eq!(store.status_given(dir.path(), &evil), TrustStatus::Changed);
        // A project without any of them keeps the old record's form.
        let bare = tempfile::tempdir().unwrap();
        assert_eq!(TrustStore::hash_of(bare.path()), NO_INIT_FILE);
    }
}
