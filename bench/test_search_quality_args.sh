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
check "a best known that is no time" 2 "EVO_BEST_KNOWN: '1x8x512x64=fast' is not BxHxSxD=US" \
  EVO_BEST_KNOWN="1x8x512x64=fast" "$script" --dry-run "$bundle" "$scratch/out"
check "a stop that is neither 0 nor 1" 2 "EVO_STOP_AT_TARGET must be 0 or 1, got 'yes'" \
  EVO_STOP_AT_TARGET=yes "$script" --dry-run "$bundle" "$scratch/out"
check "a resume that is neither 0 nor 1" 2 "EVO_RESUME must be 0 or 1, got 'yes'" \
  EVO_RESUME=yes "$script" --dry-run "$bundle" "$scratch/out"
check "a deadline of no time" 2 "EVO_DEADLINE_S must be a positive integer, got '0'" \
  EVO_DEADLINE_S=0 "$script" --dry-run "$bundle" "$scratch/out"
check "a reference that is no file" 2 "EVO_REFERENCE '$scratch/none' is not a readable file" \
  EVO_REFERENCE="$scratch/none" "$script" --dry-run "$bundle" "$scratch/out"
printf '# a comment\n1x8x512x64 BLOCK_M=64\n1x8x512x64 --start-from run-0001\n1x8x512x64 BLOCK_M=32 # two\n' > "$scratch/ref.txt"
check "a reference without a genome for a shape" 2 "EVO_REFERENCE '$scratch/ref.txt' names no genome for 2x8x512x64" \
  EVO_REFERENCE="$scratch/ref.txt" EVO_SUITE="1x8x512x64 2x8x512x64" "$script" --dry-run "$bundle" "$scratch/out"

# The plan: a shape_suite.sh invocation per shape, strategy and seed, then the report.
check "the default plan" 0 "== 1x8x512x64 surrogate seed 3: EVO_SUITE=1x8x512x64 EVO_BUDGET=90s EVO_STRATEGY=surrogate EVO_RNG_SEED=3 EVO_GENERATIONS=200 EVO_POPULATION=16 EVO_BENCH=0" \
  "$script" --dry-run "$bundle" "$scratch/out"
check "no target without a best known" 0 "none" \
  bash -c "'$script' --dry-run '$bundle' '$scratch/out' | grep -q EVO_TARGETS && echo found || echo none"
# With GPUs, the runs take them in turn: run i on the (i % count)-th.
check "the first run on the first GPU" 0 "== 1x8x512x64 evolve seed 1 on GPU 2: EVO_SUITE=1x8x512x64" \
  EVO_GPUS="2 5" "$script" --dry-run "$bundle" "$scratch/out"
check "the second run on the second GPU" 0 "== 1x8x512x64 evolve seed 2 on GPU 5: EVO_SUITE=1x8x512x64" \
  EVO_GPUS="2 5" "$script" --dry-run "$bundle" "$scratch/out"
check "the third run on the first GPU again" 0 "== 1x8x512x64 evolve seed 3 on GPU 2: EVO_SUITE=1x8x512x64" \
  EVO_GPUS="2 5" "$script" --dry-run "$bundle" "$scratch/out"
# A target per bucket: within 1 % of the best known given, or of the reference run's best.
check "a run stops within 1 % of the best known" 0 "EVO_POPULATION=16 EVO_TARGETS=1x8x512x64=5.1510 EVO_BENCH=0" \
  EVO_BEST_KNOWN="1x8x512x64=5.1" "$script" --dry-run "$bundle" "$scratch/out"
check "EVO_STOP_AT_TARGET=0 spends the budget" 0 "none" \
  bash -c "EVO_STOP_AT_TARGET=0 EVO_BEST_KNOWN=1x8x512x64=5.1 '$script' --dry-run '$bundle' '$scratch/out' | grep -q EVO_TARGETS && echo found || echo none"
check "the reference run first, of the file's two genomes and the default" 0 "== 1x8x512x64 reference run: EVO_SUITE=1x8x512x64 EVO_BUDGET=90s EVO_START_FILE=$scratch/ref.txt EVO_STRATEGY=random EVO_RNG_SEED=1 EVO_GENERATIONS=1 EVO_POPULATION=3 EVO_TOP_K=3 EVO_BENCH=0 bench/shape_suite.sh BUNDLE $scratch/out/1x8x512x64-reference" \
  bash -c "EVO_REFERENCE='$scratch/ref.txt' '$script' --dry-run '$bundle' '$scratch/out' | head -1"
check "with GPUs, a reference run on each" 0 "== 1x8x512x64 reference run on GPU 5: EVO_SUITE=1x8x512x64 EVO_BUDGET=90s EVO_START_FILE=$scratch/ref.txt EVO_STRATEGY=random EVO_RNG_SEED=1 EVO_GENERATIONS=1 EVO_POPULATION=3 EVO_TOP_K=3 EVO_BENCH=0 bench/shape_suite.sh BUNDLE $scratch/out/1x8x512x64-reference-gpu5" \
  bash -c "EVO_GPUS='4 5' EVO_REFERENCE='$scratch/ref.txt' '$script' --dry-run '$bundle' '$scratch/out' | head -2"
check "then the runs, each stopping at its GPU's reference's best + 1 %" 0 "== 1x8x512x64 evolve seed 1 on GPU 4: EVO_SUITE=1x8x512x64 EVO_BUDGET=90s EVO_STRATEGY=evolve EVO_RNG_SEED=1 EVO_GENERATIONS=200 EVO_POPULATION=16 EVO_TARGETS=1x8x512x64=<its-GPU's-reference-best+1%>" \
  EVO_GPUS="4 5" EVO_REFERENCE="$scratch/ref.txt" "$script" --dry-run "$bundle" "$scratch/out"
check "no reference run for a bucket whose best is given" 0 "none" \
  bash -c "EVO_BEST_KNOWN=1x8x512x64=5.1 EVO_REFERENCE='$scratch/ref.txt' '$script' --dry-run '$bundle' '$scratch/out' | grep -q 'reference' && echo found || echo none"
check "the report last" 0 "== bench/search_quality_report.py $scratch/out" \
  "$script" --dry-run "$bundle" "$scratch/out"

((failures == 0)) || { echo "$failures check(s) failed"; exit 1; }
echo "all checks passed"
