#!/usr/bin/env bash
# fault_campaign.sh: evod under the faults that used to cost honest work, with two model-backend
# workers on loopback; then what it cost, read from the workers' logs and the database:
# honest results refused, lost and doubled (the goal is 0 / 0 / 0).
#
#   bench/fault_campaign.sh BUILD_DIR OUT_DIR [--outage-s 420] [--stop-s 20] [--ttl-ms 10000]
#
# The faults, in order, while three runs are in flight: a SIGSTOP of evod (--stop-s), a SIGKILL of
# evod and a restart, a SIGKILL of one worker and a restart, an outage (evod killed, started again
# --outage-s later on the same database), a second SIGSTOP, a last SIGKILL of evod. The workers
# keep running through evod's faults (they heartbeat, retry and reconnect as they would). Each
# worker compiles into its own empty cache, so evaluations take seconds and leases are held
# across the faults. Takes the outage plus two to four minutes. Writes OUT_DIR/summary.json and
# keeps the logs and the database there.
#
#   refused: reports a worker made that evod refused (event=report_rejected in its log);
#   lost:    results a worker evaluated and evod accepted that the database does not hold, plus
#            candidates left unfinished once the runs ended;
#   doubled: candidates with more than one accepted result.
set -euo pipefail

BUILD=${1:?usage: fault_campaign.sh BUILD_DIR OUT_DIR [--outage-s N] [--stop-s N] [--ttl-ms N]}
OUT=${2:?usage: fault_campaign.sh BUILD_DIR OUT_DIR [--outage-s N] [--stop-s N] [--ttl-ms N]}
shift 2
OUTAGE_S=420
STOP_S=20
TTL_MS=10000
while [ $# -gt 0 ]; do
  case "$1" in
    --outage-s) OUTAGE_S=$2; shift 2 ;;
    --stop-s) STOP_S=$2; shift 2 ;;
    --ttl-ms) TTL_MS=$2; shift 2 ;;
    *) echo "fault_campaign.sh: unknown option '$1'" >&2; exit 2 ;;
  esac
done

EVOD=$BUILD/server/evod
WORKER=$BUILD/worker/evo-worker
EVOCTL=$BUILD/cli/evoctl
for bin in "$EVOD" "$WORKER" "$EVOCTL"; do
  [ -x "$bin" ] || { echo "fault_campaign.sh: $bin is not built" >&2; exit 2; }
done
mkdir -p "$OUT"
DB=$OUT/evo.db
rm -f "$DB" "$DB-wal" "$DB-shm"
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
ADDR=127.0.0.1:$PORT
EVOD_PID=
WORKER_PIDS=()

log() { echo "$(date -u +%H:%M:%S) $*" | tee -a "$OUT/campaign.log"; }

start_evod() {
  "$EVOD" serve --db "$DB" --listen "$ADDR" --lease-ttl-ms "$TTL_MS" >>"$OUT/evod.log" 2>&1 &
  EVOD_PID=$!
  for _ in $(seq 100); do
    "$EVOCTL" --coordinator "$ADDR" runs >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  echo "fault_campaign.sh: evod did not come up (see $OUT/evod.log)" >&2
  exit 1
}

start_worker() {  # index
  EVO_CACHE_DIR=$OUT/cache-$1 "$WORKER" --coordinator "$ADDR" --backend model --name "w$1" \
    >>"$OUT/worker-$1.log" 2>&1 &
  WORKER_PIDS[$1]=$!
}

cleanup() {
  for pid in "${WORKER_PIDS[@]}" $EVOD_PID; do kill -CONT "$pid" 2>/dev/null || true; kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
}
trap cleanup EXIT

active_runs() {
  sqlite3 "file:$DB?mode=ro" "PRAGMA busy_timeout=5000; SELECT COUNT(*) FROM runs WHERE state IN (1, 2);" | tail -1
}

log "evod on $ADDR, lease TTL ${TTL_MS} ms; outage ${OUTAGE_S} s, SIGSTOP ${STOP_S} s; out $OUT"
start_evod
start_worker 1
start_worker 2
for seed in 11 12 13; do
  "$EVOCTL" --coordinator "$ADDR" submit --seed fa_s512_v3 --generations 5 --population 8 --top-k 2 \
    --rng-seed "$seed" >>"$OUT/runs.txt"
