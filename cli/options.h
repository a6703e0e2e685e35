#pragma once
// evoctl's command line: `evoctl [--coordinator ADDR] COMMAND [ARGS]`, parsed into one struct.
// A usage error throws UsageError with one line; main turns it into exit status 2.
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "evo/evo.pb.h"

namespace evo::cli {

class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

constexpr const char* kDefaultCoordinator = "127.0.0.1:50051";

struct SubmitOptions {
  std::string seed;
  std::vector<std::string> shapes;  // sent as typed: evod parses and validates them
  bool causal = false;
  v1::DType dtype = v1::DTYPE_FP16;  // of every shape without a dtype suffix
  int32_t generations = 0;          // 0: evod's default
  int32_t population = 0;
  int32_t top_k = 0;
  v1::SearchStrategy strategy = v1::SEARCH_STRATEGY_UNSPECIFIED;  // unset: evod's default (surrogate)
  uint64_t rng_seed = 0;
  bool rng_seed_set = false;
  std::string device_class;
  std::vector<std::string> start_genomes;  // --start, as given; read once by the seed's space at submit
  std::vector<std::string> start_from_runs;  // --start-from: these runs' elites join start_genomes
  v1::FitnessInputs fitness_inputs = v1::FITNESS_INPUTS_UNSPECIFIED;  // --fitness-inputs; unset: evod's (rotated)
  int64_t budget_ms = 0;            // --budget; 0: none
  int32_t max_evals = 0;            // --max-evals; 0: none
  int32_t patience = 0;             // --patience; 0: none
  double target_us = 0;             // --target-us; 0: none
  std::string workload;             // --workload FILE: one run per bucket of the file's shapes (workload.h)
};

struct Options {
  std::string coordinator = kDefaultCoordinator;
  std::string token_file;           // --token-file: evod's shared token (else $EVO_TOKEN)
  std::string tls_ca;               // --tls-ca: connect over TLS trusting this CA (PEM)
  std::string command;              // submit, status, leaderboard, candidates, runs, workers, cancel, export, report
  bool help = false;                // print the help of `command` (or the overview) and exit 0
  std::string run_id;               // the first run named
  std::vector<std::string> run_ids; // export: every run named (several: one dispatch table)
  bool watch = false;
  bool json = false;
  bool all = false;                 // workers --all: the gone ones too
  bool failed_only = false;         // candidates --failed
  int32_t limit = 0;                // candidates --limit; 0: evod's default (50)
  int32_t top = 10;
  std::string out;                  // export --out
  std::string python;               // export --python: the evo_kernels package's folder
  std::string html;                 // report --html
  SubmitOptions submit;
};

// `text` as an integer in min..max, or UsageError naming `flag` (an option or a variable).
// --budget: "90s", "10m", "2h", "1h30m" or plain seconds, 1 s .. 7 days; in milliseconds.
int64_t parse_duration_ms(const std::string& flag, const std::string& text);
int64_t parse_integer(const std::string& flag, const std::string& text, int64_t min, int64_t max);

// `coordinator_default` comes from $EVO_COORDINATOR when set.
Options parse_options(const std::vector<std::string>& args, const std::string& coordinator_default);

// The help text of a command ("" for the overview).
std::string help_text(const std::string& command);

}  // namespace evo::cli
