#!/usr/bin/env bash
# Opens a capture in the real Wireshark GUI under Xvfb with the plugin,
# selects a packet, expands a tree, and takes a screenshot of the screen.
#
#   scripts/wireshark-gui-screenshot.sh [--wireshark 4.4|4.6] [--plugin SO]
#       [--capture PCAP] [--select FILTER] [--expand metaroce|rocev2] [OUT.png]
#
# Defaults: the host's Wireshark; the plugin built in release for it; the
# two-host scenario's sender capture; its first retransmitted DATA packet
# (--select "metaroce.analysis.retransmission && metaroce.type == 0") with
# its MetaRoCE tree expanded; dissector-plugin/wireshark-gui.png.
# `--expand rocev2` expands the "RoCEv2 analysis" tree instead (the last
# one of a RoCEv2 packet). With --wireshark, the Wireshark of that line's
# Debian root (scripts/wireshark-root.sh, its `wireshark` package
# installed on first use) runs inside the root, on the host's Xvfb through
# a bind of /tmp/.X11-unix; the plugin must be built for that line. The
# capture is coloured with the plugin's rules (dissector-plugin/colorfilters).
# Prints "plugin loaded: <path>" once the running Wireshark has the plugin
# mapped (read from /proc/PID/maps), and fails when it has not, when the
# window does not come up, or when the screenshot is blank. Runs Wireshark
# as user 65534 when started as root (root loads no personal plugins).
# Needs: wireshark-qt (host line), xvfb, xdotool, imagemagick (scripts/setup.sh).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/.." && pwd)"
plugin=""
line=""
capture="$repo/fixtures/generated/multipath_loss_sender.pcap"
select="metaroce.analysis.retransmission && metaroce.type == 0"
expand=metaroce
while [ $# -gt 0 ]; do
    case "$1" in
        --wireshark) line="${2:?--wireshark needs 4.4 or 4.6}"; shift 2 ;;
        --plugin) plugin="${2:?--plugin needs a file}"; shift 2 ;;
        --capture) capture="${2:?--capture needs a file}"; shift 2 ;;
        --select) select="${2:?--select needs a display filter}"; shift 2 ;;
        --expand) expand="${2:?--expand needs metaroce or rocev2}"; shift 2 ;;
        -h|--help) sed -n '2,22p' "$0"; exit 0 ;;
        *) break ;;
    esac
done
case "$expand" in
    metaroce|rocev2) ;;
    *) echo "--expand takes metaroce or rocev2" >&2; exit 64 ;;
esac
out="$(realpath -m "${1:-$repo/dissector-plugin/wireshark-gui.png}")"
tools=(Xvfb xdotool import convert)
[ -n "$line" ] || tools+=(wireshark)
for tool in "${tools[@]}"; do
    command -v "$tool" >/dev/null || { echo "$tool is missing (scripts/setup.sh installs it)" >&2; exit 1; }
done
root=""
if [ -n "$line" ]; then
    root="$("$here/wireshark-root.sh" "$line")"
    "$here/wireshark-root.sh" "$line" install wireshark
fi
if [ -z "$plugin" ]; then
    if [ -n "$line" ]; then
        "$here/wireshark-root.sh" "$line" cargo build --release --quiet -p metaroce-dissector --lib
        plugin="$repo/target/wireshark-$line/release/libmetaroce_dissector.so"
    else
        (cd "$repo" && cargo build --release --quiet -p metaroce-dissector --lib)
        plugin="$repo/target/release/libmetaroce_dissector.so"
    fi
fi

mm="$(chroot "${root:-/}" wireshark --version 2>/dev/null | head -1 | grep -oE '[0-9]+\.[0-9]+' | head -1)"
# The work folder inside the root when Wireshark runs there (as the root
# sees it: $inside).
if [ -n "$root" ]; then work="$(mktemp -d "$root/tmp/gui.XXXXXX")"; else work="$(mktemp -d)"; fi
inside="${work#"$root"}"
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT
mkdir -p "$work/plugins/$mm/epan" "$work/home/.config/wireshark"
install -m 0755 "$plugin" "$work/plugins/$mm/epan/"
install -m 0644 "$capture" "$work/capture.pcap"
# The colouring rule first, then Wireshark's own rules.
{ grep '^@' "$repo/dissector-plugin/colorfilters"; cat "$root/usr/share/wireshark/colorfilters"; } \
    > "$work/home/.config/wireshark/colorfilters"
