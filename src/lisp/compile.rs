//! Compiling Fennel: source to a Lua function, and files through a cache of compiled Lua keyed
//! by the hash of everything the output depends on. A cached file is run only when it is a
//! private regular file of this user whose first line names that key (`read_cached`).
//!
//! This module does not run what it compiles.

use std::path::Path;

use mlua::{Function, Lua, Table};
use sha2::{Digest, Sha256};

use super::error::compile_message;
use super::{COMPILER, Lisp, LispError, SCOPE};

impl Lisp {
    /// Compile Fennel source to a Lua function without running it. `name` is the chunk name used
    /// in error messages and by `source` (a file path, or something like `eval`).
    pub fn compile(&self, src: &str, name: &str) -> Result<Function, LispError> {
        compile_in(&self.lua, src, name)
    }

    /// Compile a file, using the compiled-Lua cache when the file's content has been seen.
    pub fn compile_file(&self, path: &Path) -> Result<Function, LispError> {
        let io = |source| LispError::Io {
            path: path.to_path_buf(),
            source,
        };
        // Only a regular file, opened without blocking (a FIFO would hang the load).
        let bytes = crate::regular::read_regular(path).map_err(io)?;
        let src = String::from_utf8(bytes)
            .map_err(|e| io(std::io::Error::new(std::io::ErrorKind::InvalidData, e)))?;
        let name = path.display().to_string();
        let Some(cache) = &self.shared.cache_dir else {
            return self.compile(&src, &name);
        };
        let key = sha256_hex(
            format!(
                "oml {}\0{}\0{}\0{}\0{}",
                env!("CARGO_PKG_VERSION"),
                include_str!(concat!(env!("OUT_DIR"), "/fennel_path.txt")),
                // The Fennel compiler, the prelude's macros and the options they compile with
                // (prelude/host.fnl): a change to any of them changes the compiled output.
                include_str!(concat!(env!("OUT_DIR"), "/compiler_id.txt")),
                name,
                src
            )
            .as_bytes(),
        );
        let cached = cache.join(format!("{key}.lua"));
        if let Some(lua_src) = read_cached(&cached, &key) {
            return load_lua(&self.lua, lua_src.as_str(), &name);
        }
        let lua_src = to_lua_source(&self.lua, &src, &name)?;
        let f = load_lua(&self.lua, &lua_src, &name)?;
        // A cache that cannot be written only costs speed.
        let entry = format!("{}{key}\n{lua_src}", CACHE_HEADER);
        let _ = write_atomically(cache, &cached, entry.as_bytes());
        Ok(f)
    }
}

/// The first line of a cached file, before the key it was compiled for (a Lua comment).
const CACHE_HEADER: &str = "-- oml compiled for ";

/// The compiled Lua cached at `path` for `key`, when it may be run: a regular file (not a link)
/// of this user that neither group nor others can write, whose first line names `key` (the hash
/// of the source and of everything the output depends on). Anything else is compiled again
/// and replaced. No confined command can write the cache (the sandbox keeps oml's folders
/// read-only), so this guards against other users, stray files and copies put in place.
fn read_cached(path: &Path, key: &str) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::symlink_metadata(path).ok()?;
    let me = rustix::process::geteuid().as_raw();
    if !meta.file_type().is_file() || meta.uid() != me || meta.mode() & 0o022 != 0 {
        return None;
    }
    let text = std::fs::read_to_string(path).ok()?;
    let rest = text.strip_prefix(CACHE_HEADER)?.strip_prefix(key)?;
    let lua = rest.strip_prefix('\n')?;
    Some(lua.to_owned())
}

/// `Lisp::compile` for host functions, which get the state as `&Lua` rather than a `Lisp`.
pub fn compile_in(lua: &Lua, src: &str, name: &str) -> Result<Function, LispError> {
    let lua_src = to_lua_source(lua, src, name)?;
    load_lua(lua, &lua_src, name)
}

/// Fennel to Lua source, with oml's options and macros.
fn to_lua_source(lua: &Lua, src: &str, name: &str) -> Result<String, LispError> {
    let compiler: Function = lua.named_registry_value(COMPILER)?;
    let scope: Table = lua.named_registry_value(SCOPE)?;
    compiler
        .call((src, name, scope))
        .map_err(|e| LispError::Compile(compile_message(&e)))
}

fn load_lua(lua: &Lua, lua_src: &str, name: &str) -> Result<Function, LispError> {
    lua.load(lua_src)
        .set_name(format!("@{name}"))
        .into_function()
        .map_err(|e| LispError::Compile(format!("{name}: {}", compile_message(&e))))
}

pub(crate) fn sha256_hex(bytes: &[u8]) -> String {
    let digest = Sha256::digest(bytes);
    let mut s = String::with_capacity(64);
    for b in digest.iter() {
        s.push_str(&format!("{b:02x}"));
    }
    s
}

/// Write `bytes` to `path` through a temp file in `dir` and a rename, so readers never see half.
pub(crate) fn write_atomically(dir: &Path, path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let tmp = dir.join(format!(
        ".tmp-{}-{}",
        std::process::id(),
        path.file_name().and_then(|n| n.to_str()).unwrap_or("file")
    ));
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(&tmp, path)
}
