#!/usr/bin/env bash
# Issue 35 on one GPU host, from a relocatable bundle (deploy/bundle.sh), in one call:
#   1. device     the GPU, python, torch, transformers, setuptools/wheel, nvcc
#   2. run        evod + one cuda evo-worker, one short run at 1x8x512x64 fp16, causal and not, and a
#                 packed batch of 17, 300 and 777 tokens (8 heads, head dim 64), causal and not
#   3. export     evoctl export RUN --python PKG (a fresh folder)
#   4. install    pip install --no-build-isolation --no-index PKG (no network), then import it
#                 from another folder
#   5. overhead   bench/torch_op_overhead.py: the op's eager cost over the raw entry point
#   6. op         bench/torch_op_check.py: results, refusals, torch.compile fullgraph, CUDA graphs,
#                 the packed-batch op
#                 (each check in a process of its own, so a crash names the check)
#   7. llama      bench/llama_e2e.py: a random Llama, SDPA vs evo, eager and compiled
#
#   bench/torch_acceptance.sh [--dry-run] BUNDLE_DIR OUT_DIR
#
# Every step prints a '== step' line with the seconds elapsed, runs under a timeout cut from what
# is left of EVO_DEADLINE_S (default 400 s, so the whole stays under 7 minutes), and is attempted
# whether or not an earlier one failed, unless it needs that step's output (no package: no
# install, no install: no torch steps). OUT_DIR gets at most 8 files: torch_check.log (everything
# this script printed), one log per torch step (pip_install.log, overhead.log, op_check.log,
# llama.log), the run's leaderboard.txt, and logs.tgz (evod, worker, the package's manifest and
# report). Exit status: 0 when every step passed, 1 otherwise (the failed ones are named last).
# Environment: EVO_BUDGET (the run's wall budget, default 60s), EVO_POPULATION (default 8),
# PYTHON (default python3), EVO_DEADLINE_S, EVO_WORKER_BACKEND (default cuda; model tries the
# script's own steps on a machine without a GPU, where the torch steps then fail).
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$root/bench/lib.sh"
bench_args torch_acceptance "$@"
mkdir -p "$out_arg" && out="$(cd "$out_arg" && pwd)"
python="${PYTHON:-python3}"
deadline="${EVO_DEADLINE_S:-400}"
budget="${EVO_BUDGET:-60s}"
population="${EVO_POPULATION:-8}"
backend="${EVO_WORKER_BACKEND:-cuda}"
positive EVO_DEADLINE_S "$deadline"
positive EVO_POPULATION "$population"
if ((dry_run)); then
  echo "torch_acceptance: would run device, run, export, install, overhead, op, llama from $bundle into $out"
  exit 0
fi
export CUDA_HOME="${CUDA_HOME:-/usr/local/cuda}"
export PATH="$bundle/bin:$CUDA_HOME/bin:$PATH"
export PYTHONUNBUFFERED=1
scratch="$(mktemp -d -t evo-torch.XXXXXX)"
export EVO_CACHE_DIR="$scratch/cache"
pkg="$scratch/pkg"
exec > >(tee "$out/torch_check.log") 2>&1
start=$SECONDS
failed=()
passed=()
pids=()
trap 'stop_pids 8 "${pids[@]}"' EXIT

step() { printf '\n== %s (t=%ds)\n' "$*" "$((SECONDS - start))"; }
left() {  # seconds a step may take: what is left of the deadline, at most $1, at least 20
  local rest=$((deadline - (SECONDS - start)))
  ((rest > $1)) && rest=$1
  ((rest < 20)) && rest=20
  echo "$rest"
}
verdict() {  # $1: step, $2: its exit status
  if [[ $2 -eq 0 ]]; then passed+=("$1"); echo "-- $1: PASS"
  else failed+=("$1"); echo "-- $1: FAIL (exit $2$([[ $2 -eq 124 ]] && echo ', timed out'))"; fi
}

step "device"
set -x
nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv,noheader
"$python" -c 'import sys, torch, setuptools; print(sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda, "setuptools", setuptools.__version__)'
"$python" -c 'import transformers; print("transformers", transformers.__version__)'
"$python" -c 'import wheel; print("wheel", wheel.__version__)' || echo "no wheel package: setuptools >= 70.1 builds wheels without it"
nvcc --version | tail -n 1
set +x

