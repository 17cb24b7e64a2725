#!/usr/bin/env bash
# Benchmark of metaroce-top's capture + engine path (not a timed test).
#
# Two network namespaces joined by a veth pair; in one, `blast` (the tui
# crate's example) injects fixture-like MetaRoCE frames (one connection per
# sender thread, 8 paths, 1024-byte DATA, an ACK every 8 DATA, 0.1% loss
# repaired by retransmission) at stepped rates; in the other,
# `metaroce-top -i VETH --headless` runs the same capture thread and flow
# engine as the TUI (without drawing) and writes its JSON snapshot, from
# which we read libpcap's received / kernel-drop / interface-drop counters,
# the frames the engine took, and the process CPU time.
#
# Then: a drain step (capture SIGSTOPped behind a 256 MiB buffer while the
# sender fills it, then resumed: the peak 100 ms rate is the live path's
# ceiling) and the offline ceiling (replay --speed 0).
#
# Last, the cost of `--metrics`: the drain peak and the offline ceiling
# again, each without and with `--metrics` and a scrape of /metrics every
# second, alternated over ROUNDS rounds in this one run; the ratio
# with/without of the best of each (issue 34's bound: at least 0.95).
#
# Usage: scripts/bench-tui.sh [RATES_KPPS...]   (default: 50 100 200 300 500 700 1000)
# Env:   SECONDS_PER_STEP (3), THREADS (sender threads, 2), PAYLOAD (1024),
#        SKIP_BUILD=1 (use the release binaries already built),
#        ONLY_METRICS=1 (only the --metrics comparison), ROUNDS (3)
# Needs root (ip netns). Prints a table and the highest rate with < 1 % drops.
set -euo pipefail

