#!/usr/bin/env bash
# One evo-worker per GPU on one host, measured (issue 37): from a relocatable bundle
# (deploy/bundle.sh), on a host with N GPUs.
#
#   bench/scaling.sh [--dry-run] BUNDLE_DIR OUT_DIR
#
# Steps (EVO_SCALING_STEPS, default "scaling isolation kill"; each may run in a call of its own,
# into the same OUT_DIR):
#   scaling    bench/shape_suite.sh's default suite (no warm start, a fresh database and compile
#              cache each time, a fixed budget: EVO_GENERATIONS x EVO_POPULATION per run, no bench)
#              once per worker count in EVO_SCALING_WORKERS, with `evo-worker --all-gpus` on GPUs
#              0..k-1 (CUDA_VISIBLE_DEVICES); evaluations per minute for each, from the database
#              (every evaluation stored, confirmations included, over the time from the first
#              run's submit to the last report), and the speedup over one worker. Each count adds
#              its row to OUT_DIR/scaling.tsv (a count run again replaces its row); the table is
#              printed from every row there
#   isolation  `evo-worker eval` of one fixed genome on GPU 0, EVO_ISOLATION_REPEATS times alone,
#              as many times while workers on every other GPU are busy with a run, and alone
#              again; the medians, and whether the busy one is within the alone timings' spread
#   kill       evod (5 s leases) and `evo-worker --all-gpus` on every GPU on one run; nvidia-smi's
#              process-to-GPU mapping sampled while they work; once a third of the run is
#              evaluated one worker is killed (SIGKILL); the run must finish with every candidate
#              evaluated and counted once (checked in the database), and evo-worker must exit 1
#              naming the killed worker's GPU
#
# Environment:
#   EVO_WORKER_BACKEND   cuda (default) or model. model: the same steps on model workers
#                        (`--backend model --workers k`), no GPU, for testing this script's plumbing:
#                        every fitness is an ESTIMATE, the evaluations per minute measure this
#                        host's CPUs (NVRTC), and timing isolation is not measured (an estimate does
#                        not depend on load). Every figure printed is labelled MODEL.
#   EVO_SCALING_STEPS    which steps, in this order (default "scaling isolation kill")
#   EVO_SCALING_WORKERS  worker counts (default "1 2 4 8", those up to the GPUs visible; model "1 2")
#   EVO_GENERATIONS, EVO_POPULATION  the budget of each suite run (default 2 x 10: 5 buckets x 20 =
#                        100 candidates, plus the confirmations of would-be elites; model 1 x 3);
#                        each run keeps 3 elites (fewer when the population is smaller)
#   EVO_SUITE            the buckets (default: shape_suite.sh's)
#   EVO_RUN_TIMEOUT      seconds for one worker count's runs (default 540: a call of 10 minutes)
#   EVO_ISOLATION_GENOME, EVO_ISOLATION_SHAPE  the fixed genome and its shape (default: the
#                        2x8x512x64 start of bench/suite_starts.txt, first line for that bucket with
#                        WGMMA)
#   EVO_ISOLATION_REPEATS  evaluations per phase (default 5)
#   EVO_KILL_SHAPE       the kill step's run: one bucket, causal and not (default 2x8x512x64),
#                        EVO_KILL_GENERATIONS x EVO_KILL_POPULATION (default 3 x 16; model 1 x 4)
#
# Expected time on an 8 x H200 host (2.5 s an evaluation on one worker, bench/NOTES.md): scaling
# with 1 worker ~5 min for the default budget, then about half for each doubling: "1 2" in one
# call and "4 8" in another; isolation ~2 min; kill ~2 min. --dry-run prints the estimate.
#
# Bad arguments or environment: one line, exit 2. A step that fails says so, the others go on,
# and the script exits 1 at the end; the daemons it started are always stopped.
set -uo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
bench_args scaling "$@"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

