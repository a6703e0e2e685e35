#!/usr/bin/env bash
# The shape suite of issue 5 on one GPU host, from a relocatable bundle (deploy/bundle.sh):
#   1. evod + one `evo-worker --backend cuda` on loopback (as bench/gpu_acceptance.sh's run step),
#   2. one run per shape bucket, each covering its shape causal and non-causal
#      (`--shape S --shape S:causal`), all submitted at once so the worker always has work,
#   3. waits for all of them, prints each leaderboard,
#   4. exports the winners as ONE dispatch table: `evoctl export r1 r2 ... --out OUT/table.cu`
#      (also OUT/table.report.md and OUT/table.dispatch.json),
#   5. benchmarks exactly that table: `bench/run_gpu_bench.sh OUT/table.dispatch.json OUT/bench`.
#
#   bench/shape_suite.sh [--dry-run] BUNDLE_DIR OUT_DIR
#
# Environment (small budgets by default, so that the whole script ends within ~9 minutes):
#   EVO_GENERATIONS   generations per run (default 3)
#   EVO_POPULATION    candidates per generation (default 12)
#   EVO_TOP_K         elites kept per run (default 3)
#   EVO_SUITE         the shape buckets, space-separated BxHxSxD
#                     (default "1x8x512x64 2x8x512x64 16x16x512x64 4x16x2048x64 2x16x4096x128")
#   EVO_RUN_TIMEOUT   seconds to wait for all runs together (default 300); runs still going then are
#                     cancelled and those with an elite are exported anyway (the report says which)
#   EVO_WORKER_BACKEND  cuda (default) or model (no GPU: every figure ESTIMATED; for trying the script)
#   EVO_BENCH         1 (default) runs step 5; 0 skips it
#
# Expected time on an H100/H200 with the defaults (5 runs x 3 generations x 12 = 180 candidates,
# plus a confirming second measurement and the sanitizer for each would-be elite):
#   daemons up ~5 s; runs ~4-5 min: compiles run in parallel on the host's CPUs, and each
#   evaluation of the big shapes (4x16x2048x64, 2x16x4096x128) takes ~1 s of timing, the small ones
#   well under that; the sanitizer pass of each elite candidate ~5-10 s; export ~1 s; bench ~3 min:
#   nvcc builds the table (~1-2 min, every variant for both head dims and both causal settings),
#   Triton pre-compiles its configs (~30 s), then ~3-5 s per shape and causal setting.
# --dry-run checks the arguments, the bundle and the budgets, prints every step it would take, and
# starts nothing.
#
# On any failure the script says what failed (and where its log is), goes on where it can, always
# stops the daemons it started, and exits non-zero.
set -uo pipefail

usage() { echo "usage: bench/shape_suite.sh [--dry-run] BUNDLE_DIR OUT_DIR" >&2; exit 2; }
die() { echo "shape_suite: $*" >&2; exit 2; }

