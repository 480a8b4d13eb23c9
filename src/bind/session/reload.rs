//! `oml.reload`, what `/reload` calls: the user init file loaded again, then the project's, with
//! a report for the user. Only the CLI knows the init paths, so it installs this after the
//! agent. It knows nothing of sessions.

use std::path::Path;
use std::sync::Arc;

use super::rt;
use crate::lisp::{HostFn, Lisp, LispError, define};

/// The init paths `oml.reload` loads, which only the CLI knows.
struct ReloadPaths(Arc<crate::paths::Paths>);

/// `oml.reload`: what `/reload` calls.
const RELOAD: &[HostFn] = &[HostFn {
    name: "reload",
    args: "dir",
    doc: "Load the user init file again, then the project init file of the directory DIR (as \
          init.project-init allows). Returns a report for the user: \"Reloaded FILES\" or \
          \"Reloaded nothing (no init files)\", with one \"- \" line per error or notice.",
    make: |lua| {
        // A weak handle: the function lives inside the state it would otherwise keep alive.
        let weak = lua.weak();
        crate::lisp::create_async_function(lua, move |_, dir: String| {
            let weak = weak.clone();
            async move {
                let Some(lua) = weak.try_upgrade() else {
                    return Ok(String::new());
                };
                let lisp = Lisp::from_lua(&lua).ok_or_else(|| rt("the Lisp host is gone"))?;
                let paths = lua
                    .app_data_ref::<ReloadPaths>()
                    .map(|p| Arc::clone(&p.0))
                    .ok_or_else(|| rt("oml.reload: no init paths"))?;
                let report =
                    crate::lisp::init::load_all(&lisp, &paths, Some(Path::new(&dir)), true).await;
                Ok(reload_report(&report))
            }
        })
    },
}];

/// `oml.reload`'s answer for `report`.
fn reload_report(report: &crate::lisp::init::InitReport) -> String {
    let mut out = if report.loaded.is_empty() {
        "Reloaded nothing (no init files)".to_owned()
    } else {
        let files: Vec<String> = report
            .loaded
            .iter()
            .map(|p| p.display().to_string())
            .collect();
        format!("Reloaded {}", files.join(" and "))
    };
    for line in report.messages() {
        out.push_str("\n- ");
        out.push_str(&line);
    }
    out
}

/// Install `oml.reload`, which loads the init files of `paths`. The CLI calls it after the
/// agent, since only it knows the paths.
pub fn install_reload(lisp: &Lisp, paths: crate::paths::Paths) -> Result<(), LispError> {
    lisp.lua().set_app_data(ReloadPaths(Arc::new(paths)));
    define(lisp.lua(), "oml", RELOAD)?;
    Ok(())
}
