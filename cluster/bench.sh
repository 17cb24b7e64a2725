#!/usr/bin/env bash
# Benchmark of the Spark post-mortem on the job-scale scenario: for each
# host count, side by side in one run: the map step per host (metaroce-
# analyze export of one capture), the reduce (postmortem.sh over the
# exports, local mode), matched transmissions per second in the reduce, and
# the single-process `metaroce-analyze report` of all captures.
#
#   cluster/bench.sh [HOSTS...]        (default: 8 16 32 64)
#
# Uses the workspace's debug builds (cargo build -p metaroce-analyze -p
# fixtures-generator); set ANALYZER to time another build of the analyzer.
set -euo pipefail
cd "$(dirname "$0")/.."
hosts=("$@")
((${#hosts[@]})) || hosts=(8 16 32 64)
cargo build -q -p metaroce-analyze -p fixtures-generator
analyzer="${ANALYZER:-target/debug/metaroce-analyze}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
now() { date +%s.%N; }

printf '%6s %10s %12s %12s %10s %14s %12s\n' hosts packets "map s/host" "reduce s" matched "matched/s" "report s"
for n in "${hosts[@]}"; do
    d="$work/$n"
    target/debug/fixtures-generator job-allreduce --hosts "$n" "$d/captures" >/dev/null
    t0=$(now)
    for c in "$d"/captures/host-*.pcap; do
        "$analyzer" export --no-progress --parquet "$d/exports" "$c" 2>/dev/null
    done
    t1=$(now)
    cluster/postmortem.sh --master 'local[2]' --analyzer "$analyzer" --out "$d/out" "$d/exports" >"$d/log" 2>&1
    t2=$(now)
    report_s="-"
    if ((n <= 255)); then
        t3=$(now)
        "$analyzer" report --json --no-progress "$d"/captures/host-*.pcap >/dev/null
        report_s=$(echo "$(now) - $t3" | bc)
    fi
    python3 - "$d/out/report.json" "$n" "$(echo "($t1 - $t0) / $n" | bc -l)" "$(echo "$t2 - $t1" | bc)" "$report_s" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
n, map_s, reduce_s, report_s = int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4]), sys.argv[5]
packets = sum(h["packets"] for h in r["hosts"])
matched = sum(b["matched_packets"] for b in r["between_captures"])
print(f"{n:6d} {packets:10d} {map_s:12.2f} {reduce_s:12.1f} {matched:10d} {matched / reduce_s:14.0f} {report_s:>12}")
print("       phases: " + ", ".join(f"{k} {v:.1f} s" for k, v in r["phases_s"].items()), file=sys.stderr)
PY
done
