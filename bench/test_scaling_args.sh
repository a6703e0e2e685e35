#!/usr/bin/env bash
# scaling.sh's argument checks and its plan (--dry-run), which start nothing: each bad input gets
# one line and exit 2. Needs no GPU and no build (the bundle is a folder of stand-in executables).
set -uo pipefail
script="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/scaling.sh"
source "$(dirname "${BASH_SOURCE[0]}")/test_lib.sh"
# The plan for the 8-GPU host, wherever this runs: no nvidia-smi on PATH.
path_without_smi="$scratch/path"
mkdir -p "$path_without_smi"
for tool in bash sh env seq awk sed grep cat mktemp rm mkdir dirname python3 chmod tr; do
  ln -sf "$(command -v "$tool")" "$path_without_smi/$tool"
done

check_env=(env -u CUDA_VISIBLE_DEVICES PATH="$path_without_smi")

check "no bundle" 2 "does not exist" "$script" --dry-run "$scratch/none" "$scratch/out"
check "bad backend" 2 "EVO_WORKER_BACKEND must be cuda or model, got 'gpu'" \
  EVO_WORKER_BACKEND=gpu "$script" --dry-run "$bundle" "$scratch/out"
check "unknown step" 2 "EVO_SCALING_STEPS: unknown step 'warmup'" \
  EVO_SCALING_STEPS="scaling warmup" "$script" --dry-run "$bundle" "$scratch/out"
check "zero population" 2 "EVO_POPULATION must be a positive integer, got '0'" \
  EVO_POPULATION=0 "$script" --dry-run "$bundle" "$scratch/out"
check "more workers than GPUs" 2 "EVO_SCALING_WORKERS: 16 workers, but this host has 8 GPU(s)" \
  EVO_SCALING_WORKERS="1 16" "$script" --dry-run "$bundle" "$scratch/out"
check "a kill shape that is not BxHxSxD" 2 "EVO_KILL_SHAPE: '2x8x512' is not BxHxSxD" \
  EVO_KILL_SHAPE=2x8x512 "$script" --dry-run "$bundle" "$scratch/out"
check "CUDA_VISIBLE_DEVICES set" 2 "CUDA_VISIBLE_DEVICES is set ('3')" \
  CUDA_VISIBLE_DEVICES=3 "$script" --dry-run "$bundle" "$scratch/out"
check "no start genome for the isolation shape" 2 "bench/suite_starts.txt has none for 3x3x64x64" \
  EVO_ISOLATION_SHAPE=3x3x64x64 "$script" --dry-run "$bundle" "$scratch/out"

# The plan: every count on its first k GPUs, --all-gpus; model workers labelled as such.
check "8 workers on GPUs 0-7" 0 "CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6,7 EVO_WORKER_ARGS=--all-gpus EVO_BENCH=0" \
  "$script" --dry-run "$bundle" "$scratch/out"
check "one worker alone: the budget's time" 0 "(100 candidates, about 270 s)" \
  "$script" --dry-run "$bundle" "$scratch/out"
check "neighbours on the other GPUs" 0 "with workers on GPUs 1,2,3,4,5,6,7 busy" \
  "$script" --dry-run "$bundle" "$scratch/out"
check "model workers" 0 "EVO_WORKER_ARGS='--workers 2' EVO_BENCH=0 EVO_GENERATIONS=1 EVO_POPULATION=3" \
  EVO_WORKER_BACKEND=model "$script" --dry-run "$bundle" "$scratch/out"
check "model runs are labelled" 0 "MODEL workers, plumbing only" \
  EVO_WORKER_BACKEND=model "$script" --dry-run "$bundle" "$scratch/out"
check "one step alone" 0 "kill: evod --lease-ttl-ms 5000, evo-worker --backend model --workers 3" \
  EVO_WORKER_BACKEND=model EVO_SCALING_STEPS=kill EVO_SCALING_WORKERS="1 3" "$script" --dry-run "$bundle" "$scratch/out"

((failures == 0)) || { echo "$failures check(s) failed"; exit 1; }
echo "all checks passed"
