#!/usr/bin/env bash
# Installs everything apgas needs to build and run its whole test suite on Debian 12 (bookworm): compiler, CMake,
# Ninja, Boost.Context, GoogleTest, oneTBB (benchmarks), Open MPI and libfabric (the coming
# transports and their multi-process tests). Run as root, or as a user with sudo. Does nothing when all is there.
#
#   bash scripts/install-deps.sh        (no arguments; -h or --help prints this)
set -euo pipefail
case "${1-}" in
  -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "${BASH_SOURCE[0]}"; exit 0 ;;
esac
if [[ $# -gt 0 ]]; then
  echo "install-deps: unexpected argument '$1' (it takes none; -h for help)" >&2
  exit 2
fi
packages=(build-essential cmake ninja-build pkg-config git
          libboost-context-dev libtbb-dev libgtest-dev libgmock-dev
          libopenmpi-dev openmpi-bin libfabric-dev libfabric-bin)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages are installed"
  exit 0
fi
sudo=()
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "install-deps: run as root (or install sudo) to install: ${missing[*]}" >&2; exit 1; }
  sudo=(sudo)
fi
echo "install-deps: installing ${missing[*]}"
"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq
"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"
