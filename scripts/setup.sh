#!/usr/bin/env bash
# Installs what a fresh Debian (bookworm) machine lacks to build and test
# the toolkit: Wireshark/tshark with its headers (the plugin's bindgen),
# libpcap (live capture), clang (bindgen), tcpdump, tmux (TUI tests),
# nftables and iproute2 (network-namespace tests), debootstrap (Debian roots
# with Wireshark 4.4/4.6 for the plugin), the Wireshark GUI with Xvfb,
# xdotool and imagemagick (the plugin's GUI test), Chromium (the HTML
# report's browser test), valgrind and linux-perf (the benchmarks'
# instruction counts and CPU time), Prometheus and curl (a real server
# scrapes metaroce-top --metrics in tui/tests/prometheus.rs), Java 17 and a Python
# virtual environment with PySpark and pytest pinned (cluster/: the Spark
# post-mortem job), and the Rust components.
# Idempotent: installs only what is missing. Needs root (or sudo) for apt.
set -euo pipefail

packages=(tshark libwireshark-dev wireshark-dev libpcap-dev clang libclang-dev
          pkg-config tcpdump tmux nftables iproute2 util-linux debootstrap
          wireshark-qt xvfb xdotool imagemagick chromium openjdk-17-jre-headless python3-venv
          valgrind linux-perf prometheus curl)
missing=()
for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    echo "setup: installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    # tshark asks whether non-root users may capture; answer no.
    echo "wireshark-common wireshark-common/install-setuid boolean false" | $sudo debconf-set-selections
    $sudo apt-get update -q
    $sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

if ! command -v cargo >/dev/null; then
    echo "setup: cargo is missing: install Rust (rustup) first" >&2
    exit 1
fi
for component in rustfmt clippy; do
    rustup component list --installed 2>/dev/null | grep -q "^$component" || rustup component add "$component"
done

# The Spark job's Python packages, pinned, in a virtual environment outside
# the repository (cluster/postmortem.sh and scripts/run.sh use it).
venv="${METAROCE_CLUSTER_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/metaroce-cluster-venv}"
requirements="$(dirname "$0")/../cluster/requirements.txt"
pinned="$(grep -v '^#' "$requirements" | sort)"
if [ ! -x "$venv/bin/python" ] ||
    [ -n "$(comm -23 <(echo "$pinned") <("$venv/bin/python" -m pip freeze | sort))" ]; then
    echo "setup: installing $(echo $pinned) in $venv"
    python3 -m venv "$venv"
    "$venv/bin/python" -m pip install -q -r "$requirements"
fi
