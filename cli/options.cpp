#include "options.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <iterator>
#include <cstdlib>
#include <map>
#include <set>

#include "errors.h"
#include "family.h"
#include "server_config.h"
#include "wire_labels.h"

namespace evo::cli {
namespace {

// In the order the overview lists them.
const std::vector<std::string> kCommands = {"submit", "status",  "leaderboard", "candidates", "runs",
                                            "workers", "cancel", "export",      "report"};

bool is_command(const std::string& word) {
  return std::find(kCommands.begin(), kCommands.end(), word) != kCommands.end();
}

std::string command_list() {
  std::string out;
  for (const auto& c : kCommands) out += (out.empty() ? "" : ", ") + c;
  return out;
}

uint64_t parse_unsigned(const std::string& flag, const std::string& text) {
  errno = 0;
  char* end = nullptr;
  const unsigned long long v = std::strtoull(text.c_str(), &end, 10);
  if (text.empty() || text[0] == '-' || *end != '\0' || errno == ERANGE)
    throw UsageError(flag + " expects a non-negative integer, got '" + text + "'");
  return v;
}

// A flag that names an enum value by its label (--strategy, --fitness-inputs): parsed once, here.
template <class E>
E parse_choice(const std::string& flag, const std::string& text) {
  if (const auto value = parse_label<E>(text)) return *value;
  throw UsageError(flag + " expects one of " + label_list<E>() + ", got '" + text + "'");
}

// A --shape as a kernel family's grammar reads it: text that no family of this build reads (an
// unknown dtype among it) is a usage error here, exit 2, not a refusal from evod or, with evod
// down, a connection error; the first family's reason is the one told. Sent as typed: evod parses
// it again with the seed's family, with --causal and --dtype, and checks it against the template.
std::string checked_shape_syntax(const std::string& text) {
  std::string first_reason;
  for (const KernelFamily* family : families()) {
    try {
      family->parse(text, {});
      return text;
    } catch (const InputError& e) {
      if (first_reason.empty()) first_reason = e.what();
    }
  }
  throw UsageError("--shape: " + first_reason);
}

// --dtype: the submit's dtype field by its label ("bf16"); evod applies it to every shape without
// a dtype suffix.
v1::DType parse_dtype_flag(const std::string& text) {
  if (const auto d = parse_dtype_label(text)) return *d;
  throw UsageError("--dtype: unknown dtype '" + text + "': expected " + dtype_label_choices());
}

// --target-us: a positive, finite time in µs.
double parse_time_us(const std::string& flag, const std::string& text) {
  errno = 0;
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || errno == ERANGE || !std::isfinite(v) || v <= 0 || v > 1e9)
    throw UsageError(flag + " expects a time in µs greater than 0 (e.g. 5.2), got '" + text + "'");
  return v;
}

// Walks the arguments; flags may come before or after the command and its positional argument.
class Parser {
 public:
  explicit Parser(const std::vector<std::string>& args) : args_(args) {}
  bool done() const { return i_ >= args_.size(); }
  const std::string& next() { return args_[i_++]; }
  std::string value_of(const std::string& flag) {
    if (done()) throw UsageError(flag + " needs a value");
    return next();
  }

 private:
  const std::vector<std::string>& args_;
  size_t i_ = 0;
};

}  // namespace

