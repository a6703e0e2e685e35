#!/usr/bin/env bash
# Fix-reversal check for issue 38: each patch here takes one fix out of the tree; with it applied,
# the tests named for it below must FAIL, and on the clean tree they must PASS.
#
#   lab/fix_reversals/run.sh BUILD_DIR SOURCE_TREE [PATCH_NAME_PART ...]
#
# SOURCE_TREE is a git work tree of evo (a scratch copy: its files are changed while this runs)
# and BUILD_DIR a build folder configured from it with -DEVO_BUILD_TESTS=ON. For each patch (or
# only those whose name contains one of the PATCH_NAME_PARTs) the script applies it with
# `git apply`, builds only the targets its tests need, runs each named test in a process of its
# own (a gtest filter naming that one test), reverses the patch with `git apply -R` and prints
# one line. A patch that no longer applies is reported as stale. At the end it rebuilds the clean
# tree and runs every named test again: each must pass.
#
# Environment: EVO_REVERSAL_JOBS (build jobs, default 2), EVO_REVERSAL_TEST_TIMEOUT_S (per test,
# default 900), EVO_REVERSAL_LOG_DIR (each build's and test's output; default BUILD_DIR/fix-reversal-logs).
# Exit status: 0 when every patch made all its tests fail and the clean tree passed them all.
set -u -o pipefail

