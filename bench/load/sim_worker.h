#pragma once
// A simulated evo-worker for the load benchmark: it speaks the real gRPC protocol to a real evod
// (register, lease one candidate, report at once), but "evaluates" by inventing a plausible
// Evaluation from the genome text, so that evod, not a GPU, is what the benchmark measures.
//
// Workers come in groups; each group owns one run at a time, pinned to a device class of its own
// ("sim/g<group>/e<epoch>"). When a group's run is done, the group submits a new run under a new
// class, so evod's result cache (keyed by device class) never answers for the workers and every
// candidate is really leased and reported.
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "evo/evo.grpc.pb.h"

namespace evo::load {

struct SimConfig {
  std::string address;   // evod, host:port
  int population = 64;   // per generation of each group's runs
  int generations = 40;  // per run (the random strategy stops early when the space runs out)
};

struct RunGroup {
  int index = 0;
  std::mutex mutex;
  int epoch = -1;        // -1: no run submitted yet
  std::string run_id;
  std::atomic<int64_t> run_reports{0};  // reports accepted in the current run (its candidates done, about)
  // A model's class ends in /estimated (evod refuses a backend that does not match its class).
  std::string device_class() const {
    return "sim/g" + std::to_string(index) + "/e" + std::to_string(epoch) + "/estimated";
  }
};

struct SimStats {
  std::vector<double> lease_ms;   // every LeaseCandidates call, empty answers included
  std::vector<double> report_ms;  // every ReportResult call
  // Every ReportResult call: how many reports its run had accepted before it, and its ms.
  std::vector<std::pair<int64_t, double>> report_at;
  int64_t reports = 0;            // accepted reports
  int64_t empty_leases = 0;
  int64_t errors = 0;             // RPCs that failed
  int64_t runs_submitted = 0;
};

class SimWorker {
 public:
  SimWorker(int index, RunGroup& group, const SimConfig& config);
  // Works until stop is set.
  void run(const std::atomic<bool>& stop);
  const SimStats& stats() const { return stats_; }

 private:
  // Moves the group to its next run when its current one is finished (or it has none yet).
  void advance_group(int seen_epoch);
  bool register_for(int epoch);
  v1::Evaluation invent_evaluation(const v1::Lease& lease) const;

  int index_;
  RunGroup& group_;
  SimConfig config_;
  std::unique_ptr<v1::Coordinator::Stub> stub_;
  std::string worker_id_;
  std::string credential_;  // the registration's, sent with every worker call
  int registered_epoch_ = -1;
  std::string device_class_;
  SimStats stats_;
};

}  // namespace evo::load
