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
    let temp = parent.join(format!(
        ".{}.{}.tmp",
        file.file_name()
            .map(|n| n.to_string_lossy())
            .unwrap_or_default(),
        std::process::id()
    ));
    let mut written = Written::default();
    let result = write_all(&temp, &text, parent, &dir_name, &images, &mut written)
        .and_then(|()| std::fs::rename(&temp, file).map_err(io_error(file)));
    if result.is_err() {
        written.undo(&temp);
    }
    result
}

/// What a file export wrote so far, taken back when it fails: nothing is left half done.
#[derive(Default)]
struct Written {
    images: Vec<PathBuf>,
    made_dir: Option<PathBuf>,
}

impl Written {
    fn undo(&self, temp: &Path) {
        let _ = std::fs::remove_file(temp);
        for path in &self.images {
            let _ = std::fs::remove_file(path);
        }
        if let Some(dir) = &self.made_dir {
            let _ = std::fs::remove_dir(dir);
        }
    }
}

fn io_error(path: &Path) -> impl FnOnce(std::io::Error) -> WriteError {
    let path = path.to_owned();
    move |source| WriteError::Io { path, source }
}

/// The trajectory to `temp` first (so a folder that cannot take it fails before any image is
/// written), then the images into `dir_name` beside it.
fn write_all(
    temp: &Path,
    text: &[u8],
    parent: &Path,
    dir_name: &str,
    images: &[atif::Image],
    written: &mut Written,
) -> Result<(), WriteError> {
    std::fs::write(temp, text).map_err(io_error(temp))?;
    if images.is_empty() {
        return Ok(());
    }
    let dir = parent.join(dir_name);
    if !dir.is_dir() {
        std::fs::create_dir(&dir).map_err(io_error(&dir))?;
        written.made_dir = Some(dir.clone());
    }
    for image in images {
        let path = parent.join(&image.path);
        std::fs::write(&path, &image.bytes).map_err(io_error(&path))?;
        written.images.push(path);
    }
    Ok(())
}
