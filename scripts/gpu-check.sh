#!/usr/bin/env bash
# gpu-check.sh: every claim about the GPU path, checked on a machine with an NVIDIA GPU, in one command.
#
#   scripts/gpu-check.sh [-b BUILD_DIR] [-o FILE] [--quick] [--budget SECONDS] [--only STEPS]
#
#   -b DIR    use this build folder as it is (a CUDA build: the `cuda` preset or APGAS_WITH_CUDA=ON): nothing is
#             configured or built, so the machine needs no compiler and no Boost, MPI or CUDA development files, only
#             their run-time libraries and the NVIDIA driver (ctest files and rpaths hold absolute paths: use the
#             folder at the path where it was built; some tests run the build machine's cmake, /usr/bin/cmake, which
#             must exist there too). Default: configure and build the `cuda` preset into build/cuda.
#   -o FILE   write the table there as well (default: gpu-check.md in the build folder)
#   --quick   fewer repeats (a first look, not figures to quote)
#   --budget S  the whole check's time in seconds (default 900); every step's own limit shrinks in proportion
#   --only LIST  run only these steps (comma-separated: tests, launch, kmeans, kernels, trace, parboil), e.g.
#             `--only parboil` when device time is short and only the Parboil GPU columns are missing
#
# Runs, each within its own share of the budget (at most 15 minutes in all; 48 s on one H100 without Parboil, 285 s
# on one H200 with everything):
#   1. ctest -L gpu (kernels and copies on real GPUs, the review items only a GPU settles) and the k-means sample's
#      GPU tests (GPU places vs CPU places, the native CUDA baseline); one row per test case;
#   2. apgas_bench_gpu: launch round trip, copies from pageable (the spooler, or the driver's own call up to
#      APGAS_CUDA_DIRECT_COPY) and pinned memory in both directions against the raw driver, the spooler's slice-size
#      sweep (both directions) and the direct copies against the spooler around their limit;
#   3. samples/kmeans/kmeans_table.sh (apgas_kmeans against kmeans_native_cuda, target <= 1.05) and the k-means inner
#      loop two points per cluster load against one (--single-point-loop);
#   4. bench/apgas_bench_kernels, a traced GPU run of Parboil's mri_q, mri_fhd and sad (scripts/trace_summary.py:
#      kernels and copies against the whole run), mri_q, sad, tpacf and cp ours and native with CUDA's lazy and eager
#      kernel loading (the trace step), and samples/parboil/parboil_table.sh, where they exist in this tree
#      and build folder (otherwise a row says they were skipped).
# Prints one table — machine, driver, GPU, command, figure, target, result — and exits 1 if anything with a target
# missed it or failed, else 0. On a machine without a GPU (nvidia-smi lists none) it says so and exits 0 having run
# nothing (a wrong option exits 2 first, GPU or not). NVIDIA_SMI names another nvidia-smi (the test of this script uses a missing one).
set -uo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
build=""
out=""
quick=0
budget=900
only=""
usage() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "${BASH_SOURCE[0]}"; }
# need <option> <what> <arguments left> <next argument>: a usage error unless the option has its value.
need() { (( $3 >= 2 )) && [[ -n "$4" ]] || { echo "gpu-check.sh: $1 needs $2, none given" >&2; exit 2; }; }
while [[ $# -gt 0 ]]; do
  case "$1" in
    -b) need -b "a build folder" $# "${2:-}"; build="$2"; shift 2 ;;
    -o) need -o "a file" $# "${2:-}"; out="$2"; shift 2 ;;
    --quick) quick=1; shift ;;
    --budget) need --budget "a number of seconds" $# "${2:-}"; budget="$2"; shift 2 ;;
    --only) need --only "a comma-separated list of steps" $# "${2:-}"; only="$2"; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "gpu-check.sh: unknown option '$1'" >&2; usage >&2; exit 2 ;;
  esac
done

for step in ${only//,/ }; do
  case "$step" in
    tests|launch|kmeans|kernels|trace|parboil) ;;
    *) echo "gpu-check.sh: --only: unknown step '$step' (tests, launch, kmeans, kernels, trace, parboil)" >&2; exit 2 ;;
  esac
done
# Every option checked here, before the GPU probe, so that a wrong one is refused on any machine.
if ! [[ "$budget" =~ ^[1-9][0-9]*$ ]]; then
  echo "gpu-check.sh: --budget '$budget' is not a number of seconds (expected a positive integer)" >&2
  exit 2
