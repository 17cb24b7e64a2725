#!/usr/bin/env bash
# Builds the MetaRoCE Wireshark plugin (release) for the Wireshark you have
# and installs it into that version's plugin folder (plugins/X.Y/epan/).
#
#   scripts/install-plugin.sh            # your personal plugin folder (tshark -G folders)
#   scripts/install-plugin.sh --system   # the global plugin folder (root)
#   scripts/install-plugin.sh --dir D    # D/X.Y/epan/ (use with WIRESHARK_PLUGIN_DIR=D)
#   scripts/install-plugin.sh --wireshark 4.4|4.6 [--dir D]
#        build for another Wireshark line, against a Debian root made by
#        scripts/wireshark-root.sh (needs root), e.g. to copy the plugin to a
#        machine that has that line; default D: target/wireshark-X.Y/plugins
#   --colors        also add the "Bad MetaRoCE" colouring rule
#                   (dissector-plugin/colorfilters) to your colouring rules
#   --colors-only   only add the colouring rule
#
# Needs: cargo, tshark, libwireshark-dev (pkg-config wireshark), clang and
# libclang-dev (bindgen). A plugin loads only into the Wireshark major.minor
# it was built for: the script refuses when tshark and the headers differ.
# The colouring rule goes first in your personal colorfilters file (the first
# matching rule colours a packet); your own rules are kept as they are, and a
# rule already named "Bad MetaRoCE" (even disabled) is left alone.
#
# Note: tshark run as root loads no personal plugins and ignores
# WIRESHARK_PLUGIN_DIR. As root, use --system, or run tshark as another user.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/.." && pwd)"
mode=personal
dest_base=""
line=""
colors=no
build=yes
while [ $# -gt 0 ]; do
    case "$1" in
        --system) mode=system ;;
        --dir) mode=dir; dest_base="${2:?--dir needs a folder}"; shift ;;
        --wireshark) line="${2:?--wireshark needs 4.4 or 4.6}"; shift ;;
        --colors) colors=yes ;;
        --colors-only) colors=yes; build=no ;;
        -h|--help) sed -n '2,24p' "$0"; exit 0 ;;
        *) echo "unknown argument: $1" >&2; exit 2 ;;
    esac
    shift
done

command -v tshark >/dev/null || { echo "tshark is not installed (apt-get install tshark)" >&2; exit 1; }
folder() { # a folder named by `tshark -G folders`
    tshark -G folders 2>/dev/null | awk -F'\t' -v name="$1:" '$1 ~ "^" name { print $2; exit }'
}

# Puts the "Bad MetaRoCE" rule first in the personal colorfilters file.
add_colors() {
    local conf file rule tmp
    conf="$(folder "Personal configuration")"
    [ -n "$conf" ] || { echo "cannot find your configuration folder (tshark -G folders)" >&2; exit 1; }
    file="$conf/colorfilters"
    rule="$(grep '^@Bad MetaRoCE@' "$repo/dissector-plugin/colorfilters")"
    if [ -f "$file" ] && grep -q '^!\?@Bad MetaRoCE@' "$file"; then
        echo "colouring rule: $file already has \"Bad MetaRoCE\" (left as it is)"
        return
    fi
    mkdir -p "$conf"
    tmp="$(mktemp "$file.XXXXXX")"
    if [ -f "$file" ]; then
        { printf '%s\n' "$rule"; cat "$file"; } > "$tmp"
    else
        # No personal rules yet: Wireshark was using the global ones; keep
        # them after the new rule.
        { printf '%s\n' "$rule"; cat "$(folder "Global configuration")/colorfilters" 2>/dev/null || true; } > "$tmp"
    fi
    chmod 644 "$tmp"
    mv "$tmp" "$file"
    echo "colouring rule: \"Bad MetaRoCE\" added first in $file"
}

if [ "$build" = no ]; then
    add_colors
    exit 0
fi

if [ -n "$line" ]; then
    # Another line, built against its Debian root.
    case "$line" in 4.4|4.6) ;; *) echo "--wireshark takes 4.4 or 4.6" >&2; exit 2 ;; esac
    [ "$mode" != system ] || { echo "--system installs for the installed Wireshark; with --wireshark use --dir" >&2; exit 2; }
    echo "building metaroce-dissector (release) against Wireshark $line (Debian root) ..."
    "$here/wireshark-root.sh" "$line" cargo build --release -p metaroce-dissector --lib
    so="$repo/target/wireshark-$line/release/libmetaroce_dissector.so"
    dest_base="${dest_base:-$repo/target/wireshark-$line/plugins}"
    dest="$dest_base/$line/epan"
    mkdir -p "$dest"
    install -m 0755 "$so" "$dest/libmetaroce_dissector.so"
    echo "installed $dest/libmetaroce_dissector.so"
    if "$here/wireshark-root.sh" "$line" run --plugin "$so" tshark -G plugins 2>/dev/null \
            | grep -q '^libmetaroce_dissector.so'; then
        echo "tshark $line (in its root) lists the plugin"
    else
        echo "tshark $line (in its root) does not list the plugin" >&2
        exit 1
    fi
    [ "$colors" = no ] || add_colors
    exit 0
fi

command -v pkg-config >/dev/null && pkg-config --exists wireshark \
    || { echo "libwireshark-dev is missing (apt-get install libwireshark-dev)" >&2; exit 1; }
tshark_version="$(tshark --version | head -1 | grep -oE '[0-9]+\.[0-9]+\.[0-9]+' | head -1)"
headers_version="$(pkg-config --modversion wireshark)"
tshark_mm="${tshark_version%.*}"
headers_mm="${headers_version%.*}"
if [ "$tshark_mm" != "$headers_mm" ]; then
    echo "tshark is $tshark_version but the Wireshark headers (pkg-config) are $headers_version:" >&2
    echo "a plugin only loads into the major.minor it was built for. Install the headers" >&2
    echo "of your Wireshark (libwireshark-dev $tshark_mm), or use --wireshark 4.4|4.6." >&2
    exit 1
fi

echo "building metaroce-dissector (release) against Wireshark $headers_version ..."
(cd "$repo" && cargo build --release -p metaroce-dissector --lib)
target_dir="$(cd "$repo" && cargo metadata --format-version 1 --no-deps \
    | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')"
so="$target_dir/release/libmetaroce_dissector.so"
[ -f "$so" ] || { echo "build produced no $so" >&2; exit 1; }

case "$mode" in
    personal) dest="$(folder "Personal Plugins")/epan" ;;
    system) dest="$(folder "Global Plugins")/epan" ;;
    dir) dest="$dest_base/$tshark_mm/epan" ;;
esac
[ "$dest" != /epan ] || { echo "cannot find the plugin folder (tshark -G folders)" >&2; exit 1; }
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
[ "$colors" = no ] || add_colors
