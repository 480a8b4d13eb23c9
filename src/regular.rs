//! Opening a file oml reads on its own or the model's behalf, only when it is a regular file: a
//! FIFO nobody writes would block the open (a turn past any cancel, or start-up itself when it
//! sits where skills, commands or instructions are looked for), and a device such as
//! `/dev/zero` never ends. The file is opened without blocking and checked on the descriptor
//! itself, so nothing can be swapped in between the check and the read. The tools, the skills
//! and commands, the instruction files and the trust hash of a project's init files all read
//! through it. Knows nothing of what is read.

use std::fs::File;
use std::io::{self, Read};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// `path` opened for reading when it is a regular file (links followed); an error of kind
/// `InvalidInput`, "not a regular file", for anything else.
pub fn open_regular(path: &Path) -> io::Result<File> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)?;
    if !file.metadata()?.is_file() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "not a regular file",
        ));
    }
    Ok(file)
}

/// The whole content of the regular file at `path` ([`open_regular`]).
pub fn read_regular(path: &Path) -> io::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    open_regular(path)?.read_to_end(&mut bytes)?;
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fifo_or_a_device_is_refused_without_blocking() {
        let dir = tempfile::tempdir().expect("temp dir");
        let fifo = dir.path().join("fifo");
        rustix::fs::mknodat(
            rustix::fs::CWD,
            &fifo,
            rustix::fs::FileType::Fifo,
            rustix::fs::Mode::from_raw_mode(0o600),
            0,
        )
        .expect("mkfifo");
        for path in [fifo.as_path(), Path::new("/dev/zero")] {
            let error = open_regular(path).expect_err("refused");
            assert_eq!(error.kind(), io::ErrorKind::InvalidInput, "{path:?}");
        }
        let file = dir.path().join("f");
        std::fs::write(&file, "x").expect("write");
        assert_eq!(read_regular(&file).expect("read"), b"x");
    }
}
