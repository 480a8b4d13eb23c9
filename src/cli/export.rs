//! `oml sessions export --format atif ID [-o FILE]`: a stored session written out as an ATIF
//! trajectory, to stdout, or to FILE with the images it holds in a folder beside it.
//!
//! It knows no format: `session::atif` builds the document; this writes it. A file is written
//! whole or not at all (a temporary file renamed into place), and the session is only read.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use super::status;
use crate::front::stdio::err;
use crate::paths::Paths;
use crate::session::atif::{self, Export, Media};
use crate::session::store::Store;

/// Why an export could not be written.
#[derive(Debug, thiserror::Error)]
enum WriteError {
    #[error("{0}")]
    Export(#[from] atif::ExportError),
    #[error("cannot write {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot encode the trajectory: {0}")]
    Encode(#[from] serde_json::Error),
}

/// Export session `id` to `output` (stdout when `None`); the exit status.
pub(super) fn run(paths: &Paths, id: &str, output: Option<&Path>) -> i32 {
    let store = Store::new(paths.sessions_dir());
    let written = match output {
        Some(path) => to_file(&store, id, path),
        None => to_stdout(&store, id),
    };
    match written {
        Ok(()) => status::OK,
        Err(e) => {
            err!("oml sessions export: {e}");
            status::ERROR
        }
    }
}

fn to_stdout(store: &Store, id: &str) -> Result<(), WriteError> {
    let Export { trajectory, .. } = atif::export(store, id, &Media::Omitted)?;
    let mut text = serde_json::to_vec_pretty(&trajectory)?;
    text.push(b'\n');
    let mut out = std::io::stdout().lock();
    // A reader that went away (`| head`) is no error of the export's.
    match out.write_all(&text).and_then(|()| out.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(WriteError::Io {
            path: "stdout".into(),
            source: e,
        }),
        _ => Ok(()),
    }
}

/// The folder of `file`'s images: its name with `.images` for its extension, beside it.
fn images_dir_name(file: &Path) -> String {
    let stem = file
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "trajectory".into());
    format!("{stem}.images")
}

fn to_file(store: &Store, id: &str, file: &Path) -> Result<(), WriteError> {
    let dir_name = images_dir_name(file);
    let media = Media::Files {
        dir: dir_name.clone(),
    };
    let Export { trajectory, images } = atif::export(store, id, &media)?;
    let mut text = serde_json::to_vec_pretty(&trajectory)?;
    text.push(b'\n');
    let parent = file
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let io = |path: &Path| {
        let path = path.to_owned();
        move |source| WriteError::Io { path, source }
    };
    if !images.is_empty() {
        let dir = parent.join(&dir_name);
        std::fs::create_dir_all(&dir).map_err(io(&dir))?;
        for image in &images {
            let path = parent.join(&image.path);
            std::fs::write(&path, &image.bytes).map_err(io(&path))?;
        }
    }
    let temp = parent.join(format!(
        ".{}.{}.tmp",
        file.file_name()
            .map(|n| n.to_string_lossy())
            .unwrap_or_default(),
        std::process::id()
    ));
    let written = std::fs::write(&temp, &text).and_then(|()| std::fs::rename(&temp, file));
    if let Err(source) = written {
        let _ = std::fs::remove_file(&temp);
        return Err(WriteError::Io {
            path: file.to_owned(),
            source,
        });
    }
    Ok(())
}
