# What the bench scripts that run from a bundle share (sourced, not run): their arguments,
# `[--dry-run] BUNDLE_DIR OUT_DIR`, their one-line refusals, and stopping the daemons they started.
#
#   bench_args NAME "$@"
# sets dry_run (0 or 1), bundle (BUNDLE_DIR as an absolute path) and out_arg (OUT_DIR as given),
# and refuses a wrong count of arguments, a missing bundle or one without bin/evod, bin/evo-worker
# and bin/evoctl: one line naming NAME, exit 2.

bench_name=bench
die() { echo "$bench_name: $*" >&2; exit 2; }

positive() {  # $1: name, $2: value
  [[ $2 =~ ^[1-9][0-9]*$ ]] || die "$1 must be a positive integer, got '$2'"
}

# stop_pids TRIES PID...: SIGTERM to each, then up to TRIES quarter-seconds for them to exit, then
# SIGKILL to those still there; reaps them all.
stop_pids() {
  local tries=$1 pid
  shift
  for pid in "$@"; do kill -TERM "$pid" 2>/dev/null; done
  for _ in $(seq "$tries"); do
    local alive=0
    for pid in "$@"; do kill -0 "$pid" 2>/dev/null && alive=1; done
    ((alive)) || break
    sleep 0.25
  done
  for pid in "$@"; do kill -KILL "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; done
}

bench_args() {
  bench_name=$1
  shift
  dry_run=0
  if [[ ${1:-} == --dry-run ]]; then dry_run=1; shift; fi
  [[ $# -eq 2 ]] || { echo "usage: bench/$bench_name.sh [--dry-run] BUNDLE_DIR OUT_DIR" >&2; exit 2; }
  [[ -d $1 ]] || die "bundle directory '$1' does not exist"
  bundle="$(cd "$1" && pwd)"
  local bin
  for bin in evod evo-worker evoctl; do
    [[ -x $bundle/bin/$bin ]] || die "bundle '$bundle' has no executable bin/$bin (build it with deploy/bundle.sh)"
  done
  out_arg=$2
}