fi
if [[ -n "$build" && ! -d "$build" ]]; then
  echo "gpu-check.sh: -b: no build folder '$build' (expected a built CUDA build folder)" >&2
  exit 2
fi
if [[ -n "$out" && ! -d "$(dirname "$out")" ]]; then
  echo "gpu-check.sh: -o: the folder of '$out' does not exist (expected a file in an existing folder)" >&2
  exit 2
fi
# wanted <step>: whether --only left it in (every step without --only).
wanted() { [[ -z "$only" || ",$only," == *",$1,"* ]]; }

# ---- is there a GPU? ----
smi="${NVIDIA_SMI:-nvidia-smi}"
gpus=0
if command -v "$smi" > /dev/null 2>&1; then
  gpus=$("$smi" -L 2> /dev/null | grep -c '^GPU' || true)
fi
if [[ $gpus -eq 0 ]]; then
  echo "gpu-check: no GPU on this machine ($smi lists none, or is not installed): nothing to check, nothing run"
  exit 0
fi

start=$(date +%s)
left() { echo $((budget - ($(date +%s) - start))); }

machine="$(hostname -s 2> /dev/null || hostname), $(lscpu 2> /dev/null | sed -n 's/^Model name: *//p' | head -1), $(nproc) cores"
driver="$("$smi" --query-gpu=driver_version --format=csv,noheader 2> /dev/null | head -1)"
cuda_version="$("$smi" 2> /dev/null | sed -n 's/.*CUDA Version: *\([0-9.]*\).*/\1/p' | head -1)"
[[ -n "$cuda_version" ]] && driver="$driver (CUDA $cuda_version)"
gpu="$gpus x $("$smi" --query-gpu=name --format=csv,noheader 2> /dev/null | head -1)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# ---- the table ----
rows=()
failures=0
cell() { printf '%s' "$1" | tr '|' '/' | tr '\n' ' '; }
# row <command> <figure> <target> <result: pass|FAIL|reported|skipped>
row() {
  rows+=("| $(cell "$machine") | $(cell "$driver") | $(cell "$gpu") | $(cell "$1") | $(cell "$2") | $(cell "$3") | $4 |")
  [[ "$4" == FAIL ]] && failures=$((failures + 1))
  echo "gpu-check: $1: $2 (target $3): $4" >&2
}
# verdict <value> <op> <bound>: pass or FAIL (op: le, lt)
verdict() {
  awk -v v="$1" -v op="$2" -v b="$3" 'BEGIN { ok = (op == "le") ? (v <= b) : (v < b); print ok ? "pass" : "FAIL" }'
}
# The target of a `ratio <name> <value>` line, by name: "le 1.05", "lt 1" or "" (no target: reported).
target_of() {
  case "$1" in
    kmeans_native_*|parboil_*_native|x10cuda_*_native|*_native_*) echo "le 1.05" ;;
    parboil_*_loc|x10cuda_*_loc) echo "le 0.8" ;;
    h2d_pageable_*|d2h_pageable_*) echo "le 1.15" ;;
    *_direct_vs_driver_pageable_*) echo "le 1.1" ;;  # (a direct copy is the driver's own call, plus its wait)
    *_vs_driver_pageable_*) echo "lt 1" ;;
    kmeans_pairs_vs_single_*) echo "le 1.0" ;;
    parboil_*_omp|x10cuda_*_omp) echo "le 1.15" ;;
    kernel_*_clocked_omp) echo "le 5.0" ;;
    kernel_*_block*_omp) echo "le 1.2" ;;
    kernel_*_plain_omp) echo "le 1.1" ;;
    *) echo "" ;;
  esac
}
# ratio_rows <command> <file>: one row per `ratio <name> <value> (...)` line of the file.
ratio_rows() {
  local cmd="$1" file="$2" any=0 name value rest t
  while read -r _ name value rest; do
    any=1
    t=$(target_of "$name")
    if [[ -z "$t" ]]; then
      row "$cmd" "$name = $value $rest" "—" reported
    else
      row "$cmd" "$name = $value $rest" "${t/le /≤ }" "$(verdict "$value" ${t})"
    fi
  done < <(grep '^ratio ' "$file" || true)
  [[ $any -eq 1 ]] || row "$cmd" "no ratio lines (see its output)" "ratio lines" FAIL
}
# run_step <seconds> <log> <command...>: runs it with a time limit (never beyond the overall budget).
run_step() {
  local limit=$(( $1 * budget / 900 )) log=$2
  shift 2
  local l
  l=$(left)
  (( limit > l )) && limit=$l
  if (( limit <= 10 )); then
    echo "out of time" > "$log"
    return 124
  fi
  echo "gpu-check: running (up to ${limit} s): $*" >&2
  timeout "$limit" "$@" > "$log" 2>&1
}

