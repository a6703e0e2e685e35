#!/usr/bin/env bash
# search_quality.sh's argument checks and its plan (--dry-run), which start nothing: each bad input
# gets one line and exit 2. Needs no GPU and no build (the bundle is a folder of stand-in executables).
set -uo pipefail
script="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/search_quality.sh"
source "$(dirname "${BASH_SOURCE[0]}")/test_lib.sh"

check "no bundle" 2 "does not exist" "$script" --dry-run "$scratch/none" "$scratch/out"
check "an unknown strategy" 2 "EVO_STRATEGIES: 'exhaustive' is not evolve, surrogate or random" \
  EVO_STRATEGIES="evolve exhaustive" "$script" --dry-run "$bundle" "$scratch/out"
check "no seed" 2 "EVO_SEEDS names no seed" EVO_SEEDS="" "$script" --dry-run "$bundle" "$scratch/out"
check "a seed of 0" 2 "EVO_SEEDS must be a positive integer, got '0'" \
  EVO_SEEDS="1 0" "$script" --dry-run "$bundle" "$scratch/out"
check "a budget that is no duration" 2 "EVO_BUDGET must be a duration (90s, 2m), got 'soon'" \
  EVO_BUDGET=soon "$script" --dry-run "$bundle" "$scratch/out"

check "a GPU that is no index" 2 "EVO_GPUS: 'gpu1' is not a device index" \
  EVO_GPUS="0 gpu1" "$script" --dry-run "$bundle" "$scratch/out"
check "a GPU named twice" 2 "EVO_GPUS names device 1 twice" \
  EVO_GPUS="1 0 1" "$script" --dry-run "$bundle" "$scratch/out"

# The plan: a shape_suite.sh invocation per shape, strategy and seed, then the report.
check "the default plan" 0 "== 1x8x512x64 surrogate seed 3: EVO_SUITE=1x8x512x64 EVO_STRATEGY=surrogate EVO_RNG_SEED=3 EVO_BUDGET=90s" \
  "$script" --dry-run "$bundle" "$scratch/out"
# With GPUs, the runs take them in turn: run i on the (i % count)-th.
check "the first run on the first GPU" 0 "== 1x8x512x64 evolve seed 1 on GPU 2: EVO_SUITE=1x8x512x64" \
  EVO_GPUS="2 5" "$script" --dry-run "$bundle" "$scratch/out"
check "the second run on the second GPU" 0 "== 1x8x512x64 evolve seed 2 on GPU 5: EVO_SUITE=1x8x512x64" \
  EVO_GPUS="2 5" "$script" --dry-run "$bundle" "$scratch/out"
check "the third run on the first GPU again" 0 "== 1x8x512x64 evolve seed 3 on GPU 2: EVO_SUITE=1x8x512x64" \
  EVO_GPUS="2 5" "$script" --dry-run "$bundle" "$scratch/out"
check "the report last" 0 "== bench/search_quality_report.py $scratch/out" \
  "$script" --dry-run "$bundle" "$scratch/out"

((failures == 0)) || { echo "$failures check(s) failed"; exit 1; }
echo "all checks passed"
