#!/usr/bin/env bash
# Installs what building and testing oml needs, where it is missing; safe to run again.
#   - the Fennel compiler (scripts/setup-fennel.sh);
#   - the reference MCP servers from npm for the MCP tests, and Node.js when it is missing
#     (scripts/setup-mcp.sh);
#   - mdbook, pinned, for the docs site (cargo install, into ~/.cargo/bin);
#   - the ACP proxy-chains conductor, pinned, for the `oml proxy` chain test (the same way);
#   - Harbor, pinned, in a virtualenv of its own, and a Python >= 3.12 for it (built from
#     Debian's source where none is installed), for the ATIF and Terminal-Bench tests
#     (scripts/setup-harbor.sh);
#   - Debian packages the tests need where a command is missing (apt-get, as root or with sudo):
#     python3 and python3-venv for the interop tests against the official ACP Python SDK,
#     bsdutils for util-linux `script` (the pseudo-terminal of the terminal tests), ripgrep and
#     git (the search tools and the project's git state are tested with both), and, as root,
#     e2fsprogs for `chattr` (root ignores a 0555 directory; the tools tests make one immutable).
#     Under CI those tests fail rather than skip without them (tests/support/home.rs, `skip`).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export PATH="$HOME/.cargo/bin:$PATH"

MDBOOK_VERSION=0.5.4
# The proxy-chains conductor from the protocol's repository (crate agent-client-protocol-conductor),
# which tests/proxy.rs runs `oml proxy` under as a chain component.
CONDUCTOR_VERSION=5.0.0

say() { echo "setup: $*" >&2; }

bash "$root/scripts/setup-fennel.sh" >/dev/null
bash "$root/scripts/setup-mcp.sh"

if ! mdbook --version 2>/dev/null | grep -q "v$MDBOOK_VERSION"; then
  say "installing mdbook $MDBOOK_VERSION (cargo install; a few minutes once)"
  cargo install mdbook --version "$MDBOOK_VERSION" --locked --no-default-features --features search >&2
fi

if ! agent-client-protocol-conductor --version 2>/dev/null | grep -q "$CONDUCTOR_VERSION"; then
  say "installing agent-client-protocol-conductor $CONDUCTOR_VERSION (cargo install; a few minutes once)"
  cargo install agent-client-protocol-conductor --version "$CONDUCTOR_VERSION" --locked >&2
fi

if ! bash "$root/scripts/setup-harbor.sh" >/dev/null; then
  say "could not set up Harbor; the ATIF and Harbor tests fail under CI"
fi

# The Debian packages missing here, by what the tests run.
packages=()
python3 -c 'import venv, ensurepip' 2>/dev/null || packages+=(python3 python3-venv)
command -v script >/dev/null 2>&1 || packages+=(bsdutils)
command -v rg >/dev/null 2>&1 || packages+=(ripgrep)
command -v git >/dev/null 2>&1 || packages+=(git)
if [ "$(id -u)" = 0 ] && ! command -v chattr >/dev/null 2>&1; then packages+=(e2fsprogs); fi

if [ "${#packages[@]}" -gt 0 ]; then
  if command -v apt-get >/dev/null 2>&1; then
    say "installing ${packages[*]}"
    sudo=""; [ "$(id -u)" = 0 ] || sudo="sudo"
    apt_get() { $sudo env DEBIAN_FRONTEND=noninteractive apt-get -qq "$@" >/dev/null; }
    # A fresh machine (or container) has no package lists yet.
    { apt_get update && apt_get install -y --no-install-recommends "${packages[@]}"; } \
      || say "could not install ${packages[*]}; the tests that need them fail under CI"
  else
    say "missing ${packages[*]} (no apt-get here); the tests that need them fail under CI"
  fi
fi