step "run: evod + evo-worker ($backend), 1x8x512x64 and 17+300+777x8x64 fp16 causal and not, budget $budget"
port=$("$python" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
export EVO_COORDINATOR="127.0.0.1:$port"
evod serve --db "$scratch/evo.db" --listen "$EVO_COORDINATOR" > "$scratch/evod.log" 2>&1 &
pids+=($!)
for _ in $(seq 100); do evoctl runs > /dev/null 2>&1 && break; sleep 0.2; done
evo-worker --backend "$backend" > "$scratch/worker.log" 2>&1 &
pids+=($!)
set -x
run=$(evoctl submit --seed fa_s512_v3 --shape 1x8x512x64 --shape 1x8x512x64:causal --shape 17+300+777x8x64 \
        --shape 17+300+777x8x64:causal --generations 4 \
        --population "$population" --budget "$budget" --rng-seed 7)
timeout "$(left 150)" evoctl status "$run" --watch | tail -n 3
set +x
evoctl leaderboard "$run" --top 5 > "$out/leaderboard.txt" 2>&1
verdict run $?
cat "$out/leaderboard.txt"

step "export: evoctl export $run --python $pkg"
set -x
evoctl export "$run" --python "$pkg"
rc=$?
set +x
verdict export $rc
stop_pids 8 "${pids[@]}"
pids=()

step "install: pip install --no-build-isolation --no-index $pkg"
installed=0
if [[ -f $pkg/setup.py ]]; then
  set -x
  (cd "$scratch" && MAX_JOBS=16 timeout "$(left 200)" "$python" -m pip install -v --no-build-isolation --no-index "$pkg") \
    > "$out/pip_install.log" 2>&1
  rc=$?
  set +x
  if [[ $rc -ne 0 ]] && grep -q externally-managed-environment "$out/pip_install.log"; then
    # A system Python that pip may not write to (PEP 668): the same install into a folder of ours.
    echo "pip may not install into this Python: installing with --target $scratch/site instead"
    export PYTHONPATH="$scratch/site${PYTHONPATH:+:$PYTHONPATH}"
    set -x
    (cd "$scratch" && MAX_JOBS=16 timeout "$(left 200)" "$python" -m pip install -v --no-build-isolation --no-index \
       --target "$scratch/site" "$pkg") >> "$out/pip_install.log" 2>&1
    rc=$?
    set +x
  fi
  tail -n 5 "$out/pip_install.log"
  grep -iE 'evo_kernels: |error' "$out/pip_install.log" | head -n 20
  if [[ $rc -eq 0 ]]; then
    (cd "$scratch" && "$python" -c 'import evo_kernels, torch; print(evo_kernels.__file__); print(evo_kernels.CHOICE_BY_DEVICE); print(torch.ops.evo.attention)')
    rc=$?
  fi
  verdict install $rc
  [[ $rc -eq 0 ]] && installed=1
else
  echo "no package to install: the export failed"
  verdict install 1
fi

torch_step() {  # $1: step name, $2: log file, $3: seconds at most, then the command
  local name=$1 log=$2 most=$3
  shift 3
  step "$name: $*"
  if ((!installed)); then echo "not run: evo_kernels is not installed"; verdict "$name" 1; return; fi
  (cd "$root" && timeout "$(left "$most")" "$@") > "$out/$log" 2>&1
  local rc=$?
  grep -E '^(PASS|FAIL)|overhead|host|torch_op_check:|llama_e2e:|^  |^attention|^logits|^compiled|Error' "$out/$log" | head -n 60
  verdict "$name" $rc
}

torch_step overhead overhead.log 60 "$python" bench/torch_op_overhead.py
torch_step op op_check.log 150 "$python" bench/torch_op_check.py
llama_args=()
(( SECONDS - start > deadline - 200 )) && llama_args+=(--skip-compiled-decode)
torch_step llama llama.log 240 "$python" bench/llama_e2e.py "${llama_args[@]}"

step "logs"
cp "$pkg/evo_kernels/manifest.json" "$scratch/" 2>/dev/null
cp "$pkg"/evo_kernels/kernels/*/kernel.report.md "$scratch/" 2>/dev/null
tar -czf "$out/logs.tgz" -C "$scratch" $(cd "$scratch" && ls evod.log worker.log manifest.json kernel.report.md 2>/dev/null)
printf '\n== done in %ds: passed: %s\n' "$((SECONDS - start))" "${passed[*]:-none}"
if ((${#failed[@]})); then
  echo "== failed: ${failed[*]}"
  exit 1
fi
echo "== all steps passed"
