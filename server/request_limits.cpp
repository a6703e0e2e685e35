#include "request_limits.h"

#include <cmath>
#include <string>

#include "errors.h"
#include "wire_labels.h"

namespace evo::limits {

namespace {

// A short text field: bounded, and without control characters that would split a log line.
void check_text(const std::string& value, const char* field, size_t max_bytes, bool required) {
  if (required && value.empty()) throw InputError(std::string("missing ") + field);
  if (value.size() > max_bytes)
    throw InputError(std::string(field) + " is " + std::to_string(value.size()) + " bytes; at most " +
                     std::to_string(max_bytes));
  for (char c : value) {
    auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f) throw InputError(std::string(field) + " holds a control character");
  }
}

void check_id(const std::string& value, const char* field, bool required = true) {
  check_text(value, field, kMaxIdBytes, required);
}

void check_count(int count, int max, const char* field) {
  if (count > max)
    throw InputError(std::string(field) + " has " + std::to_string(count) + " entries; at most " +
                     std::to_string(max));
}

// A typed genome's size and names; its kernel's space checks the rest (genome_proto.h).
void check_genome(const v1::Genome& g, const char* field) {
  check_text(g.kernel(), field, kMaxTextBytes, false);
  check_count(g.genes_size(), kMaxGenes, field);
  for (const auto& gene : g.genes()) check_text(gene.first, field, kMaxTextBytes, true);
}

// Times and rates: finite and not negative.
void check_time(double value, const std::string& field) {
  if (!std::isfinite(value) || value < 0)
    throw InputError(field + " must be a finite number >= 0, got " + std::to_string(value));
}

// Error figures: NaN/Inf are legitimate evidence (a kernel that writes NaN has a NaN error), a
// negative figure is not.
void check_error_figure(double value, const std::string& field) {
  if (value < 0) throw InputError(field + " must not be negative, got " + std::to_string(value));
}

void check_non_negative(int64_t value, const std::string& field) {
  if (value < 0) throw InputError(field + " must not be negative, got " + std::to_string(value));
}

void check_device(const v1::DeviceInfo& d) {
  check_text(d.gpu_name(), "device.gpu_name", kMaxTextBytes, false);
  check_text(d.arch(), "device.arch", kMaxTextBytes, false);
  check_text(d.driver_version(), "device.driver_version", kMaxTextBytes, false);
  check_text(d.cuda_version(), "device.cuda_version", kMaxTextBytes, false);
  check_text(d.nvrtc_version(), "device.nvrtc_version", kMaxTextBytes, false);
  check_text(d.backend(), "device.backend", kMaxTextBytes, false);
  check_text(d.device_class(), "device.device_class", kMaxTextBytes, false);
  check_text(d.timing(), "device.timing", kMaxTextBytes, false);
  check_non_negative(d.sm_count(), "device.sm_count");
  check_non_negative(d.sm_clock_mhz(), "device.sm_clock_mhz");
  check_non_negative(d.mem_clock_mhz(), "device.mem_clock_mhz");
  check_non_negative(d.smem_per_block_optin(), "device.smem_per_block_optin");
  check_non_negative(d.l2_bytes(), "device.l2_bytes");
  check_non_negative(d.global_mem_bytes(), "device.global_mem_bytes");
  check_count(d.template_fingerprints_size(), kMaxTemplates, "device.template_fingerprints");
  for (const auto& f : d.template_fingerprints())
    check_text(f, "device.template_fingerprints[]", kMaxTextBytes, true);
}

void check_evaluation(const v1::Evaluation& e) {
  if (e.ByteSizeLong() > kMaxEvaluationBytes)
    throw InputError("evaluation is " + std::to_string(e.ByteSizeLong()) + " bytes; at most " +
                     std::to_string(kMaxEvaluationBytes));
  if (!v1::EvalStatus_IsValid(e.status()))
    throw InputError("evaluation.status " + std::to_string(e.status()) + " is not an EvalStatus");
  check_time(e.fitness_us(), "evaluation.fitness_us");
  check_time(e.compile_ms(), "evaluation.compile_ms");
  check_time(e.wall_ms(), "evaluation.wall_ms");
  const auto& r = e.resources();
  check_non_negative(r.registers(), "evaluation.resources.registers");
  check_non_negative(r.spill_store_bytes(), "evaluation.resources.spill_store_bytes");
  check_non_negative(r.spill_load_bytes(), "evaluation.resources.spill_load_bytes");
  check_non_negative(r.stack_frame_bytes(), "evaluation.resources.stack_frame_bytes");
  check_non_negative(r.static_smem_bytes(), "evaluation.resources.static_smem_bytes");
  check_non_negative(r.dynamic_smem_bytes(), "evaluation.resources.dynamic_smem_bytes");
  check_non_negative(r.threads_per_block(), "evaluation.resources.threads_per_block");
  check_count(e.gates_size(), kMaxGates, "evaluation.gates");
  for (int i = 0; i < e.gates_size(); ++i) {
    const auto& g = e.gates(i);
    const std::string at = "evaluation.gates[" + std::to_string(i) + "]";
    // By enum, or by label from a worker before the enums; never echoed (it may be huge).
    if (label(gate_of(g)).empty()) throw InputError(at + " names no gate (" + label_list<v1::Gate>() + ")");
    if (label(verdict_of(g)).empty())
      throw InputError(at + " has no verdict (" + label_list<v1::Verdict>() + ")");
    check_time(g.elapsed_ms(), at + ".elapsed_ms");
  }
  check_count(e.shapes_size(), kMaxShapes, "evaluation.shapes");
  for (int i = 0; i < e.shapes_size(); ++i) {
    const auto& s = e.shapes(i);
    const std::string at = "evaluation.shapes[" + std::to_string(i) + "].";
    check_time(s.median_us(), at + "median_us");
    check_time(s.p10_us(), at + "p10_us");
    check_time(s.p90_us(), at + "p90_us");
    check_time(s.resident_us(), at + "resident_us");
    check_time(s.tflops(), at + "tflops");
    check_error_figure(s.rel_l2_error(), at + "rel_l2_error");
    check_error_figure(s.max_abs_error(), at + "max_abs_error");
    check_non_negative(s.nonfinite(), at + "nonfinite");
    check_non_negative(s.unwritten(), at + "unwritten");
    check_non_negative(s.repeats(), at + "repeats");
  }
  check_device(e.device());
}

}  // namespace

