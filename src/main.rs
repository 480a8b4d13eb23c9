//! The `oml` binary: parse arguments, run the library, map the outcome to an exit code.
//! It is the only place in the crate that exits the process.

fn main() -> std::process::ExitCode {
    let code = oml::cli::main();
    std::process::ExitCode::from(u8::try_from(code).unwrap_or(1))
}