dry_run=0
if [[ ${1:-} == --dry-run ]]; then dry_run=1; shift; fi
[[ $# -eq 2 ]] || usage
[[ -d $1 ]] || die "bundle directory '$1' does not exist"
bundle="$(cd "$1" && pwd)"
for bin in evod evo-worker evoctl; do
  [[ -x $bundle/bin/$bin ]] || die "bundle '$bundle' has no executable bin/$bin (build it with deploy/bundle.sh)"
done

positive() {  # $1: name, $2: value
  [[ $2 =~ ^[1-9][0-9]*$ ]] || die "$1 must be a positive integer, got '$2'"
}
generations="${EVO_GENERATIONS:-3}"
population="${EVO_POPULATION:-12}"
top_k="${EVO_TOP_K:-3}"
run_timeout="${EVO_RUN_TIMEOUT:-300}"
backend="${EVO_WORKER_BACKEND:-cuda}"
bench="${EVO_BENCH:-1}"
positive EVO_GENERATIONS "$generations"
positive EVO_POPULATION "$population"
positive EVO_TOP_K "$top_k"
positive EVO_RUN_TIMEOUT "$run_timeout"
[[ $backend == cuda || $backend == model ]] || die "EVO_WORKER_BACKEND must be cuda or model, got '$backend'"
[[ $bench == 0 || $bench == 1 ]] || die "EVO_BENCH must be 0 or 1, got '$bench'"
read -r -a suite <<< "${EVO_SUITE:-1x8x512x64 2x8x512x64 16x16x512x64 4x16x2048x64 2x16x4096x128}"
((${#suite[@]})) || die "EVO_SUITE names no shape"
declare -A seen_shape=()
for s in "${suite[@]}"; do
  # evod checks the shapes for real; this catches a typo before any daemon starts.
  [[ $s =~ ^[1-9][0-9]*x[1-9][0-9]*x[1-9][0-9]*x[1-9][0-9]*$ ]] \
    || die "EVO_SUITE: '$s' is not BxHxSxD (the causal variant of each shape is added here)"
  [[ -z ${seen_shape[$s]:-} ]] || die "EVO_SUITE names '$s' twice: a shape belongs to one bucket"
  seen_shape[$s]=1
done

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
if ((dry_run)); then
  out="$2"
else
  mkdir -p "$2" || die "cannot create OUT_DIR '$2'"
  out="$(cd "$2" && pwd)"
fi

say() { printf '== %s\n' "$*"; }
failed=()
fail() { failed+=("$1"); printf '!! %s failed: %s\n' "$1" "$2"; }

if ((dry_run)); then
  say "dry run: nothing is started"
  say "evod serve --db <scratch>/evo.db --listen 127.0.0.1:<free port>   (log: $out/evod.log)"
  say "evo-worker --backend $backend   (log: $out/worker.log)"
  for s in "${suite[@]}"; do
    say "evoctl submit --seed fa_s512_v3 --shape $s --shape $s:causal --generations $generations" \
        "--population $population --top-k $top_k"
  done
  say "wait for the ${#suite[@]} runs (at most ${run_timeout} s together), then print each leaderboard"
  say "evoctl export <the ${#suite[@]} runs> --out $out/table.cu"
  if ((bench)); then
    say "bench/run_gpu_bench.sh $out/table.dispatch.json $out/bench --shapes ${suite[*]} --causal both"
  else
    say "bench skipped (EVO_BENCH=0)"
  fi
  exit 0
fi

export CUDA_HOME="${CUDA_HOME:-/usr/local/cuda}"
export PATH="$CUDA_HOME/bin:$PATH"
export PYTHONUNBUFFERED=1
scratch="$(mktemp -d -t evo-shape-suite.XXXXXX)"
export EVO_CACHE_DIR="$scratch/cache"
evoctl="$bundle/bin/evoctl"

# The daemons this script started, stopped however it ends (TERM, then KILL what is left).
pids=()
# shellcheck disable=SC2317  # reached through the EXIT trap
cleanup() {
  local status=$?
  if ((${#pids[@]})); then
    say "stopping evod and the worker"
    for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null; done
    for _ in $(seq 20); do
      local alive=0
      for pid in "${pids[@]}"; do kill -0 "$pid" 2>/dev/null && alive=1; done
      ((alive)) || break
      sleep 0.25
    done
    for pid in "${pids[@]}"; do kill -KILL "$pid" 2>/dev/null; done
  fi
  cp "$scratch"/evo.db* "$out/" 2>/dev/null  # the runs' database (with its WAL), for a later look
  rm -rf "$scratch"
  exit "$status"
}
trap cleanup EXIT
trap 'echo "shape_suite: interrupted"; exit 130' INT TERM

finish() {
  if ((${#failed[@]})); then
    say "failed steps: ${failed[*]} (logs in $out)"
    exit 1
  fi
  say "all steps passed; table: $out/table.cu$( ((bench)) && echo ", bench: $out/bench/compare.txt")"
  exit 0
}

# 1. Daemons.
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])') \
  || { fail daemons "python3 is needed to pick a free port"; finish; }
addr="127.0.0.1:$port"
export EVO_COORDINATOR="$addr"
say "evod on $addr, one $backend worker"
"$bundle/bin/evod" serve --db "$scratch/evo.db" --listen "$addr" > "$out/evod.log" 2>&1 &
pids+=($!)
up=0
for _ in $(seq 100); do
  if "$evoctl" runs > /dev/null 2>&1; then up=1; break; fi
  kill -0 "${pids[0]}" 2>/dev/null || break
  sleep 0.2
done
if ((!up)); then
  fail daemons "evod did not answer on $addr; last lines of $out/evod.log:"
  tail -n 5 "$out/evod.log"
  finish
fi
"$bundle/bin/evo-worker" --coordinator "$addr" --backend "$backend" > "$out/worker.log" 2>&1 &
pids+=($!)
sleep 1
if ! kill -0 "${pids[1]}" 2>/dev/null; then
  fail worker "evo-worker exited at once; last lines of $out/worker.log:"
  tail -n 5 "$out/worker.log"
  finish
fi

# 2. One run per shape bucket, causal and non-causal.
runs=()
for s in "${suite[@]}"; do
  if run=$("$evoctl" submit --seed fa_s512_v3 --shape "$s" --shape "$s:causal" --generations "$generations" \
             --population "$population" --top-k "$top_k" --rng-seed 7 2> "$out/submit-$s.err"); then
    say "run $run: $s and $s:causal"
    runs+=("$run")
  else
    fail "submit-$s" "$(cat "$out/submit-$s.err")"
  fi
done
((${#runs[@]})) || finish

# 3. Wait for every run under one deadline; cancel what is still going when it passes.
deadline=$((SECONDS + run_timeout))
for run in "${runs[@]}"; do
  left=$((deadline - SECONDS))
  ((left > 0)) || left=1
  timeout "$left" "$evoctl" status "$run" --watch > "$out/watch-$run.log" 2>&1
  rc=$?
  tail -n 1 "$out/watch-$run.log"
  if ((rc == 124)); then
    fail "run-$run" "not done after ${run_timeout} s: cancelled, its elites so far are kept"
    "$evoctl" cancel "$run" || true
  elif ((rc != 0)); then
    fail "run-$run" "see $out/watch-$run.log"
  fi
done
if ! kill -0 "${pids[1]}" 2>/dev/null; then
  fail worker "evo-worker died during the runs; last lines of $out/worker.log:"
  tail -n 5 "$out/worker.log"
fi
exportable=()
for run in "${runs[@]}"; do
  say "leaderboard of $run"
  "$evoctl" leaderboard "$run" --top 5 | tee "$out/leaderboard-$run.txt"
  # Proto JSON leaves out an empty list: no "elites" key, no winner to export.
  if "$evoctl" leaderboard "$run" --top 1 --json 2> /dev/null | grep -q '"elites"'; then
    exportable+=("$run")
  else
    fail "elite-$run" "run $run has no confirmed elite: its shapes are left out of the table"
  fi
done
((${#exportable[@]})) || finish

# 4. One dispatch table of every winner.
say "evoctl export ${exportable[*]} --out $out/table.cu"
if ! "$evoctl" export "${exportable[@]}" --out "$out/table.cu" 2>&1 | tee "$out/export.log"; then
  fail export "see $out/export.log"
  finish
fi

# 5. The table against SDPA and autotuned Triton, on the suite's shapes.
if ((bench)); then
  say "bench/run_gpu_bench.sh $out/table.dispatch.json $out/bench"
  if "$root/bench/run_gpu_bench.sh" "$out/table.dispatch.json" "$out/bench" --shapes "${suite[@]}" \
       --causal both > "$out/bench.log" 2>&1; then
    tail -n 30 "$out/bench/compare.txt"
  else
    fail bench "see $out/bench.log"
    tail -n 10 "$out/bench.log"
  fi
fi
finish
