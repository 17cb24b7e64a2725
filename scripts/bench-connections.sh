#!/usr/bin/env bash
# Memory per connection: what `metaroce-analyze report` and tshark with the
# MetaRoCE plugin hold for captures of many short connections (a training
# host has thousands of QPs) and of a few long ones.
#
#   scripts/bench-connections.sh [CONNECTIONS:FRAMES[:stream]]...
#
# Default series: 1000:10000 10000:100000 100000:1000000 (about ten frames
# per connection: a few DATA packets over up to 16 evs, their ACKs),
# 1000:1000000 and 1000:3000000 (a thousand and three thousand frames per
# connection: tshark's cost per frame is the difference of those two rows),
# and 1000:100000000:stream (a hundred thousand frames per connection).
# Each capture is written by `fixtures-generator bulk OUT FRAMES CONNECTIONS
# 5 64` (see fixtures/generator/src/bulk.rs). A `:stream` capture is never
# written to disk (100 M frames are 16 GB): the generator writes it into a
# named pipe that `report` reads as it goes; tshark does not run on it (it
# keeps state for every frame, see the per-frame line below; it would
# need tens of GB and hours). For each capture, one row per program:
#
# - peak RSS (/usr/bin/time's maximum resident set size), wall and CPU time;
# - frames per second of wall time and per CPU-second (user + system; a
#   streamed row's wall time is bounded by the generator, which shares the
#   two cores with it: its rate per CPU-second is the analyzer's);
# - bytes per direction and per path: the peak RSS less the program's peak
#   RSS on a capture of one connection, divided by the directions, and by
#   the paths, that `report --json` counts (each figure charges all the
#   memory to that one kind of state: upper bounds, not a split).
#
# Below `report`'s row, from its report: how many latency histograms hold
# more than 128 samples, so are dense HdrHistograms, and the size of their
# counts by the ranges they cover; and the stall records kept (at most
# 1,024 per direction). After the rows, for programs measured on two
# captures of the same number of connections, the growth of the peak RSS
# per frame between them (the per-frame cost, which the per-connection
# figures do not separate).
#
# BEFORE=REV adds rows for another version, built by scripts/build-rev.sh
# (BEFORE_REVERT=COMMIT: REV with COMMIT's change undone), `report` and
# tshark with that version's plugin, run in the same round as the current
# ones (side by side, same page-cache state). tshark reads each capture in
# two passes (-2, as the GUI does), as user 65534 when started as root
# (root tshark loads no personal plugins); `tshark-bare` is tshark without
# the plugin, whose per-frame line is Wireshark's own share of tshark's.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
series=("$@")
[ ${#series[@]} -gt 0 ] || series=(1000:10000 10000:100000 100000:1000000
    1000:1000000 1000:3000000 1000:100000000:stream)

# `report` uses neither the export nor the plot feature: built without
# them (no polars), it is the same program for this measurement.
(cd "$root" && cargo build --release --quiet -p fixtures-generator \
    && cargo build --release --quiet -p metaroce-analyze --no-default-features \
    && cargo build --release --quiet -p metaroce-dissector --lib)
target_dir="$(cd "$root" && cargo metadata --format-version 1 --no-deps \
    | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')"
gen="$target_dir/release/fixtures-generator"
declare -A analyze plugin
analyze[report]="$target_dir/release/metaroce-analyze"
plugin[tshark]="$target_dir/release/libmetaroce_dissector.so"
programs=(report)
if [ -n "${BEFORE:-}" ]; then
    before_dir="$("$here/build-rev.sh" "$BEFORE" ${BEFORE_REVERT:+--revert "$BEFORE_REVERT"})"
    analyze[before]="$before_dir/metaroce-analyze"
    plugin["tshark-before"]="$before_dir/libmetaroce_dissector.so"
    programs+=(before)
fi
programs+=(tshark)
[ -n "${BEFORE:-}" ] && programs+=(tshark-before)
# tshark without the plugin (UDP 4794 is then undissected data): its own
# per-frame state, the baseline of the plugin's.
plugin[tshark-bare]=
programs+=(tshark-bare)

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
chmod 755 "$work"
mm="$(tshark --version 2>/dev/null | sed -n '1s/.* \([0-9]*\.[0-9]*\)\..*/\1/p')"
mkdir -p "$work/home"
chmod 777 "$work/home"
declare -A tshark_cmd
for p in "${!plugin[@]}"; do
    # One plugin folder per version: WIRESHARK_PLUGIN_DIR/X.Y/epan/.
    mkdir -p "$work/$p/$mm/epan"
    [ -z "${plugin[$p]}" ] \
        || install -m 0755 "${plugin[$p]}" "$work/$p/$mm/epan/libmetaroce_dissector.so"
    chmod -R a+rX "$work/$p"
    cmd="env HOME=$work/home WIRESHARK_PLUGIN_DIR=$work/$p tshark"
    [ "$(id -u)" = 0 ] && cmd="setpriv --reuid=65534 --regid=65534 --clear-groups $cmd"
    tshark_cmd[$p]="$cmd"
    loaded=0
    ${tshark_cmd[$p]} -G plugins 2>/dev/null | grep -q '^libmetaroce_dissector.so' && loaded=1
    if [ "$loaded" != "$([ -n "${plugin[$p]}" ] && echo 1 || echo 0)" ]; then
        echo "$p: the plugin does$([ "$loaded" = 1 ] || echo " not") load" >&2
        exit 1
    fi
done

# Runs a command, its standard output to $work/out; prints its peak RSS in
# KiB, wall seconds and CPU seconds: "KIB WALL CPU".
measure() {
    /usr/bin/time -f '%M %e %U %S' -o "$work/time" "$@" >"$work/out" 2>"$work/stderr" \
        || { cat "$work/stderr" >&2; exit 1; }
    awk '{ printf "%d %s %.2f\n", $1, $2, $3 + $4 }' "$work/time"
}

run() { # program capture
    case "$1" in
        report | before) measure "${analyze[$1]}" report --json "$2" ;;
        tshark-bare) measure ${tshark_cmd[$1]} -n -2 -r "$2" -T fields -e frame.number ;;
        tshark*) measure ${tshark_cmd[$1]} -n -2 -r "$2" -T fields -e metaroce.analysis.flow ;;
    esac
}

