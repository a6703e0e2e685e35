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
#                    figure); default: EVO_REFERENCE's run, else the best any run here reached
#   EVO_REFERENCE    a start file as shape_suite.sh reads it ("BxHxSxD GENOME" lines, such as
#                    bench/suite_starts.txt) naming the genomes known best: before the strategies,
#                    a run per bucket (with EVO_GPUS, per bucket and GPU) measures the default
#                    genome and the file's, and its best confirmed elite is the bucket's best known
#                    for the runs on that GPU (so that a run is judged against a mark measured on
#                    its own card in this invocation, not on another card or day)
#   EVO_STOP_AT_TARGET  1 (default): a run whose bucket has a best known (given or from the
#                    reference) stops once it has an elite within 1 % of it (`--target-us`): it has
#                    its answer, and the rest of its budget would measure nothing the table reports
#                    but its best; 0: every run spends its whole budget
#   EVO_WORKER_BACKEND  cuda (default) or model (no GPU: figures labelled MODEL)
#   EVO_GPUS         device indices, space-separated ("0 1 2 3"): that many runs at once, each on
#                    its own GPU (CUDA_VISIBLE_DEVICES) with its own daemons, each GPU taking its share
#                    of the runs in turn; a run's figures are its GPU's alone, as with one GPU
#                    (with the model backend: that many runs side by side on the CPU). Default: one
#                    run at a time on the GPUs the environment shows the worker
#   EVO_RESUME       1: a run whose folder in OUT_DIR already holds an ended run (an earlier
#                    invocation's) is kept, not run again; a run cut off mid-way is run again.
#                    Default 0: every run starts afresh
#   EVO_DEADLINE_S   seconds from this script's start: a run that could not end by then (its budget
#                    and a minute for its daemons and its last evaluation) is not started but left
#                    for a later invocation with EVO_RESUME=1, so that a call with a time limit ends
#                    on whole runs (exit 3 when any was left; strategy runs wait for their
#                    bucket's reference run)
#   EVO_SHAPE_SUITE  the script each run calls with BUNDLE_DIR and its folder (default
#                    bench/shape_suite.sh; bench/test_search_quality_runs.sh puts a stand-in here)
# Writes OUT_DIR/quality.txt: per run, its best, and the seconds and evaluations it took to come
# within 1 % of the best known (and whether it stopped there); then per strategy the median over
# its runs.
# Bad arguments: one line, exit 2. A run that fails says so, the others go on, exit 1. Runs left
# for a later invocation (EVO_DEADLINE_S): exit 3.
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
resume="${EVO_RESUME:-0}"
[[ $resume == 0 || $resume == 1 ]] || die "EVO_RESUME must be 0 or 1, got '$resume'"
deadline="${EVO_DEADLINE_S-}"
[[ -z $deadline ]] || positive EVO_DEADLINE_S "$deadline"
started_s=$(date +%s)
# A run's wall time beyond its budget: its daemons' start and stop, and the evaluation under way
# when the budget ends (a confirmation's sanitizer pass among them).
run_overhead_s=60
# The budget in seconds (its syntax was checked above).
budget_s() {
  if [[ $budget =~ ^([0-9]+)m([0-9]+)s$ ]]; then echo $((BASH_REMATCH[1] * 60 + BASH_REMATCH[2])); return; fi
  [[ $budget =~ ^([0-9]+)([smh]?)$ ]]
  case ${BASH_REMATCH[2]} in
    h) echo $((BASH_REMATCH[1] * 3600)) ;;
    m) echo $((BASH_REMATCH[1] * 60)) ;;
    *) echo "${BASH_REMATCH[1]}" ;;
  esac
}
stop_at_target="${EVO_STOP_AT_TARGET:-1}"
[[ $stop_at_target == 0 || $stop_at_target == 1 ]] || die "EVO_STOP_AT_TARGET must be 0 or 1, got '$stop_at_target'"
declare -A best_known=()
for item in ${EVO_BEST_KNOWN-}; do
  [[ $item =~ ^([0-9]+x[0-9]+x[0-9]+x[0-9]+)=([0-9]+(\.[0-9]+)?)$ ]] \
    || die "EVO_BEST_KNOWN: '$item' is not BxHxSxD=US (a time in µs, such as 5.25)"
  best_known[${BASH_REMATCH[1]}]=${BASH_REMATCH[2]}
