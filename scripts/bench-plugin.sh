#!/usr/bin/env bash
# Times tshark with the MetaRoCE plugin against tshark's built-in InfiniBand
# (RoCEv2) dissector, on captures with the same number of frames and the
# same frame sizes (written by the `bench_captures` example with
# proto_parse), all with `-T fields` and five fields. Reports seconds,
# microseconds per packet and the ratio MetaRoCE / RoCEv2. The RoCEv2 twin
# carries what the MetaRoCE packets carry (a DATA WRITE names its remote
# address and key in every packet: RDMA WRITE Only with a RETH); the
# BTH-only twin (Write/Send Middle) is the InfiniBand dissector's cheapest
# case and is timed too. Also times the MetaRoCE capture with the plugin's
# sequence analysis off, and with the protocol disabled (payload decoded as
# plain data) as a floor. The InfiniBand rows run with the plugin's RoCEv2
# analysis disabled (`--disable-protocol rocev2`: the InfiniBand dissector
# alone), and the RoCEv2 row times the same capture with it (the default:
# the InfiniBand dissector with the plugin's analysis and its RC-* lint);
# its ratio to the InfiniBand dissector alone is printed per line.
#
#   scripts/bench-plugin.sh [--wireshark LINE]... [PACKETS=200000] [PAYLOAD=256] [REPEAT=3]
#   BENCH_INSTRUCTIONS=1 scripts/bench-plugin.sh ...
#
# LINE is "host" (the installed Wireshark, the default) or 4.4 / 4.6: the
# plugin is then built against that line's Debian root
# (scripts/wireshark-root.sh) and timed against that root's tshark and its
# own InfiniBand dissector (chroot, as user 65534). Several --wireshark
# options run the lines one after the other in one run and end with their
# ratios side by side. For the instruction counts valgrind is installed in
# the roots that lack it.
#
# With BENCH_INSTRUCTIONS=1 it also counts instructions per packet under
# valgrind (cachegrind, no cache simulation): the difference between runs
# over 12 000 and 2 000 packets, divided by 10 000, so tshark's start-up
# cancels out. Instruction counts do not depend on the machine's load (wall
# times on a shared machine do), but they are not time: cache misses and
# branch mispredictions are not in them.
#
# The runs are interleaved and the best of REPEAT rounds is kept, for the
# wall time and the CPU time (user + system), with the load average. Runs
# tshark as user 65534 when started as root (root tshark loads no personal
# plugins).
set -euo pipefail

lines=()
while [ "${1:-}" = --wireshark ]; do
    lines+=("${2:?--wireshark needs host, 4.4 or 4.6}")
    shift 2