"$gen" bulk "$work/one.pcap" 10 1 5 64 2>/dev/null
declare -A base
for p in "${programs[@]}"; do
    read -r kib _ < <(run "$p" "$work/one.pcap")
    base[$p]=$kib
done

printf '%-22s %-13s %11s %8s %8s %11s %13s %10s %9s %12s %8s\n' capture program \
    "peak RSS MB" "wall s" "CPU s" "frames/s" "frames/CPU-s" directions paths "B/direction" "B/path"
declare -A rss_at # "PROGRAM CONNECTIONS" -> "FRAMES KIB" of its last capture
slopes=()
for s in "${series[@]}"; do
    IFS=: read -r conns frames mode <<<"$s"
    pcap="$work/c${conns}_f${frames}.pcap"
    if [ "$mode" != stream ]; then
        "$gen" bulk "$pcap" "$frames" "$conns" 5 64 2>/dev/null
        chmod a+r "$pcap"
    fi
    dirs= paths=
    for p in "${programs[@]}"; do
        if [ "$mode" = stream ]; then
            [[ $p == tshark* ]] && continue
            rm -f "$pcap"
            mkfifo "$pcap"
            "$gen" bulk "$pcap" "$frames" "$conns" 5 64 2>/dev/null &
            writer=$!
        fi
        read -r kib wall cpu < <(run "$p" "$pcap")
        if [ "$mode" = stream ]; then
            wait "$writer" || { echo "the generator failed on $s" >&2; exit 1; }
        fi
        if [ "$p" = report ]; then # what this capture's state holds, from the report
            read -r dirs paths dense dense_mib stalls < <(python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))
ds = r["directions"]
# Histograms past 128 samples are HdrHistograms (3 significant digits,
# ns): (buckets + 1) * 1024 counts of 8 bytes, the buckets covering max.
def counts_bytes(h):
    buckets, untrackable = 1, 2048
    while untrackable <= h["max"]:
        untrackable, buckets = untrackable << 1, buckets + 1
    return (buckets + 1) * 1024 * 8
hists = [h for d in ds for h in [d["fabric_rtt_ns"], d["msg_delivery_ns"],
         *d["msg_completion_by_op_ns"].values(), *(q["ack_rtt_ns"] for q in d["paths"])]]
dense = [counts_bytes(h) for h in hists if h["count"] > 128]
print(len(ds), sum(len(d["paths"]) for d in ds), len(dense), f"{sum(dense) / 2**20:.1f}",
      sum(len(d["stalls"]) for d in ds))' "$work/out")
        fi
        key="$p $conns"
        if [ -n "${rss_at[$key]:-}" ]; then
            read -r f0 k0 <<<"${rss_at[$key]}"
            slopes+=("$p $conns $f0 $frames $k0 $kib")
        fi
        rss_at[$key]="$frames $kib"
        python3 - "$s" "$p" "$kib" "$wall" "$cpu" "$frames" "$dirs" "$paths" "${base[$p]}" <<'EOF'
import sys
s, p, kib, wall, cpu, frames, dirs, paths, base = sys.argv[1:]
kib, wall, cpu, frames = int(kib), float(wall), float(cpu), int(frames)
dirs, paths, base = int(dirs), int(paths), int(base)
held = max(kib - base, 0) * 1024
rate = lambda secs: f"{frames / secs:.0f}" if secs > 0 else "inf"
# tshark without the plugin holds no state per direction or path.
per_dir, per_path = ("-", "-") if p == "tshark-bare" else \
    (f"{held / max(dirs, 1):.0f}", f"{held / max(paths, 1):.0f}")
print(f"{s:<22} {p:<13} {kib / 1024:11.1f} {wall:8.2f} {cpu:8.2f} {rate(wall):>11} {rate(cpu):>13} "
      f"{dirs:10} {paths:9} {per_dir:>12} {per_path:>8}")
EOF
        if [ "$p" = report ]; then
            echo "    its report: $dense histograms past 128 samples (their counts $dense_mib MiB by their ranges), $stalls stall records kept"
        fi
    done
    rm -f "$pcap"
done
for line in "${slopes[@]}"; do
    read -r p conns f0 f1 k0 k1 <<<"$line"
    awk -v p="$p" -v c="$conns" -v f0="$f0" -v f1="$f1" -v k0="$k0" -v k1="$k1" 'BEGIN {
        printf "%s, %d connections, %d -> %d frames: peak RSS +%.1f MB, %.0f bytes per frame\n",
            p, c, f0, f1, (k1 - k0) / 1024, (k1 - k0) * 1024 / (f1 - f0) }'
done
