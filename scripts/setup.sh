#!/usr/bin/env bash
# Installs what building and testing oml needs, where it is missing; safe to run again.
#   - the Fennel compiler (scripts/setup-fennel.sh);
#   - mdbook, pinned, for the docs site (cargo install, into ~/.cargo/bin);
#   - python3 with venv, for the interop tests against the official ACP Python SDK.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export PATH="$HOME/.cargo/bin:$PATH"

MDBOOK_VERSION=0.5.4

say() { echo "setup: $*" >&2; }

bash "$root/scripts/setup-fennel.sh" >/dev/null

if ! mdbook --version 2>/dev/null | grep -q "v$MDBOOK_VERSION"; then
  say "installing mdbook $MDBOOK_VERSION (cargo install; a few minutes once)"
  cargo install mdbook --version "$MDBOOK_VERSION" --locked --no-default-features --features search >&2
fi

if ! python3 -c 'import venv, ensurepip' 2>/dev/null; then
  if command -v apt-get >/dev/null 2>&1; then
    say "installing python3-venv"
    sudo=""; [ "$(id -u)" = 0 ] || sudo="sudo"
    $sudo apt-get install -y python3 python3-venv >&2 || say "could not install python3-venv; interop tests will be skipped"
  fi
fi
