#!/usr/bin/env bash
# Installs the reference MCP servers the tests connect to (tests/mcp/package.json, pinned by its
# package-lock.json) into tests/mcp/node_modules, and the official ACP TypeScript SDK
# (tests/interop/ts), with the machine's Node.js and npm; installs
# Debian's nodejs and npm first when they are missing (apt-get, as root or with sudo). Safe to
# run again: nothing is done when the installed packages match the lock file.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
say() { echo "setup-mcp: $*" >&2; }

if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  if command -v apt-get >/dev/null 2>&1; then
    say "installing nodejs and npm (Debian packages)"
    sudo=""; [ "$(id -u)" = 0 ] || sudo="sudo"
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get -qq update >/dev/null
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get -qq install -y --no-install-recommends nodejs npm >/dev/null \
      || say "could not install nodejs and npm; the MCP tests fail under CI"
  else
    say "Node.js and npm are missing (no apt-get here); the MCP tests fail under CI"
  fi
fi
command -v npm >/dev/null 2>&1 || exit 0

# Each folder's packages, pinned by its lock file: the reference MCP servers (tests/mcp) and the
# official ACP TypeScript SDK the interop tests drive oml acp with (tests/interop/ts). A copy
# of the lock file marks a finished install of exactly these versions.
for dir in "$root/tests/mcp" "$root/tests/interop/ts"; do
  stamp="$dir/node_modules/.oml-installed-lock.json"
  if cmp -s "$dir/package-lock.json" "$stamp" 2>/dev/null; then
    continue
  fi
  say "installing ${dir#"$root"/}'s packages (npm ci)"
  (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error >&2)
  cp "$dir/package-lock.json" "$stamp"
done
