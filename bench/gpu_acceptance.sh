#!/usr/bin/env bash
# The whole GPU acceptance pass from a relocatable bundle (deploy/bundle.sh), in one go:
#   1. the GPU test suite (tests/gpu/run_gpu_suite.sh),
#   2. `evo-worker eval` of a spread of genomes at 1x8x512x64 (the resource/status/time table),
#   3. a real evolutionary run: evod + one cuda worker + evoctl submit, its leaderboard and export,
#   4. the exported winner against PyTorch SDPA and autotuned Triton (bench/run_gpu_bench.sh).
#
#   bench/gpu_acceptance.sh BUNDLE_DIR OUT_DIR [steps]     steps: any of tests,eval,run,bench (default all)
#
# Every step writes its log into OUT_DIR and the script goes on after a failed step; the exit
# status is non-zero if any step failed.
set -uo pipefail
if [ $# -lt 2 ]; then
  echo "usage: bench/gpu_acceptance.sh BUNDLE_DIR OUT_DIR [tests,eval,run,bench]" >&2
  exit 2
fi
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bundle="$(cd "$1" && pwd)" || exit 2
mkdir -p "$2" && out="$(cd "$2" && pwd)"
steps="${3:-tests,eval,run,bench}"
generations="${EVO_GENERATIONS:-6}"
population="${EVO_POPULATION:-16}"
shape="${EVO_SHAPE:-1x8x512x64}"
export CUDA_HOME="${CUDA_HOME:-/usr/local/cuda}"
export PATH="$CUDA_HOME/bin:$PATH"
export PYTHONUNBUFFERED=1
scratch="$(mktemp -d -t evo-acceptance.XXXXXX)"
export EVO_CACHE_DIR="$scratch/cache"
failed=()
say() { printf '== %s\n' "$*"; }
want() { [[ ",$steps," == *",$1,"* ]]; }

pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null; done
  sleep 1
  for pid in "${pids[@]}"; do kill -KILL "$pid" 2>/dev/null; done
}
trap cleanup EXIT

if want tests; then
  say "GPU test suite"
  "$root/tests/gpu/run_gpu_suite.sh" "$bundle" "$scratch/gpu" || failed+=(tests)
  cp "$scratch/gpu/gpu_tests.log" "$out/gpu_tests.log" 2>/dev/null
  cp "$scratch/gpu/device.txt" "$out/device.txt" 2>/dev/null
fi

if want eval; then
  say "evo-worker eval at $shape"
  genomes=(
    "BLOCK_M=32,BLOCK_N=64,WARPS=4,STAGES=2,SCHEDULE=cp_async,SWIZZLE=1"
    "BLOCK_M=16,BLOCK_N=64,WARPS=4,STAGES=2,SCHEDULE=cp_async,SWIZZLE=1"
    "BLOCK_M=32,BLOCK_N=64,WARPS=4,STAGES=1,SCHEDULE=cp_async,SWIZZLE=1"
    "BLOCK_M=32,BLOCK_N=32,WARPS=4,STAGES=2,SCHEDULE=cp_async,SWIZZLE=1"
    "BLOCK_M=16,BLOCK_N=128,WARPS=8,STAGES=3,SCHEDULE=cp_async,SWIZZLE=1"
    "BLOCK_M=64,BLOCK_N=64,WARPS=8,STAGES=2,SCHEDULE=cp_async,SWIZZLE=1"
    "BLOCK_M=32,BLOCK_N=128,WARPS=8,STAGES=4,SCHEDULE=cp_async,SWIZZLE=1"
    "BLOCK_M=64,BLOCK_N=128,WARPS=4,STAGES=3,SCHEDULE=cp_async,SWIZZLE=1"
    "BLOCK_M=64,BLOCK_N=64,WARPS=4,STAGES=1,SCHEDULE=sync,SWIZZLE=0"
    "BLOCK_M=64,BLOCK_N=64,WARPS=4,STAGES=3,SCHEDULE=cp_async,SWIZZLE=0"
    "BLOCK_M=128,BLOCK_N=64,WARPS=8,STAGES=2,SCHEDULE=cp_async,SWIZZLE=1"
    "BLOCK_M=128,BLOCK_N=128,WARPS=1,STAGES=2,SCHEDULE=cp_async,SWIZZLE=1"
    "BLOCK_M=32,BLOCK_N=64,WARPS=4,STAGES=2,SCHEDULE=cp_async,SWIZZLE=1,SPLIT_KV=2"
    "BLOCK_M=64,BLOCK_N=64,WARPS=4,STAGES=2,SCHEDULE=cp_async,SWIZZLE=1,SPLIT_KV=4"
  )
  mkdir -p "$scratch/eval"
  i=0
  for g in "${genomes[@]}"; do
    i=$((i + 1))
    "$bundle/bin/evo-worker" eval --seed fa_s512_v3 --genome "$g" --shape "$shape" --json \
      > "$scratch/eval/$i.json" 2> "$scratch/eval/$i.err"
    echo "$g" > "$scratch/eval/$i.genome"
  done
  python3 "$root/bench/eval_table.py" "$scratch/eval" | tee "$out/eval_table.md" || failed+=(eval)
fi

if want run; then
  say "evolutionary run: evod + 1 cuda worker, $generations generations x $population at $shape"
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  addr="127.0.0.1:$port"
  export EVO_COORDINATOR="$addr"
  "$bundle/bin/evod" serve --db "$scratch/evo.db" --listen "$addr" > "$out/evod.log" 2>&1 &
  pids+=($!)
  for _ in $(seq 100); do "$bundle/bin/evoctl" runs >/dev/null 2>&1 && break; sleep 0.2; done
  "$bundle/bin/evo-worker" --coordinator "$addr" --backend cuda > "$out/worker.log" 2>&1 &
  pids+=($!)
  run=$("$bundle/bin/evoctl" submit --seed fa_s512_v3 --shape "$shape" --generations "$generations" \
          --population "$population" --rng-seed 7)
  say "run $run"
  timeout "${EVO_RUN_TIMEOUT:-420}" "$bundle/bin/evoctl" status "$run" --watch > "$out/run_watch.log" 2>&1 \
    || failed+=(run-watch)
  tail -n 3 "$out/run_watch.log"
  "$bundle/bin/evoctl" leaderboard "$run" --top 10 | tee "$out/leaderboard.txt"
  "$bundle/bin/evoctl" leaderboard "$run" --top 10 --json > "$out/leaderboard.json"
  mkdir -p "$scratch/export"
  if "$bundle/bin/evoctl" export "$run" --out "$scratch/export/best.cu"; then
    cp "$scratch/export/best.cu" "$scratch/export/best.report.md" "$out/" 2>/dev/null
  else
    failed+=(export)
  fi
  sqlite3 "$scratch/evo.db" "select status, count(*) from evaluations group by status" 2>/dev/null \
    > "$out/evaluation_counts.txt" || true
fi

if want bench; then
  say "benchmark: exported winner vs SDPA backends vs autotuned Triton"
  src="$scratch/export/best.cu"
  [ -f "$src" ] || src=none
  "$root/bench/run_gpu_bench.sh" "$src" "$scratch/bench" > "$out/bench_stdout.log" 2>&1 || failed+=(bench)
  cp "$scratch/bench/compare.txt" "$scratch/bench/compare.json" "$out/" 2>/dev/null
  cat "$out/compare.txt" 2>/dev/null | head -40
fi

if ((${#failed[@]})); then
  say "failed steps: ${failed[*]}"
  exit 1
fi
say "all steps passed"