# ---- 0. the build ----
if [[ -z "$build" ]]; then
  build="$root/build/cuda"
  if run_step 600 "$work/build.log" bash -c "cd '$root' && cmake --preset cuda && cmake --build --preset cuda -j$(nproc)"; then
    row "cmake --preset cuda && cmake --build --preset cuda" "built in $(( $(date +%s) - start )) s" "builds" pass
  else
    row "cmake --preset cuda && cmake --build --preset cuda" "$(tail -3 "$work/build.log")" "builds" FAIL
  fi
fi
build="$(cd "$build" 2> /dev/null && pwd)" || { echo "gpu-check.sh: no build folder '$build'" >&2; exit 2; }
[[ -n "$out" ]] || out="$build/gpu-check.md"

# ---- 1. the tests that need a GPU ----
if ! wanted tests; then
  :
elif command -v ctest > /dev/null 2>&1; then
  cmd="ctest -L gpu; ctest -R 'kmeans_(gpu_vs_cpu|native_cuda|same_centroids)'"
  run_step 420 "$work/ctest.log" bash -c "ctest --test-dir '$build' -L gpu -V --timeout $(( 400 * budget / 900 )); \
    ctest --test-dir '$build' -R 'apgas.sample.kmeans_(gpu_vs_cpu|native_cuda|same_centroids)' -V \
      --timeout $(( 300 * budget / 900 ))"
  rc=$?
  # One row per test case (gtest's result lines, "N: [       OK ] Suite.Name (12 ms)"), then one per ctest entry.
  cases=0
  while read -r status name; do
    cases=$((cases + 1))
    case "$status" in
      OK) row "$cmd" "$name" "passes" pass ;;
      SKIPPED) row "$cmd" "$name (skipped on this machine)" "passes" skipped ;;
      *) row "$cmd" "$name" "passes" FAIL ;;
    esac
  done < <(sed -n 's/^[0-9]*: \[ *\(OK\|FAILED\|SKIPPED\) *\] \([A-Za-z0-9_/]*\.[A-Za-z0-9_./]*\).*/\1 \2/p' \
             "$work/ctest.log" | sort -u)
  while read -r name verdict_text; do
    case "$verdict_text" in
      Passed) result=pass ;;
      Skipped) result=skipped ;;
      *) result=FAIL ;;
    esac
    row "$cmd" "ctest $name: $verdict_text" "passes" "$result"
  done < <(sed -n 's/^ *[0-9]*\/[0-9]* Test *#[0-9]*: \(apgas\.[a-z_.0-9]*\) \.*[* ]*\([A-Za-z]*\).*/\1 \2/p' "$work/ctest.log")
  [[ $cases -gt 0 ]] || row "$cmd" "no test case ran (rc $rc): $(tail -2 "$work/ctest.log")" "passes" FAIL
  cp "$work/ctest.log" "$build/gpu-check-ctest.log"
else
  row "ctest -L gpu" "ctest is not installed" "passes" FAIL
fi

# ---- 2. launches and copies against the raw driver ----
bench="$build/bench/apgas_bench_gpu"
repeats=7
[[ $quick -eq 1 ]] && repeats=3
if ! wanted launch; then
  :
