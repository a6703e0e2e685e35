// The markdown evidence beside an exported kernel: what was measured (or estimated), on what,
// with which compiler options, so that a reader can judge the kernel without evo at hand.
#include <cstdio>
#include <sstream>
#include <vector>

#include "exporter.h"
#include "resident_time.h"
#include "family.h"
#include "wire_labels.h"

namespace evo {
namespace {

// best.cu -> libbest.so: the library the build line makes of the exported file.
std::string shared_library_for(const std::string& source_name) {
  const std::string ext = ".cu";
  const bool has_ext = source_name.size() > ext.size() &&
                       source_name.compare(source_name.size() - ext.size(), ext.size(), ext) == 0;
  return "lib" + (has_ext ? source_name.substr(0, source_name.size() - ext.size()) : source_name) + ".so";
}

std::string fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

std::string sci(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.3g", v);
  return buf;
}

std::string or_unknown(const std::string& s) { return s.empty() ? "unknown" : s; }

// text as a markdown code span; a backtick in it (a file name may hold one) takes a wider fence.
std::string code_span(const std::string& text) {
  if (text.find('`') == std::string::npos) return "`" + text + "`";
  return "`` " + text + " ``";
}

std::string shape_text(const v1::ShapeResult& s) { return result_problem(s).text(); }

const v1::GateVerdict* find_gate(const v1::Evaluation& e, v1::Gate kind) {
  for (const auto& g : e.gates())
    if (g.kind() == kind) return &g;
  return nullptr;
}

// A gate's wall time on the worker; "-" where it was not timed (not reached, or older evidence).
std::string elapsed_text(const v1::GateVerdict& g) {
  if (g.elapsed_ms() <= 0) return "-";
  return fixed(g.elapsed_ms(), g.elapsed_ms() < 10 ? 1 : 0);
}

void report_variant(std::ostringstream& o, const ExportVariant& v, size_t index, size_t count) {
  const v1::Evaluation& e = v.evidence;
  if (count > 1) o << "## Variant " << index << "\n\n";
  if (!v.run_id.empty()) o << "Run: `" << v.run_id << "`\n\n";
  o << "Genome: `" << v.genome.text() << "`\n\n";
  if (!v.shapes.empty()) {
    o << (count > 1 ? "Shape bucket: " : "Shapes: ");
    for (size_t i = 0; i < v.shapes.size(); ++i) o << (i ? ", " : "") << "`" << v.shapes[i].text() << "`";
    o << "\n\n";
  }
  o << "Status: " << v1::EvalStatus_Name(e.status());
  if (!e.message().empty()) o << " (" << e.message() << ")";
  o << (e.estimated() ? " — **ESTIMATED** by the model evaluator: no kernel ran" : " — measured") << "\n\n";

  const auto& r = e.resources();
  o << "### Resources (ptxas)\n\n"
    << "| registers | spill stores B | spill loads B | stack frame B | static smem B | dynamic smem B | threads/block |\n"
    << "| --- | --- | --- | --- | --- | --- | --- |\n"
    << "| " << r.registers() << " | " << r.spill_store_bytes() << " | " << r.spill_load_bytes() << " | "
    << r.stack_frame_bytes() << " | " << r.static_smem_bytes() << " | " << r.dynamic_smem_bytes() << " | "
    << r.threads_per_block() << " |\n\n";

  o << "### Gates\n\n";
  if (e.gates().empty()) {
    o << "No gate verdicts were recorded.\n\n";
  } else {
    o << "| gate | verdict | wall ms | detail |\n| --- | --- | --- | --- |\n";
    for (const auto& g : e.gates())
      o << "| " << label(g.kind()) << " | " << label(g.outcome()) << " | " << elapsed_text(g) << " | " << g.detail()
        << " |\n";
    o << "\n";
    if (e.wall_ms() > 0) {
      double gates_ms = 0;
      for (const auto& g : e.gates()) gates_ms += g.elapsed_ms();
      o << "The evaluation took " << fixed(e.wall_ms(), 0) << " ms on the worker, " << fixed(gates_ms, 0)
        << " of them in the gates; the rest is the wait for the GPU and the start-up of the"
           " evaluation's processes.\n\n";
    }
  }
  const v1::GateVerdict* sanitizer = find_gate(e, v1::GATE_SANITIZER);
  o << "Sanitizer (memcheck, racecheck, initcheck, synccheck): "
    << (sanitizer ? label(sanitizer->outcome()) + (sanitizer->detail().empty() ? "" : " — " + sanitizer->detail())
                  : std::string("not recorded"))
    << "\n\n";

  o << "### Per shape\n\n";
  if (e.shapes().empty()) {
    o << "No per-shape results were recorded.\n\n";
  } else {
    o << "| shape | median µs | p10 µs | p90 µs | resident µs | TFLOP/s | rel L2 error | max abs error | non-finite | "
         "unwritten | repeats |\n"
      << "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n";
    for (const auto& s : e.shapes())
      o << "| " << shape_text(s) << " | " << fixed(s.median_us(), 2) << " | " << fixed(s.p10_us(), 2)
        << " | " << fixed(s.p90_us(), 2) << " | " << (s.resident_us() > 0 ? fixed(s.resident_us(), 2) : "-")
        << " | " << fixed(s.tflops(), 2) << " | "
        << (e.estimated() ? "n/a" : sci(s.rel_l2_error())) << " | " << (e.estimated() ? "n/a" : sci(s.max_abs_error()))
        << " | " << (e.estimated() ? "n/a" : std::to_string(s.nonfinite())) << " | "
        << (e.estimated() ? "n/a" : std::to_string(s.unwritten())) << " | " << s.repeats() << " |\n";
    o << "\n";
  }
  o << "Median, p10 and p90 are per call with inputs cycled past L2; resident, with one input set left in L2 "
       "(as a model's previous layer leaves its output).\n\n";
  o << "Fitness (geometric mean of per-shape medians): " << fixed(e.fitness_us(), 2) << " µs"
    << (e.estimated() ? " (ESTIMATED)" : "") << "\n\n";
  if (ranks_by_resident(v.fitness_inputs, e))
    o << "Run " << (v.run_id.empty() ? std::string("-") : v.run_id)
      << " ranked its candidates by L2-resident inputs: geometric mean of the resident times "
      << fixed(resident_geomean_us(e), 2) << " µs.\n\n";

  const auto& d = e.device();
  o << "### Device and toolkit\n\n"
    << "- GPU: " << or_unknown(d.gpu_name()) << " (" << or_unknown(d.arch()) << ", " << d.sm_count() << " SMs, SM clock "
    << d.sm_clock_mhz() << " MHz, memory clock " << d.mem_clock_mhz() << " MHz)\n"
    << "- device class: " << or_unknown(d.device_class()) << ", backend: " << or_unknown(d.backend()) << "\n"
    << "- driver " << or_unknown(d.driver_version()) << ", CUDA runtime " << or_unknown(d.cuda_version())
    << ", NVRTC " << or_unknown(d.nvrtc_version()) << "\n"
    << "- timing: " << or_unknown(d.timing()) << "\n"
    << "- NVRTC options of the evaluated build: `" << or_unknown(e.compile_options()) << "`\n\n";
}

// A dispatch table's buckets at a glance: which run's winner serves which shapes, how fast, and
// whether that figure was measured or estimated. The sections below hold the full evidence.
void report_buckets(std::ostringstream& o, const std::vector<ExportVariant>& variants) {
  o << "## Buckets\n\n"
    << "| bucket | run | shapes | genome | median µs per shape | fitness µs | evidence |\n"
    << "| --- | --- | --- | --- | --- | --- | --- |\n";
  for (size_t i = 0; i < variants.size(); ++i) {
    const ExportVariant& v = variants[i];
    const v1::Evaluation& e = v.evidence;
    o << "| " << i << " | " << (v.run_id.empty() ? "-" : v.run_id) << " | ";
    for (size_t k = 0; k < v.shapes.size(); ++k) o << (k ? ", " : "") << "`" << v.shapes[k].text() << "`";
    o << " | `" << v.genome.text() << "` | ";
    if (e.shapes().empty()) o << "not recorded";
    for (int k = 0; k < e.shapes_size(); ++k)
      o << (k ? ", " : "") << shape_text(e.shapes(k)) << " " << fixed(e.shapes(k).median_us(), 2);
    // The figure the run ranked its candidates by, marked where that was the resident one.
    o << " | " << fixed(ranked_fitness_us(v.fitness_inputs, e), 2)
      << (ranks_by_resident(v.fitness_inputs, e) ? " (resident)" : "") << " | ";
    if (e.estimated()) {
      o << "**ESTIMATED** (model evaluator, no kernel ran)";
    } else {
      const v1::GateVerdict* sanitizer = find_gate(e, v1::GATE_SANITIZER);
      o << "measured on " << or_unknown(e.device().gpu_name()) << ", sanitizer "
        << (sanitizer ? label(sanitizer->outcome()) : std::string("not recorded"));
    }
    o << " |\n";
  }
  o << "\nFitness: the geometric mean over a bucket's shapes of the time its run ranked by: the median "
       "with inputs cycled past L2, or where marked (resident) the time with one input set left in L2.\n\n";
}

}  // namespace

std::string export_report(const std::vector<ExportVariant>& variants, const FamilyExport& family,
                          const std::string& arch, const std::string& source_name) {
  bool estimated = false;
  for (const auto& v : variants) estimated = estimated || v.evidence.estimated();
  std::ostringstream o;
  o << "# evo export report\n\n";
  if (estimated && variants.size() > 1) {
    o << "> **ESTIMATED (model evaluator, no GPU)** for bucket(s)";
    for (size_t i = 0; i < variants.size(); ++i)
      if (variants[i].evidence.estimated())
        o << " " << i << (variants[i].run_id.empty() ? "" : " (run " + variants[i].run_id + ")");
    o << ". Their figures are an analytical estimate from real compiler resource reports; those\n"
      << "> kernels were never timed or checked for correctness on a GPU. Measure before you trust them.\n\n";
  } else if (estimated) {
    o << "> **ESTIMATED (model evaluator, no GPU).** The figures below are an analytical estimate from\n"
      << "> real compiler resource reports; no kernel of this export was timed or checked for correctness\n"
      << "> on a GPU. Measure before you trust them.\n\n";
  }
  o << "Template `" << (variants.empty() ? "" : variants.front().genome.template_id()) << "`, "
    << variants.size() << (variants.size() == 1 ? " genome" : " genomes (a dispatch table: shape bucket -> genome)")
    << ".\n\n"
    << "Build: " << code_span(exported_build_command(source_name, shared_library_for(source_name), arch)) << "\n\n"
    << family.report_entry_points << "\n\n";
  if (variants.size() > 1) report_buckets(o, variants);
  for (size_t i = 0; i < variants.size(); ++i) report_variant(o, variants[i], i, variants.size());
  return o.str();
}

}  // namespace evo
