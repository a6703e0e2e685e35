#!/usr/bin/env bash
# search_quality.sh's runs, with a stand-in for shape_suite.sh (EVO_SHAPE_SUITE) that logs what it
# was given and does what each case needs: a failed run still waits for its worker before the next
# run starts, and a run that never started its evod waits for none; a reference run's best becomes
# each run's target; EVO_RESUME keeps what an earlier invocation ended and EVO_DEADLINE_S leaves
# what could not end in time; with EVO_GPUS the slots run side by side, each on its own GPU; an
# interrupt stops every slot's run. Needs no GPU and no build.
set -uo pipefail
script="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/search_quality.sh"
source "$(dirname "${BASH_SOURCE[0]}")/test_lib.sh"

# The bundle's worker stands in for a daemon that finishes its evaluation after its run has ended.
printf '#!/bin/sh\nsleep "${STANDIN_WORKER_S:-0}"\n' > "$bundle/bin/evo-worker"
log="$scratch/standin.log"
marks="$scratch/marks"
mkdir -p "$marks"
# The stand-in: the run's seed and GPU into the log, then the case's behaviour (STANDIN_MODE).
standin="$scratch/shape_suite.sh"
cat > "$standin" << 'EOF'
#!/usr/bin/env bash
seed=$EVO_RNG_SEED
# write_db DIR [US]: DIR/evo.db with one run ended DONE and, given US, an elite confirmed at it.
write_db() {
  mkdir -p "$1"
  python3 - "$1/evo.db" "${2-}" << 'PY'
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
db.executescript("""
CREATE TABLE runs (id TEXT, created_ms INTEGER, started_ms INTEGER, stop_reason TEXT, state INTEGER);
CREATE TABLE candidates (id TEXT, run_id TEXT, state TEXT, elite_eligible INTEGER, fitness_us REAL,
                         final_evaluation_id INTEGER);
CREATE TABLE evaluations (id INTEGER PRIMARY KEY, candidate_id TEXT, created_ms INTEGER);
INSERT INTO runs VALUES ('run-0001', 1, 1, 'generations_done', 3);
""")
if sys.argv[2]:
    db.execute("INSERT INTO evaluations VALUES (1, 'c0', 5)")
    db.execute("INSERT INTO candidates VALUES ('c0', 'run-0001', 'done', 1, ?, 1)", (float(sys.argv[2]),))
db.commit()
PY
}
echo "start seed=$seed gpu=${CUDA_VISIBLE_DEVICES-none}" >> "$STANDIN_LOG"
case $STANDIN_MODE in
  worker)  # the first run leaves its worker busy and fails; the next notes whether it is still busy
    port=$((6100 + seed))
    echo "evod on 127.0.0.1:$port"
    if [[ $seed == 1 ]]; then
      STANDIN_WORKER_S=2 "$1/bin/evo-worker" --coordinator "127.0.0.1:$port" &
      exit 1
    fi
    pgrep -f -- "evo-worker --coordinator 127.0.0.1:6101" > /dev/null && echo "overlap seed=$seed" >> "$STANDIN_LOG"
    exit 0 ;;
  noaddr)  # the first run fails before its evod starts, while another slot's worker is busy
    if [[ $seed == 1 ]]; then
      STANDIN_WORKER_S=3 "$1/bin/evo-worker" --coordinator 127.0.0.1:6199 &
      exit 1
    fi
    pgrep -f -- "evo-worker --coordinator 127.0.0.1:6199" > /dev/null && echo "no wait seed=$seed" >> "$STANDIN_LOG"
    exit 0 ;;
  together)  # each run waits (up to 10 s) for the other to have started
    touch "$STANDIN_MARKS/started-$seed"
    for _ in $(seq 40); do
      [[ $(ls "$STANDIN_MARKS" | wc -l) -ge 2 ]] && { echo "together seed=$seed" >> "$STANDIN_LOG"; exit 0; }
      sleep 0.25
    done
    echo "alone seed=$seed" >> "$STANDIN_LOG"
    exit 0 ;;
  reference)  # a reference run confirms an elite at 8.2 µs (8.4 on GPU 7); the others log their target
    if [[ $EVO_GENERATIONS == 1 ]]; then
      mkdir -p "$2"
      write_db "$2" "$([[ ${CUDA_VISIBLE_DEVICES-} == 7 ]] && echo 8.4 || echo 8.2)"
    else
      echo "target seed=$seed ${EVO_TARGETS-none}" >> "$STANDIN_LOG"
    fi
    exit 0 ;;
  ended)  # every run ends DONE, and says it started
    write_db "$2"
    exit 0 ;;
  long)  # runs until stopped, and says so
    echo $$ > "$STANDIN_MARKS/pid-$seed"
    sleep 60 &
    trap 'echo "stopped seed=$seed" >> "$STANDIN_LOG"; kill $!; exit 143' TERM
    wait $!
    exit 0 ;;
esac
EOF
chmod +x "$standin"
export EVO_SHAPE_SUITE="$standin" STANDIN_LOG="$log" STANDIN_MARKS="$marks" EVO_STRATEGIES=evolve EVO_SEEDS="1 2"

check "a shape_suite that is not executable" 2 "EVO_SHAPE_SUITE '$scratch/none' is not an executable file" \
  EVO_SHAPE_SUITE="$scratch/none" "$script" --dry-run "$bundle" "$scratch/out"

# A failed run's worker ends its evaluation before the next run starts.
check "a failed run is reported and the next run goes on" 1 "!! 1x8x512x64 evolve seed 1: shape_suite failed" \
  STANDIN_MODE=worker "$script" "$bundle" "$scratch/out-worker"
