#!/usr/bin/env bash
# throughput.sh's argument checks and its plan (--dry-run), which start nothing: each bad input
# gets one line and exit 2. Needs no GPU and no build (the bundle is a folder of stand-in executables).
set -uo pipefail
script="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/throughput.sh"
source "$(dirname "${BASH_SOURCE[0]}")/test_lib.sh"

check "no bundle" 2 "does not exist" "$script" --dry-run "$scratch/none" "$scratch/out"
check "a configuration without its colon" 2 "EVO_THROUGHPUT_CONFIGS: 'serving' is not NAME:WORKER_ARGS" \
  EVO_THROUGHPUT_CONFIGS="serving" "$script" --dry-run "$bundle" "$scratch/out"
check "no configuration" 2 "EVO_THROUGHPUT_CONFIGS names no configuration" \
  EVO_THROUGHPUT_CONFIGS="" "$script" --dry-run "$bundle" "$scratch/out"
check "zero population" 2 "EVO_POPULATION must be a positive integer, got '0'" \
  EVO_POPULATION=0 "$script" --dry-run "$bundle" "$scratch/out"
check "bad backend" 2 "EVO_WORKER_BACKEND must be cuda or model, got 'gpu'" \
  EVO_WORKER_BACKEND=gpu "$script" --dry-run "$bundle" "$scratch/out"

# The plan: each configuration its own shape_suite.sh run, in the order given.
check "the default pair" 0 "== per-evaluation: EVO_WORKER_ARGS='--child-per-evaluation'" \
  "$script" --dry-run "$bundle" "$scratch/out"
check "a configuration with worker options" 0 "== ahead: EVO_WORKER_ARGS='--max-inflight 8' EVO_SUITE='1x8x512x64' EVO_BUDGET=30s" \
  EVO_THROUGHPUT_CONFIGS="ahead:--max-inflight 8" EVO_SUITE=1x8x512x64 EVO_BUDGET=30s "$script" --dry-run "$bundle" "$scratch/out"

((failures == 0)) || { echo "$failures check(s) failed"; exit 1; }
echo "all checks passed"