backend="${EVO_WORKER_BACKEND:-cuda}"
[[ $backend == cuda || $backend == model ]] || die "EVO_WORKER_BACKEND must be cuda or model, got '$backend'"
model=0
[[ $backend == model ]] && model=1
read -r -a steps <<< "${EVO_SCALING_STEPS-scaling isolation kill}"
((${#steps[@]})) || die "EVO_SCALING_STEPS names no step (scaling, isolation, kill)"
for s in "${steps[@]}"; do
  [[ $s == scaling || $s == isolation || $s == kill ]] || die "EVO_SCALING_STEPS: unknown step '$s' (scaling, isolation, kill)"
done
if ((model)); then
  generations="${EVO_GENERATIONS:-1}" population="${EVO_POPULATION:-3}"
  kill_generations="${EVO_KILL_GENERATIONS:-1}" kill_population="${EVO_KILL_POPULATION:-4}"
else
  generations="${EVO_GENERATIONS:-2}" population="${EVO_POPULATION:-10}"
  kill_generations="${EVO_KILL_GENERATIONS:-3}" kill_population="${EVO_KILL_POPULATION:-16}"
fi
run_timeout="${EVO_RUN_TIMEOUT:-540}"
repeats="${EVO_ISOLATION_REPEATS:-5}"
for v in generations:EVO_GENERATIONS population:EVO_POPULATION kill_generations:EVO_KILL_GENERATIONS \
         kill_population:EVO_KILL_POPULATION run_timeout:EVO_RUN_TIMEOUT repeats:EVO_ISOLATION_REPEATS; do
  name=${v%%:*}
  positive "${v#*:}" "${!name}"
done
shape_re='^[1-9][0-9]*x[1-9][0-9]*x[1-9][0-9]*x[1-9][0-9]*$'
kill_shape="${EVO_KILL_SHAPE:-2x8x512x64}"
[[ $kill_shape =~ $shape_re ]] || die "EVO_KILL_SHAPE: '$kill_shape' is not BxHxSxD"
iso_shape="${EVO_ISOLATION_SHAPE:-2x8x512x64}"
[[ $iso_shape =~ $shape_re ]] || die "EVO_ISOLATION_SHAPE: '$iso_shape' is not BxHxSxD"
iso_genome="${EVO_ISOLATION_GENOME:-$(awk -v s="$iso_shape" '$1 == s && /WGMMA=1/ {print $2; exit}' \
  "$root/bench/suite_starts.txt")}"
[[ -n $iso_genome ]] || die "no EVO_ISOLATION_GENOME given and bench/suite_starts.txt has none for $iso_shape"
[[ -z ${CUDA_VISIBLE_DEVICES+x} ]] \
  || die "CUDA_VISIBLE_DEVICES is set ('$CUDA_VISIBLE_DEVICES'): unset it, this script chooses the GPUs of each step"

# The GPUs (cuda), and the worker counts that fit them.
if ((model)); then
  gpus=0
  default_counts="1 2"
else
  if ((dry_run)) && ! command -v nvidia-smi > /dev/null 2>&1; then
    gpus=8  # a plan for the 8-GPU host
    planned_for="(no nvidia-smi here: planned for 8 GPUs)"
  else
    command -v nvidia-smi > /dev/null 2>&1 || die "nvidia-smi not found: the cuda backend needs the GPU host (EVO_WORKER_BACKEND=model without one)"
    gpus=$(nvidia-smi --query-gpu=index --format=csv,noheader | grep -c '^[0-9]')
    ((gpus > 0)) || die "nvidia-smi lists no GPU"
  fi
  default_counts=""
  for k in 1 2 4 8; do ((k <= gpus)) && default_counts+="$k "; done
fi
read -r -a counts <<< "${EVO_SCALING_WORKERS:-$default_counts}"
for k in "${counts[@]}"; do
  positive "EVO_SCALING_WORKERS entry" "$k"
  ((model || k <= gpus)) || die "EVO_SCALING_WORKERS: $k workers, but this host has $gpus GPU(s)"
done
max_workers=2
((model)) || max_workers=$gpus
for k in "${counts[@]}"; do ((k > max_workers)) && max_workers=$k; done
if [[ " ${steps[*]} " == *" isolation "* ]] && ((!model && gpus < 2)); then
  die "the isolation step needs 2 GPUs or more (its neighbours run on the others); this host has $gpus"
fi
# GPU indices as nvidia-smi numbers them, in CUDA as well.
export CUDA_DEVICE_ORDER=PCI_BUS_ID
gpu_list() { seq -s, "$1" "$2"; }  # "0,1,2" for 0 2
label=""
((model)) && label="MODEL "

say() { printf '== %s\n' "$*"; }
failed=()
fail() { failed+=("$1"); printf '!! %s failed: %s\n' "$1" "$2"; }

if ((dry_run)); then
  out="$out_arg"
  say "dry run: nothing is started (backend $backend$( ((model)) && echo ": MODEL workers, plumbing only, no GPU figure"))" \
      "${planned_for:-}"
  for s in "${steps[@]}"; do
    case $s in
      scaling)
        read -r -a suite <<< "${EVO_SUITE-1x8x512x64 2x8x512x64 16x16x512x64 4x16x2048x64 2x16x4096x128}"
        candidates=$((${#suite[@]} * generations * population))
        for k in "${counts[@]}"; do
          if ((model)); then how="EVO_WORKER_ARGS='--workers $k'"; else how="CUDA_VISIBLE_DEVICES=$(gpu_list 0 $((k - 1))) EVO_WORKER_ARGS=--all-gpus"; fi
          say "scaling, $k worker(s): $how EVO_BENCH=0 EVO_GENERATIONS=$generations EVO_POPULATION=$population" \
              "bench/shape_suite.sh BUNDLE $out/scaling-$k   ($candidates candidates$( ((model)) || echo ", about $((candidates * 5 / 2 / k + 20)) s"))"
        done
        say "scaling: evaluations per minute of each count into $out/scaling.tsv, then the table" ;;
      isolation)
        say "isolation: evo-worker eval --genome $iso_genome --shape $iso_shape on GPU 0, $repeats times alone," \
            "$repeats times with $( ((model)) && echo "$((max_workers - 1)) model workers" || echo "workers on GPUs $(gpu_list 1 $((gpus - 1)))") busy, $repeats times alone" ;;
      kill)
        say "kill: evod --lease-ttl-ms 5000, $( ((model)) && echo "evo-worker --backend model --workers $max_workers" || echo "evo-worker --all-gpus ($gpus GPUs)")," \
            "one run of $kill_shape (causal and not), $kill_generations x $kill_population; nvidia-smi sampled;" \
            "SIGKILL to the last worker once a third is evaluated; every candidate counted once" ;;
    esac
  done
  exit 0
fi

mkdir -p "$out_arg" || die "cannot create OUT_DIR '$out_arg'"
out="$(cd "$out_arg" && pwd)"
export PYTHONUNBUFFERED=1
evoctl="$bundle/bin/evoctl"
report="$root/bench/scaling_report.py"
scratch="$(mktemp -d -t evo-scaling.XXXXXX)"

# Daemons this script started (evod, evo-worker parents), stopped however it ends.
pids=()
stop_tries=60  # quarter-seconds a daemon gets to exit on SIGTERM
# shellcheck disable=SC2317  # reached through the EXIT trap
cleanup() {
  local status=$?
  ((${#pids[@]})) && stop_pids "$stop_tries" "${pids[@]}"
  rm -rf "$scratch"
  exit "$status"
}
trap cleanup EXIT
trap 'echo "scaling: interrupted"; exit 130' INT TERM

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# evod on a fresh database in $1, leases of $2 ms; sets EVO_COORDINATOR and evod_pid.
start_evod() {
  local dir=$1 ttl=$2 port
  port=$(free_port) || return 1
  export EVO_COORDINATOR="127.0.0.1:$port"
  "$bundle/bin/evod" serve --db "$dir/evo.db" --listen "$EVO_COORDINATOR" --lease-ttl-ms "$ttl" > "$dir/evod.log" 2>&1 &
  evod_pid=$!
  pids+=("$evod_pid")
  for _ in $(seq 100); do
    "$evoctl" runs > /dev/null 2>&1 && return 0
    kill -0 "$evod_pid" 2>/dev/null || break
    sleep 0.2
  done
  echo "evod did not answer; last lines of $dir/evod.log:"
  tail -n 5 "$dir/evod.log"
  return 1
}

# The workers: evo-worker --all-gpus on GPUs $1 (a CUDA_VISIBLE_DEVICES list), or $2 model workers;
# log $3; sets workers_pid.
start_workers() {
  local gpus_visible=$1 n=$2 log=$3
  if ((model)); then
    "$bundle/bin/evo-worker" --backend model --workers "$n" > "$log" 2>&1 &
  else
    CUDA_VISIBLE_DEVICES="$gpus_visible" "$bundle/bin/evo-worker" --all-gpus > "$log" 2>&1 &
  fi
  workers_pid=$!
  pids+=("$workers_pid")
}

# A run's field from `evoctl runs --json`: $1 run, $2 field (evaluationsDone, evaluationsTotal, state).
run_field() {
  "$evoctl" runs --json 2>/dev/null | python3 -c '
import json, sys
for s in json.load(sys.stdin).get("runs", []):
    if s.get("run", {}).get("runId") == sys.argv[1]:
        v = s.get(sys.argv[2], s.get("run", {}).get(sys.argv[2], 0))
        print(v)
' "$1" "$2"
}

step_scaling() {
  local k dir rc figures status
  touch "$out/scaling.tsv"
  for k in "${counts[@]}"; do
    dir="$out/scaling-$k"
    rm -rf "$dir"
    local args="--workers $k" visible=""
    ((model)) || { args="--all-gpus"; visible=$(gpu_list 0 $((k - 1))); }
    say "scaling: $k ${label}worker(s)${visible:+ on GPUs $visible}, $generations x $population per run (log: $dir.log)"
    env -u EVO_DB -u EVO_START_FILE -u EVO_EXPORT ${visible:+CUDA_VISIBLE_DEVICES=$visible} \
      EVO_WORKER_BACKEND="$backend" EVO_WORKER_ARGS="$args" EVO_BENCH=0 \
      EVO_GENERATIONS="$generations" EVO_POPULATION="$population" EVO_TOP_K=$((population < 3 ? population : 3)) \
      EVO_RUN_TIMEOUT="$run_timeout" \
      "$root/bench/shape_suite.sh" "$bundle" "$dir" > "$dir.log" 2>&1
    rc=$?
    # A worker stopped mid-evaluation finishes it first: wait, so that the next count starts on
    # idle GPUs.
    for _ in $(seq 120); do
      pgrep -f -- "$bundle/bin/evo-worker" > /dev/null || break
      sleep 0.5
    done
    status=complete
    ((rc == 0)) || { status="shape_suite exit $rc"; fail "scaling-$k" "bench/shape_suite.sh exited $rc (see $dir.log)"; }
    if ! figures=$(python3 "$report" throughput "$dir/evo.db"); then
      fail "scaling-$k" "no evaluation stored ($figures)"
      continue
    fi
    say "  $label$figures"
    field() { sed -n "s/.*\b$1=\([0-9.]*\).*/\1/p" <<< "$figures"; }
    grep -v "^$k	" "$out/scaling.tsv" > "$scratch/tsv"
    printf '%s\t%s\t%s\t%s\t%s\n' "$k" "$(field evaluations)" "$(field span_s)" "$(field per_min)" "$label$status" \
      >> "$scratch/tsv"
    cp "$scratch/tsv" "$out/scaling.tsv"
  done
  say "${label}evaluations per minute ($out/scaling.tsv)"
  python3 "$report" table "$out/scaling.tsv"
}

# One `evo-worker eval` of the fixed genome on GPU 0, into $1.
eval_once() {
  local args=(eval --seed fa_s512_v3 --genome "$iso_genome" --shape "$iso_shape" --json --backend "$backend")
  if ((model)); then
    "$bundle/bin/evo-worker" "${args[@]}" > "$1" 2> "$1.err"
  else
    CUDA_VISIBLE_DEVICES=0 "$bundle/bin/evo-worker" "${args[@]}" > "$1" 2> "$1.err"
  fi
}

step_isolation() {
  local dir="$out/isolation" i run
  rm -rf "$dir"
  mkdir -p "$dir"
  export EVO_CACHE_DIR="$dir/cache"
  say "isolation: $iso_genome at $iso_shape, $repeats ${label}evaluations per phase"
  for i in $(seq "$repeats"); do eval_once "$dir/alone1-$i.json" || true; done
  start_evod "$dir" 30000 || { fail isolation "evod did not start"; return; }
  local neighbours=$((max_workers - 1))
  ((model)) || neighbours=$((gpus - 1))
  start_workers "$(gpu_list 1 $((gpus - 1)))" "$neighbours" "$dir/neighbours.log"
  # Enough work that the neighbours stay busy through the busy phase; cancelled after it.
  if ! run=$("$evoctl" submit --seed fa_s512_v3 --shape 2x16x4096x128 --shape 4x16x2048x64 --generations 50 \
               --population 64 --top-k 3 --rng-seed 11 2> "$dir/submit.err"); then
    fail isolation "submit: $(cat "$dir/submit.err")"
  else
    for _ in $(seq 300); do
      [[ $(run_field "$run" evaluationsDone) -ge 1 ]] && break
      sleep 1
    done
    "$evoctl" workers > "$dir/workers-before.txt" 2>&1
    for i in $(seq "$repeats"); do eval_once "$dir/busy-$i.json" || true; done
    "$evoctl" workers > "$dir/workers-after.txt" 2>&1
    say "  neighbours during the busy phase (evoctl workers, before and after it):"
    sed 's/^/    /' "$dir/workers-before.txt" "$dir/workers-after.txt"
    "$evoctl" cancel "$run" > /dev/null 2>&1
  fi
  stop_pids "$stop_tries" "$workers_pid" "$evod_pid"
  for i in $(seq "$repeats"); do eval_once "$dir/alone2-$i.json" || true; done
  unset EVO_CACHE_DIR
  ((model)) && say "  MODEL: an estimate does not depend on load; these lines test the plumbing, not isolation"
  python3 "$report" isolation "$dir" | sed "s/^/  $label/"
  [[ ${PIPESTATUS[0]} == 0 ]] || fail isolation "a phase has no OK evaluation (see $dir/*.err)"
}

# nvidia-smi's compute processes and every process's parent, sample $2, into $1.
smi_sample() {
  local dir=$1 n=$2
  ((model)) && return 0
  nvidia-smi --query-compute-apps=pid,gpu_uuid,used_memory --format=csv,noheader > "$dir/apps-$n.csv" 2>&1
  ps -e -o pid=,ppid= > "$dir/ppids-$n.txt"
}

step_kill() {
  local dir="$out/kill" run total done_now victim victim_pid rc
  rm -rf "$dir"
  mkdir -p "$dir/smi"
  export EVO_CACHE_DIR="$dir/cache"
  start_evod "$dir" 5000 || { fail kill "evod did not start"; return; }
  start_workers "$(gpu_list 0 $((gpus - 1)))" "$max_workers" "$dir/workers.log"
  ((model)) || nvidia-smi --query-gpu=index,uuid --format=csv,noheader > "$dir/smi/gpus.csv" 2>&1
  if ! run=$("$evoctl" submit --seed fa_s512_v3 --shape "$kill_shape" --shape "$kill_shape:causal" \
               --generations "$kill_generations" --population "$kill_population" --top-k $((kill_population < 3 ? kill_population : 3)) --rng-seed 13 \
               2> "$dir/submit.err"); then
    fail kill "submit: $(cat "$dir/submit.err")"
    return
  fi
  total=$((kill_generations * kill_population))
  say "kill: run $run ($total candidates) on $( ((model)) && echo "$max_workers model workers" || echo "$gpus GPUs")"
  local n=0
  for _ in $(seq 600); do
    done_now=$(run_field "$run" evaluationsDone)
    smi_sample "$dir/smi" $((n++))
    ((${done_now:-0} * 3 >= total)) && break
    sleep 1
  done
  # The last worker started: the highest GPU.
  read -r victim victim_pid < <(grep -o 'event=worker_started name=[^ ]* pid=[0-9]*' "$dir/workers.log" | tail -n 1 \
    | sed 's/.*name=\([^ ]*\) pid=\([0-9]*\)/\1 \2/')
  if [[ -z ${victim_pid:-} ]]; then
    fail kill "no worker_started line in $dir/workers.log"
    return
  fi
  say "  the workers evod knows (each its own name and device class):"
  "$evoctl" workers 2>&1 | tee "$dir/workers.txt" | sed 's/^/    /'
  say "  $done_now of $total evaluated: SIGKILL to $victim (pid $victim_pid)"
  kill -KILL "$victim_pid"
  for _ in 1 2 3; do smi_sample "$dir/smi" $((n++)); sleep 1; done
  timeout "$run_timeout" "$evoctl" status "$run" --watch > "$dir/watch.log" 2>&1
  rc=$?
  tail -n 1 "$dir/watch.log"
  ((rc == 0)) || fail kill "run $run did not finish (evoctl status exit $rc; see $dir/watch.log)"
  kill -TERM "$workers_pid"
  wait "$workers_pid"
  rc=$?
  if ((rc == 1)) && grep -q "($victim) was killed by signal 9" "$dir/workers.log"; then
    say "  evo-worker exited 1: $(grep "($victim) was killed" "$dir/workers.log")"
  else
    fail kill "evo-worker exited $rc without naming $victim (see $dir/workers.log)"
  fi
  stop_pids "$stop_tries" "$evod_pid"
  unset EVO_CACHE_DIR
  python3 "$report" once "$dir/evo.db" "$run" "$victim" | sed "s/^/  $label/"
  [[ ${PIPESTATUS[0]} == 0 ]] || fail kill "a candidate was lost or counted twice"
  if ((model)); then
    say "  nvidia-smi: skipped (MODEL workers use no GPU)"
  else
    say "  nvidia-smi, sampled while the workers ran ($dir/smi):"
    python3 "$report" gpu-map "$dir/workers.log" "$dir/smi" | sed 's/^/    /'
    [[ ${PIPESTATUS[0]} == 0 ]] || fail kill "a worker's processes were seen off its GPU (or none seen)"
    nvidia-smi 2>&1 | tail -n 20 > "$dir/smi/last.txt"
  fi
}

for s in "${steps[@]}"; do "step_$s"; done
if ((${#failed[@]})); then
  say "failed: ${failed[*]} (logs in $out)"
  exit 1
fi
say "all steps passed${label:+ (MODEL workers: plumbing only)}; logs in $out"
