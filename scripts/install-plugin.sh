#!/usr/bin/env bash
# Builds the MetaRoCE Wireshark plugin (release) and installs it for the
# installed tshark/Wireshark version.
#
#   scripts/install-plugin.sh            # ~/.local/lib/wireshark/plugins/<maj.min>/epan/
#   scripts/install-plugin.sh --system   # the global plugin folder (root)
#   scripts/install-plugin.sh --dir D    # D/<maj.min>/epan/ (use with WIRESHARK_PLUGIN_DIR=D)
#
# Needs: cargo, tshark, libwireshark-dev (pkg-config wireshark), clang and
# libclang-dev (bindgen). The plugin must be built against the headers of the
# same major.minor as the tshark that loads it: this script checks that.
#
# Note: tshark run as root loads no personal plugins and ignores
# WIRESHARK_PLUGIN_DIR. As root, use --system, or run tshark as another user.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
mode=personal
dest_base=""
while [ $# -gt 0 ]; do
    case "$1" in
        --system) mode=system ;;
        --dir) mode=dir; dest_base="${2:?--dir needs a folder}"; shift ;;
        -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
        *) echo "unknown argument: $1" >&2; exit 2 ;;
    esac
    shift
done

command -v tshark >/dev/null || { echo "tshark is not installed (apt-get install tshark)" >&2; exit 1; }
command -v pkg-config >/dev/null && pkg-config --exists wireshark \
    || { echo "libwireshark-dev is missing (apt-get install libwireshark-dev)" >&2; exit 1; }

tshark_version="$(tshark --version | head -1 | grep -oE '[0-9]+\.[0-9]+\.[0-9]+' | head -1)"
headers_version="$(pkg-config --modversion wireshark)"
tshark_mm="${tshark_version%.*}"
headers_mm="${headers_version%.*}"
if [ "$tshark_mm" != "$headers_mm" ]; then
    echo "tshark is $tshark_version but the Wireshark headers are $headers_version:" >&2
    echo "a plugin only loads into the major.minor it was built for." >&2
    exit 1
fi

echo "building metaroce-dissector (release) against Wireshark $headers_version ..."
(cd "$root" && cargo build --release -p metaroce-dissector --lib)
target_dir="$(cd "$root" && cargo metadata --format-version 1 --no-deps \
    | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')"
so="$target_dir/release/libmetaroce_dissector.so"
[ -f "$so" ] || { echo "build produced no $so" >&2; exit 1; }

case "$mode" in
    personal) dest="$HOME/.local/lib/wireshark/plugins/$tshark_mm/epan" ;;
    system)
        global="$(tshark -G folders 2>/dev/null | awk -F'\t' '/^Global Plugins:/ {print $2}')"
        [ -n "$global" ] || { echo "cannot find the global plugin folder (tshark -G folders)" >&2; exit 1; }
        dest="$global/epan" ;;
    dir) dest="$dest_base/$tshark_mm/epan" ;;
esac
mkdir -p "$dest"
install -m 0755 "$so" "$dest/libmetaroce_dissector.so"
echo "installed $dest/libmetaroce_dissector.so"

# Check that tshark loads it (a version mismatch only prints a warning and
# tshark still exits 0, so look for the plugin in the list).
check() {
    if "$@" -G plugins 2>/dev/null | grep -q '^libmetaroce_dissector.so'; then
        echo "tshark -G plugins lists the plugin"
    else
        echo "warning: tshark does not list the plugin; try: $* -G plugins" >&2
        return 1
    fi
}
if [ "$mode" = dir ]; then
    if [ "$(id -u)" = 0 ]; then
        # Root ignores WIRESHARK_PLUGIN_DIR: check as an unprivileged user.
        home="$(mktemp -d)"; chmod 777 "$home"
        check setpriv --reuid=65534 --regid=65534 --clear-groups \
            env HOME="$home" WIRESHARK_PLUGIN_DIR="$dest_base" tshark
        rmdir "$home"
    else
        check env WIRESHARK_PLUGIN_DIR="$dest_base" tshark
    fi
elif [ "$(id -u)" = 0 ] && [ "$mode" = personal ]; then
    echo "note: tshark run as root does not load personal plugins; as root use --system," >&2
    echo "      or run Wireshark/tshark as the user whose HOME holds the plugin." >&2
else
    check tshark
fi
