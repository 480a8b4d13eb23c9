#!/usr/bin/env bash
# Runs every check the project has: formatting, clippy, all tests, and the docs site build.
# Installs what is missing first (scripts/setup.sh).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
export PATH="$HOME/.cargo/bin:$PATH"

bash scripts/setup.sh

echo "== cargo fmt --check"
cargo fmt --all -- --check
echo "== cargo clippy"
cargo clippy --all-targets -- -D warnings
echo "== cargo test"
cargo test
echo "== mdbook build docs"
mdbook build docs
