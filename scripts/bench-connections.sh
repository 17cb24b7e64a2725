#!/usr/bin/env bash
# Memory per connection: what `metaroce-analyze report` and tshark with the
# MetaRoCE plugin hold for captures of many short connections (a training
# host has thousands of QPs) and of a few long ones.
#
#   scripts/bench-connections.sh [CONNECTIONS:FRAMES]...
#
# Default series: 1000:10000 10000:100000 100000:1000000 (about ten frames
# per connection: a few DATA packets over up to 16 evs, their ACKs) and
# 1000:1000000 (a thousand frames per connection). Each capture is written
# by `fixtures-generator bulk OUT FRAMES CONNECTIONS 5 64` (see
# fixtures/generator/src/bulk.rs). For each, one row per program:
#
# - peak RSS (/usr/bin/time's maximum resident set size) and wall time;
# - frames per second;
# - bytes per direction and per path: the peak RSS less the program's peak
#   RSS on a capture of one connection, divided by the directions, and by
#   the paths, that `report --json` counts (each figure charges all the
#   memory to that one kind of state: upper bounds, not a split).
#
# BEFORE=/path/to/an/older/metaroce-analyze adds a row for that binary, run
# in the same round (side by side, same page-cache state). tshark reads
# each capture in two passes (-2, as the GUI does), as user 65534 when
# started as root (root tshark loads no personal plugins).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
series=("$@")
[ ${#series[@]} -gt 0 ] || series=(1000:10000 10000:100000 100000:1000000 1000:1000000)

# `report` uses neither the export nor the plot feature: built without
# them (no polars), it is the same program for this measurement.
(cd "$root" && cargo build --release --quiet -p fixtures-generator \
    && cargo build --release --quiet -p metaroce-analyze --no-default-features \
    && cargo build --release --quiet -p metaroce-dissector --lib)
target_dir="$(cd "$root" && cargo metadata --format-version 1 --no-deps \
    | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')"
gen="$target_dir/release/fixtures-generator"
analyze="$target_dir/release/metaroce-analyze"

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
chmod 755 "$work"
mm="$(tshark --version 2>/dev/null | sed -n '1s/.* \([0-9]*\.[0-9]*\)\..*/\1/p')"
mkdir -p "$work/plugins/$mm/epan" "$work/home"
install -m 0755 "$target_dir/release/libmetaroce_dissector.so" "$work/plugins/$mm/epan/"
chmod -R a+rX "$work/plugins"; chmod 777 "$work/home"
tshark_cmd=(env HOME="$work/home" WIRESHARK_PLUGIN_DIR="$work/plugins" tshark)
if [ "$(id -u)" = 0 ]; then
    tshark_cmd=(setpriv --reuid=65534 --regid=65534 --clear-groups "${tshark_cmd[@]}")
fi
"${tshark_cmd[@]}" -G plugins 2>/dev/null | grep -q '^libmetaroce_dissector.so' \
    || { echo "the plugin does not load" >&2; exit 1; }

# peak RSS in KiB and wall seconds of a command: "KIB SECONDS"
measure() {
    /usr/bin/time -f '%M %e' -o "$work/time" "$@" >/dev/null 2>"$work/stderr" \
        || { cat "$work/stderr" >&2; exit 1; }
    cat "$work/time"
}

programs=(report)
[ -n "${BEFORE:-}" ] && programs+=(before)
programs+=(tshark)
run() { # program capture
    case "$1" in
        report) measure "$analyze" report --json "$2" ;;
        before) measure "$BEFORE" report --json "$2" ;;
        tshark) measure "${tshark_cmd[@]}" -n -2 -r "$2" -T fields -e metaroce.analysis.flow ;;
    esac
}

"$gen" bulk "$work/one.pcap" 10 1 5 64 >/dev/null
declare -A base
for p in "${programs[@]}"; do
    read -r kib _ < <(run "$p" "$work/one.pcap")
    base[$p]=$kib
done

printf '%-16s %-8s %12s %10s %12s %10s %10s %12s %10s\n' \
    capture program "peak RSS MB" "wall s" "frames/s" directions paths "B/direction" "B/path"
for s in "${series[@]}"; do
    conns="${s%%:*}"; frames="${s##*:}"
    pcap="$work/c${conns}_f${frames}.pcap"
    "$gen" bulk "$pcap" "$frames" "$conns" 5 64 >/dev/null
    chmod a+r "$pcap"
    read -r dirs paths < <("$analyze" report --json "$pcap" | python3 -c '
import json, sys
r = json.load(sys.stdin)
print(len(r["directions"]), sum(len(d["paths"]) for d in r["directions"]))')
    for p in "${programs[@]}"; do
        read -r kib secs < <(run "$p" "$pcap")
        python3 - "$s" "$p" "$kib" "$secs" "$frames" "$dirs" "$paths" "${base[$p]}" <<'EOF'
import sys
s, p, kib, secs, frames, dirs, paths, base = sys.argv[1:]
kib, secs, frames, dirs, paths, base = int(kib), float(secs), int(frames), int(dirs), int(paths), int(base)
held = max(kib - base, 0) * 1024
rate = frames / secs if secs > 0 else float("inf")
print(f"{s:<16} {p:<8} {kib / 1024:12.1f} {secs:10.2f} {rate:12.0f} {dirs:10} {paths:10} "
      f"{held / max(dirs, 1):12.0f} {held / max(paths, 1):10.0f}")
EOF
    done
done