done
sleep 15
log "SIGSTOP evod for ${STOP_S} s"; kill -STOP "$EVOD_PID"; sleep "$STOP_S"; kill -CONT "$EVOD_PID"
sleep 10
log "SIGKILL evod, restart"; kill -KILL "$EVOD_PID"; wait "$EVOD_PID" 2>/dev/null || true; start_evod
sleep 8
log "SIGKILL worker 1, restart"; kill -KILL "${WORKER_PIDS[1]}"; wait "${WORKER_PIDS[1]}" 2>/dev/null || true
start_worker 1
sleep 8
log "outage: SIGKILL evod, back in ${OUTAGE_S} s"; kill -KILL "$EVOD_PID"; wait "$EVOD_PID" 2>/dev/null || true
sleep "$OUTAGE_S"
start_evod; log "evod back"
sleep 10
log "SIGSTOP evod for ${STOP_S} s"; kill -STOP "$EVOD_PID"; sleep "$STOP_S"; kill -CONT "$EVOD_PID"
sleep 5
log "SIGKILL evod, restart"; kill -KILL "$EVOD_PID"; wait "$EVOD_PID" 2>/dev/null || true; start_evod
for _ in $(seq 600); do
  [ "$(active_runs)" = "0" ] && break
  sleep 1
done
log "runs active at the end: $(active_runs)"
cleanup
trap - EXIT

python3 - "$OUT" "$DB" <<'EOF'
import glob, json, re, sqlite3, sys
out, db = sys.argv[1], sys.argv[2]
evaluated, rejected = set(), []
for path in sorted(glob.glob(out + "/worker-*.log")):
    for line in open(path, errors="replace"):
        m = re.search(r"lease_id=(\S+)", line)
        if not m:
            continue
        if "event=evaluated" in line:
            evaluated.add(m.group(1))
        elif "event=report_rejected" in line:
            rejected.append(line.strip())
rejected_ids = {re.search(r"lease_id=(\S+)", l).group(1) for l in rejected}
c = sqlite3.connect(db)
q = lambda sql: c.execute(sql).fetchone()[0]
stored = {r[0] for r in c.execute("SELECT lease_id FROM evaluations WHERE lease_id IS NOT NULL")}
# A worker killed between its evaluation and its report never delivered that result: its lease
# expired and the candidate was measured again. Those are not counted as lost.
undelivered = [l for l in evaluated - stored - rejected_ids]
killed_mid_report = 0
for l in undelivered:
    killed_mid_report += 1 if q(f"SELECT COUNT(*) FROM leases WHERE id = '{l}' AND outcome = 'expired'") else 0
summary = {
    "refused": len(rejected),
    "lost": len(undelivered) - killed_mid_report + q("SELECT COUNT(*) FROM candidates WHERE state != 'done'"),
    "doubled": q("SELECT COUNT(*) FROM (SELECT candidate_id FROM evaluations WHERE is_confirmation = 0 "
                 "GROUP BY candidate_id HAVING COUNT(*) > 1)"),
    "runs": q("SELECT COUNT(*) FROM runs"),
    "runs_done": q("SELECT COUNT(*) FROM runs WHERE state = 3"),
    "candidates": q("SELECT COUNT(*) FROM candidates"),
    "results": q("SELECT COUNT(*) FROM evaluations WHERE is_confirmation = 0"),
    "evaluated_by_workers": len(evaluated),
    "undelivered_killed_worker": killed_mid_report,
    "leases": q("SELECT COUNT(*) FROM leases"),
    "leases_expired": q("SELECT COUNT(*) FROM leases WHERE outcome = 'expired'"),
    "leases_returned_unreceived": q("SELECT COUNT(*) FROM leases WHERE outcome = 'returned'"),
    "crash_recorded": q("SELECT COUNT(*) FROM candidates WHERE final_status = 8"),
    "rejected_lines": rejected[:10],
}
json.dump(summary, open(out + "/summary.json", "w"), indent=2)
print(json.dumps(summary, indent=2))
EOF