void check_request(const v1::RegisterWorkerRequest& r) {
  check_text(r.name(), "name", kMaxTextBytes, false);
  check_id(r.enrolment_key(), "enrolment_key", false);  // missing: the registry decides
  check_device(r.device());
}

void check_request(const v1::LeaseRequest& r) {
  check_id(r.worker_id(), "worker_id");
  check_id(r.credential(), "credential", false);  // missing: the coordinator says so
  check_non_negative(r.max_candidates(), "max_candidates");
  check_count(r.held_lease_ids_size(), kMaxHeartbeatLeases, "held_lease_ids");
  for (const auto& id : r.held_lease_ids()) check_id(id, "held_lease_ids[]");
}

void check_request(const v1::ReportRequest& r) {
  check_id(r.worker_id(), "worker_id");
  check_id(r.credential(), "credential", false);
  check_id(r.lease_id(), "lease_id");
  if (!r.has_evaluation()) throw InputError("missing evaluation");
  check_evaluation(r.evaluation());
}

void check_request(const v1::HeartbeatRequest& r) {
  check_id(r.worker_id(), "worker_id");
  check_id(r.credential(), "credential", false);
  check_count(r.lease_ids_size(), kMaxHeartbeatLeases, "lease_ids");
  for (const auto& id : r.lease_ids()) check_id(id, "lease_ids[]");
}

void check_request(const v1::SubmitRunRequest& r) {
  check_text(r.seed(), "seed", kMaxTextBytes, false);  // empty: the coordinator names the fix
  check_count(r.shapes_size(), kMaxShapes, "shapes");
  for (const auto& s : r.shapes()) check_text(s, "shapes[]", kMaxShapeTextBytes, true);
  check_text(r.strategy(), "strategy", kMaxTextBytes, false);
  check_text(r.fitness_inputs(), "fitness_inputs", kMaxTextBytes, false);
  check_text(r.device_class(), "device_class", kMaxTextBytes, false);
  check_count(r.start_genomes_size(), kMaxStartGenomes, "start_genomes");
  for (const auto& g : r.start_genomes()) check_text(g, "start_genomes[]", kMaxGenomeTextBytes, false);
  check_id(r.request_id(), "request_id", /*required=*/false);
  check_count(r.typed_start_genomes_size(), kMaxStartGenomes, "typed_start_genomes");
  for (const auto& g : r.typed_start_genomes()) check_genome(g, "typed_start_genomes[]");
}

void check_request(const v1::RunRef& r) { check_id(r.run_id(), "run_id"); }

void check_request(const v1::LeaderboardRequest& r) {
  check_id(r.run_id(), "run_id", /*required=*/false);  // empty: the newest run
}

void check_request(const v1::ListCandidatesRequest& r) {
  check_id(r.run_id(), "run_id");
  if (r.limit() < 0 || r.limit() > kMaxListedCandidates)
    throw InputError("limit must be 1.." + std::to_string(kMaxListedCandidates) + " (0: 50), got " +
                     std::to_string(r.limit()));
}

void check_request(const v1::ExportRequest& r) {
  // run_id alone (one run), run_ids alone or both (a dispatch table): at least one id in all.
  if (r.run_id().empty() && r.run_ids_size() == 0) throw InputError("missing run_id");
  check_id(r.run_id(), "run_id", /*required=*/false);
  check_count(r.run_ids_size(), kMaxExportRuns, "run_ids");
  for (const auto& id : r.run_ids()) check_id(id, "run_ids[]");
  check_text(r.source_name(), "source_name", kMaxTextBytes, false);
}

}  // namespace evo::limits
