#!/usr/bin/env bash
# kmeans_table.sh: the X10 paper's Fig. 13 table for apgas_kmeans and its baselines, measured side by side.
#
#   samples/kmeans/kmeans_table.sh [-b BUILD_DIR] [-i ITERATIONS] [-r REPEATS] [-n "N..."] [-k "K..."] [--cpu]
#
#   -b DIR    the build tree (default: build/release under the repository root); the programs are taken from
#             DIR/samples/kmeans
#   -i I      iterations per run (default 10; the paper ran 50: the table shows seconds per iteration)
#   -r R      runs per cell, interleaved across the columns of a row; the median is shown (default 3; for an even
#             R the lower of the two middle runs)
#   -n, -k    the rows' N and K values (default "2000000 4000000" and "100 400", Fig. 13's shapes); the programs'
#             limits hold: N at most 1000000000, K at most 3072 (4 dimensions) and at most every N, I at most 1000000
#   --cpu     the CPU table even where GPUs exist
#
# With GPUs (nvidia-smi lists some): columns native (kmeans_native_cuda, one GPU), 1x1, 2x1, and 1x2, 2x2 where
# enough GPUs exist (hosts x GPUs; "hosts" are processes of one mpirun on this machine; with a single GPU 2x1 puts
# both processes on it); every run uses all the cores for its host step. Prints `ratio kmeans_native_<N>_<K>`
# (apgas 1x1 / native).
# Without GPUs: columns OpenMP (kmeans_omp), apgas 1 host, apgas 2 hosts, all on CPU places with the same number of
# cores: OMP_NUM_THREADS=C, APGAS_NTHREADS=C for one host place, C/2 per place for two (C = cores of this machine).
# Prints `ratio kmeans_omp_<N>_<K>` (apgas 1 host / OpenMP).
# Every run is --no-check; times are the programs' own (total_s of their last line / iterations). A run that fails
# shows as "fail"; the first failure's command and the end of its stderr are printed, and the script exits with 1.
set -euo pipefail

# Internal: `kmeans_table.sh --rank-gpus G program args...` runs the program with APGAS_GPUS set to this MPI rank's G
# GPUs (rank r: r*G .. r*G+G-1), so that every host place of a one-machine mpirun gets GPUs of its own.
if [[ "${1:-}" == "--rank-gpus" ]]; then
  per=$2
  shift 2
  rank=${OMPI_COMM_WORLD_RANK:-${PMIX_RANK:-${PMI_RANK:-0}}}
  list=""
  for ((g = rank * per; g < (rank + 1) * per; g++)); do list+="${list:+,}$g"; done
  export APGAS_GPUS="$list"
  exec "$@"
fi

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
build="$root/build/release"
iterations=10
repeats=3
sizes="2000000 4000000"
clusters="100 400"
force_cpu=0
usage() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "${BASH_SOURCE[0]}"; }
# need <option> <arguments left>: a usage error unless the option has its value.
need() { (( $2 >= 2 )) || { echo "kmeans_table.sh: $1 needs a value, none given (-h for help)" >&2; exit 2; }; }
while [[ $# -gt 0 ]]; do
  case "$1" in
    -b) need -b $#; build="$2"; shift 2 ;;
    -i) need -i $#; iterations="$2"; shift 2 ;;
    -r) need -r $#; repeats="$2"; shift 2 ;;
    -n) need -n $#; sizes="$2"; shift 2 ;;
    -k) need -k $#; clusters="$2"; shift 2 ;;
    --cpu) force_cpu=1; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "kmeans_table.sh: unknown option '$1'" >&2; usage >&2; exit 2 ;;
  esac
