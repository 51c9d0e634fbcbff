#!/usr/bin/env bash
# parboil_table.sh: the Parboil programs (and samples/x10cuda's) against their baselines, measured side by side.
#
#   samples/parboil/parboil_table.sh [-b BUILD_DIR] [-r REPEATS] [--only "B..."] [--sizes "SIZE..."] [--cpu|--gpu]
#                                    [--quick]
#
#   -b DIR       the build tree (default: build/release under the repository root)
#   -r R         runs per cell, interleaved across the columns of a row; the median is shown (default 3); a pair
#                of columns (apgas-cpu and openmp, apgas-gpu and native) whose median is under 0.2 s gets 5R runs
#   --only       the benchmarks to run (default: every one built: cp mri_q mri_fhd rpes tpacf sad sgemm stencil,
#                then x10cuda's blackscholes fdtd3d matmul)
#   --sizes      the generated input sizes (default "default"; a program that lacks one is skipped for it)
#   --cpu        the CPU table even where GPUs exist
#   --gpu        only the GPU columns (where GPUs exist; scripts/gpu-check.sh uses it)
#   --quick      one run per cell, no host-place columns (a first look, not figures to quote)
#
# Columns, per benchmark and size (seconds: the programs' own time_s, computation only; --no-check):
#   CPU: apgas on this host's CPU place (--cpu, APGAS_NTHREADS=C) and the OpenMP baseline (OMP_NUM_THREADS=C),
#        C = cores of this machine; then apgas on 1, 2 and 3 host places (mpirun, C/N workers each).
#   GPU (where nvidia-smi lists GPUs): apgas on one GPU place (APGAS_GPUS=0) and the native CUDA baseline.
# Ratio lines (ours ÷ anchor; above 1: ours slower): `ratio parboil_<b>_omp`, `ratio parboil_<b>_native`
# (x10cuda_<b>_... for samples/x10cuda), and the lines-of-code table of each apgas version against its native CUDA
# version (non-blank lines that are not only a comment; the shared <b>.hpp and common/ are not counted on either
# side), with `ratio parboil_<b>_loc`.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
build="$root/build/release"
repeats=3
only=""
sizes="default"
force_cpu=0
gpu_only=0
quick=0
usage() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "${BASH_SOURCE[0]}"; }
# need <option> <what> <arguments left> <next argument>: a usage error unless the option has its value.
need() { (( $3 >= 2 )) && [[ -n "$4" ]] || { echo "parboil_table.sh: $1 needs $2, none given (-h for help)" >&2; exit 2; }; }
while [[ $# -gt 0 ]]; do
  case "$1" in
    -b) need -b "a build folder" $# "${2:-}"; build="$2"; shift 2 ;;
    -r) need -r "a number of runs" $# "${2:-}"; repeats="$2"; shift 2 ;;
    --only) need --only "benchmark names" $# "${2:-}"; only="$2"; shift 2 ;;
    --sizes) need --sizes "size names" $# "${2:-}"; sizes="$2"; shift 2 ;;
    --cpu) force_cpu=1; shift ;;
    --gpu) gpu_only=1; shift ;;
    --quick) quick=1; repeats=1; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "parboil_table.sh: unknown option '$1'" >&2; usage >&2; exit 2 ;;
  esac
done
[[ "$repeats" =~ ^[1-9][0-9]*$ ]] || { echo "parboil_table.sh: -r '$repeats' is not a positive number" >&2; exit 2; }
[[ -d "$build" ]] || { echo "parboil_table.sh: no build folder '$build'" >&2; exit 2; }
build="$(cd "$build" && pwd)"
[[ $force_cpu -eq 1 && $gpu_only -eq 1 ]] && { echo "parboil_table.sh: --cpu and --gpu exclude each other" >&2; exit 2; }

cores=$(nproc)
gpus=0
if [[ $force_cpu -eq 0 ]] && command -v nvidia-smi > /dev/null 2>&1; then
  gpus=$(nvidia-smi -L 2> /dev/null | grep -c '^GPU' || true)
fi
[[ $gpu_only -eq 1 && $gpus -eq 0 ]] && { echo "parboil_table.sh: --gpu, but nvidia-smi lists no GPU here" >&2; exit 2; }
mpi=(mpirun --oversubscribe --bind-to none)  # (Open MPI binds 1 or 2 processes to one core each by default: a 1-host
                                             # run's workers would share one core)
[[ $(id -u) -eq 0 ]] && mpi+=(--allow-run-as-root)
have_mpi=0
command -v mpirun > /dev/null 2>&1 && have_mpi=1

