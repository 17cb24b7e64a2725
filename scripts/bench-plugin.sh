#!/usr/bin/env bash
# Times tshark with the MetaRoCE plugin against tshark's built-in InfiniBand
# (RoCEv2) dissector, on two captures with the same number of frames and the
# same frame sizes (written by the `bench_captures` example with
# proto_parse), both with `-T fields` and five fields. Reports seconds,
# microseconds per packet and the ratio MetaRoCE / RoCEv2. Also times the
# MetaRoCE capture with the plugin's sequence analysis off, and with the
# protocol disabled (payload decoded as plain data) as a floor.
#
#   scripts/bench-plugin.sh [PACKETS=200000] [PAYLOAD=256] [REPEAT=3]
#
# The best of REPEAT runs is kept. Runs tshark as user 65534 when started as
# root (root tshark loads no personal plugins).
set -euo pipefail

packets="${1:-200000}"
payload="${2:-256}"
repeat="${3:-3}"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"

(cd "$root" && cargo build --release --quiet -p metaroce-dissector --lib --example bench_captures)
target_dir="$(cd "$root" && cargo metadata --format-version 1 --no-deps \
    | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')"

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
chmod 755 "$work"
mm="$(tshark --version | head -1 | grep -oE '[0-9]+\.[0-9]+' | head -1)"
mkdir -p "$work/plugins/$mm/epan" "$work/home"
install -m 0755 "$target_dir/release/libmetaroce_dissector.so" "$work/plugins/$mm/epan/"
chmod -R a+rX "$work/plugins"; chmod 777 "$work/home"
"$target_dir/release/examples/bench_captures" "$work" "$packets" "$payload"
chmod 644 "$work"/*.pcap

ts() {
    if [ "$(id -u)" = 0 ]; then
        setpriv --reuid=65534 --regid=65534 --clear-groups \
            env HOME="$work/home" WIRESHARK_PLUGIN_DIR="$work/plugins" tshark "$@"
    else
        env HOME="$work/home" WIRESHARK_PLUGIN_DIR="$work/plugins" tshark "$@"
    fi
}

ts -G plugins | grep -q '^libmetaroce_dissector.so' || { echo "the plugin does not load" >&2; exit 1; }
# Both captures are what they claim to be.
n_mr="$(ts -n -r "$work/metaroce.pcap" -c 1000 -Y metaroce -T fields -e frame.number | wc -l)"
n_ib="$(ts -n -r "$work/rocev2.pcap" -c 1000 -Y infiniband -T fields -e frame.number | wc -l)"
[ "$n_mr" = 1000 ] && [ "$n_ib" = 1000 ] || { echo "captures not decoded as expected ($n_mr, $n_ib)" >&2; exit 1; }

best() { # best wall time of $repeat runs of "$@", output discarded
    local best_t="" t0 t1 t
    for _ in $(seq "$repeat"); do
        t0="$(date +%s.%N)"
        "$@" > /dev/null
        t1="$(date +%s.%N)"
        t="$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }')"
        if [ -z "$best_t" ] || awk -v t="$t" -v b="$best_t" 'BEGIN { exit !(t < b) }'; then best_t="$t"; fi
    done
    echo "$best_t"
}

mr_fields=(-e frame.number -e metaroce.type -e metaroce.psn -e metaroce.ev -e metaroce.data.msg_id)
ib_fields=(-e frame.number -e infiniband.bth.opcode -e infiniband.bth.psn -e infiniband.bth.destqp -e udp.srcport)

t_mr="$(best ts -n -r "$work/metaroce.pcap" -T fields "${mr_fields[@]}")"
t_mr_noan="$(best ts -n -r "$work/metaroce.pcap" -o metaroce.analyze:FALSE -T fields "${mr_fields[@]}")"
t_ib="$(best ts -n -r "$work/rocev2.pcap" -T fields "${ib_fields[@]}")"
t_data="$(best ts -n -r "$work/metaroce.pcap" --disable-protocol metaroce -T fields -e frame.number -e udp.srcport -e data.len)"

us() { awk -v t="$1" -v n="$packets" 'BEGIN { printf "%.3f", t * 1e6 / n }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }
printf '%-46s %9s %12s\n' "run ($packets packets, best of $repeat)" "seconds" "us/packet"
printf '%-46s %9.3f %12s\n' "MetaRoCE plugin (decode + analysis)" "$t_mr" "$(us "$t_mr")"
printf '%-46s %9.3f %12s\n' "MetaRoCE plugin (decode only)" "$t_mr_noan" "$(us "$t_mr_noan")"
printf '%-46s %9.3f %12s\n' "InfiniBand (RoCEv2) built-in" "$t_ib" "$(us "$t_ib")"
printf '%-46s %9.3f %12s\n' "MetaRoCE capture as plain data (floor)" "$t_data" "$(us "$t_data")"
echo "ratio MetaRoCE / RoCEv2 per packet: $(ratio "$t_mr" "$t_ib") (decode only: $(ratio "$t_mr_noan" "$t_ib"))"