done
# positive <option> <value> [list]: a usage error unless the value is a positive integer (a list: one or more,
# separated by spaces).
positive() {
  local words=()
  if [[ -n "${3:-}" ]]; then read -ra words <<< "$2"; else words=("$2"); fi
  [[ ${#words[@]} -gt 0 ]] || { echo "kmeans_table.sh: $1 '$2': expected one or more positive integers" >&2; exit 2; }
  for v in "${words[@]}"; do
    [[ "$v" =~ ^[1-9][0-9]*$ ]] || { echo "kmeans_table.sh: $1 '$2': '$v' is not a positive integer" >&2; exit 2; }
  done
}
positive -i "$iterations"
positive -r "$repeats"
positive -n "$sizes" list
positive -k "$clusters" list
# at_most <option> <value> <limit> <what the limit is>: a usage error unless value <= limit (compared as decimal
# strings: a value of any length is refused, not wrapped).
at_most() {
  if (( ${#2} > ${#3} )) || { (( ${#2} == ${#3} )) && [[ "$2" > "$3" ]]; }; then
    echo "kmeans_table.sh: $1 $2: at most $3 ($4)" >&2
    exit 2
  fi
}
at_most -i "$iterations" 1000000 "apgas_kmeans's limit"
min_n=""
for n in $sizes; do
  at_most -n "$n" 1000000000 "apgas_kmeans's limit"
  [[ -z "$min_n" ]] || (( n < min_n )) && min_n=$n
done
for k in $clusters; do
  at_most -k "$k" 3072 "the clusters' 12288 floats in shared memory, at 4 dimensions"
  at_most -k "$k" "$min_n" "a row's K is at most its N, and -n has $min_n"
done
bin="$build/samples/kmeans"
[[ -x "$bin/apgas_kmeans" ]] || { echo "kmeans_table.sh: no $bin/apgas_kmeans: build first (or give -b)" >&2; exit 2; }

cores=$(nproc)
half=$(( cores / 2 > 0 ? cores / 2 : 1 ))
gpus=0
if [[ $force_cpu -eq 0 ]] && command -v nvidia-smi > /dev/null 2>&1; then
  gpus=$(nvidia-smi -L 2> /dev/null | grep -c '^GPU' || true)
fi
mpi=(mpirun --oversubscribe --bind-to none)  # (Open MPI binds 1 or 2 processes to one core each by default: a 1-host
                                             # run's workers would share one core)
[[ $(id -u) -eq 0 ]] && mpi+=(--allow-run-as-root)
model=$(lscpu | sed -n 's/^Model name: *//p' | head -1)

label() {  # 2000000 -> 2M
  local n=$1
  if (( n % 1000000 == 0 )); then echo "$((n / 1000000))M"
  elif (( n % 1000 == 0 )); then echo "$((n / 1000))k"
  else echo "$n"; fi
}

# run <command...>: prints the seconds per iteration, or "fail". Full precision (9 significant digits): the samples,
# their medians and the ratios are computed unrounded; only the table and the ratio lines round, when printing.
# The first run that fails leaves its command and the end of its stderr in $errors/first, shown at once and at the end.
errors=$(mktemp -d)
trap 'rm -rf "$errors"' EXIT
run() {
  local out
  if out=$("$@" -i "$iterations" -q --no-check 2> "$errors/last" | tail -1) && [[ "$out" =~ total_s=([0-9.]+) ]]; then
    awk -v t="${BASH_REMATCH[1]}" -v i="$iterations" 'BEGIN { printf "%.9g", t / i }'
  else
    if [[ ! -e "$errors/first" ]]; then
      { echo "kmeans_table.sh: a run failed: $* -i $iterations -q --no-check"; tail -5 "$errors/last"; } > "$errors/first"
      cat "$errors/first" >&2
    fi
    echo fail
  fi
}

cell() { if [[ "$1" == fail ]]; then printf ' %10s' fail; else LC_ALL=C printf ' %10.4f' "$1"; fi; }  # a table cell

median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) print "fail"; else if (v[1] == "fail") print "fail"; else print v[int((NR + 1) / 2)] }'; }

# The columns: names[c], and column c's command, words starts[c] .. starts[c] + lengths[c] - 1 of argv (one array for
# all, so that every word stays one argument: paths with spaces work).
names=() argv=() starts=() lengths=()
column() { starts+=(${#argv[@]}); lengths+=($#); argv+=("$@"); }
if [[ $gpus -gt 0 ]]; then
  gpu_name=$(nvidia-smi --query-gpu=name --format=csv,noheader 2> /dev/null | head -1)
  echo "machine: $model, $cores cores; $gpus x $gpu_name"
  [[ -x "$bin/kmeans_native_cuda" ]] || { echo "kmeans_table.sh: no $bin/kmeans_native_cuda (a CUDA build is needed)" >&2; exit 2; }
  names=(native 1x1 2x1)
  column env OMP_NUM_THREADS="$cores" "$bin/kmeans_native_cuda"
  column env APGAS_NTHREADS="$cores" APGAS_GPUS=0 "$bin/apgas_kmeans"
  self="$here/$(basename "${BASH_SOURCE[0]}")"
  if [[ $gpus -ge 2 ]]; then
    column env APGAS_TRANSPORT=mpi APGAS_NTHREADS="$half" "${mpi[@]}" -x APGAS_TRANSPORT -x APGAS_NTHREADS -np 2 \
      "$self" --rank-gpus 1 "$bin/apgas_kmeans"
    names+=(1x2)
    column env APGAS_NTHREADS="$cores" APGAS_GPUS=0,1 "$bin/apgas_kmeans"
  else
    column env APGAS_TRANSPORT=mpi APGAS_NTHREADS="$half" APGAS_GPUS=0 "${mpi[@]}" -x APGAS_TRANSPORT -x APGAS_NTHREADS \
      -x APGAS_GPUS -np 2 "$bin/apgas_kmeans"
  fi
  if [[ $gpus -ge 4 ]]; then
    names+=(2x2)
    column env APGAS_TRANSPORT=mpi APGAS_NTHREADS="$half" "${mpi[@]}" -x APGAS_TRANSPORT -x APGAS_NTHREADS -np 2 \
      "$self" --rank-gpus 2 "$bin/apgas_kmeans"
  fi
  ratio_name=native
  echo "columns: native = kmeans_native_cuda (CUDA + MPI, 1 rank, 1 GPU); HxG = apgas_kmeans on H host places x G GPU places each"
  [[ $gpus -lt 2 ]] && echo "(one GPU: the 2x1 column runs both host places on GPU 0)"
else
  echo "machine: $model, $cores cores, no GPU (CPU places)"
  [[ -x "$bin/kmeans_omp" ]] || { echo "kmeans_table.sh: no $bin/kmeans_omp (OpenMP was not found at build time)" >&2; exit 2; }
  names=(OpenMP "1 host" "2 hosts")
  column env OMP_NUM_THREADS="$cores" "$bin/kmeans_omp"
  column env APGAS_NTHREADS="$cores" APGAS_GPUS=none "$bin/apgas_kmeans"
  column env APGAS_TRANSPORT=mpi APGAS_NTHREADS="$half" APGAS_GPUS=none "${mpi[@]}" -x APGAS_TRANSPORT -x APGAS_NTHREADS \
    -x APGAS_GPUS -np 2 "$bin/apgas_kmeans"
  ratio_name=omp
  echo "columns: OpenMP = kmeans_omp, OMP_NUM_THREADS=$cores; 1 host = apgas_kmeans, APGAS_NTHREADS=$cores;" \
       "2 hosts = mpirun -np 2 apgas_kmeans, APGAS_NTHREADS=$half each"
fi
echo "seconds per iteration, median of $repeats runs of $iterations iterations (--no-check), runs interleaved by column"

header=$(printf '%6s %5s |' N K)
for n in "${names[@]}"; do header+=$(printf ' %10s' "$n"); done
echo "$header"
ratios=()
for n in $sizes; do
  for k in $clusters; do
    declare -A samples=()
    for ((r = 0; r < repeats; r++)); do
      for c in "${!starts[@]}"; do
        samples[$c]+=" $(run "${argv[@]:${starts[$c]}:${lengths[$c]}}" -n "$n" -k "$k")"
      done
    done
    line=$(printf '%6s %5s |' "$(label "$n")" "$k")
    declare -a med=()
    for c in "${!starts[@]}"; do
      # shellcheck disable=SC2086
      med[$c]=$(median ${samples[$c]})
      line+=$(cell "${med[$c]}")
    done
    echo "$line"
    if [[ "${med[0]}" != fail && "${med[1]}" != fail ]]; then
      ratios+=("$(awk -v o="${med[1]}" -v a="${med[0]}" -v name="kmeans_${ratio_name}_$(label "$n")_$k" \
                 'BEGIN { printf "ratio %s %.3f (ours %.4f s/iter, anchor %.4f s/iter)", name, o / a, o, a }')")
    fi
    unset samples med
  done
done
printf '%s\n' "${ratios[@]}"
if [[ -e "$errors/first" ]]; then
  cat "$errors/first" >&2
  exit 1
fi
