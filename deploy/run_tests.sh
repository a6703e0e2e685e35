#!/usr/bin/env bash
# evo's tests in one command: install the dependencies, build everything with the tests, and run
# every CTest suite but those labelled slow (the full compile sweep, label sweep: README). GPU
# tests skip cleanly without a GPU. Exits non-zero when any test fails.
# EVO_BUILD_DIR (default build-tests/), EVO_CTEST_JOBS (tests at once, default 2).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${EVO_BUILD_DIR:-$root/build-tests}"

"$root/deploy/install_deps.sh"
# -O2 without debug info: the tests want optimised code (they enumerate whole search spaces and
# run daemons) but no debugger, and on two cores the debug info was about a quarter of the build's time.
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS_RELEASE="-O2 -DNDEBUG" -DEVO_BUILD_TESTS=ON
cmake --build "$build" -j"$(nproc)"
cd "$build"
ctest --output-on-failure -LE "slow|sweep" -j"${EVO_CTEST_JOBS:-2}"
