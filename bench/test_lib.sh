# What the tests of the bench scripts' arguments share (sourced): a scratch folder, removed at
# exit; a stand-in bundle of executables that only fail ($bundle); and the checks. A script sets
# check_env (default: plain env) to run each case in an environment of its own.
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
bundle="$scratch/bundle"
mkdir -p "$bundle/bin"
for bin in evod evo-worker evoctl; do printf '#!/bin/sh\nexit 1\n' > "$bundle/bin/$bin"; chmod +x "$bundle/bin/$bin"; done
check_env=(env)

failures=0
check() {  # $1: what, $2: expected exit status, $3: text the output must hold; the rest: env and args
  local what=$1 want_rc=$2 want_text=$3
  shift 3
  local output rc
  output=$("${check_env[@]}" "$@" 2>&1)
  rc=$?
  if [[ $rc != "$want_rc" || $output != *"$want_text"* ]]; then
    printf 'FAIL %s: exit %s (want %s), output:\n%s\n' "$what" "$rc" "$want_rc" "$output"
    failures=$((failures + 1))
  else
    printf 'ok   %s\n' "$what"
  fi
}
count() {  # how many lines of $2's output (env and args) hold $1
  local pattern=$1
  shift
  "${check_env[@]}" "$@" 2>&1 | grep -cF -- "$pattern"
}
