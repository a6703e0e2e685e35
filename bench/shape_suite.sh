#!/usr/bin/env bash
# The shape suite of issue 5 on one GPU host, from a relocatable bundle (deploy/bundle.sh):
#   1. evod + one `evo-worker --backend cuda` on loopback (as bench/gpu_acceptance.sh's run step),
#      evod serving a fresh database, or a copy of an earlier invocation's (EVO_DB),
#   2. one run per shape bucket, each covering its shape causal and non-causal
#      (`--shape S --shape S:causal`), or with EVO_SPLIT_CAUSAL=1 one run for each, all submitted
#      at once so the worker always has work,
#   3. waits for all of them, prints each leaderboard,
#   4. exports the winners as ONE dispatch table: `evoctl export run-0001 run-0002 ... --out OUT/table.cu`
#      (also OUT/table.report.md and OUT/table.dispatch.json),
#   5. benchmarks exactly that table: `bench/run_gpu_bench.sh OUT/table.dispatch.json OUT/bench`.
# The database is left in OUT/evo.db (one consistent file when sqlite3 is installed), to be given
# to the next invocation as EVO_DB.
#
#   bench/shape_suite.sh [--dry-run] BUNDLE_DIR OUT_DIR
#
# Environment (small budgets by default: on one H100/H200 worker the runs take about 8 minutes and
# the whole script about 12; see "Expected time" below):
#   EVO_GENERATIONS   generations per run (default 3)
#   EVO_POPULATION    candidates per generation (default 12)
#   EVO_TOP_K         elites kept per run (default 3)
#   EVO_STRATEGY      evolve (default), surrogate, random or exhaustive (`evoctl submit --strategy`)
#   EVO_RNG_SEED      the runs' random seed (default 7). A run that repeats an earlier one over the
#                     same database retraces its path from cached results; another seed explores
#                     other genomes
#   EVO_WORKLOAD      a workload file (bench/workloads/llama3-8b.json): step 2 is then one
#                     `evoctl submit --workload FILE` (a run per bucket of its shapes, EVO_MAX_EVALS
#                     shared by their weights), in place of EVO_SUITE's runs, and step 5 benches
#                     the file's shapes, each with its own causal setting, in its dtype; its
#                     EVO_START_FILE lines name the bucket "workload" (every run starts from them,
#                     after the "starts" the file names for the run's own shapes)
#   EVO_SUITE         the shape buckets, space-separated BxHxSxD
#                     (default "1x8x512x64 2x8x512x64 16x16x512x64 4x16x2048x64 2x16x4096x128");
#                     empty ("") submits nothing, which needs EVO_DB and EVO_EXPORT=all
#   EVO_RUN_TIMEOUT   seconds to wait for all runs together (default 600); runs still going then are
#                     cancelled and those with an elite are exported anyway (this script's output
#                     names each one so cut short, and it exits non-zero)
#   EVO_DB            an evo.db an earlier invocation left in its OUT_DIR (its -wal beside it is
#                     taken too); evod serves a copy of it, so the earlier runs are kept and this
#                     invocation's are added. Runs it left QUEUED or RUNNING (an invocation killed
#                     mid-way) are resumed by evod and waited for with this invocation's runs.
#                     Unset: a fresh database.
#   EVO_EXPORT        runs (default): the table holds the runs this invocation submitted;
#                     all: every run in the database with a confirmed elite (seed fa_s512_v3), the
#                     newest serving a shape that two runs share; step 5 then benches the table's
#                     shapes
#   EVO_START_FILE    warm starts: lines "BxHxSxD GENOME" or "BxHxSxD --start-from RUN" (# comments,
#                     blank lines allowed); each bucket's run starts from its lines' genomes (`evoctl
#                     submit --start`) and from every elite of its lines' runs (`--start-from`, a
#                     run in EVO_DB: see the model screen below) besides
#                     the default genome and random ones. Unset: no warm start.
#   EVO_FITNESS_INPUTS  rotated (default) or resident: the runs' fitness (`evoctl submit
#                     --fitness-inputs`), inputs cycled past L2 or one set left in L2 as the table
#                     times them
#   EVO_DTYPE         fp16 (default), bf16 or e4m3: the element type of every run's shapes (`evoctl
#                     submit --dtype`) and of the bench (`compare_sdpa.py --dtype`; e4m3 benches the
#                     FP8 rows: evolved and Triton on e4m3 inputs, SDPA on the fp16 draws). The FP8
#                     acceptance shapes are a workload: EVO_WORKLOAD=bench/workloads/fp8.json (each
#                     with an fp16 twin, which the bench runs in the e4m3 row's "ev fp16" column)
#   EVO_WORKER_BACKEND  cuda (default) or model (no GPU: every figure ESTIMATED; for trying the script,
#                     or for a screen ahead of the GPU runs, below)
#   EVO_WORKER_ARGS   more options for the one evo-worker command, space-separated: "--all-gpus" (a
#                     worker per visible GPU; CUDA_VISIBLE_DEVICES chooses them), "--workers N" with
#                     the model backend, "--compile-threads N" (bench/scaling.sh uses it). Default: none
#   EVO_BENCH         1 (default) runs step 5; 0 skips it
#   EVO_SPLIT_CAUSAL  0 (default): one run per bucket ranks genomes over both causal settings, so
#                     one genome serves both; 1: a run for S and another for S:causal, so the table
#                     may hold a genome for each (causal calls gain from genes that non-causal ones
#                     pay for, such as LAZY_RESCALE beside CAUSAL_FOLD: bench/NOTES.md)
#   EVO_BUDGET        a wall time for the runs (`evoctl submit --budget`: 90s, 10m, 1h30m), each counted
#                     from its first lease; the runs share the worker side by side, so each gets it
#                     whole. A run ends DONE when it is spent. Unset: none
#   EVO_MAX_EVALS     evaluations for the whole suite, shared by the runs by their buckets' weights
#                     (`evoctl submit --max-evals`, at least 1 a run). Unset: none
#   EVO_WEIGHTS       the buckets' weights for EVO_MAX_EVALS, "BxHxSxD=W ..." (default 1 each): a
#                     bucket of weight 3 gets three times the evaluations of one of weight 1
#   EVO_PATIENCE      generations without a better time after which a run ends (`--patience`)
#   EVO_TARGETS       "BxHxSxD=US ...": that bucket's run ends once an elite is confirmed at or under
#                     US µs of fitness (`--target-us`; the run's fitness over S and S:causal, so not
#                     with EVO_SPLIT_CAUSAL=1 or EVO_WORKLOAD)
#   EVO_BENCH_ROUNDS  step 5 measures every kernel this many times in rotated orders and reports
#                     the medians (default 1; see bench/bench_rounds.py)
#
# Expected time on an H100/H200 with the defaults (5 runs x 3 generations x 12 = 180 candidates,
# plus a confirming second measurement and the sanitizer for each would-be elite):
#   daemons up ~5 s; runs: measured at about 2.5 s per evaluation with one worker on an H100
#   (bench/NOTES.md, suite 14: suite 13's first step, 83 evaluations of five warm-started runs,
#   done in 209 s, compile, correctness checks, timing and the sanitizer together; 17 s each
#   before the gates' own times were cut), so the default budget's runs take about 7.5 minutes
#   (--dry-run prints this estimate for the budget given, and warns when EVO_RUN_TIMEOUT is
#   shorter); export ~1 s; bench ~3 min:
#   nvcc builds the table (~1-2 min, every variant for both head dims and both causal settings),
#   Triton pre-compiles its configs (~30 s), then ~3-5 s per shape and causal setting.
#
# A screen on the model evaluator first, with no GPU (the fitted model ranks held-out genomes at
# 0.90-0.98; bench/NOTES.md), so that the GPU's time goes to what it found: the screen's database
# and its start_from.txt become the GPU invocation's EVO_DB and EVO_START_FILE:
#   EVO_WORKER_BACKEND=model EVO_BENCH=0 EVO_GENERATIONS=8 EVO_POPULATION=32 EVO_RUN_TIMEOUT=3600 \
#     bench/shape_suite.sh B screen
#   EVO_DB=screen/evo.db EVO_START_FILE=screen/start_from.txt bench/shape_suite.sh B out
# (At 2,8,512,64 an 8 x 32 screen's top elites started a 4 x 16 GPU run that reached 6.04 us in
# 81 s of search, against 6.65 us from no start: bench/NOTES.md.)
#
# Where one command may run 10 minutes at most, or for bigger budgets, spread the suite over
# several invocations that hand the database on, and export and bench once at the end:
#   EVO_BENCH=0 EVO_RUN_TIMEOUT=540 EVO_SUITE="1x8x512x64 2x8x512x64 16x16x512x64" bench/shape_suite.sh B out1
#   EVO_BENCH=0 EVO_RUN_TIMEOUT=540 EVO_DB=out1/evo.db EVO_SUITE="4x16x2048x64 2x16x4096x128" \
#     bench/shape_suite.sh B out2
#   EVO_DB=out2/evo.db EVO_SUITE="" EVO_EXPORT=all bench/shape_suite.sh B out3
# Each search invocation takes about EVO_RUN_TIMEOUT at most plus ~30 s (keep it under the limit);
# the last one ~3-4 min (export, then the bench of every bucket).
# --dry-run checks the arguments, the bundle and the budgets, prints every step it would take, and
# starts nothing.
#
# On any failure the script says what failed (and where its log is), goes on where it can, always
# stops the daemons it started, and exits non-zero. Bad arguments or environment: one line, exit 2.
set -uo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
bench_args shape_suite "$@"