elif [[ -x "$bench" ]]; then
  run_step 240 "$work/bench_gpu.log" "$bench" --repeats "$repeats"
  rc=$?
  ratio_rows "apgas_bench_gpu --repeats $repeats" "$work/bench_gpu.log"
  # The sweep: the default slice (4 MiB) against the best one, per direction.
  for dir in h2d d2h; do
    best=$(sed -n "s/^sweep slice=\([0-9]*\) .*${dir}_GBps=\([0-9.]*\).*/\1 \2/p" "$work/bench_gpu.log" | sort -k2 -g | tail -1)
    default=$(sed -n "s/^sweep slice=4194304 .*${dir}_GBps=\([0-9.]*\).*/\1/p" "$work/bench_gpu.log")
    if [[ -n "$best" && -n "$default" ]]; then
      read -r best_slice best_gbps <<< "$best"
      ok=$(awk -v d="$default" -v b="$best_gbps" 'BEGIN { print (d >= 0.95 * b) ? "pass" : "FAIL" }')
      row "apgas_bench_gpu (slice sweep, 256 MiB, $dir)" \
          "best slice $best_slice B: $best_gbps GB/s; default 4 MiB: $default GB/s" "default ≥ 0.95 × best" "$ok"
    else
      row "apgas_bench_gpu (slice sweep, $dir)" "no sweep lines (rc $rc)" "sweep" FAIL
    fi
  done
  # The direct copies (one driver call) against the spooler, per size: where the default limit comes from.
  while read -r line; do
    row "apgas_bench_gpu (direct copies against the spooler)" "$line" "—" reported
  done < <(grep '^direct bytes=' "$work/bench_gpu.log" || true)
  cp "$work/bench_gpu.log" "$build/gpu-check-bench_gpu.log"
else
  row "apgas_bench_gpu" "not built ($bench): a CUDA build with APGAS_BUILD_BENCH is needed" "runs" FAIL
fi

# ---- 3. k-means against native CUDA, and its inner loop ----
table="$root/samples/kmeans/kmeans_table.sh"
kbin="$build/samples/kmeans"
if ! wanted kmeans; then
  :
