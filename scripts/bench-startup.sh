#!/usr/bin/env bash
# Whole-process start-up benchmark: process start to first evaluated form (`oml eval '(+ 1 2)'`)
# with no init file, and with a 200-line init file cold (empty compile cache) and warm; plus
# resident memory after start. Needs hyperfine (apt-get install hyperfine) and GNU time.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
cargo build --release >&2
bin="$root/target/release/oml"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
export XDG_CONFIG_HOME="$tmp/config" XDG_STATE_HOME="$tmp/state" XDG_CACHE_HOME="$tmp/cache" XDG_RUNTIME_DIR="$tmp/run"
mkdir -p "$XDG_CONFIG_HOME/oml"

# A 200-line init file in the style users write: settings, functions with docs, advice.
{
  echo '(defsetting my.limit 200 :integer "How many lines to keep.")'
  for i in $(seq 1 50); do
    cat <<FNL
(fn my.step-$i [x]
  "Step $i: add $i to X."
  (+ x $i))
(advise! my.step-$i :log (fn [f x] (f x)))
FNL
  done
  echo '(setq my.limit 300)'
} > "$tmp/init-200.fnl"
wc -l "$tmp/init-200.fnl" >&2

echo "== no init file"
rm -f "$XDG_CONFIG_HOME/oml/init.fnl"
hyperfine -N --warmup 5 --runs 100 "$bin eval '(+ 1 2)'"

cp "$tmp/init-200.fnl" "$XDG_CONFIG_HOME/oml/init.fnl"
echo "== 200-line init file, cold (compile cache emptied before each run)"
hyperfine -N --warmup 2 --runs 50 --prepare "rm -rf $XDG_CACHE_HOME/oml" "$bin eval '(+ 1 2)'"
echo "== 200-line init file, warm compile cache"
"$bin" eval '(+ 1 2)' >/dev/null
hyperfine -N --warmup 5 --runs 100 "$bin eval '(+ 1 2)'"

echo "== resident memory after start (max RSS, KiB)"
rm -f "$XDG_CONFIG_HOME/oml/init.fnl"
/usr/bin/time -f "no init: %M KiB" "$bin" eval '(+ 1 2)' >/dev/null
cp "$tmp/init-200.fnl" "$XDG_CONFIG_HOME/oml/init.fnl"
/usr/bin/time -f "200-line init, warm: %M KiB" "$bin" eval '(+ 1 2)' >/dev/null