generations="${EVO_GENERATIONS:-3}"
population="${EVO_POPULATION:-12}"
top_k="${EVO_TOP_K:-3}"
rng_seed="${EVO_RNG_SEED:-7}"
strategy="${EVO_STRATEGY:-evolve}"
[[ $strategy =~ ^(evolve|surrogate|random|exhaustive)$ ]] ||
  die "EVO_STRATEGY must be evolve, surrogate, random or exhaustive, got '$strategy'"
run_timeout="${EVO_RUN_TIMEOUT:-600}"
backend="${EVO_WORKER_BACKEND:-cuda}"
bench="${EVO_BENCH:-1}"
bench_rounds="${EVO_BENCH_ROUNDS:-1}"
split_causal="${EVO_SPLIT_CAUSAL:-0}"
[[ $split_causal == 0 || $split_causal == 1 ]] || die "EVO_SPLIT_CAUSAL must be 0 or 1, got '$split_causal'"
fitness_inputs="${EVO_FITNESS_INPUTS:-rotated}"
dtype="${EVO_DTYPE:-fp16}"
[[ $dtype == fp16 || $dtype == bf16 || $dtype == e4m3 ]] || die "EVO_DTYPE must be fp16, bf16 or e4m3, got '$dtype'"
[[ $fitness_inputs == rotated || $fitness_inputs == resident ]] ||
  die "EVO_FITNESS_INPUTS must be rotated or resident, got '$fitness_inputs'"
