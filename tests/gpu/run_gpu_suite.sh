#!/usr/bin/env bash
# Runs the GPU suite from a relocatable bundle on a GPU host and leaves the evidence in OUT_DIR.
#
#   tests/gpu/run_gpu_suite.sh [--shards N] BUNDLE_DIR OUT_DIR [extra gtest args...]
#
# BUNDLE_DIR holds bin/ (evo-worker, ...) and tests/ (gpu_tests; bin/ is searched too). OUT_DIR
# gets: device.txt (nvidia-smi and compute-sanitizer versions), gpu_tests.log (everything the
# tests printed, the per-genome table included), gpu_tests.json (GoogleTest's report) and the
# compile cache. Prints a short summary; the exit status is gpu_tests'.
# --shards N (1-8) runs the suite as N GoogleTest shards side by side on the one GPU, each with a
# compile cache of its own (cache.K, gpu_tests.K.log and .json): the compiles and the sanitizer,
# most of the suite's time, then overlap. gpu_tests.log holds the shards' logs one after another;
# the exit status is the first failing shard's, else 0.
set -uo pipefail
shards=1
if [ "${1:-}" = "--shards" ]; then
  if ! [[ "${2:-}" =~ ^[1-8]$ ]]; then
    echo "run_gpu_suite: --shards needs a number of shards in 1..8, got '${2:-}'" >&2
    exit 2
  fi
  shards=$2
  shift 2
fi
if [ $# -lt 2 ]; then
  echo "usage: run_gpu_suite.sh [--shards N] BUNDLE_DIR OUT_DIR [gtest args...]" >&2
  exit 2
fi
bundle="$1" out="$2"
shift 2
[ -d "$bundle" ] || { echo "run_gpu_suite: bundle '$bundle' does not exist" >&2; exit 2; }
tests_bin=""
for candidate in "$bundle/tests/gpu_tests" "$bundle/bin/gpu_tests"; do
  [ -x "$candidate" ] && { tests_bin="$candidate"; break; }
done
[ -n "$tests_bin" ] || { echo "run_gpu_suite: no gpu_tests under $bundle/tests or $bundle/bin" >&2; exit 2; }
mkdir -p "$out"
out="$(cd "$out" && pwd)"

{
  echo "host: $(hostname)"
  command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv
  cs="${EVO_COMPUTE_SANITIZER:-$(command -v compute-sanitizer || echo "${CUDA_HOME:-/usr/local/cuda}/bin/compute-sanitizer")}"
  if [ -x "$cs" ]; then "$cs" --version | head -3; else echo "compute-sanitizer: not found (sanitizer tests will skip)"; fi
} > "$out/device.txt" 2>&1

# A private compile cache, so that the run compiles what it tests and nothing stale is reused.
start=$(date +%s)
if [ "$shards" -eq 1 ]; then
  EVO_CACHE_DIR="$out/cache" "$tests_bin" --gtest_output="json:$out/gpu_tests.json" "$@" > "$out/gpu_tests.log" 2>&1
  rc=$?
else
  pids=()
  for ((k = 0; k < shards; ++k)); do
    GTEST_TOTAL_SHARDS=$shards GTEST_SHARD_INDEX=$k EVO_CACHE_DIR="$out/cache.$k" \
      "$tests_bin" --gtest_output="json:$out/gpu_tests.$k.json" "$@" > "$out/gpu_tests.$k.log" 2>&1 &
    pids+=($!)
  done
  rc=0
  for ((k = 0; k < shards; ++k)); do
    wait "${pids[$k]}"
    shard_rc=$?
    [ "$rc" -eq 0 ] && rc=$shard_rc
  done
  for ((k = 0; k < shards; ++k)); do cat "$out/gpu_tests.$k.log"; done > "$out/gpu_tests.log"
fi
elapsed=$(( $(date +%s) - start ))

echo "== gpu_tests on $(sed -n 3p "$out/device.txt" 2>/dev/null) — exit $rc after ${elapsed}s ($shards shard(s))"
grep -E '^\[  (PASSED|FAILED|SKIPPED) +\] [0-9]+ tests?' "$out/gpu_tests.log"
if [ "$shards" -gt 1 ]; then  # the shards' counts, added up
  awk '/^\[  (PASSED|FAILED|SKIPPED) +\] [0-9]+ tests?/ { n[$2] += $4 }
       END { printf "== all shards: %d passed, %d failed, %d skipped\n", n["PASSED"], n["FAILED"], n["SKIPPED"] }' \
    "$out/gpu_tests.log"
fi
grep -E '^\[  FAILED  \] [A-Za-z]' "$out/gpu_tests.log" | sort -u
# The genome table of TwentyGenomesSpreadOverTheSpacePassCorrectness.
awk '/^genome +regs/{show=1} show && /^(genome|BLOCK_M=)/{print}' "$out/gpu_tests.log"
echo "logs: $out"
exit $rc
