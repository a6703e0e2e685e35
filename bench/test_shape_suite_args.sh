#!/usr/bin/env bash
# shape_suite.sh's argument checks and its plan (--dry-run), which start nothing: each bad input
# gets one line and exit 2, and the plan names the runs each bucket gets. Needs no GPU and no build
# (the bundle is a folder of stand-in executables).
set -uo pipefail
suite="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/shape_suite.sh"
source "$(dirname "${BASH_SOURCE[0]}")/test_lib.sh"

check "no bundle" 2 "does not exist" "$suite" --dry-run "$scratch/none" "$scratch/out"
check "bad EVO_SPLIT_CAUSAL" 2 "EVO_SPLIT_CAUSAL must be 0 or 1, got '2'" \
  EVO_SPLIT_CAUSAL=2 "$suite" --dry-run "$bundle" "$scratch/out"
check "bad EVO_FITNESS_INPUTS" 2 "EVO_FITNESS_INPUTS must be rotated or resident" \
  EVO_FITNESS_INPUTS=hot "$suite" --dry-run "$bundle" "$scratch/out"
check "bad EVO_DTYPE" 2 "EVO_DTYPE must be fp16, bf16 or e4m3, got 'fp8'" \
  EVO_DTYPE=fp8 "$suite" --dry-run "$bundle" "$scratch/out"
# e4m3 reaches every run's submit and the bench (its FP8 rows); fp16 stays the default.
check "EVO_DTYPE=e4m3 reaches the submits" 0 "--shape 1x8x512x64:causal --generations 3 --population 12 --top-k 3 --rng-seed 7 --strategy evolve --fitness-inputs rotated --dtype e4m3" \
  EVO_DTYPE=e4m3 EVO_SUITE="1x8x512x64 2x8x512x64" "$suite" --dry-run "$bundle" "$scratch/out"
check "EVO_DTYPE=e4m3 reaches the bench" 0 "--shapes 1x8x512x64 2x8x512x64 --causal both --rounds 1 --dtype e4m3" \
  EVO_DTYPE=e4m3 EVO_SUITE="1x8x512x64 2x8x512x64" "$suite" --dry-run "$bundle" "$scratch/out"
n=$(count "--dtype fp16" EVO_SUITE="1x8x512x64 2x8x512x64" "$suite" --dry-run "$bundle" "$scratch/out")
if [[ $n == 3 ]]; then
  echo "ok   fp16 by default: 2 submits and the bench"
else
  echo "FAIL --dtype fp16 on $n planned lines (want 3: 2 submits and the bench)"
  failures=$((failures + 1))
fi
check "a shape that is not BxHxSxD" 2 "'1x8x512' is not BxHxSxD" \
  EVO_SUITE=1x8x512 "$suite" --dry-run "$bundle" "$scratch/out"
printf '1x8x512x64\n' > "$scratch/starts.txt"
check "a start line without a genome" 2 "EVO_START_FILE line 1" \
  EVO_START_FILE="$scratch/starts.txt" "$suite" --dry-run "$bundle" "$scratch/out"
printf '2x8x512x64 --start-from\n' > "$scratch/from.txt"
check "a --start-from line without a run" 2 "EVO_START_FILE line 1: expected 'BxHxSxD --start-from RUN'" \
  EVO_START_FILE="$scratch/from.txt" "$suite" --dry-run "$bundle" "$scratch/out"
printf '# comment\n\n2x8x512x64 BLOCK_M=64 extra\n' > "$scratch/two.txt"
check "a genome line with a second word" 2 "EVO_START_FILE line 3: expected 'BxHxSxD GENOME' or" \
  EVO_START_FILE="$scratch/two.txt" "$suite" --dry-run "$bundle" "$scratch/out"

check "a shell word in EVO_WORKER_ARGS" 2 "EVO_WORKER_ARGS: '\$(id)' is not an option" \
  EVO_WORKER_ARGS='--all-gpus $(id)' "$suite" --dry-run "$bundle" "$scratch/out"
check "worker options reach the worker's command" 0 "evo-worker --backend model --workers 4 --compile-threads 1   (log:" \
  EVO_WORKER_BACKEND=model EVO_WORKER_ARGS="--workers 4 --compile-threads 1" "$suite" --dry-run "$bundle" "$scratch/out"

# Start lines reach their bucket's submit only: genomes as --start, earlier runs as --start-from
# (a model screen's start_from.txt).
printf '2x8x512x64 BLOCK_M=64,WARPS=8\n2x8x512x64 --start-from run-0007  # the screen\n1x8x512x64 --start-from run-0003\n' \
  > "$scratch/mixed.txt"
