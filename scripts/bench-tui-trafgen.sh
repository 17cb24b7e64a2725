#!/usr/bin/env bash
# The TUI's capture + engine path against the fastest sender this machine
# has: trafgen (Debian's netsniff-ng, a PACKET_MMAP TX ring), which reaches
# higher packet rates on a veth than scripts/bench-tui.sh's libpcap sender.
# trafgen sends a 96-byte MetaRoCE SEND frame of fixtures/generated/all_types.pcap
# (frame 3) with the PSN's low byte counting, from one namespace; in the
# other, `metaroce-top -i VETH --headless` captures and analyses. Prints the
# packets sent, received, kernel and interface drops, the peak 100 ms rate
# and the TUI's CPU time. Not a timed test: a benchmark to read.
#   scripts/bench-tui-trafgen.sh [SECONDS=3] [SENDER_CPUS=2]
# Needs root (ip netns). On 2 cores the sender, the veth softirq and the TUI
# share the CPUs: the sender is the limit.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-3}
cpus=${2:-2}
command -v trafgen >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -q netsniff-ng >/dev/null
cargo build -q --release -p metaroce-tui --bin metaroce-top
top=$PWD/target/release/metaroce-top

work=$(mktemp -d)
id=$$
a=tgba$id; b=tgbb$id
cleanup() { ip netns del "$a" 2>/dev/null || true; ip netns del "$b" 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT INT TERM

# The frame's bytes as a trafgen packet, PSN low byte (frame offset 61) counting.
python3 - "$work/packet.cfg" <<'PY'
import struct, sys
data = open("fixtures/generated/all_types.pcap", "rb").read()
offset, frame = 24, None
for _ in range(3):
    caplen = struct.unpack("<I", data[offset + 8:offset + 12])[0]
    frame = data[offset + 16:offset + 16 + caplen]
    offset += 16 + caplen
parts = ["dinc(0, 255, 1)" if i == 42 + 19 else "0x%02x" % byte for i, byte in enumerate(frame)]
open(sys.argv[1], "w").write("{ " + ", ".join(parts) + " }\n")
PY

ip netns add "$a"; ip netns add "$b"
ip link add "va$id" type veth peer name "vb$id"
ip link set "va$id" netns "$a"; ip link set "vb$id" netns "$b"
ip -n "$a" link set "va$id" up; ip -n "$b" link set "vb$id" up

ip netns exec "$b" "$top" -i "vb$id" --headless --duration $((secs + 3)) --json-out "$work/top.json" &
sleep 1
ip netns exec "$a" timeout "$secs" trafgen --dev "va$id" --conf "$work/packet.cfg" --cpus "$cpus" 2>/dev/null \
    | grep -E "packets outgoing" || true
wait
python3 - "$work/top.json" "$secs" <<'PY'
import json, sys
snap = json.load(open(sys.argv[1]))
stats, proc = snap["stats"], snap["process"]
secs = float(sys.argv[2])
print(f"received {stats['received']} ({stats['received'] / secs / 1e3:.0f} kpps over {secs:.0f} s), "
      f"kernel drops {stats['kernel_drops']}, interface drops {stats['interface_drops']}, "
      f"engine frames {stats['frames']}")
print(f"peak 100 ms rate {proc['peak_packets_per_s'] / 1e3:.0f} kpps; TUI CPU {proc['cpu_user_s'] + proc['cpu_system_s']:.2f} s "
      f"in {proc['wall_s']:.1f} s wall")
PY
