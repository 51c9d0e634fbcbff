#!/usr/bin/env bash
# Run the task benchmarks from a build folder (default build/release) and keep the output.
set -euo pipefail
build=${1:-build/release}
out=${2:-bench-tasks-$(date +%Y%m%d-%H%M%S).txt}
"$build/bench/apgas_bench_tasks" "${@:3}" | tee "$out"
echo "saved to $out"