check "starts and runs for a bucket" 0 \
  "--fitness-inputs rotated --start BLOCK_M=64,WARPS=8 --start-from run-0007" \
  EVO_START_FILE="$scratch/mixed.txt" EVO_SUITE="2x8x512x64 16x16x512x64" "$suite" --dry-run "$bundle" "$scratch/out"
n=$(count "--start-from" EVO_START_FILE="$scratch/mixed.txt" EVO_SUITE="2x8x512x64 16x16x512x64" \
  "$suite" --dry-run "$bundle" "$scratch/out")
if [[ $n == 1 ]]; then
  echo "ok   a bucket outside the suite gets nothing, another bucket nothing of 2x8's"
else
  echo "FAIL --start-from in $n planned submits (want 1)"
  failures=$((failures + 1))
fi

# The dry run estimates the runs' time from the budget and warns when EVO_RUN_TIMEOUT is shorter.
check "the default budget fits the default timeout" 0 "about 450 s for 180 candidates" \
  "$suite" --dry-run "$bundle" "$scratch/out"
w=$(count "warning: EVO_RUN_TIMEOUT" "$suite" --dry-run "$bundle" "$scratch/out")
check "a timeout shorter than the budget" 0 "warning: EVO_RUN_TIMEOUT=100 is shorter" \
  EVO_RUN_TIMEOUT=100 "$suite" --dry-run "$bundle" "$scratch/out"
if [[ $w == 0 ]]; then echo "ok   no warning where the budget fits"; else
  echo "FAIL a warning where the default budget fits the default timeout"; failures=$((failures + 1)); fi

# One run per bucket covers both causal settings; EVO_SPLIT_CAUSAL=1 gives each its own.
check "one run per bucket" 0 "--shape 1x8x512x64 --shape 1x8x512x64:causal --generations" \
  EVO_SUITE="1x8x512x64 2x8x512x64" "$suite" --dry-run "$bundle" "$scratch/out"
check "one run per causal setting" 0 "wait for the 4 runs" \
  EVO_SPLIT_CAUSAL=1 EVO_SUITE="1x8x512x64 2x8x512x64" "$suite" --dry-run "$bundle" "$scratch/out"
n=$(count "evoctl submit" EVO_SPLIT_CAUSAL=1 EVO_SUITE="1x8x512x64 2x8x512x64" "$suite" --dry-run "$bundle" "$scratch/out")
c=$(count "fa_s512_v3 --shape 2x8x512x64:causal --generations" EVO_SPLIT_CAUSAL=1 EVO_SUITE="1x8x512x64 2x8x512x64" \
  "$suite" --dry-run "$bundle" "$scratch/out")
if [[ $n == 4 && $c == 1 ]]; then
  echo "ok   split plan: 4 submits, 2x8x512x64:causal alone in one"
else
  echo "FAIL split plan: $n submits (want 4), $c with 2x8x512x64:causal alone (want 1)"
  failures=$((failures + 1))
fi

# Budgets: the wall time and the patience go to every run, the evaluations are shared by weight.
check "a budget that is no duration" 2 "EVO_BUDGET must be a duration" \
  EVO_BUDGET=soon "$suite" --dry-run "$bundle" "$scratch/out"
check "weights without evaluations to share" 2 "EVO_WEIGHTS shares EVO_MAX_EVALS" \
  EVO_WEIGHTS="1x8x512x64=3" "$suite" --dry-run "$bundle" "$scratch/out"
check "a weight for a bucket the suite lacks" 2 "EVO_WEIGHTS names '4x8x512x64'" \
  EVO_MAX_EVALS=40 EVO_WEIGHTS="4x8x512x64=3" EVO_SUITE="1x8x512x64 2x8x512x64" "$suite" --dry-run "$bundle" "$scratch/out"
check "EVO_STRATEGY reaches the submits" 0 "--rng-seed 7 --strategy surrogate --fitness-inputs rotated" \
  EVO_STRATEGY=surrogate "$suite" --dry-run "$bundle" "$scratch/out"
check "an unknown EVO_STRATEGY" 2 "EVO_STRATEGY must be evolve, surrogate, random or exhaustive, got 'greedy'" \
  EVO_STRATEGY=greedy "$suite" --dry-run "$bundle" "$scratch/out"
