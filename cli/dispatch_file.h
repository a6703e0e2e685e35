#pragma once
// The dispatch file evoctl export writes beside the .cu: the same shape buckets, in the format the
// family's side-by-side bench reads (attention: bench/bench_dispatch.py; each problem's fields are
// the family's, FamilyExport::bench_fields), every entry pointing at the exported .cu, so
// `bench/run_gpu_bench.sh FILE.dispatch.json OUT` measures exactly the exported table.
#include <string>
#include <vector>

#include "evo/evo.pb.h"

namespace evo::cli {

struct DispatchFile {
  // {"shapes": [{<the family's bench fields>, "genome", "run_id", "estimated", "cu"}]}
  std::string json;
  std::vector<std::string> skipped;  // shapes the bench cannot run, with why
};

// cu_name: the .cu as the dispatch file should name it (relative to the dispatch file's folder).
// Throws std::invalid_argument for a bucket of a kernel this build does not know, or a shape its
// family's grammar refuses.
DispatchFile dispatch_file(const v1::ExportResponse& response, const std::string& cu_name);

// best.cu -> best.dispatch.json; anything else gets .dispatch.json appended.
std::string dispatch_path(const std::string& cu_path);

// The export's path without its .cu (best.cu -> best; a name without .cu stays whole): the stem
// its report, dispatch file and shared library are named after.
std::string cu_stem(const std::string& cu_path);

}  // namespace evo::cli
