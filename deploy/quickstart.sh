#!/usr/bin/env bash
# evo in one command: install the dependencies, build, start evod on a temporary database and one
# local evo-worker, submit a small fa_s512_v3 run, follow it, print the leaderboard, and stop both
# daemons again (also on Ctrl-C or an error: nothing is left running).
#
#   deploy/quickstart.sh            # EVO_BUILD_DIR (default build/), EVO_GENERATIONS, EVO_POPULATION
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${EVO_BUILD_DIR:-$root/build}"
generations="${EVO_GENERATIONS:-3}"
population="${EVO_POPULATION:-8}"

say() { printf 'quickstart: %s\n' "$*"; }

"$root/deploy/install_deps.sh"

say "building evod, evo-worker and evoctl (Release) in $build"
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DEVO_BUILD_TESTS=OFF >/dev/null
cmake --build "$build" -j"$(nproc)" --target evod evo-worker evoctl
bin() { find "$build" -type f -name "$1" -perm -u+x -print -quit; }
evod="$(bin evod)" worker="$(bin evo-worker)" evoctl="$(bin evoctl)"
for b in "$evod" "$worker" "$evoctl"; do [ -n "$b" ] || { say "build produced no evod/evo-worker/evoctl"; exit 1; }; done

scratch="$(mktemp -d -t evo-quickstart.XXXXXX)"
evod_pid="" worker_pid=""
stop_all() {
  local status=$?
  for pid in "$worker_pid" "$evod_pid"; do
    if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
      kill -TERM "$pid" 2>/dev/null || true
      for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
      kill -KILL "$pid" 2>/dev/null || true
      wait "$pid" 2>/dev/null || true
    fi
  done
  if [ "$status" -ne 0 ]; then
    say "failed; the daemons' logs follow"
    tail -n 20 "$scratch"/*.log 2>/dev/null || true
  fi
  rm -rf "$scratch"
  exit "$status"
}
trap stop_all EXIT
trap 'exit 130' INT TERM

# A free loopback port, so a running evod elsewhere is never disturbed.
port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
addr="127.0.0.1:$port"
export EVO_COORDINATOR="$addr"
export EVO_CACHE_DIR="$scratch/cache"

say "starting evod on $addr (database $scratch/evo.db)"
"$evod" serve --db "$scratch/evo.db" --listen "$addr" >"$scratch/evod.log" 2>&1 &
evod_pid=$!
for _ in $(seq 100); do
  "$evoctl" runs >/dev/null 2>&1 && break
  kill -0 "$evod_pid" 2>/dev/null || { say "evod exited"; exit 1; }
  sleep 0.2
done

# Try the GPU first; a worker without a GPU says so and exits within moments.
backend=cuda
"$worker" --coordinator "$addr" --backend cuda >"$scratch/worker.log" 2>&1 &
worker_pid=$!
sleep 3
if ! kill -0 "$worker_pid" 2>/dev/null; then
  wait "$worker_pid" 2>/dev/null || true
  say "$(head -n 1 "$scratch/worker.log")"
  say "no GPU: using the model evaluator; results are ESTIMATED"
  backend=model
  "$worker" --coordinator "$addr" --backend model >"$scratch/worker.log" 2>&1 &
  worker_pid=$!
fi
say "one evo-worker on the $backend backend"

run="$("$evoctl" submit --seed fa_s512_v3 --shape 1x8x512x64 --generations "$generations" \
        --population "$population" --top-k 3 --rng-seed 1)"
say "submitted run $run ($generations generations x $population candidates); following it"
"$evoctl" status "$run" --watch
echo
"$evoctl" leaderboard "$run"
if [ "$backend" = model ]; then
  say "no GPU: the model evaluator chose these; results are ESTIMATED, not measured"
fi
# The winner as a standalone kernel, with its evidence beside it.
mkdir -p "$build/quickstart"
"$evoctl" export "$run" --out "$build/quickstart/best.cu"