check "the weighted share of the evaluations" 0 "--shape 1x8x512x64:causal --generations 3 --population 12 --top-k 3 --rng-seed 7 --strategy evolve --fitness-inputs rotated --budget 10m --patience 2 --max-evals 30" \
  EVO_BUDGET=10m EVO_PATIENCE=2 EVO_MAX_EVALS=40 EVO_WEIGHTS="1x8x512x64=3" EVO_SUITE="1x8x512x64 2x8x512x64" \
  "$suite" --dry-run "$bundle" "$scratch/out"
check "the other bucket's share" 0 "--shape 2x8x512x64:causal --generations 3 --population 12 --top-k 3 --rng-seed 7 --strategy evolve --fitness-inputs rotated --budget 10m --patience 2 --max-evals 10" \
  EVO_BUDGET=10m EVO_PATIENCE=2 EVO_MAX_EVALS=40 EVO_WEIGHTS="1x8x512x64=3" EVO_SUITE="1x8x512x64 2x8x512x64" \
  "$suite" --dry-run "$bundle" "$scratch/out"

# Targets: per bucket, onto that bucket's run alone.
check "a target that is no time" 2 "EVO_TARGETS: '1x8x512x64=fast' is not BxHxSxD=US" \
  EVO_TARGETS="1x8x512x64=fast" "$suite" --dry-run "$bundle" "$scratch/out"
check "a target for a bucket the suite lacks" 2 "EVO_TARGETS names '4x8x512x64'" \
  EVO_TARGETS="4x8x512x64=5" "$suite" --dry-run "$bundle" "$scratch/out"
check "a target with the causal runs apart" 2 "not with EVO_SPLIT_CAUSAL=1" \
  EVO_TARGETS="1x8x512x64=5" EVO_SPLIT_CAUSAL=1 "$suite" --dry-run "$bundle" "$scratch/out"
check "a bucket's target" 0 "--shape 1x8x512x64:causal --generations 3 --population 12 --top-k 3 --rng-seed 7 --strategy evolve --fitness-inputs rotated --target-us 5.25 --dtype" \
  EVO_TARGETS="1x8x512x64=5.25" EVO_SUITE="1x8x512x64 2x8x512x64" "$suite" --dry-run "$bundle" "$scratch/out"
check "no target for the other bucket" 0 "--shape 2x8x512x64:causal --generations 3 --population 12 --top-k 3 --rng-seed 7 --strategy evolve --fitness-inputs rotated --dtype" \
  EVO_TARGETS="1x8x512x64=5.25" EVO_SUITE="1x8x512x64 2x8x512x64" "$suite" --dry-run "$bundle" "$scratch/out"

# A workload file: one submit of it (evoctl plans its buckets and shares the evaluations), and the
# bench on its own shapes; a suite or weights beside it are refused.
workload="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/workloads/llama3-8b.json"
check "a workload is one submit of the file" 0 "evoctl submit --workload $workload --generations 3 --population 12 --top-k 3 --rng-seed 7 --strategy evolve --fitness-inputs rotated --budget 3m --max-evals 60" \
  EVO_WORKLOAD="$workload" EVO_BUDGET=3m EVO_MAX_EVALS=60 "$suite" --dry-run "$bundle" "$scratch/out"
check "a workload's bench runs its shapes" 0 "--suite $workload --rounds 1" \
  EVO_WORKLOAD="$workload" "$suite" --dry-run "$bundle" "$scratch/out"
fp8_workload="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/workloads/fp8.json"
check "the FP8 workload is one submit and its bench" 0 "--suite $fp8_workload --rounds 1" \
  EVO_WORKLOAD="$fp8_workload" "$suite" --dry-run "$bundle" "$scratch/out"
check "a workload beside a suite" 2 "EVO_WORKLOAD names the shapes and their weights" \
  EVO_WORKLOAD="$workload" EVO_SUITE=1x8x512x64 "$suite" --dry-run "$bundle" "$scratch/out"
check "a target with a workload" 2 "EVO_TARGETS is not for EVO_WORKLOAD's runs" \
  EVO_WORKLOAD="$workload" EVO_TARGETS="1x8x512x64=5" "$suite" --dry-run "$bundle" "$scratch/out"
check "a workload that is no file" 2 "EVO_WORKLOAD '$scratch/none.json' is not a readable file" \
  EVO_WORKLOAD="$scratch/none.json" "$suite" --dry-run "$bundle" "$scratch/out"

((failures == 0)) || { echo "$failures check(s) failed"; exit 1; }
echo "all checks passed"