done
[ ${#lines[@]} -gt 0 ] || lines=(host)
packets="${1:-200000}"
payload="${2:-256}"
repeat="${3:-3}"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"

works=()
trap 'rm -rf "${works[@]}"' EXIT
summary=()
isummary=()
for line in "${lines[@]}"; do
    case "$line" in host|4.4|4.6) ;; *) echo "--wireshark takes host, 4.4 or 4.6" >&2; exit 2 ;; esac
    if [ "$line" = host ]; then
        (cd "$root" && cargo build --release --quiet -p metaroce-dissector --lib --example bench_captures)
        target_dir="$(cd "$root" && cargo metadata --format-version 1 --no-deps \
            | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')"
        work="$(mktemp -d)"
        inner="$work" # the work folder as tshark sees it
        mm="$(tshark --version | head -1 | grep -oE '[0-9]+\.[0-9]+' | head -1)"
        tshark_cmd=(env HOME="$inner/home" WIRESHARK_PLUGIN_DIR="$inner/plugins" tshark)
        if [ "$(id -u)" = 0 ]; then
            tshark_cmd=(setpriv --reuid=65534 --regid=65534 --clear-groups "${tshark_cmd[@]}")
        fi
    else
        "$here/wireshark-root.sh" "$line" cargo build --release --quiet -p metaroce-dissector --lib \
            --example bench_captures
        target_dir="$root/target/wireshark-$line"
        ws_root="$("$here/wireshark-root.sh" "$line")"
        work="$(mktemp -d "$ws_root/tmp/bench.XXXXXX")"
        inner="/tmp/$(basename "$work")"
        mm="$line"
        # /proc mounted in the root (valgrind needs it), in a mount
        # namespace of the command's own.
        tshark_cmd=(unshare --mount --propagation private
                    sh -c 'mount -t proc proc "$1/proc" && exec chroot --userspec=65534:65534 "$@"'
                    sh "$ws_root" env HOME="$inner/home" WIRESHARK_PLUGIN_DIR="$inner/plugins" tshark)
    fi
    works+=("$work")
    chmod 755 "$work"
    mkdir -p "$work/plugins/$mm/epan" "$work/home"
    install -m 0755 "$target_dir/release/libmetaroce_dissector.so" "$work/plugins/$mm/epan/"
    chmod -R a+rX "$work/plugins"; chmod 777 "$work/home"
    "$target_dir/release/examples/bench_captures" "$work" "$packets" "$payload"
    chmod 644 "$work"/*.pcap

    ts() { "${tshark_cmd[@]}" "$@"; }
    echo "== Wireshark $(ts --version | head -1 | grep -oE '[0-9]+\.[0-9]+\.[0-9]+' | head -1) ($line)"

    ts -G plugins | grep -q '^libmetaroce_dissector.so' || { echo "the plugin does not load" >&2; exit 1; }
    # Both captures are what they claim to be.
    n_mr="$(ts -n -r "$inner/metaroce.pcap" -c 1000 -Y metaroce -T fields -e frame.number | wc -l)"
    n_ib="$(ts -n -r "$inner/rocev2.pcap" -c 1000 -Y 'infiniband.reth || infiniband.bth.opcode == 1' -T fields -e frame.number | wc -l)"
    [ "$n_mr" = 1000 ] && [ "$n_ib" = 1000 ] || { echo "captures not decoded as expected ($n_mr, $n_ib)" >&2; exit 1; }

    mr_fields=(-e frame.number -e metaroce.type -e metaroce.psn -e metaroce.ev -e metaroce.data.msg_id)
    ib_fields=(-e frame.number -e infiniband.bth.opcode -e infiniband.bth.psn -e infiniband.bth.destqp -e udp.srcport)

    runs=(mr mr_lint mr_noan ib ib_an ib_bth data)
    # The analysis without the conformance lint (on by default; its own
    # cost is the mr_lint row).
    args_mr=(-n -r "$inner/metaroce.pcap" -o metaroce.lint:FALSE -T fields "${mr_fields[@]}")
    args_mr_lint=(-n -r "$inner/metaroce.pcap" -T fields "${mr_fields[@]}")
    args_mr_noan=(-n -r "$inner/metaroce.pcap" -o metaroce.analyze:FALSE -T fields "${mr_fields[@]}")
    args_ib=(-n -r "$inner/rocev2.pcap" --disable-protocol rocev2 -T fields "${ib_fields[@]}")
    args_ib_an=(-n -r "$inner/rocev2.pcap" -T fields "${ib_fields[@]}")
    args_ib_bth=(-n -r "$inner/rocev2-bth-only.pcap" --disable-protocol rocev2 -T fields "${ib_fields[@]}")
    args_data=(-n -r "$inner/metaroce.pcap" --disable-protocol metaroce -T fields -e frame.number -e udp.srcport -e data.len)

    # The runs are interleaved (one of each per round), so that load from other
    # processes on this machine hits every side alike; the best of REPEAT rounds
    # is kept, for the wall time and for the CPU time (user + system: less
    # sensitive to waiting for a busy CPU).
    unset wall cpu
    declare -A wall cpu
    for _ in $(seq "$repeat"); do
        for r in "${runs[@]}"; do
            declare -n a="args_$r"
            /usr/bin/time -o "$work/time" -f '%e %U %S' "${tshark_cmd[@]}" "${a[@]}" > /dev/null
            read -r e u s < "$work/time"
            c="$(awk -v u="$u" -v s="$s" 'BEGIN { printf "%.3f", u + s }')"
            if [ -z "${wall[$r]:-}" ] || awk -v t="$e" -v b="${wall[$r]}" 'BEGIN { exit !(t < b) }'; then wall[$r]="$e"; fi
            if [ -z "${cpu[$r]:-}" ] || awk -v t="$c" -v b="${cpu[$r]}" 'BEGIN { exit !(t < b) }'; then cpu[$r]="$c"; fi
            unset -n a
        done
    done

    us() { awk -v t="$1" -v n="$packets" 'BEGIN { printf "%.3f", t * 1e6 / n }'; }
    ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }
    printf '%-44s %8s %10s %8s %10s\n' "run ($packets packets, best of $repeat)" "wall s" "us/packet" "CPU s" "us/packet"
    row() { printf '%-44s %8.3f %10s %8.3f %10s\n' "$1" "${wall[$2]}" "$(us "${wall[$2]}")" "${cpu[$2]}" "$(us "${cpu[$2]}")"; }
    row "MetaRoCE plugin (decode + analysis)" mr
    row "MetaRoCE plugin (decode + analysis + lint)" mr_lint
    row "MetaRoCE plugin (decode only)" mr_noan
    row "InfiniBand built-in, twin (WRITE Only+RETH)" ib
    row "InfiniBand + plugin's RoCEv2 analysis, twin" ib_an
    row "InfiniBand built-in, BTH-only twin" ib_bth
    row "MetaRoCE capture as plain data (floor)" data
    echo "ratio MetaRoCE / RoCEv2 twin per packet: $(ratio "${wall[mr]}" "${wall[ib]}") (decode only: $(ratio "${wall[mr_noan]}" "${wall[ib]}"))"
    echo "same, CPU time: $(ratio "${cpu[mr]}" "${cpu[ib]}") (decode only: $(ratio "${cpu[mr_noan]}" "${cpu[ib]}"))"
    echo "against the BTH-only twin: wall $(ratio "${wall[mr]}" "${wall[ib_bth]}"), CPU $(ratio "${cpu[mr]}" "${cpu[ib_bth]}")"
    echo "RoCEv2: InfiniBand + analysis / InfiniBand alone per packet: wall $(ratio "${wall[ib_an]}" "${wall[ib]}"), CPU $(ratio "${cpu[ib_an]}" "${cpu[ib]}")"
    echo "load average: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) CPUs"
    summary+=("$(printf '%-8s %-8s %10s %10s %18s %16s' "$line" "$mm" "$(ratio "${wall[mr]}" "${wall[ib]}")" \
        "$(ratio "${cpu[mr]}" "${cpu[ib]}")" "$(ratio "${wall[mr_noan]}" "${wall[ib]}")" \
        "$(ratio "${cpu[ib_an]}" "${cpu[ib]}")")")

    if [ "${BENCH_INSTRUCTIONS:-0}" = 1 ]; then
        if [ "$line" != host ]; then
            "$here/wireshark-root.sh" "$line" install valgrind
        fi
        ir() { # instructions of one tshark run over the first $1 packets
            local n="$1"; shift
            rm -f "$work/home/cg.out"
            "${tshark_cmd[@]:0:${#tshark_cmd[@]}-1}" valgrind --tool=cachegrind --cache-sim=no \
                --cachegrind-out-file="$inner/home/cg.out" tshark -c "$n" "$@" > /dev/null 2> "$work/vg.err"
            awk '/^summary:/ { print $2 }' "$work/home/cg.out"
        }
        declare -A ipp
        for r in "${runs[@]}"; do
            declare -n a="args_$r"
            lo="$(ir 2000 "${a[@]}")"
            hi="$(ir 12000 "${a[@]}")"
            ipp[$r]=$(( (hi - lo) / 10000 ))
            unset -n a
        done
        echo "instructions per packet (cachegrind, packets 2001..12000):"
        for r in "${runs[@]}"; do printf '  %-10s %8d\n' "$r" "${ipp[$r]}"; done
        echo "ratio MetaRoCE / RoCEv2 twin in instructions: $(ratio "${ipp[mr]}" "${ipp[ib]}") (decode only: $(ratio "${ipp[mr_noan]}" "${ipp[ib]}")); BTH-only twin: $(ratio "${ipp[mr]}" "${ipp[ib_bth]}")"
        echo "lint: analysis + lint / analysis alone in instructions: $(ratio "${ipp[mr_lint]}" "${ipp[mr]}")"
        echo "RoCEv2: InfiniBand + analysis / InfiniBand alone in instructions: $(ratio "${ipp[ib_an]}" "${ipp[ib]}")"
        isummary+=("$(printf '%-8s %-8s %10s %12s %18s %16s' "$line" "$mm" "$(ratio "${ipp[mr]}" "${ipp[ib]}")" \
            "$(ratio "${ipp[mr_noan]}" "${ipp[ib]}")" "$(ratio "${ipp[mr]}" "${ipp[ib_bth]}")" \
            "$(ratio "${ipp[ib_an]}" "${ipp[ib]}")")")
    fi
done
if [ ${#lines[@]} -gt 1 ]; then
    echo
    echo "MetaRoCE / RoCEv2 twin per packet, each line against its own InfiniBand dissector:"
    printf '%-8s %-8s %10s %10s %18s %16s\n' line version "wall" "CPU" "wall, no analysis" "RoCEv2 an. CPU"
    printf '%s\n' "${summary[@]}"
    if ((${#isummary[@]})); then
        echo "in instructions (cachegrind):"
        printf '%-8s %-8s %10s %12s %18s %16s\n' line version "analysis" "decode only" "vs BTH-only twin" "RoCEv2 an./IB"
        printf '%s\n' "${isummary[@]}"
    fi
fi