# Packet list, details and bytes one above the other; no welcome dialogs.
cat > "$work/home/.config/wireshark/preferences" <<'EOF'
gui.layout_type: 1
gui.update.enabled: FALSE
gui.tips_on_startup: FALSE
EOF
cat > "$work/home/.config/wireshark/recent_common" <<'EOF'
gui.geometry_main_x: 0
gui.geometry_main_y: 0
gui.geometry_main_width: 1400
gui.geometry_main_height: 1400
gui.geometry_main_maximized: TRUE
privs.warn_if_elevated: FALSE
EOF
cat > "$work/home/.config/wireshark/recent" <<'EOF'
gui.geometry_main_upper_pane: 300
gui.geometry_main_lower_pane: 560
EOF
chmod -R a+rX "$work"; chmod -R a+rwX "$work/home"

# A free display: Xvfb writes its number to the given descriptor.
Xvfb -displayfd 3 -screen 0 1400x1400x24 -nolisten tcp -ac 3> "$work/display" 2>/dev/null &
pids+=($!)
for _ in $(seq 50); do [ -s "$work/display" ] && break; sleep 0.1; done
display=":$(cat "$work/display")"
[ "$display" != ":" ] || { echo "Xvfb did not start" >&2; exit 1; }
export DISPLAY="$display"

# In the root: its own mount namespace with the X socket folder bound, as
# user 65534 (unshare, sh, chroot and env exec: $! is Wireshark's pid).
run_as=()
if [ -n "$root" ]; then
    mkdir -p "$root/tmp/.X11-unix"
    run_as=(unshare --mount --propagation private sh -c \
        'mount --bind /tmp/.X11-unix "$1/tmp/.X11-unix" && r="$1" && shift && exec chroot --userspec=65534:65534 "$r" "$@"' \
        sh "$root")
elif [ "$(id -u)" -eq 0 ]; then
    run_as=(setpriv --reuid=65534 --regid=65534 --clear-groups)
fi
# -J: select the first packet the filter matches. rpcordma off: 4.4's
# RPC-over-RDMA dissector reports dissector bugs on RoCEv2 READ/WRITE in
# two-pass mode (the GUI's), which is Wireshark's own.
"${run_as[@]}" env DISPLAY="$DISPLAY" HOME="$inside/home" XDG_CONFIG_HOME="$inside/home/.config" \
    WIRESHARK_PLUGIN_DIR="$inside/plugins" QT_QPA_PLATFORM=xcb \
    wireshark -n --disable-protocol rpcordma -r "$inside/capture.pcap" -J "$select" \
    > "$work/wireshark.log" 2>&1 &
pids+=($!)
ws_pid=$!

window=""
for _ in $(seq 60); do
    window="$(xdotool search --onlyvisible --name 'capture.pcap' 2>/dev/null | head -1 || true)"
    [ -n "$window" ] && break
    sleep 0.5
done
if [ -z "$window" ]; then
    echo "the Wireshark window did not come up; its output:" >&2
    cat "$work/wireshark.log" >&2
    exit 1
fi
# The process that runs Wireshark (setpriv and env exec it: same pid).
loaded="$(grep -o '/[^ ]*libmetaroce_dissector.so' "/proc/$ws_pid/maps" | head -1 || true)"
[ -n "$loaded" ] || { echo "Wireshark runs without the plugin mapped" >&2; exit 1; }
echo "plugin loaded: $loaded"
echo "window: $(xdotool getwindowname "$window")"

sleep 2
xdotool windowactivate --sync "$window" 2>/dev/null || xdotool windowfocus "$window"
xdotool windowsize "$window" 1400 1400
sleep 1
# A click in the packet details pane (below its rows) gives it the keys
# (there is no window manager: keys go where the pointer is); Home selects
# its first row ("Frame"), four Downs pass Ethernet, IP and UDP to the
# MetaRoCE item; for the RoCEv2 analysis (a post-dissector's item comes
# last) more Downs than there are rows stop on the last one; Shift+Right
# expands the item with all its subtrees.
xdotool mousemove --window "$window" 700 840 click 1
sleep 0.5
keys=(Home Down Down Down Down shift+Right)
[ "$expand" = metaroce ] || keys=(Home Down Down Down Down Down Down Down Down Down Down Down Down shift+Right)
for key in "${keys[@]}"; do
    xdotool key "$key"
    sleep 0.3
done
sleep 1.5
import -window root "$out"

# Not blank: many distinct colours over the whole screen.
colours="$(convert "$out" -format '%k' info:)"
echo "screenshot: $out ($(identify -format '%wx%h' "$out"), $colours colours)"
[ "$colours" -ge 50 ] || { echo "the screenshot is blank ($colours colours)" >&2; exit 1; }
