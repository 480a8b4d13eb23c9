#!/usr/bin/env bash
# Builds oml (release) and starts it: with no arguments, its chat with the agent (`oml repl` is
# the plain Fennel REPL).
# Arguments are passed to oml, e.g. `scripts/start.sh eval '(+ 1 2)'`.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# rustup puts cargo here; a shell that has not read its profile yet may lack it.
export PATH="$HOME/.cargo/bin:$PATH"
bash "$root/scripts/setup-fennel.sh" >/dev/null
cargo build --release --manifest-path "$root/Cargo.toml" >&2
exec "$root/target/release/oml" "$@"