done
reference="${EVO_REFERENCE-}"
declare -A reference_count=()
if [[ -n $reference ]]; then
  [[ -f $reference && -r $reference ]] || die "EVO_REFERENCE '$reference' is not a readable file"
  reference="$(cd "$(dirname "$reference")" && pwd)/$(basename "$reference")"
  for shape in "${suite[@]}"; do
    reference_count[$shape]=$(grep -c -E "^$shape[[:space:]]+[^-[:space:]]" "$reference")
    ((reference_count[$shape] > 0)) || die "EVO_REFERENCE '$reference' names no genome for $shape"
  done
fi
read -r -a gpus <<< "${EVO_GPUS-}"
declare -A gpu_seen=()
for g in "${gpus[@]}"; do
  [[ $g =~ ^[0-9]+$ ]] || die "EVO_GPUS: '$g' is not a device index"
  [[ -z ${gpu_seen[$g]-} ]] || die "EVO_GPUS names device $g twice"
  gpu_seen[$g]=1
done

# The runs of the strategies in order, and the GPU slot each takes (run i on slot i % slots); a
# bucket's reference runs ("SHAPE reference K", one on each slot K) come before them, in a round
# of their own.
slots=$((${#gpus[@]} > 0 ? ${#gpus[@]} : 1))
strategy_runs=()
reference_runs=()
for shape in "${suite[@]}"; do
  if [[ -n $reference && -z ${best_known[$shape]-} ]]; then
    for ((k = 0; k < slots; k++)); do reference_runs+=("$shape reference $k"); done
  fi
  for s in "${strategies[@]}"; do
    for seed in "${seeds[@]}"; do strategy_runs+=("$shape $s $seed"); done
  done
done
report="$root/bench/search_quality_report.py"

# `on GPU g` where runs are placed, else nothing.
placement() { ((${#gpus[@]})) && echo " on GPU ${gpus[$1]}"; }

# The folder of the reference run of bucket $1 on slot $2: one per GPU with EVO_GPUS.
reference_dir() { ((${#gpus[@]})) && echo "$1-reference-gpu${gpus[$2]}" || echo "$1-reference"; }

# The best time known for the runs of bucket $1 on slot $2: EVO_BEST_KNOWN's, else the reference
# run's on that slot; empty when neither is known (yet).
mark_of() { echo "${best_known[$1]-${best_known[$1/$2]-}}"; }

# The folder and the shape_suite.sh settings of a run ("shape strategy seed") on slot $2: name,
# then the settings one a line. A reference run is one generation of the default genome and the
# reference file's genomes of its bucket; a strategy's run stops at its mark's target, if any.
run_settings() {
  local shape s seed
  read -r shape s seed <<< "$1"
  if [[ $s == reference ]]; then
    local size=$((reference_count[$shape] + 1))
    printf '%s\n' "$(reference_dir "$shape" "$2")" EVO_SUITE="$shape" EVO_BUDGET="$budget" \
      EVO_START_FILE="$reference" EVO_STRATEGY=random EVO_RNG_SEED=1 EVO_GENERATIONS=1 EVO_POPULATION=$size \
      EVO_TOP_K=$((size < 3 ? size : 3))
  else
    printf '%s\n' "$shape-$s-$seed" EVO_SUITE="$shape" EVO_BUDGET="$budget" EVO_STRATEGY="$s" \
      EVO_RNG_SEED="$seed" EVO_GENERATIONS=200 EVO_POPULATION="$population"
    local mark
    mark=$(mark_of "$shape" "$2")
    if ((stop_at_target)) && [[ -n $mark ]]; then
      echo "EVO_TARGETS=$shape=$(python3 "$report" --target "$mark")"
    elif ((stop_at_target && dry_run)) && [[ -n $reference ]]; then
      echo "EVO_TARGETS=$shape=<its-GPU's-reference-best+1%>"
    fi
  fi
}

if ((dry_run)); then
  for phase in reference strategy; do
    declare -n phase_runs="${phase}_runs"
    for i in "${!phase_runs[@]}"; do
      mapfile -t settings < <(run_settings "${phase_runs[$i]}" $((i % slots)))
      read -r shape s seed <<< "${phase_runs[$i]}"
      [[ $s == reference ]] && what="reference run" || what="$s seed $seed"
      echo "== $shape $what$(placement $((i % slots))): ${settings[*]:1} EVO_BENCH=0" \
           "bench/shape_suite.sh BUNDLE $out_arg/${settings[0]}"
    done
    unset -n phase_runs
    [[ $phase == reference ]] && ((${#reference_runs[@]})) &&
      echo "== each bucket's best known, per GPU: its reference run's best confirmed elite there"
  done
  echo "== bench/search_quality_report.py $out_arg"
  exit 0
fi
mkdir -p "$out_arg" || die "cannot create OUT_DIR '$out_arg'"
out="$(cd "$out_arg" && pwd)"

# One run; 1 if its shape_suite.sh failed. $1: the run ("shape strategy seed"), $2: its slot.
one_run() {
  local shape s seed settings
  read -r shape s seed <<< "$1"
  mapfile -t settings < <(run_settings "$1" "$2")
  local dir="$out/${settings[0]}" device=() what="$s seed $seed"
  [[ $s == reference ]] && what="reference run"
  ((${#gpus[@]})) && device=(CUDA_VISIBLE_DEVICES="${gpus[$2]}")
  if ((resume)) && python3 "$report" --ended "$dir"; then
    echo "== $shape $what: kept from an earlier invocation ($dir)"
    return 0
  fi
  if [[ -n $deadline ]] && (($(date +%s) + $(budget_s) + run_overhead_s > started_s + deadline)); then
    echo "== $shape $what: left for a later invocation (EVO_DEADLINE_S=$deadline; then EVO_RESUME=1)"
    rm -rf "$dir"  # nothing of an earlier invocation's stands in for it
    echo "${settings[0]}" >> "$out/.left"
    return 0
  fi
  rm -rf "$dir"
  echo "== $shape $what$(placement "$2"), budget $budget (log: $dir.log)"
  local status=0
  env -u EVO_DB -u EVO_START_FILE -u EVO_EXPORT -u EVO_WORKLOAD -u EVO_TARGETS -u EVO_TOP_K "${device[@]}" \
    EVO_WORKER_BACKEND="$backend" EVO_BENCH=0 "${settings[@]:1}" "$shape_suite" "$bundle" "$dir" > "$dir.log" 2>&1 ||
    { echo "!! $shape $what: shape_suite failed (see $dir.log)"; status=1; }
  # The mark the report judges this run by: the one on its own GPU.
  local mark
  mark=$(mark_of "$shape" "$2")
  if [[ $s != reference && -n $mark ]]; then mkdir -p "$dir" && echo "$mark" > "$dir/mark_us"; fi
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

# Every run of the array named $1, over the slots; 1 if any failed.
run_all() {
  local -n phase="$1"
  runs=("${phase[@]}")
  ((${#runs[@]})) || return 0
  if ((slots == 1)); then
    run_slot 0
    return
  fi
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
  local slot pid status=0
  for ((slot = 0; slot < slots; slot++)); do
    run_slot "$slot" &
    slot_pids+=($!)
  done
  for pid in "${slot_pids[@]}"; do wait "$pid" || status=1; done
  trap - INT TERM
  return "$status"
}

failed=0
rm -f "$out/.left"
run_all reference_runs || failed=1
if [[ -s $out/.left ]]; then
  # A strategy's run stops at its bucket's mark: none starts before every mark is measured.
  printf '%s\n' "${strategy_runs[@]}" >> "$out/.left"
  if ((!resume)); then  # nothing of an earlier invocation's stands in for them
    for run in "${strategy_runs[@]}"; do rm -rf "$out/$(run_settings "$run" 0 | head -1)"; done
  fi
  echo "== the strategies' runs wait for the reference runs left: run again with EVO_RESUME=1"
  strategy_runs=()
  reference_runs=()
fi
for run in "${reference_runs[@]}"; do
  read -r shape _ k <<< "$run"
  best_known[$shape/$k]=$(python3 "$report" --best "$out/$(reference_dir "$shape" "$k")")
  if [[ -n ${best_known[$shape/$k]} ]]; then
    echo "== $shape$(placement "$k"): best known ${best_known[$shape/$k]} us (its reference run)"
  else
    unset "best_known[$shape/$k]"
    echo "!! $shape$(placement "$k"): the reference run confirmed no elite: its runs there have no target"
  fi
done
run_all strategy_runs || failed=1
label=()
[[ $backend == model ]] && label=(--label MODEL)
if [[ -s $out/.left ]] && ! compgen -G "$out/*-*-[0-9]*/" > /dev/null; then
  echo "== no strategy's run here yet: no report"
else
  python3 "$report" "${label[@]}" "$out" | tee "$out/quality.txt" || failed=1
fi
if [[ -s $out/.left ]]; then
  echo "search_quality: $(wc -l < "$out/.left") run(s) left for a later invocation: run again with EVO_RESUME=1"
  ((failed)) || failed=3
fi
exit "$failed"
