#!/usr/bin/env bash
# Makes sure a `fennel.lua` (Fennel >= 1.5) is available to build.rs, and prints its path.
#
# Order: $OML_FENNEL_LUA; the system's fennel package (share/lua/5.x/fennel.lua); the
# project-local copy in .deps/fennel/; then install: `apt-get install fennel` where the
# distribution has it, otherwise (Debian bookworm) trixie's package through an isolated apt
# configuration whose state lives in .deps/apt/ — the system's apt sources, lists and cache are
# never touched — unpacked with dpkg-deb into .deps/fennel/.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
local_dir="$root/.deps/fennel"
local_lua="$local_dir/usr/share/lua/5.4/fennel.lua"

say() { echo "setup-fennel: $*" >&2; }

found() { echo "$1"; exit 0; }

if [ -n "${OML_FENNEL_LUA:-}" ] && [ -f "$OML_FENNEL_LUA" ]; then found "$OML_FENNEL_LUA"; fi
for v in 5.4 5.3 5.2 5.1; do
  for prefix in /usr/share /usr/local/share /opt/homebrew/share; do
    [ -f "$prefix/lua/$v/fennel.lua" ] && found "$prefix/lua/$v/fennel.lua"
  done
done
[ -f "$local_lua" ] && found "$local_lua"

# One install at a time (the README's two commands may run side by side in one clone): the
# others wait here, then find what the first installed.
mkdir -p "$root/.deps"
exec 9>"$root/.deps/setup-fennel.lock"
if command -v flock >/dev/null 2>&1; then flock 9; fi
[ -f "$local_lua" ] && found "$local_lua"

if ! command -v apt-get >/dev/null 2>&1; then
  say "no fennel.lua found and no apt-get here; install your distribution's 'fennel' package"
  say "(Fedora, openSUSE, Homebrew and Nix ship it) or set OML_FENNEL_LUA=/path/to/fennel.lua"
  exit 1
fi

sudo=""
if [ "$(id -u)" != 0 ]; then sudo="sudo"; fi

# The distribution may package it (Debian trixie and later, Ubuntu 24.04 and later).
if apt-cache policy fennel 2>/dev/null | grep -q 'Candidate: [0-9]'; then
  say "installing the distribution's fennel package"
  $sudo apt-get install -y fennel >&2
  for v in 5.4 5.3 5.2 5.1; do
    [ -f "/usr/share/lua/$v/fennel.lua" ] && found "/usr/share/lua/$v/fennel.lua"
  done
fi

# Debian bookworm: fetch trixie's package with an isolated apt configuration.
say "fetching Debian trixie's fennel package into $local_dir (system apt state untouched)"
mirror="$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources 2>/dev/null \
  | sed -nE 's/^URIs:[[:space:]]*([^[:space:]]+).*/\1/p; s/^deb[[:space:]]+(\[[^]]*\][[:space:]]+)?([^[:space:]]+).*/\2/p' \
  | grep -v security | head -n1 || true)"
mirror="${mirror:-http://deb.debian.org/debian}"
apt_dir="$root/.deps/apt"
mkdir -p "$apt_dir/lists/partial" "$apt_dir/cache/archives/partial"
echo "deb $mirror trixie main" > "$apt_dir/sources.list"
apt_opts=(
  -o "Dir::Etc::SourceList=$apt_dir/sources.list"
  -o "Dir::Etc::SourceParts=/dev/null"
  -o "Dir::State::Lists=$apt_dir/lists"
  -o "Dir::Cache=$apt_dir/cache"
  -o "Debug::NoLocking=1"
  -o "APT::Get::List-Cleanup=0"
)
apt-get "${apt_opts[@]}" update >&2
(cd "$apt_dir" && apt-get "${apt_opts[@]}" download fennel >&2)
deb="$(ls "$apt_dir"/fennel_*.deb | head -n1)"
# Unpacked aside and moved into place whole, so nobody finds a half-written fennel.lua.
unpacked="$local_dir.partial"
rm -rf "$unpacked"
dpkg-deb -x "$deb" "$unpacked"
[ -f "$unpacked/usr/share/lua/5.4/fennel.lua" ] || { say "the package did not contain usr/share/lua/5.4/fennel.lua"; exit 1; }
rm -rf "$local_dir"
mv "$unpacked" "$local_dir"
found "$local_lua"
