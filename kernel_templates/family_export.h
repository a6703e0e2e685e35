#pragma once
// What a kernel family gives the exporter (server/exporter.cpp): the parts of an exported .cu that
// are the family's. The exporter writes what every family shares (the kernel's text, one struct
// per genome with its genes, derived values, constraints and launch formulas, the launch itself,
// the report); the family names its problem variables and its params struct, and writes how a
// launch's arguments are made, how a call picks a genome and the C entry points.
#include <map>
#include <string>
#include <vector>

#include "problem.h"

namespace evo {

// What the exporter read of the kernel's search space (SearchSpace) that the family's text needs.
struct ExportSpace {
  std::string id;       // "fa_s512_v3"
  ServedValues served;  // the space's "serves": the values the kernel is written for
};

// The exported genomes, in order (variant i is genome i), and the problems each won: its bucket,
// empty where none were given.
struct ExportTable {
  const ExportSpace& space;
  std::vector<std::vector<Problem>> problems;
};

// A problem variable known only at the call, and how a variant's launch() reads it from its
// params `p` ("BATCH", "p.batch").
struct RuntimeVariable {
  std::string name;
  std::string from_params;
};

struct FamilyExport {
  std::string kind;         // "attention": "the fa_s512_v3 attention kernel" in the file's header
  std::string entry_point;  // the function the header tells a reader to call
  std::string params_type;  // the kernel's params struct, which each variant's launch() takes as `p`
  // The problem variables fixed when a variant is instantiated, in its template's parameter order
  // (each an int template parameter NAME_); a call picks the instantiation.
  std::vector<std::string> compile_time;
  // The problem variables known only at the call.
  std::vector<RuntimeVariable> runtime;
  // The report's paragraph on the entry points (markdown).
  std::string report_entry_points;
  // A problem as the family's side-by-side bench names it in the dispatch file evoctl writes beside
  // the export (cli/dispatch_file.h): a JSON object's text ({"shape": ..., "causal": ...}), or
  // empty with `why_not` set for a problem that bench cannot run.
  std::string (*bench_fields)(const Problem& problem, std::string* why_not);
  // The lines of a variant's launch() that make `args`, what the kernel is launched with, from `p`;
  // `launch` holds the space's launch formulas as C++, by name.
  std::string (*launch_arguments)(const std::map<std::string, std::string>& launch);
  // Inside namespace evo_export, after the variants: serves(), launch_variant() and
  // pick_variant(), which the entry points call.
  std::string (*dispatch)(const ExportTable& table);
  // After namespace evo_export: the C entry points, among them evo_<kind>_workspace_bytes (from
  // each variant's workspace_bytes(p)), which sizes the workspace a caller binds with the
  // exporter's evo_<kind>_bind_workspace.
  std::string (*entry_points)(const ExportTable& table);
};

}  // namespace evo
