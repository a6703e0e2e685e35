#!/usr/bin/env bash
# Evaluations per GPU-minute on one GPU (issue 36), worker configurations side by side in one
# call: each runs bench/shape_suite.sh on the same buckets, with the same RNG seed and budget, a
# fresh database and a fresh compile cache, and gets one line of figures from its database.
#
#   bench/throughput.sh [--dry-run] BUNDLE_DIR OUT_DIR
#
# Environment:
#   EVO_THROUGHPUT_CONFIGS  "NAME:WORKER_ARGS;..." in the order run (WORKER_ARGS space-separated
#                       evo-worker options, may be empty). Default:
#                       "per-evaluation:--child-per-evaluation;serving:" (a gate process per
#                       evaluation, as before the serving child, against one serving child)
#   EVO_SUITE           the buckets (default "1x8x512x64 2x8x512x64"), each a run, causal and not
#   EVO_BUDGET          each configuration's wall time (`evoctl submit --budget`, default 60s)
#   EVO_POPULATION      candidates per generation (default 16; 40 generations allowed: the
#                       budget ends the runs)
#   EVO_RNG_SEED        the runs' seed (default 7): every configuration draws the same genomes
#   EVO_WORKER_BACKEND  cuda (default) or model (no GPU, to try the script: figures labelled MODEL)
# Each line: evaluations (confirmations included), the seconds from the first submit to the last
# report, evaluations per minute, and the share of that time the GPU spent in the correctness,
# sanitizer and timing gates (bench/scaling_report.py throughput); OUT_DIR/throughput.txt keeps them.
# Bad arguments: one line, exit 2. A configuration that fails says so, the others run, exit 1.
set -uo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
bench_args throughput "$@"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
configs="${EVO_THROUGHPUT_CONFIGS-per-evaluation:--child-per-evaluation;serving:}"
IFS=';' read -r -a entries <<< "$configs"
((${#entries[@]})) || die "EVO_THROUGHPUT_CONFIGS names no configuration"
for e in "${entries[@]}"; do
  [[ $e =~ ^[A-Za-z0-9_.-]+: ]] || die "EVO_THROUGHPUT_CONFIGS: '$e' is not NAME:WORKER_ARGS"
done
suite="${EVO_SUITE-1x8x512x64 2x8x512x64}"
budget="${EVO_BUDGET:-60s}"
population="${EVO_POPULATION:-16}"
positive EVO_POPULATION "$population"
backend="${EVO_WORKER_BACKEND:-cuda}"
[[ $backend == cuda || $backend == model ]] || die "EVO_WORKER_BACKEND must be cuda or model, got '$backend'"
label=""
[[ $backend == model ]] && label="MODEL "

if ((dry_run)); then
  for e in "${entries[@]}"; do
    echo "== ${e%%:*}: EVO_WORKER_ARGS='${e#*:}' EVO_SUITE='$suite' EVO_BUDGET=$budget EVO_POPULATION=$population" \
         "EVO_BENCH=0 bench/shape_suite.sh BUNDLE $out_arg/${e%%:*}"
  done
  exit 0
fi
mkdir -p "$out_arg" || die "cannot create OUT_DIR '$out_arg'"
out="$(cd "$out_arg" && pwd)"
: > "$out/throughput.txt"
failed=0
for e in "${entries[@]}"; do
  name=${e%%:*} args=${e#*:}
  dir="$out/$name"
  rm -rf "$dir"
  echo "== $name: evo-worker ${args:-(defaults)}, $suite, budget $budget (log: $dir.log)"
  env -u EVO_DB -u EVO_START_FILE -u EVO_EXPORT EVO_WORKER_BACKEND="$backend" EVO_WORKER_ARGS="$args" \
    EVO_BENCH=0 EVO_SUITE="$suite" EVO_BUDGET="$budget" EVO_GENERATIONS=40 EVO_POPULATION="$population" \
    EVO_RNG_SEED="${EVO_RNG_SEED:-7}" "$root/bench/shape_suite.sh" "$bundle" "$dir" > "$dir.log" 2>&1
  rc=$?
  # A worker stopped mid-evaluation finishes it first: the next configuration starts on an idle GPU.
  for _ in $(seq 120); do
    pgrep -f -- "$bundle/bin/evo-worker" > /dev/null || break
    sleep 0.5
  done
  if ! figures=$(python3 "$root/bench/scaling_report.py" throughput "$dir/evo.db"); then
    echo "!! $name: no evaluation stored (shape_suite exit $rc; see $dir.log)"
    failed=1
    continue
  fi
  ((rc == 0)) || { echo "!! $name: shape_suite exited $rc (see $dir.log)"; failed=1; }
  printf '%s%-16s %s\n' "$label" "$name" "$figures" | tee -a "$out/throughput.txt"
done
exit "$failed"
