//! Harbor (PyPI `harbor`, pinned) for the tests that check oml against Harbor's own code: the
//! python of the virtualenv `scripts/setup-harbor.sh` makes, and Harbor's ATIF validator run on
//! a trajectory file.
//!
//! It does not install anything: `scripts/setup.sh` runs the setup script; a test without it
//! skips outside CI and fails under CI (`home::skip`).

use std::path::{Path, PathBuf};
use std::process::Command;

/// How to get the virtualenv.
pub const INSTALL_HARBOR: &str = "bash scripts/setup-harbor.sh (it builds Python 3.13 from \
    Debian's source where no Python >= 3.12 is installed, then pip-installs the pinned Harbor \
    from PyPI)";

/// The Harbor version the setup script pins (tests/interop/harbor-requirements.txt).
pub const HARBOR_VERSION: &str = "0.26.0";

/// The python of the Harbor virtualenv: `$OML_TEST_HARBOR_PYTHON`, else where the setup
/// script puts it (`$OML_TEST_CACHE`, default `~/.cache/oml-test`). `Err` says what is missing.
pub fn python() -> Result<PathBuf, String> {
    if let Some(p) = std::env::var_os("OML_TEST_HARBOR_PYTHON") {
        return Ok(PathBuf::from(p));
    }
    let cache = match std::env::var_os("OML_TEST_CACHE") {
        Some(c) => PathBuf::from(c),
        None => match std::env::var_os("XDG_CACHE_HOME") {
            Some(x) if !x.is_empty() => PathBuf::from(x).join("oml-test"),
            _ => PathBuf::from(std::env::var_os("HOME").ok_or("no HOME")?).join(".cache/oml-test"),
        },
    };
    let venv = cache.join(format!("harbor-{HARBOR_VERSION}"));
    let python = venv.join("bin/python");
    if !venv.join(".oml-ready").is_file() || !python.exists() {
        return Err(format!("the Harbor virtualenv ({})", venv.display()));
    }
    Ok(python)
}

/// Harbor's validator's verdict on the trajectory file `path`: `Ok` when it accepts it, else
/// every error it lists.
pub fn validate(python: &Path, path: &Path) -> Result<(), String> {
    let out = Command::new(python)
        .args(["-m", "harbor.utils.trajectory_validator"])
        .arg(path)
        .output()
        .expect("run Harbor's trajectory validator");
    if out.status.success() {
        return Ok(());
    }
    Err(format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    ))
}
