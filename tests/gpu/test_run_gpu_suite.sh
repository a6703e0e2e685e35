#!/usr/bin/env bash
# run_gpu_suite.sh's arguments and its shards, with a stand-in gpu_tests that prints what its shard
# was given and fails where told: no GPU and no build needed.
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
script="$here/run_gpu_suite.sh"
source "$here/../../bench/test_lib.sh"
cat > "$bundle/bin/gpu_tests" <<'FAKE'
#!/bin/sh
echo "shard ${GTEST_SHARD_INDEX:-none} of ${GTEST_TOTAL_SHARDS:-none}, cache $EVO_CACHE_DIR, args $*"
echo "[       OK ] Fake.Test${GTEST_SHARD_INDEX:-0} (1 ms)"
if [ "${FAKE_FAIL_SHARD:-none}" = "${GTEST_SHARD_INDEX:-unset}" ]; then
  echo "[  FAILED  ] 1 test, listed below:"
  echo "[  FAILED  ] Fake.Broken${GTEST_SHARD_INDEX}"
  exit 1
fi
echo "[  PASSED  ] 1 test."
FAKE
chmod +x "$bundle/bin/gpu_tests"

check "no shard count" 2 "--shards needs a number of shards in 1..8, got ''" "$script" --shards
check "a shard count of 0" 2 "--shards needs a number of shards in 1..8, got '0'" \
  "$script" --shards 0 "$bundle" "$scratch/out"
check "a shard count that is no number" 2 "got 'two'" "$script" --shards two "$bundle" "$scratch/out"
check "no out dir" 2 "usage: run_gpu_suite.sh [--shards N] BUNDLE_DIR OUT_DIR" "$script" --shards 2 "$bundle"

check "one process" 0 "[  PASSED  ] 1 test." "$script" "$bundle" "$scratch/one"
check "one process, its own cache" 0 "shard none of none, cache $scratch/one/cache, args" cat "$scratch/one/gpu_tests.log"

check "three shards" 0 "(3 shard(s))" "$script" --shards 3 "$bundle" "$scratch/three" --gtest_filter=Fake.*
for k in 0 1 2; do
  check "shard $k in the log, with its own cache and the gtest arguments" 0 \
    "shard $k of 3, cache $scratch/three/cache.$k, args --gtest_output=json:$scratch/three/gpu_tests.$k.json --gtest_filter=Fake.*" \
    cat "$scratch/three/gpu_tests.log"
done
passed=$(grep -c '^\[  PASSED  \] 1 test.' "$scratch/three/gpu_tests.log")
check "every shard's verdict in the log" 0 "3" echo "$passed"

check "the shards' counts added up" 0 "== all shards: 3 passed, 0 failed, 0 skipped" \
  "$script" --shards 3 "$bundle" "$scratch/summed"

check "a failing shard fails the suite and is named" 1 "[  FAILED  ] Fake.Broken1" \
  FAKE_FAIL_SHARD=1 "$script" --shards 2 "$bundle" "$scratch/failing"
check "a failing shard counted" 1 "== all shards: 1 passed, 1 failed, 0 skipped" \
  FAKE_FAIL_SHARD=1 "$script" --shards 2 "$bundle" "$scratch/failing2"

((failures == 0)) || { echo "$failures check(s) failed"; exit 1; }
echo "all checks passed"
