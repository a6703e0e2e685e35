#!/usr/bin/env bash
# Runs the GPU suite from a relocatable bundle on a GPU host and leaves the evidence in OUT_DIR.
#
#   tests/gpu/run_gpu_suite.sh BUNDLE_DIR OUT_DIR [extra gtest args...]
#
# BUNDLE_DIR holds bin/ (evo-worker, ...) and tests/ (gpu_tests; bin/ is searched too). OUT_DIR
# gets: device.txt (nvidia-smi and compute-sanitizer versions), gpu_tests.log (everything the
# tests printed, the per-genome table included), gpu_tests.json (GoogleTest's report) and the
# compile cache. Prints a short summary; the exit status is gpu_tests'.
set -uo pipefail
if [ $# -lt 2 ]; then
  echo "usage: run_gpu_suite.sh BUNDLE_DIR OUT_DIR [gtest args...]" >&2
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
export EVO_CACHE_DIR="$out/cache"
start=$(date +%s)
"$tests_bin" --gtest_output="json:$out/gpu_tests.json" "$@" > "$out/gpu_tests.log" 2>&1
rc=$?
elapsed=$(( $(date +%s) - start ))

echo "== gpu_tests on $(sed -n 3p "$out/device.txt" 2>/dev/null) — exit $rc after ${elapsed}s"
grep -E '^\[  (PASSED|FAILED|SKIPPED) +\] [0-9]+ tests?' "$out/gpu_tests.log"
grep -E '^\[  FAILED  \] [A-Za-z]' "$out/gpu_tests.log" | sort -u
# The genome table of TwentyGenomesSpreadOverTheSpacePassCorrectness.
awk '/^genome +regs/{show=1} show && /^(genome|BLOCK_M=)/{print}' "$out/gpu_tests.log"
echo "logs: $out"
exit $rc