int64_t parse_duration_ms(const std::string& flag, const std::string& text) {
  const std::string why = flag + " expects a duration such as 90s, 10m, 2h or 1h30m (1s to 7d), got '" + text + "'";
  // Units largest first, each at most once; a plain number is seconds.
  static const std::pair<char, int64_t> kUnits[] = {{'h', 3600}, {'m', 60}, {'s', 1}};
  const bool plain = !text.empty() && std::all_of(text.begin(), text.end(), [](unsigned char c) { return std::isdigit(c); });
  int64_t seconds = 0;
  size_t i = 0, unit = 0;
  while (i < text.size()) {
    size_t end = i;
    while (end < text.size() && std::isdigit(static_cast<unsigned char>(text[end]))) ++end;
    if (end == i || end - i > 7) throw UsageError(why);
    const int64_t n = std::stoll(text.substr(i, end - i));
    if (plain) {
      seconds = n;
      break;
    }
    while (unit < std::size(kUnits) && (end == text.size() || kUnits[unit].first != text[end])) ++unit;
    if (unit == std::size(kUnits)) throw UsageError(why);
    seconds += n * kUnits[unit++].second;
    i = end + 1;
  }
  if (text.empty() || seconds < 1 || seconds > 7 * 24 * 3600) throw UsageError(why);
  return seconds * 1000;
}

int64_t parse_integer(const std::string& flag, const std::string& text, int64_t min, int64_t max) {
  errno = 0;
  char* end = nullptr;
  const long long v = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || errno == ERANGE || v < min || v > max)
    throw UsageError(flag + " expects an integer in " + std::to_string(min) + ".." + std::to_string(max) +
                     ", got '" + text + "'");
  return v;
}

