#pragma once
// evod's policy numbers in one place. server/ must not depend on worker/, so the one threshold it
// shares with the worker's gates is copied here: keep it equal to gates::kConfirmationTolerance in
// worker/gate_thresholds.h.
#include <cstdint>

#include "evo/evo.pb.h"

namespace evo::server {

// Elite admission: the second, independent measurement must agree with the first within this
// fraction of their mean, or the candidate does not enter the elites.
inline constexpr double kConfirmationTolerance = 0.10;
// A worker is quarantined once this many of its results disagreed with its peers' (outvoted by two
// agreeing measurements of other workers) and they outnumber the results a peer agreed with: an honest worker's rare noisy measurement does not cost it its trust.
inline constexpr int kQuarantineDisagreements = 3;

// Leases.
inline constexpr int kDefaultLeaseTtlMs = 30000;
inline constexpr int kMaxLeasesPerRequest = 16;
// A candidate whose lease expired this many times unreported (it keeps killing workers) is
// recorded as a crash instead of being handed out forever.
inline constexpr int kMaxLeaseAttempts = 5;
// Lease liveness: leases are charged only for time evod itself was live. Its lease sweeper ticks
// every sweep period (LeaseScheduler::sweep_period_ms) and records each tick in the store; a
// tick later than the period by more than kStallSlackMs means evod was stopped or stalled, and
// every open lease is moved on by the gap plus one TTL. After a restart, every open lease is
// moved on by the time since the last tick plus kReconnectGraceMs, the time a live worker needs to
// be heard again: its channel's reconnect backoff, capped at 5 s (6 s with jitter), then its next
// heartbeat (a third of the default 30 s TTL), with margin.
inline constexpr int kStallSlackMs = 1000;
inline constexpr int kReconnectGraceMs = 20000;
// A lease request reads at most this many queued candidates of a run beyond what it asks for
// (those it skips: confirmations of its own first measurement, cache answers).
inline constexpr int kQueuedReadAhead = 64;
// A worker not seen for this many heartbeat intervals no longer counts as live: neither as
// "another worker of the class" when placing a confirmation, nor in a run's status.
inline constexpr int kLiveWorkerHeartbeats = 3;

// Run defaults (SubmitRunRequest fields left unset).
inline constexpr int kDefaultGenerations = 5;
inline constexpr int kDefaultPopulation = 16;
inline constexpr int kDefaultTopK = 3;
inline constexpr uint64_t kDefaultRngSeed = 1;
// surrogate: of the strategies, it searched best on the GPU (bench/NOTES.md, "Search quality").
inline constexpr v1::SearchStrategy kDefaultStrategy = v1::SEARCH_STRATEGY_SURROGATE;
inline constexpr v1::FitnessInputs kDefaultFitnessInputs = v1::FITNESS_INPUTS_ROTATED;
inline constexpr int kMaxPopulation = 4096;
inline constexpr int kMaxGenerations = 10000;

// The largest request evod reads; a bigger one is refused with RESOURCE_EXHAUSTED before it is
// parsed. A report with a full ptxas log is a few KB.
inline constexpr int kMaxReceiveMessageBytes = 4 * 1024 * 1024;

// WatchRun sends a status at least this often even when nothing changed.
inline constexpr int kWatchIntervalMs = 1000;
// ...and at most once this often, however fast the run changes: a status per report would cost
// each watcher a write per report (once a second is enough for a progress line; 300 watchers
// at twice a second cost a quarter of the reports on two cores, bench/NOTES.md).
inline constexpr int kWatchMinIntervalMs = 1000;

}  // namespace evo::server
