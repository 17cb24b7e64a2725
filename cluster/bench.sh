#!/usr/bin/env bash
# Benchmark of the Spark post-mortem against the single-process analysis,
# side by side in one run, on the job-scale scenario at each size
# HOSTSxITERATIONS (fixtures-generator job-allreduce):
#
#   report s        metaroce-analyze report --json of all captures (release)
#   py report s     metaroce.report() of the same captures (the wheel)
#   map s/host      metaroce-analyze export of one capture (debug build, as
#                   the tests use it; on a cluster each host exports its own)
#   spark s         cluster/postmortem.sh --master 'local[2]' over the
#                   exports: the whole reduce, Spark start included
#   fixed s         Spark start to the session (spark-submit started) plus
#                   the job's phase "engine loaded" (a task per core has
#                   loaded the engine and reserved a bucket's heap)
#   match s         the reduce's matching: the exports listed, hosts'
#                   packets read and cut into bucket blobs, the blobs moved,
#                   pass 1 (the matching) and pass 2 (the kept match read)
#                   (phases "map and load" + "hosts read and matched" +
#                   "clock offsets" + "between captures")
#   matched/s/core  matched transmissions / match s / 2 cores
#   engine s        the same engine calls without Spark, one process
#                   (cluster/engine_bench.py): CPU s of shard + pass 1 +
#                   pass 2 (its JSON, on stderr, has every phase)
#   engine m/s/core matched transmissions / engine s
#   rest s          the report assembled: fabric views, incidents, culprits
#   x report        spark s / report s
#   tables s        with --tables: what the tables add, from a second
#                   run with --tables: its phases "between captures"
#                   (pass 2, which writes the per-transmission tables)
#                   and "tables written" (the report's lists) minus the
#                   first run's "between captures"
#   equal           between_captures of the job against report --json and
#                   metaroce.report: "all" (percentiles included), or
#                   "counts" (every count, offset and end margin; the
#                   delay summaries differ: paths over 4,096 matches, the
#                   single process's reservoir), or NO
#
#   cluster/bench.sh [--tables] [HOSTSxITERATIONS...]     (default: 16x150 32x150)
set -euo pipefail
cd "$(dirname "$0")/.."
tables=""
if [ "${1:-}" = --tables ]; then tables=1; shift; fi
sizes=("$@")
((${#sizes[@]})) || sizes=(16x150 32x150)
cargo build -q -p metaroce-analyze -p fixtures-generator
cargo build -q --release -p metaroce-analyze --no-default-features --bin metaroce-analyze
scripts/build-wheel.sh >/dev/null
venv="${METAROCE_CLUSTER_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/metaroce-cluster-venv}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
now() { date +%s.%N; }

printf '%9s %10s %10s %9s %11s %10s %8s %8s %8s %15s %8s %15s %7s %9s %8s %6s\n' \
    size packets matched "report s" "py report s" "map s/host" "spark s" "fixed s" "match s" \
    "matched/s/core" "engine s" "engine m/s/core" "rest s" "x report" "tables s" equal
for size in "${sizes[@]}"; do
    hosts="${size%x*}" iterations="${size#*x}"
    d="$work/$size"
    target/debug/fixtures-generator job-allreduce --hosts "$hosts" --iterations "$iterations" "$d/captures" >/dev/null
    t0=$(now)
    target/release/metaroce-analyze report --json --no-progress "$d"/captures/host-*.pcap >"$d/single.json"
    t1=$(now)
    "$venv/bin/python" - "$d" <<'PY'
import glob, json, sys, metaroce
d = sys.argv[1]
json.dump(metaroce.report(sorted(glob.glob(f"{d}/captures/host-*.pcap"))), open(f"{d}/py.json", "w"))
PY
    t2=$(now)
    for c in "$d"/captures/host-*.pcap; do
        target/debug/metaroce-analyze export --no-progress --parquet "$d/exports" "$c" 2>/dev/null
    done
    t3=$(now)
    cluster/postmortem.sh --master 'local[2]' --out "$d/out" "$d/exports" >"$d/log" 2>&1 || { tail -30 "$d/log"; exit 1; }
    t4=$(now)
    "$venv/bin/python" cluster/engine_bench.py "$d/exports" >"$d/engine.json"
    if [ -n "$tables" ]; then
        cluster/postmortem.sh --master 'local[2]' --out "$d/out-tables" --tables "$d/exports" >"$d/log-tables" 2>&1 ||
            { tail -30 "$d/log-tables"; exit 1; }
    fi
    "$venv/bin/python" - "$d" "$size" "$hosts" "$t0" "$t1" "$t2" "$t3" "$t4" <<'PY'
import json, os, sys
d, size, hosts = sys.argv[1], sys.argv[2], int(sys.argv[3])
t0, t1, t2, t3, t4 = map(float, sys.argv[4:9])
r = json.load(open(f"{d}/out/report.json"))
single = json.load(open(f"{d}/single.json"))
py = json.load(open(f"{d}/py.json"))
def strip(bs, drop=("host_a", "host_b")):
    return [{k: v for k, v in b.items() if k not in drop} for b in bs]
def counts(bs):
    return [{**b, "paths": strip(b["paths"], ("one_way_delay_ns",))} for b in strip(bs)]
between = strip(r["between_captures"])
if between == single["between_captures"] == py["between_captures"]:
    equal = "all"
elif counts(between) == counts(single["between_captures"]) and py == single:
    equal = "counts"
else:
    equal = "NO"
packets = sum(h["packets"] for h in r["hosts"])
matched = sum(b["matched_packets"] for b in r["between_captures"])
ph = r["phases_s"]
match_s = ph["map and load"] + ph["hosts read and matched"] + ph["clock offsets"] + ph["between captures"]
rest = ph["fabric views and incidents"]
tables = "-"
if os.path.exists(f"{d}/out-tables/report.json"):
    with_tables = json.load(open(f"{d}/out-tables/report.json"))["phases_s"]
    tables = f'{with_tables["between captures"] + with_tables["tables written"] - ph["between captures"]:.1f}'
    print("           phases with --tables: " + ", ".join(f"{k} {v:.1f} s" for k, v in with_tables.items()),
          file=sys.stderr)
report_s, spark_s = t1 - t0, t4 - t3
engine = json.load(open(f"{d}/engine.json"))
print(f"{size:>9} {packets:10,d} {matched:10,d} {report_s:9.2f} {t2 - t1:11.2f} {(t3 - t2) / hosts:10.2f} "
      f"{spark_s:8.1f} {ph['fixed cost']:8.1f} {match_s:8.1f} {matched / match_s / 2:15,.0f} "
      f"{engine['engine s']:8.1f} {engine['engine matched/s/core']:15,d} {rest:7.1f} {spark_s / report_s:9.1f} {tables:>8} {equal:>6}")
print("           phases: " + ", ".join(f"{k} {v:.1f} s" for k, v in ph.items()), file=sys.stderr)
print("           engine alone (CPU): " + ", ".join(f"{k} {v}" for k, v in engine.items()), file=sys.stderr)
PY
done