if [ $# -lt 2 ] || [ ! -d "$1" ] || [ ! -d "$2" ]; then
  echo "usage: $0 BUILD_DIR SOURCE_TREE [PATCH_NAME_PART ...]" >&2
  exit 2
fi
BUILD=$(cd "$1" && pwd)
SRC=$(cd "$2" && pwd)
shift 2
HERE=$(cd "$(dirname "$0")" && pwd)
JOBS=${EVO_REVERSAL_JOBS:-2}
TEST_TIMEOUT=${EVO_REVERSAL_TEST_TIMEOUT_S:-900}
LOGS=${EVO_REVERSAL_LOG_DIR:-$BUILD/fix-reversal-logs}
mkdir -p "$LOGS"
if ! git -C "$SRC" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  echo "$0: $SRC is not a git work tree" >&2
  exit 2
fi

# break | patch | tests, each BINARY:Suite.Name (the binary is the CMake target that builds it)
MANIFEST='
1  | 01-wal-shm-unwatched | storage_fault_test:StorageFault.WalRemovedUnderRunningEvodIsUnavailableAndLosesNothingAcknowledged storage_fault_test:StorageFault.SharedMemoryFileRemovedUnderRunningEvodIsUnavailable server_tests:Store.RemovedWalStopsEveryWriteAndKeepsWhatWasCommitted server_tests:Store.RemovedSharedMemoryFileStopsEveryWrite server_tests:Store.ReplacedWalStopsWrites
2  | 02-estimated-from-report | server_tests:ResultAdmissionTest.AReportSayingEstimatedIsStillConfirmedOnAMeasuredRun server_tests:ResultAdmissionTest.AModelWorkersResultIsEstimatedWhateverItsReportSays integration_tests:RogueWorker.ALiarBesideTwoHonestWorkersReachesNoEliteExportStatusOrCacheAndIsQuarantined
3  | 03a-cache-takes-one-workers-word | server_tests:ResultAdmissionTest.ALoneWorkersLieNeverAnswersALaterRunThroughTheCache
3  | 03b-no-physical-floor | server_tests:ResultAdmissionTest.TimesBelowTheDevicesFloorAreRefusedAndChangeNothing server_security_tests:RpcBadInput.ReportResult
4  | 04a-stall-charged-to-leases | server_tests:LeaseLivenessTest.AStallOfEvodDoesNotExpireTheLeasesOfAWorkerThatKeepsHeartbeating
4  | 04b-restart-gives-one-ttl | server_tests:LeaseLivenessTest.AfterALongOutageAWorkerThatReturnsWithinTheGraceHasItsResultsAccepted evod_restart_test:EvodRestart.LeasesInFlightSurviveARestartLongerThanTheirTtl
4  | 04c-restart-resumes-nothing | evod_restart_test:EvodRestart.LeasesInFlightSurviveARestartLongerThanTheirTtl server_tests:LeaseLivenessTest.AfterALongOutageAWorkerThatReturnsWithinTheGraceHasItsResultsAccepted
5,7 | 05-exhaustive-list-under-the-store-lock | server_tests:SubmitTest.AnExhaustiveGenerationBredAfterARestartDoesNotListTheSpaceInsideTheReport server_tests:SubmitTest.AnExhaustiveSubmitIsAnsweredWithinASecond
6  | 06a-caller-gone-still-granted | server_tests:LeaseLivenessTest.ALeaseRequestWhoseCallerGaveUpGrantsNothing
6  | 06b-unreceived-leases-kept | server_tests:LeaseLivenessTest.LeasesTheWorkerNeverReceivedAreReturnedAtOnceAndNotCharged
7  | 07-no-submit-request-id | server_tests:SubmitTest.ARetriedSubmitReturnsTheRunTheFirstMadeAndStoresNothing
8  | 08a-every-watcher-computes-its-status | server_tests:CoordinatorTest.WatchersShareOneStatusComputationPerChange
8  | 08b-empty-lease-poll-wakes-watchers | server_tests:CoordinatorTest.AnEmptyLeasePollWakesNoWatcher
9  | 09-elites-read-from-the-whole-run | server_tests:ReportCostTest.AReportCostsTheSameAt25kCandidatesAsAt4k
10 | 10a-tls-key-not-checked | security_integration_tests:Security.TlsKeyOfAnotherCertificateIsNamedNotABusyPort
10 | 10b-evoctl-asks-is-it-running | security_integration_tests:Security.EvoctlWithTheWrongCaSaysTheHandshakeFailed evoctl_tests:Evoctl.FailedTlsHandshakeIsNamedNotNotRunning
10 | 10c-token-directory-read-as-empty | server_security_tests:Token.DirectoryIsNamedAsADirectoryNotAsEmpty
10 | 10d-unparsable-bytes-internal | server_security_tests:RpcBadInput.BytesThatDoNotParseAreInvalidArgumentNamingTheMessage
10 | 10e-corrupt-page-said-refused-but-writes-went-on | server_tests:Store.CorruptionFoundWhileRunningStopsEveryLaterWrite
11 | 11-every-refusal-logged | server_security_tests:RefusalLog.FirstRefusalIsLoggedThenTheRestAreCounted server_security_tests:Auth.AFloodOfRefusedCallsIsLoggedOnceAndCounted
12 | 12a-no-quick-check-at-start | storage_fault_test:StorageFault.CorruptDatabaseIsRefusedAtStartInOneLineAndLeftAsItWas server_tests:Store.CorruptFileIsRefusedAtOpenAndLeftAsItWas
12 | 12b-empty-file-starts-fresh | storage_fault_test:StorageFault.EmptyDatabaseFileIsRefusedUnlessInit server_tests:Store.EmptyFileIsRefusedUnlessInit
13 | 13-build-line-unquoted | exporter_tests:Exporter.ReportBuildLineQuotesTheFileNameForTheShell evoctl_tests:Evoctl.ExportBuildLineQuotesTheFileNameForTheShell
also | 14-every-identity-its-own-party | server_tests:ResultAdmissionTest.TwoIdentitiesOfOneEnrolmentCannotConfirmEachOthersLie server_tests:WorkerRegistryTest.TheWorkersOfOneEnrolmentAreOnePartyNotEachOthersPeers server_tests:ResultAdmissionTest.AnEnrolmentAloneInItsClassIsSelfConfirmedWhicheverIdentityMeasures
'

# The targets a test binary needs: itself, and the daemons its tests start.
targets_for() {
  case "$1" in
    storage_fault_test | evod_restart_test) echo "$1 evod" ;;
    integration_tests) echo "$1 evod evo-worker" ;;
    security_integration_tests) echo "$1 evod evo-worker evoctl" ;;
    *) echo "$1" ;;
  esac
}

binary_path() {
  find "$BUILD/tests" -type f -name "$1" -perm -u+x 2>/dev/null | head -n 1
}

safe() { printf '%s' "$1" | tr -c 'A-Za-z0-9_.-' '_'; }

build() {  # build LOG TARGET...
  local log=$1
  shift
  cmake --build "$BUILD" --target "$@" -j"$JOBS" </dev/null >"$log" 2>&1
}

