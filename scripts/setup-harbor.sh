#!/usr/bin/env bash
# Installs Harbor (PyPI `harbor`, pinned) in a virtualenv of its own, for the tests that check
# oml's trajectories with Harbor's own ATIF validator and run Harbor's ACP runner against
# `oml acp` (tests/atif.rs, tests/harbor.rs). Safe to run again: it does nothing once done.
#
# Harbor needs Python >= 3.12, and Debian bookworm ships 3.11. When no python3.12 or newer is on
# PATH, this builds CPython from Debian's own source tarball (trixie's python3.13, checked
# against the sha256 below) into the cache: about four minutes once, on two cores. The build
# needs gcc, make and the -dev packages listed in `build_packages`, installed here with apt-get
# where missing.
#
# Everything goes under $OML_TEST_CACHE (default ~/.cache/oml-test); the tests look there (see
# tests/support/harbor.rs). Prints the virtualenv's python on stdout.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

PY_VERSION=3.13.5
PY_TARBALL_URL="http://deb.debian.org/debian/pool/main/p/python3.13/python3.13_${PY_VERSION}.orig.tar.xz"
PY_TARBALL_SHA256=93e583f243454e6e9e4588ca2c2662206ad961659863277afcdb96801647d640
HARBOR_VERSION=0.26.0
# Every package the virtualenv holds, pinned (pip freeze of a working install): Harbor's own
# requirements float, and its dependency tree is large.
PINS="$root/tests/interop/harbor-requirements.txt"

cache="${OML_TEST_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/oml-test}"
venv="$cache/harbor-$HARBOR_VERSION"
say() { echo "setup-harbor: $*" >&2; }

# The pins the virtualenv was made from: a change of them makes it again.
stamp="$(sha256sum "$PINS" | cut -c1-16)"
if [ -x "$venv/bin/python" ] && [ "$(cat "$venv/.oml-ready" 2>/dev/null)" = "$stamp" ]; then
  echo "$venv/bin/python"
  exit 0
fi

# A Python >= 3.12: one on PATH, else the one built here before, else build it.
find_python() {
  for p in python3.14 python3.13 python3.12 "$cache/python-$PY_VERSION/bin/python3.13"; do
    if command -v "$p" >/dev/null 2>&1 \
      && "$p" -c 'import sys, venv, ssl; sys.exit(sys.version_info < (3, 12))' 2>/dev/null; then
      command -v "$p"
      return 0
    fi
  done
  return 1
}

build_packages=(gcc make libssl-dev libffi-dev zlib1g-dev libbz2-dev liblzma-dev libsqlite3-dev)

install_build_packages() {
  local missing=()
  for p in "${build_packages[@]}"; do
    dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
  done
  [ "${#missing[@]}" -eq 0 ] && return 0
  command -v apt-get >/dev/null 2>&1 || { say "missing ${missing[*]} and no apt-get"; return 1; }
  local sudo=""; [ "$(id -u)" = 0 ] || sudo="sudo"
  say "installing ${missing[*]}"
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get -qq update >/dev/null
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get -qq install -y --no-install-recommends \
    "${missing[@]}" >/dev/null
}

build_python() {
  local prefix="$cache/python-$PY_VERSION" work
  say "building CPython $PY_VERSION from Debian's source into $prefix (a few minutes, once)"
  install_build_packages
  work="$(mktemp -d)"
  trap 'rm -rf "$work"' RETURN
  curl -fsSL --retry 3 -o "$work/python.tar.xz" "$PY_TARBALL_URL"
  echo "$PY_TARBALL_SHA256  $work/python.tar.xz" | sha256sum -c --quiet -
  tar -xJf "$work/python.tar.xz" -C "$work"
  (
    cd "$work/Python-$PY_VERSION"
    ./configure --prefix="$prefix" --with-ensurepip=install >"$work/configure.log" 2>&1 \
      || { tail -20 "$work/configure.log" >&2; exit 1; }
    make -j"$(nproc)" >"$work/make.log" 2>&1 || { tail -40 "$work/make.log" >&2; exit 1; }
    make altinstall >"$work/install.log" 2>&1 || { tail -20 "$work/install.log" >&2; exit 1; }
  )
}

mkdir -p "$cache"
python="$(find_python)" || { build_python; python="$(find_python)"; }
say "making the Harbor $HARBOR_VERSION virtualenv with $python"
rm -rf "$venv"
"$python" -m venv "$venv"
"$venv/bin/pip" install -q --disable-pip-version-check -r "$PINS" >&2
"$venv/bin/python" -c 'import harbor.utils.trajectory_validator, harbor.agents.installed.acp, acp'
echo "$stamp" >"$venv/.oml-ready"
echo "$venv/bin/python"