Options parse_options(const std::vector<std::string>& args, const std::string& coordinator_default) {
  Options o;
  if (!coordinator_default.empty()) o.coordinator = coordinator_default;
  Parser p(args);
  std::vector<std::string> positional;
  // Which flags each command accepts; a flag elsewhere is a usage error, not silently ignored.
  std::vector<std::pair<std::string, std::string>> flags_seen;  // flag, command at the time
  while (!p.done()) {
    const std::string a = p.next();
    if (a == "-h" || a == "--help") {
      o.help = true;
    } else if (a == "--coordinator") {
      o.coordinator = p.value_of(a);
    } else if (a == "--token-file") {
      o.token_file = p.value_of(a);
    } else if (a == "--tls-ca") {
      o.tls_ca = p.value_of(a);
    } else if (a.rfind("--", 0) == 0) {
      flags_seen.emplace_back(a, o.command);
      if (a == "--watch") o.watch = true;
      else if (a == "--json") o.json = true;
      else if (a == "--all") o.all = true;
      else if (a == "--failed") o.failed_only = true;
      else if (a == "--limit") o.limit = static_cast<int32_t>(parse_integer(a, p.value_of(a), 1, 1000));
      else if (a == "--causal") o.submit.causal = true;
      else if (a == "--dtype") {
        o.submit.dtype = parse_dtype_flag(p.value_of(a));
      }
      else if (a == "--top") o.top = static_cast<int32_t>(parse_integer(a, p.value_of(a), 1, 1000));
      else if (a == "--out") o.out = p.value_of(a);
      else if (a == "--python") o.python = p.value_of(a);
      else if (a == "--html") o.html = p.value_of(a);
      else if (a == "--seed") o.submit.seed = p.value_of(a);
      else if (a == "--shape") o.submit.shapes.push_back(checked_shape_syntax(p.value_of(a)));
      else if (a == "--workload") o.submit.workload = p.value_of(a);
      else if (a == "--generations")
        o.submit.generations = static_cast<int32_t>(parse_integer(a, p.value_of(a), 1, server::kMaxGenerations));
      else if (a == "--population")
        o.submit.population = static_cast<int32_t>(parse_integer(a, p.value_of(a), 1, server::kMaxPopulation));
      else if (a == "--top-k") o.submit.top_k = static_cast<int32_t>(parse_integer(a, p.value_of(a), 1, 1000));
      else if (a == "--strategy") {
        o.submit.strategy = parse_choice<v1::SearchStrategy>(a, p.value_of(a));
      } else if (a == "--rng-seed") {
        o.submit.rng_seed = parse_unsigned(a, p.value_of(a));
        // 0 is the wire's "not set", which evod reads as its default seed: refuse it rather than
        // run another seed than the one asked for.
        if (o.submit.rng_seed == 0) throw UsageError("--rng-seed expects an integer of at least 1, got '0'");
        o.submit.rng_seed_set = true;
      } else if (a == "--device-class") o.submit.device_class = p.value_of(a);
      else if (a == "--start") o.submit.start_genomes.push_back(p.value_of(a));
      else if (a == "--start-from") o.submit.start_from_runs.push_back(p.value_of(a));
      else if (a == "--fitness-inputs") {
        o.submit.fitness_inputs = parse_choice<v1::FitnessInputs>(a, p.value_of(a));
      } else if (a == "--budget") o.submit.budget_ms = parse_duration_ms(a, p.value_of(a));
      else if (a == "--max-evals") o.submit.max_evals = static_cast<int32_t>(parse_integer(a, p.value_of(a), 1, 1000000));
      else if (a == "--patience") o.submit.patience = static_cast<int32_t>(parse_integer(a, p.value_of(a), 1, server::kMaxGenerations));
      else if (a == "--target-us") o.submit.target_us = parse_time_us(a, p.value_of(a));
      else throw UsageError("unknown option '" + a + "'");
    } else if (o.command.empty()) {
      if (!is_command(a)) throw UsageError("unknown command '" + a + "' (commands: " + command_list() + ")");
      o.command = a;
    } else {
      positional.push_back(a);
    }
  }
  if (o.help) return o;
  if (o.command.empty()) throw UsageError("no command given (try evoctl --help)");

  static const std::map<std::string, std::set<std::string>> kAllowed = {
      {"submit", {"--seed", "--shape", "--causal", "--dtype", "--generations", "--population", "--top-k", "--strategy",
                  "--rng-seed", "--device-class", "--start", "--start-from", "--fitness-inputs",
                  "--budget", "--max-evals", "--patience", "--target-us", "--watch", "--workload"}},
      {"status", {"--watch"}},
      {"leaderboard", {"--top", "--json"}},
      {"runs", {"--json"}},
      {"workers", {"--all", "--json"}},
      {"candidates", {"--failed", "--limit", "--json"}},
      {"cancel", {}},
      {"export", {"--out", "--python"}},
      {"report", {"--html"}},
  };
  for (const auto& [flag, _] : flags_seen)
    if (!kAllowed.at(o.command).count(flag)) throw UsageError(o.command + " does not take " + flag);

  const bool needs_run = o.command == "status" || o.command == "cancel" || o.command == "export" ||
                         o.command == "candidates" || o.command == "report";
  // export takes any number of runs (evod bounds them); submit, runs and workers none; the others
  // at most one.
  const bool takes_no_run = o.command == "submit" || o.command == "runs" || o.command == "workers";
  const size_t max_positional = takes_no_run ? 0 : o.command == "export" ? positional.size() : 1;
  if (positional.size() > max_positional)
    throw UsageError(o.command + ": unexpected argument '" + positional[max_positional] + "'");
  if (!positional.empty()) o.run_id = positional[0];
  if (o.command == "export") o.run_ids = positional;
  if (needs_run && o.run_id.empty()) throw UsageError(o.command + " needs a run id (see evoctl runs)");
  if (o.command == "submit" && !o.submit.workload.empty()) {
    static const std::pair<const char*, const char*> kNotWithWorkload[] = {
        {"--shape", "the workload file names its shapes and their defaults"},
        {"--causal", "the workload file names its shapes and their defaults"},
        {"--dtype", "the workload file names its shapes and their defaults"},
        {"--watch", "it starts several runs"},
        {"--target-us", "each bucket's run ranks its own shapes: submit a bucket's shapes with their own target"}};
    for (const auto& [flag, why] : kNotWithWorkload)
      if (std::any_of(flags_seen.begin(), flags_seen.end(), [&](const auto& seen) { return seen.first == flag; }))
        throw UsageError(std::string("submit --workload does not take ") + flag + " (" + why + ")");
  } else if (o.command == "submit" && o.submit.seed.empty()) {
    throw UsageError("submit needs --seed (e.g. --seed fa_s512_v3)");
  }
  if (o.command == "export" && o.out.empty() && o.python.empty())
    throw UsageError("export needs --out FILE.cu or --python DIR");
  if (o.command == "report" && o.html.empty()) throw UsageError("report needs --html FILE");
  return o;
}

