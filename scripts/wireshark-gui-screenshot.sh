#!/usr/bin/env bash
# Opens a MetaRoCE capture in the real Wireshark GUI (Debian's wireshark-qt)
# under Xvfb with the plugin, selects a retransmitted DATA packet, expands
# its MetaRoCE tree, and takes a screenshot of the screen.
#
#   scripts/wireshark-gui-screenshot.sh [--plugin SO] [--capture PCAP] [OUT.png]
#
# Defaults: the plugin built in release for the installed Wireshark, the
# two-host scenario's sender capture, dissector-plugin/wireshark-gui.png. The capture is
# coloured with the "Bad MetaRoCE" rule (dissector-plugin/colorfilters).
# Prints "plugin loaded: <path>" once the running Wireshark has the plugin
# mapped (read from /proc), and fails when it has not, when the window does
# not come up, or when the screenshot is blank. Runs Wireshark as user 65534
# when started as root (root loads no personal plugins).
# Needs: wireshark-qt, xvfb, xdotool, imagemagick (scripts/setup.sh).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/.." && pwd)"
plugin=""
capture="$repo/fixtures/generated/multipath_loss_sender.pcap"
while [ $# -gt 0 ]; do
    case "$1" in
        --plugin) plugin="${2:?--plugin needs a file}"; shift 2 ;;
        --capture) capture="${2:?--capture needs a file}"; shift 2 ;;
        -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
        *) break ;;
    esac
done
out="$(realpath -m "${1:-$repo/dissector-plugin/wireshark-gui.png}")"
for tool in wireshark Xvfb xdotool import convert; do
    command -v "$tool" >/dev/null || { echo "$tool is missing (scripts/setup.sh installs it)" >&2; exit 1; }
done
if [ -z "$plugin" ]; then
    (cd "$repo" && cargo build --release --quiet -p metaroce-dissector --lib)
    plugin="$repo/target/release/libmetaroce_dissector.so"
fi

mm="$(wireshark --version 2>/dev/null | head -1 | grep -oE '[0-9]+\.[0-9]+' | head -1)"
work="$(mktemp -d)"
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
{ grep '^@' "$repo/dissector-plugin/colorfilters"; cat /usr/share/wireshark/colorfilters; } \
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

run_as=()
[ "$(id -u)" -ne 0 ] || run_as=(setpriv --reuid=65534 --regid=65534 --clear-groups)
# -J: select the first retransmitted DATA packet.
"${run_as[@]}" env HOME="$work/home" XDG_CONFIG_HOME="$work/home/.config" \
    WIRESHARK_PLUGIN_DIR="$work/plugins" QT_QPA_PLATFORM=xcb \
    wireshark -n -r "$work/capture.pcap" -J "metaroce.analysis.retransmission && metaroce.type == 0" \
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
# MetaRoCE item, and Shift+Right expands it with all its subtrees.
xdotool mousemove --window "$window" 700 840 click 1
sleep 0.5
for key in Home Down Down Down Down shift+Right; do
    xdotool key "$key"
    sleep 0.3
done
sleep 1.5
import -window root "$out"

# Not blank: many distinct colours over the whole screen.
colours="$(convert "$out" -format '%k' info:)"
echo "screenshot: $out ($(identify -format '%wx%h' "$out"), $colours colours)"
[ "$colours" -ge 50 ] || { echo "the screenshot is blank ($colours colours)" >&2; exit 1; }
