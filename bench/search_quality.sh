#!/usr/bin/env bash
# Search quality (issue 36): how soon each strategy reaches within 1 % of the best time known, from
# no warm start, one run at a time on one worker. Every (shape, strategy, seed) is its own
# bench/shape_suite.sh invocation with a fresh database and compile cache, a wall-time budget and
# no bench step; bench/search_quality_report.py then reads the databases.
#
#   bench/search_quality.sh [--dry-run] BUNDLE_DIR OUT_DIR
#
# Environment:
#   EVO_SUITE        the shape buckets, space-separated BxHxSxD (default "1x8x512x64"); a bucket's run
#                    ranks genomes over S and S:causal, as shape_suite.sh's runs do
#   EVO_STRATEGIES   default "evolve surrogate random"
#   EVO_SEEDS        RNG seeds, default "1 2 3"
#   EVO_BUDGET       each run's wall time from its first lease (default 90s)
#   EVO_POPULATION   candidates per generation (default 16)
#   EVO_BEST_KNOWN   "BxHxSxD=US ..." the best time known per bucket (the exhaustive or best-ever
#                    figure); default: the best any run of this invocation reached
#   EVO_WORKER_BACKEND  cuda (default) or model (no GPU: figures labelled MODEL)
#   EVO_GPUS         device indices, space-separated ("0 1 2 3"): that many runs at once, each on
#                    its own GPU (CUDA_VISIBLE_DEVICES) with its own daemons, each GPU taking its share
#                    of the runs in turn; a run's figures are its GPU's alone, as with one GPU
#                    (with the model backend: that many runs side by side on the CPU). Default: one
#                    run at a time on the GPUs the environment shows the worker
#   EVO_SHAPE_SUITE  the script each run calls with BUNDLE_DIR and its folder (default
#                    bench/shape_suite.sh; bench/test_search_quality_runs.sh puts a stand-in here)
# Writes OUT_DIR/quality.txt: per run, its best, and the seconds and evaluations it took to come
# within 1 % of the best known; then per strategy the median over its runs.
# Bad arguments: one line, exit 2. A run that fails says so, the others go on, exit 1.
set -uo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
bench_args search_quality "$@"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
read -r -a suite <<< "${EVO_SUITE-1x8x512x64}"
read -r -a strategies <<< "${EVO_STRATEGIES-evolve surrogate random}"
read -r -a seeds <<< "${EVO_SEEDS-1 2 3}"
budget="${EVO_BUDGET:-90s}"
population="${EVO_POPULATION:-16}"
backend="${EVO_WORKER_BACKEND:-cuda}"
((${#suite[@]})) || die "EVO_SUITE names no shape"
((${#strategies[@]})) || die "EVO_STRATEGIES names no strategy"
((${#seeds[@]})) || die "EVO_SEEDS names no seed"
for s in "${strategies[@]}"; do
  [[ $s =~ ^(evolve|surrogate|random)$ ]] || die "EVO_STRATEGIES: '$s' is not evolve, surrogate or random"
done
for seed in "${seeds[@]}"; do positive EVO_SEEDS "$seed"; done
positive EVO_POPULATION "$population"
[[ $backend == cuda || $backend == model ]] || die "EVO_WORKER_BACKEND must be cuda or model, got '$backend'"
[[ $budget =~ ^[0-9]+[smh]?$|^[0-9]+m[0-9]+s$ ]] || die "EVO_BUDGET must be a duration (90s, 2m), got '$budget'"
shape_suite="${EVO_SHAPE_SUITE:-$root/bench/shape_suite.sh}"
[[ -x $shape_suite ]] || die "EVO_SHAPE_SUITE '$shape_suite' is not an executable file"
read -r -a gpus <<< "${EVO_GPUS-}"
declare -A gpu_seen=()
for g in "${gpus[@]}"; do
  [[ $g =~ ^[0-9]+$ ]] || die "EVO_GPUS: '$g' is not a device index"
  [[ -z ${gpu_seen[$g]-} ]] || die "EVO_GPUS names device $g twice"
  gpu_seen[$g]=1
done

# The runs in order, and the GPU slot each takes (run i on slot i % slots).
runs=()
for shape in "${suite[@]}"; do
  for s in "${strategies[@]}"; do
    for seed in "${seeds[@]}"; do runs+=("$shape $s $seed"); done
  done
done
slots=$((${#gpus[@]} > 0 ? ${#gpus[@]} : 1))

# `on GPU g` where runs are placed, else nothing.
placement() { ((${#gpus[@]})) && echo " on GPU ${gpus[$1]}"; }

if ((dry_run)); then
  for i in "${!runs[@]}"; do
    read -r shape s seed <<< "${runs[$i]}"
    echo "== $shape $s seed $seed$(placement $((i % slots))): EVO_SUITE=$shape EVO_STRATEGY=$s EVO_RNG_SEED=$seed" \
         "EVO_BUDGET=$budget EVO_POPULATION=$population EVO_BENCH=0 bench/shape_suite.sh BUNDLE $out_arg/$shape-$s-$seed"
  done
  echo "== bench/search_quality_report.py $out_arg"
  exit 0
fi
mkdir -p "$out_arg" || die "cannot create OUT_DIR '$out_arg'"
out="$(cd "$out_arg" && pwd)"

# One run; 1 if its shape_suite.sh failed. $1: the run ("shape strategy seed"), $2: its slot.
one_run() {
  local shape s seed
  read -r shape s seed <<< "$1"
  local dir="$out/$shape-$s-$seed" device=()
  ((${#gpus[@]})) && device=(CUDA_VISIBLE_DEVICES="${gpus[$2]}")
  rm -rf "$dir"
  echo "== $shape $s seed $seed$(placement "$2"), budget $budget (log: $dir.log)"
  local status=0
  env -u EVO_DB -u EVO_START_FILE -u EVO_EXPORT -u EVO_WORKLOAD "${device[@]}" EVO_WORKER_BACKEND="$backend" \
    EVO_BENCH=0 EVO_SUITE="$shape" EVO_STRATEGY="$s" EVO_RNG_SEED="$seed" EVO_BUDGET="$budget" EVO_GENERATIONS=200 \
    EVO_POPULATION="$population" "$shape_suite" "$bundle" "$dir" > "$dir.log" 2>&1 ||
    { echo "!! $shape $s seed $seed: shape_suite failed (see $dir.log)"; status=1; }
  # A worker stopped mid-evaluation finishes it first: the next run starts on an idle GPU. (Its
  # coordinator's address, in the run's log, tells this run's worker from the other slots'; a run
  # whose log names none never started its daemons, and has no worker to wait for.)
  local addr
  addr=$(grep -o -m1 'evod on 127\.0\.0\.1:[0-9]*' "$dir.log" | cut -d' ' -f3)
  for _ in $(seq 120); do
    [[ -n $addr ]] && pgrep -f -- "$bundle/bin/evo-worker --coordinator $addr" > /dev/null || break
    sleep 0.5
  done
  return "$status"
}

# Slot $1 takes runs $1, $1 + slots, ... in turn; 1 if any failed.
run_slot() {
  local i status=0
  for ((i = $1; i < ${#runs[@]}; i += slots)); do one_run "${runs[$i]}" "$1" || status=1; done
  return "$status"
}

failed=0
if ((slots == 1)); then
  run_slot 0 || failed=1
else
  # The slots run side by side, in the background, where bash ignores Ctrl-C: an interrupt of
  # this script ends each slot (so that it starts no further run), then stops each slot's
  # shape_suite.sh and waits for it to have stopped its daemons (up to a minute; then SIGKILL).
  slot_pids=()
  stop_slots() {
    local pid suites=()
    for pid in "${slot_pids[@]}"; do suites+=($(pgrep -P "$pid")); done
    for pid in "${slot_pids[@]}"; do kill -TERM "$pid" 2>/dev/null; done
    wait
    stop_pids 240 "${suites[@]}"
    echo "search_quality: interrupted"
    exit 130
  }
  trap stop_slots INT TERM
  for ((slot = 0; slot < slots; slot++)); do
    run_slot "$slot" &
    slot_pids+=($!)
  done
  for pid in "${slot_pids[@]}"; do wait "$pid" || failed=1; done
  trap - INT TERM
fi
label=()
[[ $backend == model ]] && label=(--label MODEL)
python3 "$root/bench/search_quality_report.py" "${label[@]}" "$out" | tee "$out/quality.txt" || failed=1
exit "$failed"
