#!/usr/bin/env bash
# search_quality.sh's runs, with a stand-in for shape_suite.sh (EVO_SHAPE_SUITE) that logs what it
# was given and does what each case needs: a failed run still waits for its worker before the next
# run starts, and a run that never started its evod waits for none; with EVO_GPUS the slots run side by side, each on its own GPU; an interrupt stops
# every slot's run. Needs no GPU and no build.
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