cd "$(dirname "$0")/.."
RATES=("$@")
[ ${#RATES[@]} -eq 0 ] && RATES=(50 100 200 300 500 700 1000)
STEP=${SECONDS_PER_STEP:-3}
THREADS=${THREADS:-2}
PAYLOAD=${PAYLOAD:-1024}

[ -n "${SKIP_BUILD:-}" ] || cargo build -q --release -p metaroce-tui --bin metaroce-top --example blast
TOP=$PWD/target/release/metaroce-top
BLAST=$PWD/target/release/examples/blast

ID=$$
NS_A=mrtb-a-$ID
NS_B=mrtb-b-$ID
VA=mrtba$ID
VB=mrtbb$ID
OUT=$(mktemp -d)
cleanup() {
    ip netns del "$NS_A" 2>/dev/null || true
    ip netns del "$NS_B" 2>/dev/null || true
    rm -rf "$OUT"
}
trap cleanup EXIT INT TERM

ip netns add "$NS_A"
ip netns add "$NS_B"
ip link add "$VA" type veth peer name "$VB"
ip link set "$VA" netns "$NS_A"
ip link set "$VB" netns "$NS_B"
ip -n "$NS_A" addr add 10.77.0.1/24 dev "$VA"
ip -n "$NS_B" addr add 10.77.0.2/24 dev "$VB"
ip -n "$NS_A" link set "$VA" up
ip -n "$NS_B" link set "$VB" up
ip -n "$NS_B" link set lo up

echo "machine: $(nproc) cores, $(uname -r); sender threads $THREADS, payload $PAYLOAD B, $STEP s per step"
"$BLAST" write "$OUT/offline.pcap" 1000000 "$PAYLOAD" 8 1 >/dev/null

# The drain step: the capture stopped (SIGSTOP) behind a 256 MiB buffer
# while the sender fills it, then resumed; prints the JSON snapshot's path.
# $1: a tag, then extra metaroce-top arguments.
drain() {
    local json=$OUT/drain-$1.json
    shift
    ip netns exec "$NS_B" "$TOP" -i "$VB" --headless --duration $((STEP + 8)) --buffer-mb 256 --json-out "$json" "$@" 2> >(grep -v "serving metrics" >&2) &
    local top_pid=$!
    sleep 2
    kill -STOP "$top_pid"
    ip netns exec "$NS_A" "$BLAST" rate "$VA" 1000000 "$STEP" "$PAYLOAD" 8 1 "$THREADS" >"$json.sent"
    kill -CONT "$top_pid"
    wait "$top_pid"
    echo "$json"
}

# The offline ceiling: the generated capture replayed as fast as possible
# (in the receiving namespace, so that a metrics port is its own).
offline() {
    local json=$OUT/offline-$1.json
    shift
    ip netns exec "$NS_B" "$TOP" -r "$OUT/offline.pcap" --speed 0 --headless --json-out "$json" "$@" 2> >(grep -v "serving metrics" >&2)
    echo "$json"
}

# A scrape of metaroce-top's /metrics every second, as Prometheus would.
scraper() {
    while sleep 1; do
        ip netns exec "$NS_B" curl -s -o /dev/null --max-time 1 "http://127.0.0.1:9794/metrics" || true
    done
}

if [ -n "${ONLY_METRICS:-}" ]; then RATES=(); fi
[ -n "${ONLY_METRICS:-}" ] || printf '%8s %9s %9s %9s %8s %8s %7s %7s %8s %9s\n' \
    target sent_kpps recv_kpps eng_kpps kdrops ifdrops drop% cpu_s cpu%core us/pkt
best=0
for k in "${RATES[@]}"; do
    json=$OUT/step-$k.json
    ip netns exec "$NS_B" "$TOP" -i "$VB" --headless --duration $((STEP + 2)) --json-out "$json" &
    top_pid=$!
    sleep 0.8
    sent=$(ip netns exec "$NS_A" "$BLAST" rate "$VA" $((k * 1000)) "$STEP" "$PAYLOAD" 8 1 "$THREADS")
    wait "$top_pid"
    read -r row sent_kpps drop < <(python3 - "$json" "$sent" "$STEP" "$k" <<'PY'
import json, sys
s = json.load(open(sys.argv[1])); sent = json.loads(sys.argv[2]); step = float(sys.argv[3]); k = sys.argv[4]
st = s["stats"]; p = s.get("process", {})
recv, kd, ifd, frames = st["received"], st["kernel_drops"], st["interface_drops"], st["frames"]
drop = 100.0 * (kd + ifd) / max(1, recv + kd + ifd)
cpu = p.get("cpu_user_s", 0) + p.get("cpu_system_s", 0)
sent_kpps = sent["sent"] / sent["seconds"] / 1e3
# CPU while traffic flowed: the process ran STEP+2 s, traffic lasted STEP s.
row = (f'{k:>8} {sent_kpps:9.1f} {recv/step/1e3:9.1f} {frames/step/1e3:9.1f} {kd:8d} {ifd:8d} '
       f'{drop:7.2f} {cpu:7.2f} {100*cpu/step:8.1f} {1e6*cpu/max(frames,1):9.2f}')
print(row.replace(" ", "_"), f"{sent_kpps:.1f}", f"{drop:.4f}")
PY
)
    echo "${row//_/ }"
    if awk -v d="$drop" 'BEGIN{exit !(d < 1.0)}' && awk -v a="$sent_kpps" -v b="$best" 'BEGIN{exit !(a > b)}'; then
        best=$sent_kpps
    fi
done
[ -n "${ONLY_METRICS:-}" ] ||
    echo "highest packet rate sustained with < 1% kernel+interface drops: ${best} kpps (the rate the sender achieved)"

if [ -z "${ONLY_METRICS:-}" ]; then
# The live path's own ceiling, independent of the sender: the capture is
# stopped (SIGSTOP) behind a 256 MiB kernel buffer while the sender fills it,
# then resumed; the fastest 100 ms tick while it drains the backlog
# (libpcap read + decode + engine) is its peak rate.
json=$(drain plain)
python3 - "$json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1])); sent = json.load(open(sys.argv[1] + ".sent")); st = s["stats"]; p = s["process"]
print(f"drain (capture stopped while {sent['sent']} packets queued, then resumed): peak "
      f"{p['peak_packets_per_s']/1e3:.0f} kpps per 100 ms tick; received {st['received']}, "
      f"engine {st['frames']}, kernel drops {st['kernel_drops']}, if drops {st['interface_drops']}")
PY

# The same decode + engine path without libpcap: a generated capture of the
# same traffic replayed as fast as possible (the TUI's own ceiling on one
# core, independent of the sender).
json=$(offline plain)
python3 - "$json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1])); p = s["process"]; f = s["stats"]["frames"]
cpu = p["cpu_user_s"] + p["cpu_system_s"]
print(f"offline ceiling (replay --speed 0, same decode + engine): {f} frames in {p['wall_s']:.2f} s wall = "
      f"{f/p['wall_s']/1e3:.0f} kpps, {1e6*cpu/f:.2f} us CPU per packet")
PY
fi

# --metrics and a scrape every second against none, alternated.
ROUNDS=${ROUNDS:-3}
echo "--metrics 127.0.0.1:9794 --metrics-paths with a scrape every second, against none ($ROUNDS rounds, alternated):"
printf '%6s %9s %22s %22s\n' round metrics drain_peak_kpps offline_kpps
for r in $(seq "$ROUNDS"); do
    for m in off on; do
        args=()
        pid=
        if [ "$m" = on ]; then
            args=(--metrics 127.0.0.1:9794 --metrics-paths)
            scraper &
            pid=$!
        fi
        d=$(drain "$m-$r" "${args[@]}")
        o=$(offline "$m-$r" "${args[@]}")
        [ -z "$pid" ] || { kill "$pid"; wait "$pid" 2>/dev/null || true; }
        python3 - "$r" "$m" "$d" "$o" <<'PY'
import json, sys
r, m, d, o = sys.argv[1:]
d = json.load(open(d)); o = json.load(open(o))
print(f"{r:>6} {m:>9} {d['process']['peak_packets_per_s']/1e3:22.0f} "
      f"{o['stats']['frames']/o['process']['wall_s']/1e3:22.0f}")
PY
    done
done | tee "$OUT/metrics.txt"
python3 - "$OUT/metrics.txt" <<'PY'
import sys
rows = [l.split() for l in open(sys.argv[1]) if l.split()[0].isdigit()]
best = lambda m, i: max(float(r[i]) for r in rows if r[1] == m)
for name, i in (("drain peak", 2), ("offline ceiling", 3)):
    print(f"{name}: best with --metrics {best('on', i):.0f} kpps / without {best('off', i):.0f} kpps = "
          f"{best('on', i) / best('off', i):.3f}")
PY