elif [[ -x "$kbin/apgas_kmeans" && -x "$kbin/kmeans_native_cuda" ]]; then
  r=3
  [[ $quick -eq 1 ]] && r=1
  run_step 300 "$work/kmeans.log" "$table" -b "$build" -i 10 -r "$r"
  ratio_rows "kmeans_table.sh -i 10 -r $r" "$work/kmeans.log"
  # Review item 12: two points per shared-memory load against one, same binary, alternating.
  pairs=() single=()
  for ((i = 0; i < r + 1; i++)); do
    for mode in pairs single; do
      (( $(left) > 30 )) || break 2
      flag=""
      [[ $mode == single ]] && flag="--single-point-loop"
      t=$(APGAS_GPUS=0 timeout 120 "$kbin/apgas_kmeans" -n 4000000 -k 400 -i 10 -q --no-check $flag 2> /dev/null |
          sed -n 's/.*total_s=\([0-9.]*\).*/\1/p')
      [[ -n "$t" ]] && { [[ $mode == pairs ]] && pairs+=("$t") || single+=("$t"); }
    done
  done
  if [[ ${#pairs[@]} -gt 0 && ${#single[@]} -gt 0 ]]; then
    p=$(printf '%s\n' "${pairs[@]}" | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }')
    s=$(printf '%s\n' "${single[@]}" | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }')
    echo "ratio kmeans_pairs_vs_single_4M_400 $(awk -v p="$p" -v s="$s" 'BEGIN { printf "%.3f", p / s }') (ours $p s, anchor $s s, 10 iterations)" > "$work/pairs.log"
    ratio_rows "apgas_kmeans -n 4000000 -k 400 [--single-point-loop], 1 GPU" "$work/pairs.log"
  else
    row "apgas_kmeans --single-point-loop" "the runs failed" "runs" FAIL
  fi
  cp "$work/kmeans.log" "$build/gpu-check-kmeans.log"
else
  row "kmeans_table.sh" "apgas_kmeans or kmeans_native_cuda not built in $kbin (kmeans_native_cuda needs MPI)" "runs" FAIL
fi

# ---- 4. the kernel and Parboil benchmarks, where they exist ----
kernels="$build/bench/apgas_bench_kernels"
if ! wanted kernels; then
  :
elif [[ -x "$kernels" ]]; then
  run_step 240 "$work/kernels.log" "$kernels"
  ratio_rows "apgas_bench_kernels" "$work/kernels.log"
  cp "$work/kernels.log" "$build/gpu-check-bench_kernels.log"
else
  row "apgas_bench_kernels" "not in this build ($kernels)" "—" skipped
fi
# Where the time of the ports furthest from native CUDA goes (mri_q, mri_fhd: 2.1-2.6x on 2026-11-26 with kernels
# whose PTX matches the native ones; sad: 1.55x): one traced run each on one GPU at the default size, as
# parboil_table.sh runs them, summarised by trace_summary.py.
for b in $(wanted trace && echo mri_q mri_fhd sad); do
  prog="$build/samples/parboil/$b/apgas_parboil_$b"
  if [[ ! -x "$prog" ]]; then
    row "APGAS_TRACE=... apgas_parboil_$b" "not in this build ($prog)" "—" skipped
    continue
  fi
  trace="$build/gpu-check-trace_$b.json"
  rm -f "$trace"
  run_step 60 "$work/trace_$b.log" env APGAS_TRACE="$trace" APGAS_NTHREADS="$(nproc)" APGAS_GPUS=0 "$prog" --no-check
  rc=$?
  [[ $rc -eq 0 ]] && python3 "$root/scripts/trace_summary.py" "$trace" --no-plot >> "$work/trace_$b.log" 2>&1
  cp "$work/trace_$b.log" "$build/gpu-check-trace_$b.log"
  if [[ $rc -eq 0 ]]; then
    row "APGAS_TRACE=... apgas_parboil_$b" "$(grep -o 'time_s=[0-9.e-]*' "$work/trace_$b.log" | head -1); the split: \
$build/gpu-check-trace_$b.log" "—" reported
  else
    row "APGAS_TRACE=... apgas_parboil_$b" "exit $rc (124: out of time): $build/gpu-check-trace_$b.log" "—" FAIL
  fi
done
# The first launch of each kernel (0.6-0.8 ms on the H100) falls in the timed code on both sides: CUDA 13 loads a
# kernel lazily, at its first launch. Each side once with CUDA_MODULE_LOADING=EAGER beside its default: where the gap
# to native closes under EAGER, first launches are what is left of it (sad launches five kernels for the first time).
for b in $(wanted trace && echo mri_q sad tpacf cp); do
  ours="$build/samples/parboil/$b/apgas_parboil_$b"
  native="$build/samples/parboil/$b/parboil_${b}_native"
  if [[ ! -x "$ours" || ! -x "$native" ]]; then
    row "CUDA_MODULE_LOADING=... apgas_parboil_$b, parboil_${b}_native" "not in this build" "—" skipped
    continue
  fi
  for mode in LAZY EAGER; do
    run_step 30 "$work/loading_${b}_$mode.log" env CUDA_MODULE_LOADING=$mode APGAS_NTHREADS="$(nproc)" APGAS_GPUS=0 \
      "$ours" --no-check
    rc_ours=$?
    run_step 30 "$work/loading_${b}_native_$mode.log" env CUDA_MODULE_LOADING=$mode "$native" --no-check
    rc_native=$?
    o=$(grep -o 'time_s=[0-9.e-]*' "$work/loading_${b}_$mode.log" | head -1)
    n=$(grep -o 'time_s=[0-9.e-]*' "$work/loading_${b}_native_$mode.log" | head -1)
    if [[ $rc_ours -eq 0 && $rc_native -eq 0 && -n "$o" && -n "$n" ]]; then
      row "CUDA_MODULE_LOADING=$mode apgas_parboil_$b, parboil_${b}_native" "ours ${o#time_s=} s, native ${n#time_s=} s" \
        "—" reported
    else
      row "CUDA_MODULE_LOADING=$mode apgas_parboil_$b, parboil_${b}_native" \
        "exit $rc_ours / $rc_native (124: out of time): $work/loading_${b}_*$mode.log" "—" FAIL
    fi
  done
done
parboil="$root/samples/parboil/parboil_table.sh"
if ! wanted parboil; then
  :
elif [[ -x "$parboil" ]]; then
  # The GPU columns only (the CPU table is measured on any machine); the last step: it may use what is left.
  pr=3
  [[ $quick -eq 1 ]] && pr=1
  run_step 900 "$work/parboil.log" "$parboil" -b "$build" --gpu -r "$pr"
  ratio_rows "parboil_table.sh" "$work/parboil.log"
  cp "$work/parboil.log" "$build/gpu-check-parboil.log"
else
  row "samples/parboil/parboil_table.sh" "not in this tree" "—" skipped
fi

# ---- the table ----
{
  echo "gpu-check: $(date -u '+%Y-%m-%d %H:%M UTC'), $(( $(date +%s) - start )) s, build folder $build"
  echo
  echo "| machine | driver | GPU | command | figure | target | result |"
  echo "|---|---|---|---|---|---|---|"
  printf '%s\n' "${rows[@]}"
  echo
  echo "$failures row(s) missed their target or failed; logs: $build/gpu-check-*.log"
} | tee "$out"
[[ $failures -eq 0 ]]