# bench <name>: sets suite, folder, exe (the apgas program), native, omp (the baselines), src and native_src (the
# sources) for it (variables, not words of one line: paths with spaces work).
bench() {
  local b=$1 bin="$build/samples/parboil/$1" prefix=apgas_parboil
  suite=parboil
  folder="$root/samples/parboil/$1"
  case "$b" in
    blackscholes|fdtd3d|matmul) suite=x10cuda; folder="$root/samples/x10cuda/$b"; bin="$build/samples/x10cuda/$b"; prefix=apgas_x10cuda ;;
  esac
  exe="$bin/${prefix}_$b"
  native="$bin/${suite}_${b}_native"
  omp="$bin/${suite}_${b}_omp"
  src="$folder/$b.cpp"
  native_src="$folder/${b}_native.cu"
}
all="cp mri_q mri_fhd rpes tpacf sad sgemm stencil blackscholes fdtd3d matmul"
[[ -n "$only" ]] || only="$all"

# time_of <command...>: the program's time_s, or "fail"
time_of() {
  local out
  if out=$("$@" 2> /dev/null | tail -1) && [[ "$out" =~ time_s=([0-9.]+) ]]; then
    echo "${BASH_REMATCH[1]}"
  else
    echo fail
  fi
}
median() {
  printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { if (NR == 0 || v[1] == "fail") print "fail"; else print v[int((NR + 1) / 2)] }'
}
short() {  # short <times...>: whether their median is under 0.2 s
  awk -v t="$(median "$@")" 'BEGIN { exit !(t != "fail" && t + 0 < 0.2) }'
}
ratio_line() {  # ratio_line <name> <ours> <anchor>
  [[ "$2" == fail || "$3" == fail ]] && return
  awk -v n="$1" -v o="$2" -v a="$3" 'BEGIN { if (a > 0) printf "ratio %s %.3f (ours %s s, anchor %s s)\n", n, o / a, o, a }'
}
# loc <file>: non-blank lines that are not only a comment (// lines, and /* */ blocks)
loc() {
  awk '
    { line = $0 }
    incomment { if (index(line, "*/")) { line = substr(line, index(line, "*/") + 2); incomment = 0 } else next }
    { while (match(line, /\/\*/)) {
        rest = substr(line, RSTART + 2)
        if (index(rest, "*/")) { line = substr(line, 1, RSTART - 1) substr(rest, index(rest, "*/") + 2) }
        else { line = substr(line, 1, RSTART - 1); incomment = 1 }
      }
      sub(/^[ \t]*\/\/.*/, "", line)
      if (line ~ /[^ \t\r]/) n++ }
    END { print n + 0 }' "$1"
}

model=$(lscpu 2> /dev/null | sed -n 's/^Model name: *//p' | head -1)
if [[ $gpus -gt 0 ]]; then
  echo "machine: $model, $cores cores; $gpus x $(nvidia-smi --query-gpu=name --format=csv,noheader 2> /dev/null | head -1)"
else
  echo "machine: $model, $cores cores, no GPU"
