#!/usr/bin/env bash
# kernel-resources.sh: what nvcc makes of every sample's kernels, ours beside the native CUDA baseline's, with no GPU.
#
#   scripts/kernel-resources.sh [-a ARCH] [--only "cp sgemm ..."]
#
# Compiles each samples/parboil and samples/x10cuda program <b>.cpp (apgas kernel closures) and <b>_native.cu with
# the flags the build gives them (-O3; --use_fast_math or -fmad=false where the sample's CMakeLists.txt asks) for
# ARCH (default sm_90) and prints one row per kernel entry: registers, stack frame (local memory), spilled bytes,
# static shared memory and barriers, as ptxas reports them. A kernel closure's shared arrays are dynamic shared
# memory, not counted there (only what the library declares statically, e.g. a block reduce's scratch). Use it
# after changing a kernel: a stack frame or spills where the native kernel has none, or many more registers, is a
# slower GPU kernel found without a GPU. Needs nvcc (NVCC, else CUDA_HOME/bin/nvcc, else /usr/local/cuda/bin/nvcc),
# c++filt and python3.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
arch=sm_90
only=""
usage="usage: $0 [-a ARCH] [--only \"names\"]"
while [[ $# -gt 0 ]]; do
  case $1 in
    -a) [[ $# -ge 2 ]] || { echo "kernel-resources.sh: -a needs an architecture (e.g. sm_90); $usage" >&2; exit 2; }
        arch=$2; shift 2 ;;
    --only) [[ $# -ge 2 ]] || { echo "kernel-resources.sh: --only needs sample names; $usage" >&2; exit 2; }
            only=$2; shift 2 ;;
    -h|--help) echo "$usage"; exit 0 ;;
    *) echo "kernel-resources.sh: unknown option '$1'; $usage" >&2; exit 2 ;;
  esac
done
# The samples there are: the folders with both <b>.cpp and <b>_native.cu; --only names some of them.
known=()
for dir in "$root"/samples/parboil/*/ "$root"/samples/x10cuda/*/; do
  b=$(basename "$dir")
  [[ -f $dir/$b.cpp && -f $dir/${b}_native.cu ]] && known+=("$b")
done
read -ra names <<< "$only"
for b in ${names[@]+"${names[@]}"}; do
  [[ " ${known[*]} " == *" $b "* ]] ||
    { echo "kernel-resources.sh: --only: unknown sample '$b' (known: ${known[*]})" >&2; exit 2; }
done
nvcc=${NVCC:-${CUDA_HOME:-/usr/local/cuda}/bin/nvcc}
[[ -x $nvcc ]] || { echo "kernel-resources.sh: no nvcc at $nvcc (set NVCC or CUDA_HOME)" >&2; exit 2; }
inc=()
for d in samples/parboil/common samples/parboil/mri_common samples/x10cuda/common apgas/include serialization/include \
         transport/include cuda_place/include; do inc+=("-I$root/$d"); done
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
echo "| sample | file | kernel | registers | stack frame | spills (stores/loads) | static shared | barriers |"
echo "|---|---|---|---|---|---|---|---|"
for dir in "$root"/samples/parboil/*/ "$root"/samples/x10cuda/*/; do
  b=$(basename "$dir")
  [[ -f $dir/$b.cpp && -f $dir/${b}_native.cu ]] || continue
  [[ -z $only || " $only " == *" $b "* ]] || continue
  # The options of the folder's parboil_programs(<b> [FAST_MATH]) or x10cuda_programs(<b> [EXACT]) call.
  call=$(grep -E '^(parboil|x10cuda)_programs\(' "$dir/CMakeLists.txt" || true)
  fast=()
  [[ $call == *FAST_MATH* ]] && fast+=(--use_fast_math)
  [[ $call == *EXACT* ]] && fast+=(-fmad=false)
  for src in "$dir/$b.cpp" "$dir/${b}_native.cu"; do
    "$nvcc" "${inc[@]}" -O3 -DNDEBUG -arch="$arch" -std=c++20 --extended-lambda --expt-relaxed-constexpr \
      "${fast[@]}" -Xptxas -v -x cu -c "$src" -o "$out/k.o" > "$out/log" 2>&1 || { cat "$out/log" >&2; exit 1; }
    python3 - "$b" "$(basename "$src")" "$out/log" <<'PY'
import re, subprocess, sys
sample, file, log = sys.argv[1:]
name = frame = None
own = False  # whether the figures that follow are the entry's own (not those of a function it calls)
for line in open(log):
    if m := re.search(r"Compiling entry function '([^']+)'", line):
        mangled, frame = m[1], None
        name = subprocess.run(["c++filt", mangled], capture_output=True, text=True).stdout.strip()
    elif m := re.search(r"Function properties for (\S+)", line):
        own = name is not None and m[1] == mangled
    elif own and (m := re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads", line)):
        frame, own = m.groups(), False
    elif name and frame and (m := re.search(r"Used (\d+) registers, used (\d+) barriers(?:, (\d+) bytes smem)?", line)):
        if "start_compute_places" in name:  # parboil::start_compute_places' empty warm-up kernel
            name = None
            continue
        if "entry_direct" in name or "entry_spilled" in name:  # entry_direct<kind, F(...)::{lambda(...)#N}>(...)
            head = name.split(">(")[0]
            fn = re.findall(r"([A-Za-z_]\w*)\((?:[^()]|\([^()]*\))*\)(?:::\{lambda|\s+const::\{lambda)", head)
            lam = re.findall(r"\{lambda\(((?:[^()]|\([^()]*\))*)\)#(\d+)\}", head)
            args = ", ".join(re.sub(r"<.*", "", a.strip()).split("::")[-1].replace("basic_shared_span", "shared_span")
                             for a in re.split(r",\s*(?![^<>]*>)", lam[-1][0])) if lam else ""
            kernel = (fn[-1] if fn else "?") + (f": lambda({args}) #{lam[-1][1]}" if lam else "")
        else:  # (anonymous namespace)::k(args)
            kernel = re.sub(r"\(.*", "", re.sub(r"^\(anonymous namespace\)::", "", name)).split("::")[-1]
        regs, bars, smem = m.groups()
        print(f"| {sample} | {file} | {kernel} | {regs} | {frame[0]} | {frame[1]}/{frame[2]} | {smem or ''} | {bars} |")
        name = None
PY
  done
done
