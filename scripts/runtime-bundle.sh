#!/usr/bin/env bash
# runtime-bundle.sh: the shared libraries a build folder's programs need at run time, gathered into one folder, so
# that the build can run on a machine with the NVIDIA driver but without Boost, Open MPI, libfabric or oneTBB (a
# lent GPU machine, a container): build here, carry the build folder and the bundle, install the bundle there.
#
#   scripts/runtime-bundle.sh BUILD_DIR OUT_DIR     gather: OUT_DIR/root mirrors / (libraries, Open MPI's
#                                                   launcher, components and help files)
#   scripts/runtime-bundle.sh --install OUT_DIR     there: copy OUT_DIR/root into / without replacing any file
#                                                   that exists (root needed), then run ldconfig
#
# Gathered: every library the ELF files of BUILD_DIR load (ldd), Open MPI's programs (orterun as mpirun/mpiexec,
# orted), its components and their libraries, its help and configuration files. Left out: the C library, libstdc++
# and libgcc_s (the machine's own, usually newer, serve) and the CUDA driver (the machine's own, loaded at run time).
# The build folder itself must sit at the path where it was built (ctest files and rpaths hold absolute paths).
set -euo pipefail

if [[ "${1:-}" == "--install" ]]; then
  [[ -n "${2:-}" ]] || { echo "runtime-bundle.sh: --install needs the bundle folder (OUT_DIR of a gather)" >&2; exit 2; }
  src="$2/root"
  [[ -d "$src" ]] || { echo "runtime-bundle.sh: no $src" >&2; exit 2; }
  cp -a --no-clobber "$src"/. /
  ldconfig 2> /dev/null || true
  echo "runtime-bundle: installed $(find "$src" -type f | wc -l) files (existing ones kept)"
  exit 0
fi

if [[ $# -ne 2 ]]; then
  echo "usage: runtime-bundle.sh BUILD_DIR OUT_DIR, or runtime-bundle.sh --install OUT_DIR (got $# arguments)" >&2
  exit 2
fi
[[ -d "$1" ]] || { echo "runtime-bundle.sh: build folder '$1' does not exist (expected a built folder)" >&2; exit 2; }
build="$(cd "$1" && pwd)"  # absolute, once: compared with the absolute paths ldd prints
out="$2"
rm -rf "$out/root"
mkdir -p "$out/root"

skip='/(libc|libm|libpthread|libdl|librt|libresolv|libutil|ld-linux-x86-64|libstdc\+\+|libgcc_s|libcuda|libnvidia-[a-z-]*)\.so'
elves=()
while IFS= read -r f; do  # ELF files by their magic number (no need for file(1))
  [[ "$(head -c4 -- "$f" 2> /dev/null | tr -d '\0')" == $'\177ELF' ]] && elves+=("$f")
done < <(find "$build" -type f -perm -u+x -o -type f -name '*.so*')

# Open MPI's launcher and where it lives, found on this machine (override with OMPI_BINDIR / OMPI_LIBDIR): the
# folder of its libraries holds its components (openmpi/), its prefix the help and configuration files.
orterun="$(command -v orterun 2> /dev/null || true)"
bindir="${OMPI_BINDIR:-}"
if [[ -z "$bindir" && -n "$orterun" ]]; then
  bindir="$(dirname "$(readlink -f "$orterun")")"
fi
libdir="${OMPI_LIBDIR:-}"
if [[ -z "$libdir" && -n "$bindir" ]]; then
  rte="$(ldd "$bindir/orterun" 2> /dev/null | sed -n 's/.*=> \(\/[^ ]*libopen-rte[^ ]*\) .*/\1/p' | head -1 || true)"
  [[ -n "$rte" ]] && libdir="$(dirname "$(readlink -f "$rte")")"
fi
ompi="${libdir:+$libdir/openmpi}"
if [[ -n "$ompi" && -d "$ompi" && -x "$bindir/orted" ]]; then
  prefix="$(dirname "$bindir")"
  while IFS= read -r f; do elves+=("$f"); done < <(find "$ompi" -name '*.so*' -type f)
  elves+=("$bindir/orted" "$bindir/orterun")
  mkdir -p "$out/root$bindir" "$out/root$libdir"
  cp -a "$ompi" "$out/root$libdir/"
  cp -a "$bindir/orted" "$bindir/orterun" "$out/root$bindir/"
  ln -sf orterun "$out/root$bindir/mpirun"
  ln -sf orterun "$out/root$bindir/mpiexec"
  for d in "$prefix/share/openmpi" "${prefix%/usr}/etc/openmpi" "$prefix/etc/openmpi"; do
    [[ -d "$d" ]] && mkdir -p "$out/root$(dirname "$d")" && cp -a "$d" "$out/root$(dirname "$d")/"
  done
else
  echo "runtime-bundle: no Open MPI launcher found (orterun on PATH, or OMPI_BINDIR / OMPI_LIBDIR): Open MPI's" \
    "programs and components left out, the build's libraries gathered" >&2
fi

declare -A seen=()
for f in "${elves[@]}"; do
  while read -r lib; do
    [[ -n "$lib" && -z "${seen[$lib]:-}" ]] || continue
    seen[$lib]=1
    [[ "$lib" =~ $skip ]] && continue
    [[ "$lib" == "$build"/* ]] && continue  # the build's own libraries travel with it
    dir="$(readlink -f "$(dirname "$lib")")"  # /lib -> /usr/lib where / is merged: one real folder per library
    mkdir -p "$out/root$dir"
    cp -L "$lib" "$out/root$dir/$(basename "$lib")"
  done < <(ldd "$f" 2> /dev/null | sed -n 's/.*=> \(\/[^ ]*\) .*/\1/p')
done
echo "runtime-bundle: $(find "$out/root" -type f | wc -l) files, $(du -sh "$out/root" | cut -f1) in $out/root"
