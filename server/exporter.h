#pragma once
// The exported kernel: a winning genome turned into ONE self-contained .cu that plain
// `nvcc -shared -Xcompiler -fPIC -arch=sm_90a` builds, exposing its family's C entry points
// (attention: evo_attention_forward of DESIGN.md, written by kernel_templates/attention/
// export_entry.cpp), plus a markdown report of the evidence that crowned it. One genome gives a
// standalone kernel; several genomes give a dispatch table (shape bucket -> genome) with the same
// entry points, for shape suites whose winners differ. No gRPC here: messages only (evo_proto).
#include <cstdint>
#include <string>
#include <vector>

#include "build_command.h"
#include "evo/evo.pb.h"
#include "genome.h"
#include "problem.h"
#include "template_registry.h"

namespace evo {

// One genome of an export and the shapes it serves: for a dispatch table, its bucket; for a
// standalone export, the shapes it was measured on (they appear in the report).
struct ExportVariant {
  Genome genome;
  std::vector<Problem> shapes;
  v1::Evaluation evidence;  // the evaluation that made it the winner (may be estimated)
  std::string run_id = {};  // the run it won, when it came from one (report and buckets)
  v1::FitnessInputs fitness_inputs = v1::FITNESS_INPUTS_ROTATED;  // what ranked that run (RunRecord's)
};

struct ExportOptions {
  // Shared memory per block the constraints are checked against. 0: the evidence's device
  // (smem_per_block_optin), else kDefaultSmemLimit (device_limits.h).
  int64_t smem_limit = 0;
  // The exported file's name, for the report's build line (the library: lib<stem>.so).
  std::string source_name = "best.cu";
};

// The winner alone. Throws InputError for an unknown template, a genome whose genes do not match
// its template's space, or a space whose formulas name something the exporter does not know.
v1::ExportResponse export_standalone(const Genome& g, const std::vector<Problem>& shapes,
                                     const v1::Evaluation& evidence,
                                     const ExportOptions& options = {});

// Several winners behind one entry point (the response lists them as buckets, in order). Which
// variant a call runs is the family's dispatch (attention: the bucket of its exact problem, else
// the nearest one of its kind). All variants must share one template.
v1::ExportResponse export_dispatch_table(const std::vector<ExportVariant>& variants,
                                         const ExportOptions& options = {});

// The same for a template given directly (its source and space JSON), e.g. one not registered.
v1::ExportResponse export_dispatch_table(const KernelTemplate& t, const std::vector<ExportVariant>& variants,
                                         const ExportOptions& options = {});

// The markdown evidence for an export (also part of the responses above); its build line names
// source_name, and `family` (the template's family's FamilyExport) its entry points.
std::string export_report(const std::vector<ExportVariant>& variants, const FamilyExport& family,
                          const std::string& arch, const std::string& source_name = "best.cu");

}  // namespace evo
