#!/bin/sh
# The ACP client's whole-process benchmarks (release build): updates per second handed from an
# agent to a Lisp callback, peak memory (VmHWM) with 10 k updates in one turn (kept in the turn's
# list, and streamed with :keep-updates? false), and the time to close an agent that ignores stdin
# EOF and SIGTERM. Usage: scripts/bench-client.sh [N]
set -eu
cd "$(dirname "$0")/.."
cargo build --release -j 1 --bins >/dev/null 2>&1
N=${1:-200000}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
OML=target/release/oml
FAKE=target/release/oml-fake-agent
cat >"$T/flood.fnl" <<'FNL'
(var count 0)
(local conn (client.connect (. arg 1) [:flood (. arg 2)] {:on-update (fn [u] (set count (+ count 1)))}))
(local s (client.new-session conn))
(local r (client.prompt conn s.session-id "go" {:keep-updates? (not= (. arg 3) "stream")}))
(assert (= count (tonumber (. arg 2))))
(client.close conn)
FNL
cat >"$T/close.fnl" <<'FNL'
(client.close (client.connect (. arg 1) [:ignores-stdin-eof]))
FNL
now() { date +%s.%N; }
t0=$(now); HOME=$T $OML --no-init run "$T/flood.fnl" $FAKE 0; t1=$(now)
HOME=$T $OML --no-init run "$T/flood.fnl" $FAKE "$N"; t2=$(now)
echo "updates/s: $(echo "$N / (($t2 - $t1) - ($t1 - $t0))" | bc -l | cut -d. -f1) ($N updates in one turn)"
HOME=$T /usr/bin/time -f "VmHWM with 10000 updates in one turn: %M kB" $OML --no-init run "$T/flood.fnl" $FAKE 10000
HOME=$T /usr/bin/time -f "VmHWM with 10000 updates streamed (:keep-updates? false): %M kB" $OML --no-init run "$T/flood.fnl" $FAKE 10000 stream
HOME=$T /usr/bin/time -f "VmHWM with $N updates streamed (:keep-updates? false): %M kB" $OML --no-init run "$T/flood.fnl" $FAKE "$N" stream
HOME=$T /usr/bin/time -f "VmHWM with no updates: %M kB" $OML --no-init run "$T/flood.fnl" $FAKE 0
t0=$(now); HOME=$T $OML --no-init run "$T/close.fnl" $FAKE; t1=$(now)
echo "close of an agent ignoring EOF and SIGTERM: $(echo "$t1 - $t0" | bc -l | cut -c1-5) s (whole process)"
