#!/usr/bin/env bash
# On the GPU host (staged by stage.sh): build the A/B program (four translation units in parallel) and run it.
set -uo pipefail
cd "$(dirname "$0")"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv,noheader
start=$(date +%s)
for tu in old new16 new_bf main; do
  nvcc -arch=sm_90a -O3 -std=c++17 -c $tu.cu -o $tu.o > build_$tu.log 2>&1 &
done
wait
grep -l "error" build_*.log && { grep -h -B2 -A5 error build_*.log | head -60; exit 1; }
nvcc -arch=sm_90a -o ab old.o new16.o new_bf.o main.o || exit 1
echo "built in $(( $(date +%s) - start )) s"
./ab "${1:-5}"
