#!/usr/bin/env bash
# A minimal Debian root file system holding one Wireshark line, to build the
# plugin against its headers and to run its tshark:
#   4.4: Debian 13 (trixie)      4.6: Debian unstable (sid)
#
#   scripts/wireshark-root.sh 4.4                 make the root (or reuse it), print its path
#   scripts/wireshark-root.sh 4.4 run [--plugin SO] CMD [ARGS...]
#        run CMD (tshark, editcap...) inside the root as user 65534, with the
#        current directory bound at /work (relative paths work) and, with
#        --plugin, SO copied into a private plugin folder
#        (WIRESHARK_PLUGIN_DIR=<folder>, which holds X.Y/epan/SO)
#   scripts/wireshark-root.sh 4.4 cargo ARGS...   run cargo with the plugin built against
#        the root: METAROCE_WIRESHARK_ROOT=<root> (read by epan-sys and by the
#        plugin's tests, which then run the root's tshark) and a target folder
#        of the line's own, target/wireshark-4.4, so lines do not rebuild each other
#        e.g. scripts/wireshark-root.sh 4.4 cargo test -p metaroce-dissector
#   scripts/wireshark-root.sh 4.4 install PKG...  add Debian packages to the root (apt)
#
# The root is made with `debootstrap --variant=minbase` plus tshark,
# libwireshark-dev and the Wireshark GUI (package `wireshark`, without
# recommends: the GUI test runs it on the host's Xvfb), in $METAROCE_CACHE (default $XDG_CACHE_HOME/metaroce, or
# /var/cache/metaroce for root), outside the repository. It is made in a
# temporary folder and renamed into place when complete, under a lock, so an
# interrupted run leaves no half root and parallel runs make it once.
# Needs root (debootstrap, chroot) and Debian's package registry;
# METAROCE_DEBIAN_MIRROR overrides debootstrap's default mirror.
set -euo pipefail

usage() { sed -n '2,25p' "$0" >&2; exit 64; }
line="${1:-}"
case "$line" in
    4.4) suite=trixie ;;
    4.6) suite=sid ;;
    *) usage ;;
esac
shift
action="${1:-path}"
[ $# -eq 0 ] || shift

if [ "$(id -u)" -ne 0 ]; then
    echo "wireshark-root.sh: needs root (debootstrap and chroot)" >&2
    exit 1
fi
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/.." && pwd)"
cache="${METAROCE_CACHE:-${XDG_CACHE_HOME:-/var/cache}/metaroce}"
root="$cache/wireshark-$line"

# Runs a command as root inside the root file system $1, with /proc mounted
# in a mount namespace of its own (gone when the command ends).
in_root() {
    local dir="$1"; shift
    unshare --mount --propagation private sh -c '
        mount -t proc proc "$1/proc" && d="$1" && shift && exec chroot "$d" "$@"' \
        sh "$dir" env DEBIAN_FRONTEND=noninteractive "$@"
}

# Makes $root unless it is there. A root is complete once renamed into place.
make_root() {
    [ -x "$root/usr/bin/tshark" ] && return 0
    mkdir -p "$cache"
    exec 9> "$cache/wireshark-$line.lock"
    flock 9
    [ -x "$root/usr/bin/tshark" ] && return 0
    command -v debootstrap >/dev/null || {
        echo "wireshark-root.sh: debootstrap is missing (scripts/setup.sh installs it)" >&2
        exit 1
    }
    local partial="$root.partial"
    rm -rf "$partial"
    echo "wireshark-root.sh: making the Wireshark $line root ($suite) in $root ..." >&2
    # Two steps: the base system, then the packages with apt inside it
    # (debootstrap's own --include cannot configure sid's optional falco
    # library). tshark asks whether non-root users may capture: no.
    if ! { debootstrap --variant=minbase "$suite" "$partial" \
                ${METAROCE_DEBIAN_MIRROR:+"$METAROCE_DEBIAN_MIRROR"} &&
           in_root "$partial" sh -c '
                echo "wireshark-common wireshark-common/install-setuid boolean false" \
                    | debconf-set-selections &&
                apt-get install -y -q --no-install-recommends tshark libwireshark-dev wireshark &&
                apt-get clean'
         } > "$cache/wireshark-$line.log" 2>&1; then
        echo "wireshark-root.sh: making the $suite root failed (no network, Debian's package" >&2
        echo "registry unreachable, or a package failed); last lines of $cache/wireshark-$line.log:" >&2
        tail -n 15 "$cache/wireshark-$line.log" >&2
        rm -rf "$partial"
        exit 1
    fi
    local got
    got="$(chroot "$partial" tshark --version 2>/dev/null | head -1 \
        | grep -oE '[0-9]+\.[0-9]+' | head -1 || true)"
    if [ "$got" != "$line" ]; then
        echo "wireshark-root.sh: $suite ships Wireshark '$got', not $line" >&2
        rm -rf "$partial"
        exit 1
    fi
    mv -T "$partial" "$root"
}

make_root
case "$action" in
path)
    echo "$root"
    ;;
install)
    [ $# -gt 0 ] || usage
    missing=()
    for p in "$@"; do
        chroot "$root" dpkg-query -W -f='${Status}' "$p" 2>/dev/null \
            | grep -q "install ok installed" || missing+=("$p")
    done
    if ((${#missing[@]})); then
        # The registry's Release files may be older than their Valid-Until.
        in_root "$root" sh -c 'apt-get -o Acquire::Check-Valid-Until=false update -q \
            && apt-get install -y -q --no-install-recommends "$@" && apt-get clean' \
            sh "${missing[@]}" >&2
    fi
    ;;
cargo)
    cd "$repo"
    METAROCE_WIRESHARK_ROOT="$root" CARGO_TARGET_DIR="$repo/target/wireshark-$line" \
        exec cargo "$@"
    ;;
run)
    plugin=""
    if [ "${1:-}" = --plugin ]; then
        plugin="${2:?--plugin needs the plugin file}"
        shift 2
    fi
    [ $# -gt 0 ] || usage
    # A private folder in the root for the plugin and an empty HOME, readable
    # by user 65534 (tshark run as root ignores WIRESHARK_PLUGIN_DIR).
    private="$(mktemp -d "$root/tmp/run.XXXXXX")"
    trap 'rm -rf "$private"' EXIT
    mkdir -p "$private/plugins/$line/epan" "$private/home" "$root/work"
    [ -z "$plugin" ] || install -m 0755 "$plugin" "$private/plugins/$line/epan/"
    chmod -R a+rX "$private"; chmod 777 "$private/home"
    inside="/tmp/$(basename "$private")"
    # A mount namespace of its own: the bind of the current directory is
    # gone when the command ends.
    unshare --mount --propagation private sh -c '
        mount --bind "$1" "$2/work" && shift 2 && exec "$@"' \
        sh "$PWD" "$root" \
        chroot --userspec=65534:65534 "$root" \
        env HOME="$inside/home" WIRESHARK_PLUGIN_DIR="$inside/plugins" \
        sh -c 'cd /work && exec "$@"' sh "$@"
    ;;
*)
    usage
    ;;
esac
