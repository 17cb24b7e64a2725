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
# Usage: scripts/bench-tui.sh [RATES_KPPS...]   (default: 50 100 200 300 500 700 1000)
# Env:   SECONDS_PER_STEP (3), THREADS (sender threads, 2), PAYLOAD (1024)
# Needs root (ip netns). Prints a table and the highest rate with < 1 % drops.
set -euo pipefail

cd "$(dirname "$0")/.."
RATES=("$@")
[ ${#RATES[@]} -eq 0 ] && RATES=(50 100 200 300 500 700 1000)
STEP=${SECONDS_PER_STEP:-3}
THREADS=${THREADS:-2}
PAYLOAD=${PAYLOAD:-1024}

cargo build -q --release -p metaroce-tui --bin metaroce-top --example blast
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

echo "machine: $(nproc) cores, $(uname -r); sender threads $THREADS, payload $PAYLOAD B, $STEP s per step"
printf '%10s %10s %10s %10s %10s %8s %8s %10s %8s\n' \
    target_kpps sent_kpps recv_kpps engine_kpps kdrops ifdrops drop% cpu_s cpu%
best=0
for k in "${RATES[@]}"; do
    json=$OUT/step-$k.json
    ip netns exec "$NS_B" "$TOP" -i "$VB" --headless --duration $((STEP + 2)) --json-out "$json" &
    top_pid=$!
    sleep 0.8
    sent=$(ip netns exec "$NS_A" "$BLAST" rate "$VA" $((k * 1000)) "$STEP" "$PAYLOAD" 8 1 "$THREADS")
    wait "$top_pid"
    line=$(python3 - "$json" "$sent" "$STEP" "$k" <<'PY'
import json, sys
s = json.load(open(sys.argv[1])); sent = json.loads(sys.argv[2]); step = float(sys.argv[3]); k = sys.argv[4]
st = s["stats"]; p = s.get("process", {})
recv, kd, ifd = st["received"], st["kernel_drops"], st["interface_drops"]
drop = 100.0 * (kd + ifd) / max(1, recv + kd + ifd)
cpu = p.get("cpu_user_s", 0) + p.get("cpu_system_s", 0)
print(f'{k:>10} {sent["sent"]/sent["seconds"]/1e3:10.1f} {recv/step/1e3:10.1f} {st["frames"]/step/1e3:10.1f} '
      f'{kd:10d} {ifd:8d} {drop:8.2f} {cpu:10.2f} {100*cpu/max(p.get("wall_s",1),1e-9):8.1f} '
      f'{sent["sent"]/sent["seconds"]/1e3:.1f} {drop:.4f}')
PY
)
    echo "$line" | awk '{for (i=1;i<=9;i++) printf "%s ", $i; print ""}' | column -t
    sent_kpps=$(echo "$line" | awk '{print $10}')
    drop=$(echo "$line" | awk '{print $11}')
    if awk -v d="$drop" 'BEGIN{exit !(d < 1.0)}'; then
        best=$sent_kpps
    fi
done
echo "highest packet rate sustained with < 1% kernel+interface drops: ${best} kpps (achieved send rate)"
