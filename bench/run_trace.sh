#!/usr/bin/env bash
# What the trace costs: builds the baseline without it (APGAS_TRACE_BUILD=OFF, only apgas_bench_trace, in
# <build>-notrace, with the release preset's flags) and runs apgas_bench_trace of <build> against it; keeps the output.
#   bench/run_trace.sh [build folder, default build/release] [output file] [apgas_bench_trace options...]
set -euo pipefail
build=${1:-build/release}
out=${2:-bench-trace-$(date +%Y%m%d-%H%M%S).txt}
base="$build-notrace"
cmake -S . -B "$base" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS_RELEASE="-O2 -g -DNDEBUG" \
      -DAPGAS_BUILD_BENCH=ON -DAPGAS_BUILD_TESTS=OFF -DAPGAS_BUILD_SAMPLES=OFF -DAPGAS_TRACE_BUILD=OFF >/dev/null
cmake --build "$base" -j2 --target apgas_bench_trace
"$build/bench/apgas_bench_trace" --anchor "$base/bench/apgas_bench_trace" "${@:3}" | tee "$out"
echo "saved to $out"