# run_test LOG BINARY TEST -> prints passed | failed | failed-timeout | skipped | not-found
run_test() {
  local log=$1 bin=$2 test=$3 path rc
  path=$(binary_path "$bin")
  if [ -z "$path" ]; then
    echo not-found
    return
  fi
  timeout -k 10 "$TEST_TIMEOUT" "$path" --gtest_filter="$test" </dev/null >"$log" 2>&1
  rc=$?
  if grep -q "^\[==========\] 0 tests from 0 test suites ran" "$log"; then
    echo not-found
  elif grep -q "^\[  SKIPPED \] $test" "$log"; then
    echo skipped
  elif [ "$rc" -eq 0 ] && grep -q "^\[  PASSED  \] 1 test" "$log"; then
    echo passed
  elif [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
    echo failed-timeout
  elif [ "$rc" -ne 0 ]; then
    echo failed
  else
    echo "passed-unclear"
  fi
}

applied=""
undo() {
  if [ -n "$applied" ]; then
    git -C "$SRC" apply -R "$HERE/$applied.patch" || echo "$0: could not reverse $applied: fix $SRC by hand" >&2
    applied=""
  fi
}
trap 'undo; exit 130' INT TERM
trap 'undo' EXIT

selected() {
  [ $# -le 1 ] && return 0
  local patch=$1 part
  shift
  for part in "$@"; do
    case "$patch" in *"$part"*) return 0 ;; esac
  done
  return 1
}

echo "fix-reversal check: source $(git -C "$SRC" rev-parse --short HEAD) ($(git -C "$SRC" log -1 --format=%cs)), build $(basename "$BUILD"), $(date -u +%Y-%m-%dT%H:%M:%SZ)"
status=0
all_tests=""
while IFS='|' read -r brk patch tests; do
  brk=$(echo "$brk" | xargs)
  patch=$(echo "$patch" | xargs)
  [ -z "$patch" ] && continue
  selected "$patch" "$@" || continue
  all_tests="$all_tests $tests"
  names=""
  targets=""
  for t in $tests; do
    names="$names ${t#*:}"
    targets="$targets $(targets_for "${t%%:*}")"
  done
  names=${names# }
  targets=$(echo "$targets" | tr ' ' '\n' | sort -u | xargs)
  file="$HERE/$patch.patch"
  if [ ! -f "$file" ]; then
    echo "break $brk patch $patch: MISSING: no file $file"
    status=1
    continue
  fi
  if ! err=$(git -C "$SRC" apply --check "$file" 2>&1); then
    echo "break $brk patch $patch: STALE: it no longer applies to this tree ($(echo "$err" | head -n 1)); tests $names were not run"
    status=1
    continue
  fi
  git -C "$SRC" apply "$file"
  applied=$patch
  started=$(date +%s)
  if ! build "$LOGS/$patch.build.log" $targets; then
    undo
    echo "break $brk patch $patch: BUILD FAILED with the patch applied (see $LOGS/$patch.build.log); tests $names were not run"
    status=1
    continue
  fi
  built=$(date +%s)
  failed="" passed="" other=""
  for t in $tests; do
    bin=${t%%:*}
    name=${t#*:}
    result=$(run_test "$LOGS/$patch.$(safe "$name").log" "$bin" "$name")
    case "$result" in
      failed) failed="$failed $name" ;;
      failed-timeout) failed="$failed $name(timed out after ${TEST_TIMEOUT}s)" ;;
      passed | passed-unclear) passed="$passed $name" ;;
      *) other="$other $name($result)" ;;
    esac
  done
  undo
  took="build $((built - started)) s, tests $(($(date +%s) - built)) s"
  if [ -z "$passed" ] && [ -z "$other" ]; then
    echo "break $brk patch $patch: tests$failed FAILED with the fix removed (as expected) [$took]"
  elif [ -n "$passed" ]; then
    echo "break $brk patch $patch: tests$passed PASSED WITHOUT THE FIX: the test does not cover the break${failed:+ (failed as expected:$failed)}${other:+ (not run:$other)} [$took]"
    status=1
  else
    echo "break $brk patch $patch: tests$other gave no verdict${failed:+ (failed as expected:$failed)} [$took]"
    status=1
  fi
done <<<"$MANIFEST"

# The clean tree: every named test passes.
echo "clean tree: rebuilding and running every test named above"
targets=""
unique_tests=$(echo "$all_tests" | tr ' ' '\n' | sed '/^$/d' | awk '!seen[$0]++')
for t in $unique_tests; do targets="$targets $(targets_for "${t%%:*}")"; done
targets=$(echo "$targets" | tr ' ' '\n' | sort -u | xargs)
if ! build "$LOGS/clean.build.log" $targets; then
  echo "clean tree: BUILD FAILED (see $LOGS/clean.build.log)"
  exit 1
fi
clean_passed=0 clean_bad=""
for t in $unique_tests; do
  name=${t#*:}
  result=$(run_test "$LOGS/clean.$(safe "$name").log" "${t%%:*}" "$name")
  if [ "$result" = passed ]; then
    clean_passed=$((clean_passed + 1))
  else
    clean_bad="$clean_bad $name($result)"
  fi
done
if [ -z "$clean_bad" ]; then
  echo "clean tree: all $clean_passed tests PASSED with every fix in place"
else
  echo "clean tree: $clean_passed tests passed; NOT PASSING with the fixes in place:$clean_bad"
  status=1
fi
exit $status