check "the next run started once the failed run's worker had ended" 0 "start seed=2" \
  bash -c "grep -q 'start seed=2' '$log' && ! grep 'overlap' '$log' && cat '$log'"

# A run that failed before its evod started has no worker of its own to wait for: the next run
# does not wait for another slot's.
: > "$log"
STANDIN_MODE=noaddr "$script" "$bundle" "$scratch/out-noaddr" > "$scratch/noaddr.out" 2>&1
check "a run with no evod waits for no other slot's worker" 0 "no wait seed=2" cat "$log"

# A reference run first; each run then stops within 1 % of its best.
: > "$log"
echo "1x8x512x64 BLOCK_M=64" > "$scratch/ref.txt"
EVO_REFERENCE="$scratch/ref.txt" STANDIN_MODE=reference "$script" "$bundle" "$scratch/out-ref" > "$scratch/ref.out" 2>&1
check "the reference run's best is the best known" 0 "== 1x8x512x64: best known 8.2000 us (its reference run)" \
  cat "$scratch/ref.out"
check "each run stops within 1 % of it" 2 "target seed=2 1x8x512x64=8.2820" \
  bash -c "cat '$log'; exit \$(grep -c '1x8x512x64=8.2820' '$log')"
# With GPUs, a reference run on each, and each run stops within 1 % of its own GPU's mark.
: > "$log"
EVO_GPUS="3 7" EVO_REFERENCE="$scratch/ref.txt" STANDIN_MODE=reference "$script" "$bundle" "$scratch/out-ref2" \
  > "$scratch/ref2.out" 2>&1
check "a mark per GPU" 0 "== 1x8x512x64 on GPU 7: best known 8.4000 us (its reference run)" cat "$scratch/ref2.out"
check "the run on GPU 3 stops at GPU 3's mark" 0 "target seed=1 1x8x512x64=8.2820" cat "$log"
check "the run on GPU 7 at GPU 7's" 0 "target seed=2 1x8x512x64=8.4840" cat "$log"
check "and the report is told which" 0 "8.4" cat "$scratch/out-ref2/1x8x512x64-evolve-2/mark_us"

# EVO_RESUME keeps the runs an earlier invocation ended; a run cut off mid-way starts again.
: > "$log"
STANDIN_MODE=ended "$script" "$bundle" "$scratch/out-resume" > /dev/null 2>&1
python3 -c "import sqlite3, sys; db = sqlite3.connect(sys.argv[1]); db.execute('UPDATE runs SET state = 2'); db.commit()" \
  "$scratch/out-resume/1x8x512x64-evolve-2/evo.db"
: > "$log"
EVO_RESUME=1 STANDIN_MODE=ended "$script" "$bundle" "$scratch/out-resume" > "$scratch/resume.out" 2>&1
check "a run an earlier invocation ended is kept" 0 "== 1x8x512x64 evolve seed 1: kept from an earlier invocation" \
  cat "$scratch/resume.out"
check "and only the run cut off mid-way starts again" 0 "start seed=2" \
  bash -c "cat '$log'; ! grep -q 'start seed=1' '$log'"

# EVO_DEADLINE_S: a run that could not end in time is left, with exit 3, and none starts.
: > "$log"
EVO_DEADLINE_S=100 EVO_BUDGET=90s STANDIN_MODE=ended "$script" "$bundle" "$scratch/out-deadline" > "$scratch/deadline.out" 2>&1
rc=$?
check "a run that cannot end before the deadline is left (exit 3)" 3 "2 run(s) left for a later invocation: run again with EVO_RESUME=1" \
  bash -c "cat '$scratch/deadline.out'; exit $rc"
check "none started" 0 "none" bash -c "grep -q start '$log' && echo started || echo none"
check "one that can is run" 0 "start seed=2" \
  bash -c "EVO_DEADLINE_S=100 EVO_BUDGET=30s STANDIN_MODE=ended '$script' '$bundle' '$scratch/out-deadline2' > /dev/null 2>&1; cat '$log'"

# Two GPUs: the two runs at once, seed 1 on the first GPU, seed 2 on the second.
: > "$log"
EVO_GPUS="3 7" STANDIN_MODE=together "$script" "$bundle" "$scratch/out-together" > "$scratch/together.out" 2>&1
check "each slot's run on its own GPU" 0 "start seed=2 gpu=7" cat "$log"
check "the slots' runs side by side" 2 "together seed=" bash -c "cat '$log'; exit \$(grep -c 'together seed=' '$log')"

# An interrupt stops every slot's run, then the script (exit 130).
: > "$log"
rm -f "$marks"/*
EVO_GPUS="0 1" STANDIN_MODE=long "$script" "$bundle" "$scratch/out-long" > "$scratch/long.out" 2>&1 &
runner=$!
for _ in $(seq 40); do [[ -e $marks/pid-1 && -e $marks/pid-2 ]] && break; sleep 0.25; done
kill -TERM "$runner"
wait "$runner"
rc=$?
check "an interrupted run exits 130" 130 "search_quality: interrupted" bash -c "cat '$scratch/long.out'; exit $rc"
check "an interrupt stops both slots' runs" 2 "stopped seed=" bash -c "cat '$log'; exit \$(grep -c 'stopped seed=' '$log')"
check "no run is left behind" 0 "" \
  bash -c "for pid in \$(cat '$marks'/pid-1 '$marks'/pid-2); do kill -0 \$pid 2> /dev/null && exit 1; done; exit 0"

((failures == 0)) || { echo "$failures check(s) failed"; exit 1; }
echo "all checks passed"
