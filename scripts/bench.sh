#!/usr/bin/env bash
# The headline benchmark: builds the release binary and prints one table of the figures on the
# path a user walks (a tool turn over ACP and in print mode, start-up, memory, the update
# stream, a 20 MB write, 200 sessions at once), see benches/headline/main.rs.
#
#   scripts/bench.sh [--runs N] [PART…]
#   OML_BENCH_BIN=/path/to/oml scripts/bench.sh     # also that baseline binary, with ratios
#
# PART is turn, print, confine, start, stream, write, sessions, protocols, checkpoint, skills, glue, wire or subagents (all when
# none is named). Times are medians; the table ends with the load average before and after: rerun when
# another build ran meanwhile.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
if [ -n "${OML_BENCH_BIN:-}" ] && [ ! -x "$OML_BENCH_BIN" ]; then
  echo "bench.sh: OML_BENCH_BIN=$OML_BENCH_BIN is not an executable" >&2
  exit 2
fi
# On a machine with few cores, JOBS=1 keeps the build from starving everything else.
jobs=(); [ -n "${JOBS:-}" ] && jobs=(-j "$JOBS")
cargo build --release "${jobs[@]}" --bin oml >&2
exec cargo bench "${jobs[@]}" --bench headline -- --bench "$@"
