#!/bin/bash
# Persistent producer blocks (the _persistent schedules) against the same genomes one block per
# tile (warp_specialized, warp_specialized_pingpong), both in this build (bin/evo-worker),
# alternating; and, as controls of the code one block per tile shares with main, the packed-batch
# pingpong and the 4-stage e4m3 producer in this build against main's (bin/evo-worker-base, copied
# into the same bundle). The 3-stage 16-bit and the head-dim-64 producers are persistent with their
# output tile over Q. Run on the GPU host from the checkout with the bundle in .bundle:
# `OUT=dir bash lab/persistent/ab.sh`; writes OUT/log.txt and OUT/gtests.tgz. `AB_CACHE_FROM=dir`
# (below) skips the compiles.
set -u
T0=$(date +%s)
B=$PWD/.bundle
L=$OUT/log.txt
# AB_CACHE_FROM=dir: compile caches made beforehand on a host with the same NVRTC (dir/cache-evo-worker,
# dir/cache-evo-worker-base: `evo-worker eval --backend model --arch sm_90a --cache-dir ...` on the
# same genomes and shapes), so that the call's time goes to the GPU; a key that does not match
# (another NVRTC) is compiled here as before.
if [ -n "${AB_CACHE_FROM:-}" ]; then
  for bin in evo-worker evo-worker-base; do
    mkdir -p /tmp/cache-$bin && cp -r "$AB_CACHE_FROM/cache-$bin/." /tmp/cache-$bin/ 2>/dev/null
  done
fi
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv,noheader > $L
ev() {  # label binary genome shapes...
  local label=$1 bin=$2 g=$3; shift 3
  local args=(); for s in "$@"; do args+=(--shape "$s"); done
  EVO_CACHE_DIR=/tmp/cache-$bin timeout 150 $B/bin/$bin eval --seed fa_s512_v3 --genome "$g" "${args[@]}" > /tmp/ev.txt 2>&1
  echo "$label $bin $g | $(grep -E '^resources' /tmp/ev.txt | cut -c11-70) | $(grep -E '^status' /tmp/ev.txt)" >> $L
  grep -E "^shape|error|rror" /tmp/ev.txt | head -12 | sed "s/^/$label $bin   /" >> $L
}
W=WGMMA=1,TMA_BOX_ROWS=256
# A persistent block first, alone and short, on shapes of more work tiles than blocks (each block
# goes on to further tiles): a hang or a wrong output here ends the call early with its log.
EVO_CACHE_DIR=/tmp/cache-evo-worker timeout 90 $B/bin/evo-worker eval --seed fa_s512_v3 --shape 4x16x1000x128 --shape 2x8x4097x128:causal \
  --genome "BLOCK_M=128,BLOCK_N=128,WARPS=8,STAGES=2,$W,SCHEDULE=warp_specialized_pingpong_persistent,LAZY_RESCALE=1" > /tmp/probe.txt 2>&1
echo "probe rc=$?" >> $L; grep -E "^shape|status|rror|gates|  [a-z]+ +(passed|failed)" /tmp/probe.txt | head -20 >> $L
grep -q "status    OK" /tmp/probe.txt || { echo "## probe failed, stopping" >> $L; exit 0; }
P=SCHEDULE=warp_specialized_pingpong,LAZY_RESCALE=1
# schedule (one block per tile; + _persistent) | genes | shapes
cases=(
"warp_specialized_pingpong|BLOCK_M=128,BLOCK_N=128,WARPS=8,STAGES=2,$W,LAZY_RESCALE=1|2x16x4096x128 2x16x4096x128:bf16"
"warp_specialized_pingpong|BLOCK_M=128,BLOCK_N=128,WARPS=8,STAGES=2,$W,LAZY_RESCALE=1,LONGEST_FIRST=1|2x16x4096x128:causal 4x32x4096x128:kv8:causal:bf16 1x32x2048x128:kv8:causal:bf16"
"warp_specialized_pingpong|BLOCK_M=128,BLOCK_N=128,WARPS=8,STAGES=3,$W,LAZY_RESCALE=1|2x16x4096x128 4x32x4096x128:kv8:causal:bf16"
"warp_specialized_pingpong|BLOCK_M=128,BLOCK_N=192,WARPS=8,STAGES=3,$W,LAZY_RESCALE=1|2x16x4096x128:e4m3 2x16x4096x128:causal:e4m3"
"warp_specialized|BLOCK_M=64,BLOCK_N=128,WARPS=4,STAGES=2,$W|4x16x2048x64 4x16x2048x64:causal"
)
controls=(
"BLOCK_M=128,BLOCK_N=192,WARPS=8,STAGES=4,$W,$P|2x16x4096x128:e4m3"
"BLOCK_M=128,BLOCK_N=128,WARPS=8,STAGES=3,$W,SCHEDULE=pingpong,LAZY_RESCALE=1|17+250+600+1100+1500+2000+2500+3000x32x128:kv8:causal:bf16"
)
for r in 1 2; do
  if [ $r = 2 ]; then order="_persistent plain"; else order="plain _persistent"; fi
  for c in "${cases[@]}"; do
    sched=${c%%|*}; rest=${c#*|}; g=${rest%%|*}; shapes=${rest#*|}
    for v in $order; do ev "r$r" evo-worker "$g,SCHEDULE=$sched${v#plain}" $shapes; done
  done
  if [ $r = 2 ]; then order="evo-worker evo-worker-base"; else order="evo-worker-base evo-worker"; fi
  for c in "${controls[@]}"; do
    g=${c%%|*}; shapes=${c#*|}
    for bin in $order; do ev "r$r" $bin "$g" $shapes; done
  done
  echo "## round $r done at $(( $(date +%s) - T0 )) s" >> $L
done
left=$(( 580 - ($(date +%s) - T0) ))
echo "## gate tests, 2 shards, ${left}s" >> $L
F='CudaEvaluator.PersistentProducerBlocksPassEveryGate:CudaEvaluator.WarpSpecializedSchedulesPassEveryGate:CudaEvaluator.WideKeyTilesPassEveryGate:CudaEvaluator.LongestFirstBlockOrderPassesEveryGate'
for i in 0 1; do
  GTEST_TOTAL_SHARDS=2 GTEST_SHARD_INDEX=$i EVO_CACHE_DIR=/tmp/gcache$i timeout $left $B/bin/gpu_tests --gtest_filter="$F" > /tmp/gt$i.txt 2>&1 &
done
wait
for i in 0 1; do grep -E "^\[ +(OK|FAILED|PASSED|SKIPPED) |Failure|tests ran|Which is|: valid=" /tmp/gt$i.txt | cut -c1-400 | head -40 >> $L; done
tar czf $OUT/gtests.tgz -C /tmp gt0.txt gt1.txt
echo "## end at $(( $(date +%s) - T0 )) s" >> $L
