#!/usr/bin/env bash
# Installs what apgas needs to build and test on Debian 12 (as root). Safe to run again.
set -euo pipefail
packages=(build-essential cmake ninja-build pkg-config git
          libboost-context-dev libtbb-dev libgtest-dev libgmock-dev libbenchmark-dev
          libopenmpi-dev openmpi-bin libfabric-dev libfabric-bin)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq "${missing[@]}"
fi