std::string help_text(const std::string& command) {
  if (command == "submit")
    return "usage: evoctl submit --seed TEMPLATE [--shape BxHx[Sq]xSxD[:kvN][:causal][:bf16] ...] [--causal]\n"
           "                     [--dtype fp16|bf16|e4m3]\n"
           "                     [--generations N] [--population P] [--top-k K]\n"
           "                     [--strategy evolve|surrogate|random|exhaustive] [--rng-seed S]\n"
           "                     [--device-class CLASS] [--start GENOME ...] [--start-from RUN ...]\n"
           "                     [--fitness-inputs rotated|resident]\n"
           "                     [--budget DURATION] [--max-evals N] [--patience G] [--target-us US]\n"
           "                     [--watch]\n"
           "       evoctl submit --workload FILE [--seed TEMPLATE] [the options above but --shape,\n"
           "                     --causal, --dtype, --target-us and --watch]\n"
           "Starts a tuning run and prints its id. Defaults come from evod: shape 1x8x512x64,\n"
           "5 generations of 16, top-k 3, strategy surrogate, rng seed 1, the device class of the first\n"
           "worker that leases (CLASS as status and runs print it, e.g. sm_90a/NVIDIA H200 or\n"
           "sm_90a/model/estimated: a run waits, QUEUED, until a worker of that class leases).\n"
           "--causal applies to every shape given without :causal or :nc, --dtype (fp16, the default,\n"
           "bf16, or e4m3: FP8 Q, K and V with per-head scales and a bf16 O) to every shape given\n"
           "without a dtype suffix;\n"
           "a run may mix dtypes, as it may mix causal and not. A shape may name the query and key\n"
           "lengths apart as BxHxSqxSkxD (causal aligns the diagonal bottom-right and needs Sq <= Sk),\n"
           "K/V heads as :kvN, and a packed batch of sequences of their own lengths as LENSxHxD\n"
           "(17+250+3000x32x128, an item Sq/Sk for a chunk over a cache). --watch follows the run like\n"
           "status --watch.\n"
           "--strategy surrogate (the default) is evolve whose children are screened: each generation\n"
           "breeds 8 times the children it has room for and sends those a model fitted to the run's\n"
           "own measurements ranks best (a quarter in breeding order, whatever the model says); plain\n"
           "evolve until 8 genomes have passed. evolve alone: tournament selection, crossover and\n"
           "mutation; random and exhaustive are the baselines.\n"
           "--start (repeatable) puts a known genome into generation 0 beside the default genome:\n"
           "GENOME as leaderboard prints it, with or without the TEMPLATE: prefix, e.g.\n"
           "BLOCK_M=64,BLOCK_N=128,WARPS=4; genes not named take their defaults. evoctl refuses one\n"
           "that does not parse; evod refuses the run if one breaks a constraint for one of the\n"
           "shapes, or the population has no room for them all.\n"
           "--start-from RUN (repeatable) starts from every elite of an earlier run, as if each were\n"
           "given to --start: to go on from a run, or to spend GPU time only where a run on the model\n"
           "evaluator (a worker with --backend model, no GPU) found the promising genomes.\n"
           "--fitness-inputs picks the per-call time that ranks candidates. rotated (the default)\n"
           "cycles input sets past L2, so the cache cannot flatter a small shape; resident replays one\n"
           "input set that stays in L2, as when attention follows the layer that wrote Q, K and V.\n"
           "The leaderboard shows both.\n"
           "Budgets end the run DONE, with its elites, at the first one spent, and status says which:\n"
           "--budget DURATION of wall time from its first lease (90s, 10m, 2h, 1h30m), --max-evals N\n"
           "candidates evaluated (its last generation is cut to fit), --patience G generations in a row\n"
           "without a better best time, --target-us US once an elite is confirmed at or under US µs of\n"
           "fitness (as leaderboard prints it: over several shapes, the geometric mean of their times).\n"
           "--generations still bounds the run: raise it to let a budget decide.\n"
           "--workload FILE tunes for a served model: a JSON file of shapes with weights ({\"seed\",\n"
           "\"dtype\", \"causal\", \"shapes\": [{\"shape\": \"1x32x1x4096x128:kv8\", \"weight\": 5}, ...]}).\n"
           "Shapes of one kind (heads, head dim, causality, dtype; prefill, chunk or decode) within a\n"
           "factor of two in batch and lengths share a bucket; each bucket gets a run on its three\n"
           "heaviest shapes, and --max-evals is shared by the buckets' weights (--budget and the rest\n"
           "apply to each run). A --start goes to the buckets whose shapes it fits (an FP16 genome\n"
           "without wgmma skips an e4m3 bucket, with a line saying so); one that fits none is refused.\n"
           "A shape's own \"starts\" in the file ([\"BLOCK_M=16,PACK_GQA=1\", ...]) begin its bucket's\n"
           "run, before the --start genomes; one that does not fit its bucket is refused.\n"
           "The plan goes to stderr, the run ids to stdout one a line, and the last\n"
           "line says the export that makes them one dispatch table, whose calls between buckets go\n"
           "to the nearest one.\n";
  if (command == "status")
    return "usage: evoctl status RUN [--watch]\n"
           "Prints the run's state, generation, evaluations, best time and genome. --watch follows it\n"
           "until it ends: a live progress bar on a terminal, one line per change otherwise.\n"
           "Exit status 1 if the run failed.\n";
  if (command == "leaderboard")
    return "usage: evoctl leaderboard [RUN] [--top N] [--json]\n"
           "The run's elites (default: the newest run), best first, after the default genome in full:\n"
           "rank, the genes the elite changes from the default genome (as --start reads them back),\n"
           "median µs, the resident µs, spread between its two measurements (\"(self)\": both by the\n"
           "one worker of its class that was live), TFLOP/s, speedup over\n"
           "the default genome, and the gate evidence (registers, shared memory, spills, sanitizer),\n"
           "then how each elite was bred (operator and parent candidates). Estimated runs say so in\n"
           "the header. --json prints evod's answer as JSON, whole genome texts included.\n";
  if (command == "runs")
    return "usage: evoctl runs [--json]\nLists every run with its state and progress.\n";
  if (command == "candidates")
    return "usage: evoctl candidates RUN [--failed] [--limit N] [--json]\n"
           "Lists the run's candidates in the order proposed, the latest N (default 50, at most\n"
           "1000): generation, state, status, µs, the gate that refused it and why, and the genes it\n"
           "changes from the default genome. --failed lists only those a gate refused (spills, wrong\n"
           "outputs, sanitizer errors, timeouts, crashes). --json prints each one's whole evaluation\n"
           "(gates with their details, resources, per-shape results; the ptxas log left out).\n";
  if (command == "workers")
    return "usage: evoctl workers [--all] [--json]\n"
           "Lists the workers evod has heard from within three heartbeat intervals (live), with their\n"
           "device class, backend, when evod last heard from them, the candidates they hold, and how\n"
           "often a peer's measurement agreed with theirs or outvoted it. A worker outvoted too often is\n"
           "QUARANTINED (no leases, its reports refused), and a line below the table says why.\n"
           "--all adds the gone ones: every evo-worker start registers under a new id, so a restarted\n"
           "worker leaves its old id behind.\n";
  if (command == "cancel")
    return "usage: evoctl cancel RUN\nCancels a queued or running run; its results so far are kept.\n";
  if (command == "export")
    return "usage: evoctl export RUN [RUN ...] [--out FILE.cu] [--python DIR]\n"
           "Writes the run's winner (its top elite) as one self-contained CUDA file exposing\n"
           "evo_attention_forward (build: nvcc -shared -Xcompiler -fPIC -arch=sm_90a; it launches as a\n"
           "programmatic dependent launch, evo_attention_forward_ex(..., 0) plainly) and, beside it,\n"
           "FILE.report.md with its evidence: resources, errors, sanitizer, timings, device, compile\n"
           "options, and FILE.RUN.html for each run, the page `evoctl report` draws (convergence,\n"
           "elites, gate failures), which the report links. Several runs make one dispatch table:\n"
           "each run's winner serves that run's shapes; a call of another shape gets the bucket of the\n"
           "nearest sequence length with its head size and causality. The runs must tune one\n"
           "template, share no shape, and each have an elite.\n"
           "Also writes FILE.dispatch.json, the shape buckets as bench/run_gpu_bench.sh reads them\n"
           "(shapes of unequal query and key lengths are left out of it: the bench runs equal ones).\n"
           "--python DIR (a new or empty folder) writes the evo_kernels Python package instead or as\n"
           "well: torch.ops.evo.attention, torch.ops.evo.attention_varlen (packed batches, where a run\n"
           "tuned one) and evo_kernels.scaled_dot_product_attention, one table per\n"
           "GPU architecture the runs were measured on, built for each on the machine that installs it:\n"
           "  pip install --no-build-isolation --no-index DIR\n";
  if (command == "report")
    return "usage: evoctl report RUN --html FILE\n"
           "Writes one self-contained HTML page about the run (inline SVG; nothing fetched, no\n"
           "scripts): its settings and state, the device that measured it (ESTIMATED in a banner\n"
           "when the model evaluator did), the best confirmed time so far against candidates\n"
           "proposed and against wall time since the first candidate done, with every candidate a\n"
           "dot coloured by the gate that refused it, the elites' genes unlike the default genome's,\n"
           "and how many candidates each gate refused. evod lists at most the latest 1000\n"
           "candidates: the page says when the run has more. The file is replaced whole or not at\n"
           "all; a run evod refuses writes nothing. An evod from before finish times draws no\n"
           "wall-time plot.\n";
  return "usage: evoctl [--coordinator ADDR] [--token-file FILE] [--tls-ca CA] COMMAND [ARGS] [--help]\n"
         "Drives evod, the evo tuning coordinator (ADDR default 127.0.0.1:50051, or $EVO_COORDINATOR).\n"
         "--token-file sends evod's shared token on every call (default: $EVO_TOKEN, else none); a\n"
         "file keeps it out of `ps`. --tls-ca connects over TLS, trusting evod's certificate if CA\n"
         "signed it. It waits 5 s for evod to answer ($EVO_CONNECT_TIMEOUT_S: seconds, 1..600).\n"
         "commands:\n"
         "  submit --seed TEMPLATE [...]   start a run, print its id\n"
         "  status RUN [--watch]           progress of a run\n"
         "  leaderboard [RUN] [--top N] [--json]\n"
         "                                 the run's elites with their evidence\n"
         "  runs [--json]                  list runs\n"
         "  candidates RUN [--failed] [--limit N] [--json]\n"
         "                                 the run's candidates: status, gate, why\n"
         "  workers [--all] [--json]       the workers evod hears from\n"
         "  cancel RUN                     stop a run\n"
         "  export RUN [RUN ...] --out FILE.cu | --python DIR\n"
         "                                 the winner as a standalone kernel (several runs: a\n"
         "                                 dispatch table) + FILE.report.md + FILE.dispatch.json\n"
         "                                 + FILE.RUN.html (each run's page, linked from the report)\n"
         "  report RUN --html FILE         the run as an HTML page: convergence plots, elites,\n"
         "                                 gate failures, device\n"
         "Exit status: 0 ok, 1 evod refused or failed (or cannot be reached), 2 usage error.\n"
         "evoctl COMMAND --help tells more.\n";
}

}  // namespace evo::cli