positive EVO_GENERATIONS "$generations"
positive EVO_POPULATION "$population"
positive EVO_TOP_K "$top_k"
positive EVO_RNG_SEED "$rng_seed"
positive EVO_RUN_TIMEOUT "$run_timeout"
positive EVO_BENCH_ROUNDS "$bench_rounds"
[[ $backend == cuda || $backend == model ]] || die "EVO_WORKER_BACKEND must be cuda or model, got '$backend'"
read -r -a worker_args <<< "${EVO_WORKER_ARGS:-}"
for a in "${worker_args[@]}"; do
  [[ $a =~ ^[A-Za-z0-9_.:/=-]+$ ]] || die "EVO_WORKER_ARGS: '$a' is not an option or a plain value"
done
[[ $bench == 0 || $bench == 1 ]] || die "EVO_BENCH must be 0 or 1, got '$bench'"
export_mode="${EVO_EXPORT:-runs}"
[[ $export_mode == runs || $export_mode == all ]] || die "EVO_EXPORT must be runs or all, got '$export_mode'"
db_in="${EVO_DB:-}"
if [[ -n $db_in ]]; then
  [[ -f $db_in ]] || die "EVO_DB '$db_in' is not a file (give the evo.db an earlier invocation left in its OUT_DIR)"
  [[ -r $db_in ]] || die "EVO_DB '$db_in' cannot be read"
  [[ $(head -c 15 "$db_in" 2>/dev/null) == "SQLite format 3" ]] || die "EVO_DB '$db_in' is not an SQLite database"
  db_in="$(cd "$(dirname "$db_in")" && pwd)/$(basename "$db_in")"
fi
workload="${EVO_WORKLOAD:-}"
if [[ -n $workload ]]; then
  [[ -f $workload && -r $workload ]] || die "EVO_WORKLOAD '$workload' is not a readable file"
  workload="$(cd "$(dirname "$workload")" && pwd)/$(basename "$workload")"
  [[ -z ${EVO_SUITE:-} && -z ${EVO_WEIGHTS:-} ]] \
    || die "EVO_WORKLOAD names the shapes and their weights: leave EVO_SUITE and EVO_WEIGHTS unset"
  [[ $export_mode == runs ]] || die "EVO_WORKLOAD exports its own runs: leave EVO_EXPORT unset"
fi
# Unset: the default suite; set but empty: no shape (export only).
if [[ -n $workload ]]; then
  suite=()
else
  read -r -a suite <<< "${EVO_SUITE-1x8x512x64 2x8x512x64 16x16x512x64 4x16x2048x64 2x16x4096x128}"
