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

// Leases.
inline constexpr int kDefaultLeaseTtlMs = 30000;
inline constexpr int kMaxLeasesPerRequest = 16;
// A candidate whose lease expired this many times unreported (it keeps killing workers) is
// recorded as a crash instead of being handed out forever.
inline constexpr int kMaxLeaseAttempts = 5;
// A worker not seen for this many heartbeat intervals no longer counts as live: neither as
// "another worker of the class" when placing a confirmation, nor in a run's status.
inline constexpr int kLiveWorkerHeartbeats = 3;

// Run defaults (SubmitRunRequest fields left unset).
inline constexpr int kDefaultGenerations = 5;
inline constexpr int kDefaultPopulation = 16;
inline constexpr int kDefaultTopK = 3;
inline constexpr uint64_t kDefaultRngSeed = 1;
inline constexpr const char* kDefaultShape = "1x8x512x64";
inline constexpr v1::SearchStrategy kDefaultStrategy = v1::SEARCH_STRATEGY_EVOLVE;
inline constexpr v1::FitnessInputs kDefaultFitnessInputs = v1::FITNESS_INPUTS_ROTATED;
inline constexpr int kMaxPopulation = 4096;
inline constexpr int kMaxGenerations = 10000;

// The largest request evod reads; a bigger one is refused with RESOURCE_EXHAUSTED before it is
// parsed. A report with a full ptxas log is a few KB.
inline constexpr int kMaxReceiveMessageBytes = 4 * 1024 * 1024;

// WatchRun sends a status at least this often even when nothing changed.
inline constexpr int kWatchIntervalMs = 1000;

}  // namespace evo::server
