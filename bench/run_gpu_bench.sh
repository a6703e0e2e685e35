#!/usr/bin/env bash
# Builds the exported evolved kernel(s) for sm_90a and runs the side-by-side bench on this GPU host.
#
#   bench/run_gpu_bench.sh SRC OUT_DIR [extra compare_sdpa.py arguments...]
#
# SRC is one of:
#   best.cu          one exported kernel, used for every shape
#   dispatch.json    a dispatch table (shape bucket -> .so or .cu; .cu entries are built into OUT_DIR/lib)
#   a directory      holding dispatch.json, or exactly one exported .cu
#   none             baselines only (SDPA backends and Triton)
# OUT_DIR receives compare.txt (the printed tables, progress lines included), compare.json (every
# figure) and lib/ (the built libraries). Set EVO_BENCH_ARCH to build for another architecture.
set -euo pipefail

if [[ $# -lt 2 ]]; then
  echo "usage: $0 SRC(best.cu|dispatch.json|dir|none) OUT_DIR [compare_sdpa.py args...]" >&2
  exit 2
fi
src=$1
out=$2
shift 2
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out/lib"

build_one() {  # $1: exported .cu -> prints the .so path
  local so
  so="$out/lib/$(basename "${1%.cu}").so"
  python3 "$here/bench_build.py" "$1" "$so" --arch "${EVO_BENCH_ARCH:-sm_90a}" >&2
  echo "$so"
}

evolved_args=()
if [[ $src == none ]]; then
  :
elif [[ -d $src ]]; then
  if [[ -f $src/dispatch.json ]]; then
    evolved_args=(--dispatch "$src/dispatch.json")
  else
    shopt -s nullglob
    sources=("$src"/*.cu)
    shopt -u nullglob
    if [[ ${#sources[@]} -eq 0 ]]; then
      echo "error: $src holds neither dispatch.json nor an exported .cu" >&2
      exit 2
    elif [[ ${#sources[@]} -gt 1 ]]; then
      echo "error: $src holds ${#sources[@]} .cu files and no dispatch.json: which shape each serves is unknown" >&2
      exit 2
    fi
    evolved_args=(--evolved "$(build_one "${sources[0]}")")
  fi
elif [[ -f $src && $src == *.json ]]; then
  evolved_args=(--dispatch "$src")
elif [[ -f $src && $src == *.cu ]]; then
  evolved_args=(--evolved "$(build_one "$src")")
else
  echo "error: $src is not a .cu, a .json, a directory or 'none'" >&2
  exit 2
fi

nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader 2>/dev/null | sed 's/^/gpu: /' \
  | tee "$out/compare.txt" || true
PYTHONUNBUFFERED=1 python3 "$here/compare_sdpa.py" "${evolved_args[@]}" --build-dir "$out/lib" \
  --arch "${EVO_BENCH_ARCH:-sm_90a}" --json "$out/compare.json" "$@" 2>&1 | tee -a "$out/compare.txt"
exit "${PIPESTATUS[0]}"