fi
if [[ -z $workload ]] && ((!${#suite[@]})); then
  [[ -n $db_in ]] || die "EVO_SUITE names no shape (an empty suite only exports, from EVO_DB's runs: set EVO_DB)"
  [[ $export_mode == all ]] || die "EVO_SUITE is empty, so EVO_EXPORT=runs has no run to export: set EVO_EXPORT=all"
fi
seed_genome=fa_s512_v3
# Warm starts per bucket, from EVO_START_FILE.
declare -A start_args=()
start_file="${EVO_START_FILE:-}"
if [[ -n $start_file ]]; then
  [[ -r $start_file ]] || die "EVO_START_FILE '$start_file' cannot be read"
  line_no=0
  while IFS= read -r line || [[ -n $line ]]; do
    line_no=$((line_no + 1))
    line="${line%%#*}"
    read -r bucket genome from_run extra <<< "$line"
    [[ -z ${bucket:-} ]] && continue
    [[ -z $workload || $bucket == workload ]] \
      || die "EVO_START_FILE line $line_no: with EVO_WORKLOAD a start line names the bucket 'workload', got '$bucket'"
    if [[ $genome == --start-from ]]; then
      [[ -n ${from_run:-} && -z ${extra:-} ]] \
        || die "EVO_START_FILE line $line_no: expected 'BxHxSxD --start-from RUN', got '$line'"
      start_args[$bucket]+=" --start-from $from_run"
    else
      [[ -n ${genome:-} && -z ${from_run:-} ]] \
        || die "EVO_START_FILE line $line_no: expected 'BxHxSxD GENOME' or 'BxHxSxD --start-from RUN', got '$line'"
      start_args[$bucket]+=" --start $genome"
    fi
  done < "$start_file"
fi
declare -A seen_shape=()
for s in "${suite[@]}"; do
  # evod checks the shapes for real; this catches a typo before any daemon starts.
  [[ $s =~ ^[1-9][0-9]*x[1-9][0-9]*x[1-9][0-9]*x[1-9][0-9]*$ ]] \
    || die "EVO_SUITE: '$s' is not BxHxSxD (the causal variant of each shape is added here)"
  [[ -z ${seen_shape[$s]:-} ]] || die "EVO_SUITE names '$s' twice: a shape belongs to one bucket"
  seen_shape[$s]=1
done

# Budgets: EVO_BUDGET and EVO_PATIENCE as given to every run, EVO_MAX_EVALS shared by weight.
budget="${EVO_BUDGET:-}"
patience="${EVO_PATIENCE:-}"
max_evals="${EVO_MAX_EVALS:-}"
[[ -z $budget || $budget =~ ^([0-9]+|([0-9]+h)?([0-9]+m)?([0-9]+s)?)$ ]] \
  || die "EVO_BUDGET must be a duration such as 90s, 10m or 1h30m, got '$budget'"
[[ -z $patience ]] || positive EVO_PATIENCE "$patience"
[[ -z $max_evals ]] || positive EVO_MAX_EVALS "$max_evals"
declare -A weight=()
for w in ${EVO_WEIGHTS:-}; do
  [[ $w =~ ^([1-9][0-9]*x[1-9][0-9]*x[1-9][0-9]*x[1-9][0-9]*)=([1-9][0-9]*)$ ]] \
    || die "EVO_WEIGHTS: '$w' is not BxHxSxD=W (a positive integer weight)"
  [[ -n ${seen_shape[${BASH_REMATCH[1]}]:-} ]] || die "EVO_WEIGHTS names '${BASH_REMATCH[1]}', which EVO_SUITE lacks"
  weight[${BASH_REMATCH[1]}]=${BASH_REMATCH[2]}
done
[[ -z ${EVO_WEIGHTS:-} || -n $max_evals ]] || die "EVO_WEIGHTS shares EVO_MAX_EVALS: set that too"
[[ -z ${EVO_TARGETS:-} || -z $workload ]] || die "EVO_TARGETS is not for EVO_WORKLOAD's runs (evoctl refuses it)"
[[ -z ${EVO_TARGETS:-} ]] || ((split_causal == 0)) \
  || die "EVO_TARGETS is a bucket's fitness over S and S:causal: not with EVO_SPLIT_CAUSAL=1"
declare -A target=()
for t in ${EVO_TARGETS:-}; do
  [[ $t =~ ^([1-9][0-9]*x[1-9][0-9]*x[1-9][0-9]*x[1-9][0-9]*)=([0-9]+(\.[0-9]+)?)$ ]] \
    || die "EVO_TARGETS: '$t' is not BxHxSxD=US (a time in µs, such as 5.25)"
  [[ -n ${seen_shape[${BASH_REMATCH[1]}]:-} ]] || die "EVO_TARGETS names '${BASH_REMATCH[1]}', which EVO_SUITE lacks"
  target[${BASH_REMATCH[1]}]=${BASH_REMATCH[2]}
done
weight_sum=0
for s in "${suite[@]}"; do weight_sum=$((weight_sum + ${weight[$s]:-1})); done
# The submit options of each run of bucket $1.
budget_flags() {
  local flags=()
  [[ -z $budget ]] || flags+=(--budget "$budget")
  [[ -z $patience ]] || flags+=(--patience "$patience")
  [[ -z ${target[$1]:-} ]] || flags+=(--target-us "${target[$1]}")
  if [[ -n $max_evals ]]; then
    local share=$((max_evals * ${weight[$1]:-1} / weight_sum / (1 + split_causal)))
    flags+=(--max-evals $((share > 0 ? share : 1)))
  fi
  printf '%s\n' "${flags[*]}"
}

# The runs of bucket $1, one line each: its shapes, space-separated (checked above: no other
# blanks, no glob characters).
bucket_runs() {
  if ((split_causal)); then printf '%s\n%s\n' "$1" "$1:causal"; else printf '%s\n' "$1 $1:causal"; fi
}
planned_runs=$((${#suite[@]} * (1 + split_causal)))

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
if ((dry_run)); then
  out="$out_arg"
else
  mkdir -p "$out_arg" || die "cannot create OUT_DIR '$out_arg'"
  out="$(cd "$out_arg" && pwd)"
fi

say() { printf '== %s\n' "$*"; }
failed=()
fail() { failed+=("$1"); printf '!! %s failed: %s\n' "$1" "$2"; }

if ((dry_run)); then
  say "dry run: nothing is started"
  if [[ -n $db_in ]]; then
    say "cp $db_in (and its -wal, if any) <scratch>/evo.db: its runs are kept"
  fi
  say "evod serve --db <scratch>/evo.db --listen 127.0.0.1:<free port>   (log: $out/evod.log)"
  say "evo-worker --backend $backend${worker_args[*]:+ ${worker_args[*]}}   (log: $out/worker.log)"
  if [[ -n $db_in ]]; then
    say "runs $db_in left QUEUED or RUNNING: resumed by evod and waited for with this invocation's runs"
  fi
  if [[ -n $workload ]]; then
    say "evoctl submit --workload $workload --generations $generations --population $population --top-k $top_k" \
        "--rng-seed $rng_seed --strategy $strategy --fitness-inputs $fitness_inputs${budget:+ --budget $budget}${patience:+ --patience $patience}${max_evals:+ --max-evals $max_evals}${start_args[workload]:-}"
  fi
  for s in "${suite[@]}"; do
    while IFS= read -r shapes; do
      budget_text="$(budget_flags "$s")"
      say "evoctl submit --seed $seed_genome --shape ${shapes// / --shape } --generations $generations" \
          "--population $population --top-k $top_k --rng-seed $rng_seed --strategy $strategy" \
          "--fitness-inputs $fitness_inputs${budget_text:+ $budget_text}${start_args[$s]:-} --dtype $dtype"
    done < <(bucket_runs "$s")
  done
  if ((${#suite[@]})); then
    say "wait for the $planned_runs runs (at most ${run_timeout} s together), then print each leaderboard"
    if [[ $backend == cuda ]]; then
      # 2.5 s an evaluation on one worker (the header's "Expected time"); cached results are faster.
      candidates=$((planned_runs * generations * population))
      estimate=$((candidates * 5 / 2))
      say "  about ${estimate} s for ${candidates} candidates at ~2.5 s each on one worker"
      ((estimate <= run_timeout)) \
        || say "  warning: EVO_RUN_TIMEOUT=${run_timeout} is shorter: runs will be cut short (raise it, or lower the budget)"
    fi
    say "write $out/start_from.txt: the runs with an elite as start lines (EVO_START_FILE) for a next invocation"
  elif [[ -n $workload ]]; then
    say "wait for the workload's runs (at most ${run_timeout} s together), then print each leaderboard"
  else
    say "no run submitted (EVO_SUITE is empty)"
  fi
  if [[ $export_mode == runs ]]; then
    say "evoctl export <the $planned_runs runs> --out $out/table.cu"
  else
    say "evoctl export <every run in the database with an elite, seed $seed_genome, the newest per shape>" \
        "--out $out/table.cu   (EVO_EXPORT=all)"
  fi
  if ((bench)) && [[ -n $workload ]]; then
    say "bench/run_gpu_bench.sh $out/table.dispatch.json $out/bench --suite $workload --rounds $bench_rounds"
  elif ((bench)) && [[ $export_mode == runs ]]; then
    say "bench/run_gpu_bench.sh $out/table.dispatch.json $out/bench --shapes ${suite[*]} --causal both --rounds $bench_rounds --dtype $dtype"
  elif ((bench)); then
    say "bench/run_gpu_bench.sh $out/table.dispatch.json $out/bench --shapes <the table's shapes> --causal both --rounds $bench_rounds --dtype $dtype"
  else
    say "bench skipped (EVO_BENCH=0)"
  fi
  say "database left in $out/evo.db (EVO_DB for a next invocation)"
  exit 0
fi

export CUDA_HOME="${CUDA_HOME:-/usr/local/cuda}"
export PATH="$CUDA_HOME/bin:$PATH"
export PYTHONUNBUFFERED=1
scratch="$(mktemp -d -t evo-shape-suite.XXXXXX)"
export EVO_CACHE_DIR="$scratch/cache"
evoctl="$bundle/bin/evoctl"

# The database into OUT_DIR, once evod is stopped. sqlite3's .backup writes one file with the WAL
# folded in; without sqlite3 the file and its WAL are copied together. A WAL left in OUT_DIR by an
# earlier invocation is removed first: beside another database it would corrupt it.
# shellcheck disable=SC2317  # reached through the EXIT trap
save_db() {
  [[ -f $scratch/evo.db ]] || return 0
  rm -f "$out/evo.db" "$out/evo.db-wal" "$out/evo.db-shm"
  if command -v sqlite3 > /dev/null 2>&1 \
       && sqlite3 "$scratch/evo.db" ".backup '$scratch/backup.db'" 2> "$scratch/backup.err"; then
    cp "$scratch/backup.db" "$out/evo.db"
  else
    [[ -s $scratch/backup.err ]] && echo "shape_suite: sqlite3 .backup failed ($(head -n 1 "$scratch/backup.err")): copying the files"
    cp "$scratch/evo.db" "$out/evo.db"
    if [[ -f $scratch/evo.db-wal ]]; then cp "$scratch/evo.db-wal" "$out/evo.db-wal"; fi
  fi
  say "database: $out/evo.db (EVO_DB for a next invocation)"
}

# A long step (a run's watch, the bench) runs in the background while the script waits for it:
# bash runs a trap only once the foreground command has ended, so INT/TERM (a session's time limit)
# would otherwise wait for the step, and the database would not be saved. The step's output goes
# to its log ($1) from inside: a redirection of this function would also take the trap's lines.
step_pid=""
waited_step() {
  local log=$1
  shift
  "$@" > "$log" 2>&1 &
  step_pid=$!
  wait "$step_pid"
  local rc=$?
  step_pid=""
  return "$rc"
}
# shellcheck disable=SC2317  # reached through the EXIT trap
descendants() {  # $1: pid -> the pids of its children, theirs, ...
  local c
  for c in $(pgrep -P "$1" 2>/dev/null); do echo "$c"; descendants "$c"; done
}

# The daemons this script started, stopped however it ends (TERM, then KILL what is left), before
# the database is copied out.
pids=()
# shellcheck disable=SC2317  # reached through the EXIT trap
cleanup() {
  local status=$?
  if [[ -n $step_pid ]]; then
    # shellcheck disable=SC2046  # one pid a word
    kill -TERM "$step_pid" $(descendants "$step_pid") 2>/dev/null
  fi
  if ((${#pids[@]})); then
    say "stopping evod and the worker"
    stop_pids 20 "${pids[@]}"
  fi
  save_db
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

# Every run evod holds, one line each: ID, seed, state, device class, shapes (comma-separated),
# separated by tabs. A shape is written as evoctl writes it: BxHxSxD or BxHxSqxSkxD, then :causal.
list_runs() {
  "$evoctl" runs --json | python3 -c '
import json, sys
for s in json.load(sys.stdin).get("runs", []):
    r = s.get("run", {})
    shapes = []
    for p in r.get("shapes", []):
        b, h, sq, sk, d = (int(p.get(k, 0)) for k in ("batch", "heads", "seqQ", "seqK", "headDim"))
        text = f"{b}x{h}x{sq}x{d}" if sq == sk else f"{b}x{h}x{sq}x{sk}x{d}"
        shapes.append(text + (":causal" if p.get("causal") else ""))
    print(r.get("runId", ""), r.get("seed", "-"), r.get("state", "-"), r.get("deviceClass") or "-",
          ",".join(shapes) or "-", sep="\t")
'
}

# Whether a run has a confirmed elite (proto JSON leaves out an empty list: no "elites" key).
has_elite() {
  local json
  json=$("$evoctl" leaderboard "$1" --top 1 --json 2> /dev/null) && [[ $json == *'"elites"'* ]]
}

# 1. Daemons.
if [[ -n $db_in ]]; then
  # The -shm is not taken: it is an index SQLite rebuilds from the WAL.
  if ! { cp "$db_in" "$scratch/evo.db" && { [[ ! -f $db_in-wal ]] || cp "$db_in-wal" "$scratch/evo.db-wal"; }; }; then
    rm -f "$scratch/evo.db" "$scratch/evo.db-wal"
    fail database "cannot copy EVO_DB '$db_in'"
    finish
  fi
fi
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])') \
  || { fail daemons "python3 is needed to pick a free port"; finish; }
addr="127.0.0.1:$port"
export EVO_COORDINATOR="$addr"
say "evod on $addr, evo-worker --backend $backend${worker_args[*]:+ ${worker_args[*]}}$([[ -n $db_in ]] && echo ", database: a copy of $db_in")"
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
"$bundle/bin/evo-worker" --coordinator "$addr" --backend "$backend" "${worker_args[@]}" > "$out/worker.log" 2>&1 &
pids+=($!)
sleep 1
if ! kill -0 "${pids[1]}" 2>/dev/null; then
  fail worker "evo-worker exited at once; last lines of $out/worker.log:"
  tail -n 5 "$out/worker.log"
  finish
fi

# The earlier runs: those left unfinished are resumed by evod, so they are waited for below.
resumed=()
if [[ -n $db_in ]]; then
  if listing=$(list_runs); then
    count=0
    while IFS=$'\t' read -r id _ state _ shapes; do
      [[ -n $id ]] || continue
      count=$((count + 1))
      if [[ $state == QUEUED || $state == RUNNING ]]; then
        say "run $id ($shapes) was left $state: evod resumes it"
        resumed+=("$id")
      fi
    done <<< "$listing"
    say "EVO_DB holds $count run(s)"
  else
    fail database "evoctl runs failed on the database of '$db_in'"
  fi
fi

# 2. One run per shape bucket, causal and non-causal (EVO_SPLIT_CAUSAL=1: one run for each).
runs=()
declare -A run_bucket=()
for s in "${suite[@]}"; do
  read -r -a starts <<< "${start_args[$s]:-}"
  read -r -a budgets <<< "$(budget_flags "$s")"
  while IFS= read -r shapes; do
    flags=()
    for sh in $shapes; do flags+=(--shape "$sh"); done
    name="${shapes// /+}"
    if run=$("$evoctl" submit --seed "$seed_genome" "${flags[@]}" --generations "$generations" \
               --population "$population" --top-k "$top_k" --rng-seed "$rng_seed" --strategy "$strategy" \
               --fitness-inputs "$fitness_inputs" --dtype "$dtype" "${budgets[@]}" "${starts[@]}" 2> "$out/submit-$name.err"); then
      say "run $run: ${shapes// / and }"
      runs+=("$run")
      run_bucket[$run]=$s
    else
      fail "submit-$name" "$(cat "$out/submit-$name.err")"
    fi
  done < <(bucket_runs "$s")
done
if [[ -n $workload ]]; then
  workload_flags=()
  [[ -z $budget ]] || workload_flags+=(--budget "$budget")
  [[ -z $patience ]] || workload_flags+=(--patience "$patience")
  [[ -z $max_evals ]] || workload_flags+=(--max-evals "$max_evals")
  read -r -a starts <<< "${start_args[workload]:-}"
  workload_flags+=("${starts[@]}")
  if workload_runs=$("$evoctl" submit --workload "$workload" --generations "$generations" --population "$population" \
                       --top-k "$top_k" --rng-seed "$rng_seed" --strategy "$strategy" --fitness-inputs "$fitness_inputs" \
                       "${workload_flags[@]}" 2> "$out/submit-workload.err"); then
    cat "$out/submit-workload.err"
    for run in $workload_runs; do
      runs+=("$run")
      run_bucket[$run]=workload
    done
  else
    fail submit-workload "$(cat "$out/submit-workload.err")"
  fi
fi
[[ $export_mode == all || ${#runs[@]} -gt 0 ]] || finish

# 3. Wait for every run under one deadline; cancel what is still going when it passes.
waited=("${resumed[@]}" "${runs[@]}")
deadline=$((SECONDS + run_timeout))
for run in "${waited[@]}"; do
  left=$((deadline - SECONDS))
  ((left > 0)) || left=1
  waited_step "$out/watch-$run.log" timeout "$left" "$evoctl" status "$run" --watch
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
for run in "${waited[@]}"; do
  say "leaderboard of $run"
  "$evoctl" leaderboard "$run" --top 5 | tee "$out/leaderboard-$run.txt"
  if has_elite "$run"; then
    [[ " ${runs[*]} " == *" $run "* ]] && exportable+=("$run")
  else
    fail "elite-$run" "run $run has no confirmed elite: its shapes are left out of the table"
  fi
done
# This invocation's runs with an elite, as EVO_START_FILE lines for the next one (the model screen).
if ((${#exportable[@]})) && [[ -z $workload ]]; then
  for run in "${exportable[@]}"; do echo "${run_bucket[$run]} --start-from $run"; done \
    > "$out/start_from.txt"
  say "wrote $out/start_from.txt: these runs as start lines (EVO_START_FILE) for the next invocation"
fi

# EVO_EXPORT=all: every run of the database with an elite. A shape belongs to one bucket, so going
# from the newest run back, a run that shares a shape with a newer one already taken is left out.
if [[ $export_mode == all ]]; then
  exportable=()
  if ! listing=$(list_runs); then
    fail export "evoctl runs failed"
    finish
  fi
  say "runs in the database (newest first) and which the table takes"
  declare -A claimed=() classes=()
  while IFS=$'\t' read -r id seed state class shapes; do
    [[ -n $id ]] || continue
    if [[ $seed != "$seed_genome" ]]; then
      say "  $id  $shapes  left out: seed $seed, not $seed_genome"
      continue
    fi
    if ! has_elite "$id"; then
      say "  $id  $shapes  left out: no confirmed elite ($state)"
      continue
    fi
    clash=""
    IFS=, read -r -a run_shapes <<< "$shapes"
    for sh in "${run_shapes[@]}"; do
      if [[ -n ${claimed[$sh]:-} ]]; then clash="newer run ${claimed[$sh]} serves $sh"; break; fi
    done
    if [[ -n $clash ]]; then
      say "  $id  $shapes  left out: $clash"
      continue
    fi
    for sh in "${run_shapes[@]}"; do claimed[$sh]=$id; done
    classes[$class]=1
    exportable=("$id" "${exportable[@]}")
    say "  $id  $shapes  taken ($state, $class)"
  done < <(tac <<< "$listing")
  if ((${#classes[@]} > 1)); then
    say "note: the table's winners were measured on different device classes: ${!classes[*]}"
  fi
  ((${#exportable[@]})) || fail export "the database holds no run of $seed_genome with a confirmed elite"
fi
((${#exportable[@]})) || finish

# 4. One dispatch table of every winner.
say "evoctl export ${exportable[*]} --out $out/table.cu"
if ! "$evoctl" export "${exportable[@]}" --out "$out/table.cu" 2>&1 | tee "$out/export.log"; then
  fail export "see $out/export.log"
  finish
fi

# 5. The table against SDPA and autotuned Triton: on the suite's shapes, or (EVO_EXPORT=all) on
# the table's.
if ((bench)) && [[ -n $workload ]]; then
  say "bench/run_gpu_bench.sh $out/table.dispatch.json $out/bench --suite $workload --rounds $bench_rounds"
  if waited_step "$out/bench.log" "$root/bench/run_gpu_bench.sh" "$out/table.dispatch.json" "$out/bench" \
       --suite "$workload" --rounds "$bench_rounds"; then
    tail -n 30 "$out/bench/compare.txt"
  else
    fail bench "see $out/bench.log"
    tail -n 10 "$out/bench.log"
  fi
elif ((bench)); then
  bench_shapes=("${suite[@]}")
  if [[ $export_mode == all ]]; then
    mapfile -t bench_shapes < <(python3 -c '
import json, sys
seen = []
for e in json.load(open(sys.argv[1])).get("shapes", []):
    if e["shape"] not in seen:
        seen.append(e["shape"])
print("\n".join(seen))
' "$out/table.dispatch.json")
    [[ -n ${bench_shapes[0]:-} ]] || bench_shapes=()
  fi
  if ((!${#bench_shapes[@]})); then
    fail bench "$out/table.dispatch.json names no shape the bench can run"
  else
    say "bench/run_gpu_bench.sh $out/table.dispatch.json $out/bench --shapes ${bench_shapes[*]} --rounds $bench_rounds --dtype $dtype"
    if waited_step "$out/bench.log" "$root/bench/run_gpu_bench.sh" "$out/table.dispatch.json" "$out/bench" \
         --shapes "${bench_shapes[@]}" --causal both --rounds "$bench_rounds" --dtype "$dtype"; then
      tail -n 30 "$out/bench/compare.txt"
    else
      fail bench "see $out/bench.log"
      tail -n 10 "$out/bench.log"
    fi
  fi
fi
finish