fi
echo "seconds (time_s, computation only), median of $repeats interleaved runs ($((5 * repeats)) for a pair under 0.2 s); CPU columns: $cores threads"
printf '%-13s %-8s' benchmark size
[[ $gpu_only -eq 0 ]] && printf ' | %9s %9s %6s' apgas-cpu openmp ratio
[[ $gpu_only -eq 0 && $quick -eq 0 ]] && printf ' | %9s %9s %9s' "1 host" "2 hosts" "3 hosts"
[[ $gpus -gt 0 ]] && printf ' | %9s %9s %6s' apgas-gpu native ratio
echo
ratios=()
loc_rows=()
for b in $only; do
  bench "$b"
  if [[ ! -x "$exe" ]]; then
    echo "$(printf '%-13s' "$b") (not built: $exe)"
    continue
  fi
  for size in $sizes; do
    args=(-q --no-check)
    [[ "$size" != default ]] && args+=(--size "$size")
    # A program without this size says so (a usage error): skip the row.
    if [[ "$size" != default ]] && [[ "$("$exe" --size "$size" --no-such-option 2>&1)" == *"--size '$size'"* ]]; then
      continue
    fi
    declare -a cpu=() omp_t=() h1=() h2=() h3=() gpu=() nat=()
    for ((r = 0; r < repeats; r++)); do
      if [[ $gpu_only -eq 0 ]]; then
        cpu+=("$(time_of env APGAS_NTHREADS="$cores" APGAS_GPUS=none "$exe" "${args[@]}" --cpu)")
        [[ -x "$omp" ]] && omp_t+=("$(time_of env OMP_NUM_THREADS="$cores" "$omp" "${args[@]}")")
      fi
      if [[ $gpu_only -eq 0 && $quick -eq 0 && $have_mpi -eq 1 ]]; then
        for np in 1 2 3; do
          per=$(( cores / np > 0 ? cores / np : 1 ))
          t=$(time_of env APGAS_TRANSPORT=mpi APGAS_NTHREADS="$per" APGAS_GPUS=none \
                "${mpi[@]}" -x APGAS_TRANSPORT -x APGAS_NTHREADS -x APGAS_GPUS -np "$np" "$exe" "${args[@]}" --cpu)
          case $np in 1) h1+=("$t") ;; 2) h2+=("$t") ;; 3) h3+=("$t") ;; esac
        done
      fi
      if [[ $gpus -gt 0 ]]; then
        gpu+=("$(time_of env APGAS_NTHREADS="$cores" APGAS_GPUS=0 "$exe" "${args[@]}")")
        [[ -x "$native" ]] && nat+=("$(time_of env OMP_NUM_THREADS="$cores" "$native" "${args[@]}")")
      fi
    done
    # Runs under 0.2 s vary by up to half from one to the next on a small machine: such a pair gets 4R runs more.
    if [[ $gpu_only -eq 0 ]] && short "${cpu[@]}"; then
      for ((r = repeats; r < 5 * repeats; r++)); do
        cpu+=("$(time_of env APGAS_NTHREADS="$cores" APGAS_GPUS=none "$exe" "${args[@]}" --cpu)")
        [[ -x "$omp" ]] && omp_t+=("$(time_of env OMP_NUM_THREADS="$cores" "$omp" "${args[@]}")")
      done
    fi
    if [[ $gpus -gt 0 ]] && short "${gpu[@]}"; then
      for ((r = repeats; r < 5 * repeats; r++)); do
        gpu+=("$(time_of env APGAS_NTHREADS="$cores" APGAS_GPUS=0 "$exe" "${args[@]}")")
        [[ -x "$native" ]] && nat+=("$(time_of env OMP_NUM_THREADS="$cores" "$native" "${args[@]}")")
      done
    fi
    line=$(printf '%-13s %-8s' "$b" "$size")
    tag="${suite}_${b}"
    [[ "$size" != default ]] && tag+="_$size"
    if [[ $gpu_only -eq 0 ]]; then
      c=$(median "${cpu[@]}")
      o=$(median "${omp_t[@]:-fail}")
      line+=$(printf ' | %9s %9s %6s' "$c" "$o" \
               "$(awk -v a="$c" -v b="$o" 'BEGIN { if (a + 0 > 0 && b + 0 > 0) printf "%.2f", a / b; else print "-" }')")
      ratios+=("$(ratio_line "${tag}_omp" "$c" "$o")")
    fi
    if [[ $gpu_only -eq 0 && $quick -eq 0 ]]; then
      line+=$(printf ' | %9s %9s %9s' "$(median "${h1[@]:-fail}")" "$(median "${h2[@]:-fail}")" "$(median "${h3[@]:-fail}")")
    fi
    if [[ $gpus -gt 0 ]]; then
      g=$(median "${gpu[@]}")
      n=$(median "${nat[@]:-fail}")
      line+=$(printf ' | %9s %9s %6s' "$g" "$n" \
                "$(awk -v a="$g" -v b="$n" 'BEGIN { if (a + 0 > 0 && b + 0 > 0) printf "%.2f", a / b; else print "-" }')")
      ratios+=("$(ratio_line "${tag}_native" "$g" "$n")")
    fi
    echo "$line"
    # Each row's ratio lines at once (a run cut short by a time limit keeps the rows it finished).
    printf '%s\n' "${ratios[@]}" | grep -v '^$' || true
    ratios=()
    unset cpu omp_t h1 h2 h3 gpu nat
  done
  if [[ -f "$src" && -f "$native_src" ]]; then
    a=$(loc "$src")
    n=$(loc "$native_src")
    loc_rows+=("$(printf '%-13s %6s %6s %6s' "$b" "$a" "$n" "$(awk -v a="$a" -v n="$n" 'BEGIN { printf "%.2f", a / n }')")")
    awk -v t="${suite}_${b}_loc" -v a="$a" -v n="$n" 'BEGIN { printf "ratio %s %.3f (ours %d lines, anchor %d lines)\n", t, a / n, a, n }'
  fi
done
if [[ ${#loc_rows[@]} -gt 0 ]]; then
  echo
  echo "lines of code (non-blank, not only a comment): the apgas version <b>.cpp against the native CUDA <b>_native.cu"
  printf '%-13s %6s %6s %6s\n' benchmark apgas cuda ratio
  printf '%s\n' "${loc_rows[@]}"
fi
