#!/usr/bin/env bash
# `metaroce-analyze report` on an ERSPAN III copy of the bench capture
# against the capture itself, per packet of inner traffic (the budget: the
# copy at least 0.9 times the packet rate of the capture). One run of each:
#
#   scripts/bench-mirror.sh [PACKETS]        # default 1,000,000
#
# The bench capture is `fixtures-generator bulk` (as scripts/bench-analyzer.sh
# writes it, under target/bench/); its copy is `fixtures-generator mirror`:
# every frame in Ethernet / IPv4 / GRE (sequence number) / ERSPAN III with
# the IEEE 1588 platform subheader, one session, 62 bytes more per frame.
# Both reports must be the same but for the capture section (checked).
#
# Printed: instructions per packet from valgrind's cachegrind (counted, not
# timed: the figure this noisy machine cannot move; both threads' sum) and
# their ratio, and the wall time of one run of each with its packet rate.
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-1000000}
dir=target/bench
mkdir -p "$dir"
cargo build --quiet --release -p metaroce-analyze --no-default-features --bin metaroce-analyze
cargo build --quiet --release -p fixtures-generator
bin=target/release/metaroce-analyze
plain="$dir/bench-$n.pcap"
mirror="$dir/bench-$n-erspan3.pcap"
[ -s "$plain" ] || target/release/fixtures-generator bulk "$plain" "$n" >&2
[ -s "$mirror" ] || target/release/fixtures-generator mirror "$plain" "$mirror" >&2

"$bin" report --json --no-progress "$plain" >"$dir/mirror-bench-plain.json"
"$bin" report --json --no-progress "$mirror" >"$dir/mirror-bench-erspan3.json"
python3 - "$dir/mirror-bench-plain.json" "$dir/mirror-bench-erspan3.json" <<'PY'
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
assert b["capture"]["traffic"]["decapsulated"].get("erspan3") == a["capture"]["frames"], b["capture"]["traffic"]
for r in (a, b):
    del r["capture"]
assert a == b, "the ERSPAN III copy's report differs from the capture's"
PY

wall() {
    local t0 t1
    t0=$(date +%s%N)
    "$bin" report --json --no-progress "$1" >/dev/null
    t1=$(date +%s%N)
    echo $((t1 - t0))
}
pw=$(wall "$plain")
mw=$(wall "$mirror")
awk -v n="$n" -v p="$pw" -v m="$mw" 'BEGIN {
    printf "wall, one run each (%d packets): capture %.3f s (%.2f M packets/s), ERSPAN III copy %.3f s (%.2f M packets/s): x%.2f of the rate\n",
        n, p / 1e9, n / p * 1e3, m / 1e9, n / m * 1e3, p / m }'

if command -v valgrind >/dev/null; then
    instr() {
        valgrind --tool=cachegrind --cache-sim=no --cachegrind-out-file=/dev/null "$@" 2>&1 >/dev/null |
            awk '/I *refs:/ { gsub(",", "", $NF); print $NF }'
    }
    pi=$(instr "$bin" report --json --no-progress "$plain")
    mi=$(instr "$bin" report --json --no-progress "$mirror")
    awk -v n="$n" -v p="$pi" -v m="$mi" 'BEGIN {
        printf "instructions per packet (%d packets): capture %.0f, ERSPAN III copy %.0f: the copy runs at x%.3f of the packet rate (budget x0.9)\n",
            n, p / n, m / n, p / m }'
else
    echo "instructions per packet: skipped (valgrind is not installed: apt-get install valgrind)" >&2
    exit 1
fi
