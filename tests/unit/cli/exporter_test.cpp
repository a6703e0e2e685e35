// The exporter's source and report, checked as text (no compiler needed).
#include "exporter.h"

#include <gtest/gtest.h>

#include <regex>

#include <nlohmann/json.hpp>

#include "errors.h"
#include "export_fixtures.h"

namespace evo {
namespace {

using testing::default_genome;
using testing::measured_evaluation;
using testing::shape_1x8x512x64;

TEST(Exporter, SourceExposesTheCEntryPointAndBakesInTheGenes) {
  const Genome g = default_genome();
  const auto r = export_standalone(g, {shape_1x8x512x64()}, measured_evaluation(false));
  EXPECT_NE(r.source().find("extern \"C\" int evo_attention_forward(const void* q, const void* k, const void* v, void* o,"),
            std::string::npos);
  for (const auto& [name, value] : g.genes())
    EXPECT_NE(r.source().find("static constexpr long long " + name + " = " + std::to_string(value) + "LL;"),
              std::string::npos)
        << name;
  // The kernel name comes from the space's pattern with the genes substituted.
  EXPECT_NE(r.source().find("evo::fa_s512_v3_kernel<DTYPE_, CAUSAL_, HEAD_DIM_, " + std::to_string(g.genes()[0].second)),
            std::string::npos);
  // Both causal values and every head dim of the space are dispatched, for the dtype it was tuned on.
  EXPECT_NE(r.source().find("Variant0<0, 1, 128, 0>::launch"), std::string::npos);
  EXPECT_NE(r.source().find("Variant0<0, 0, 64, 0>::launch"), std::string::npos);
  EXPECT_EQ(r.source().find("Variant0<1, "), std::string::npos) << "no bf16 instantiation of an fp16 run";
  EXPECT_NE(r.source().find("extern \"C\" int evo_attention_forward_dtype("), std::string::npos);
  EXPECT_EQ(r.genome().rfind("fa_s512_v3:BLOCK_M=", 0), 0u);
}

// SM_ARCH, which constraints may read (wgmma_needs_sm90a), is the target the evidence was measured
// on; the exported file is built for that target.
TEST(Exporter, SmArchIsTheMeasuredTarget) {
  const auto r = export_standalone(default_genome(), {shape_1x8x512x64()}, measured_evaluation(false));
  EXPECT_NE(r.source().find("static constexpr long long SM_ARCH = 90LL;"), std::string::npos);
  EXPECT_NE(r.source().find("/* wgmma_needs_sm90a */"), std::string::npos);
}

TEST(Exporter, SourceIncludesOnlyToolkitAndStandardHeaders) {
  const auto r = export_standalone(default_genome(), {shape_1x8x512x64()}, measured_evaluation(false));
  std::regex include_line(R"(^\s*#\s*include\s*(.*)$)");
  std::istringstream in(r.source());
  std::string line;
  int includes = 0;
  while (std::getline(in, line)) {
    std::smatch m;
    if (!std::regex_match(line, m, include_line)) continue;
    ++includes;
    EXPECT_EQ(m[1].str().front(), '<') << "a project header would make the export depend on evo: " << line;
  }
  EXPECT_GT(includes, 0);
}

TEST(Exporter, ParamsAreValueInitialised) {
  // Fields the entry point does not set (a workspace pointer) must be null, not stack garbage.
  const auto r = export_standalone(default_genome(), {shape_1x8x512x64()}, measured_evaluation(false));
  EXPECT_NE(r.source().find("*p = evo::FaParams{};"), std::string::npos);
}

TEST(Exporter, SourceNeverSynchronizes) {
  const auto r = export_standalone(default_genome(), {shape_1x8x512x64()}, measured_evaluation(false));
  EXPECT_EQ(r.source().find("Synchronize"), std::string::npos);
}

TEST(Exporter, LaunchUsesTheSpaceFormulas) {
  const auto r = export_standalone(default_genome(), {shape_1x8x512x64()}, measured_evaluation(false));
  EXPECT_NE(r.source().find("const long long grid_x = ROW_TILES;"), std::string::npos);
  EXPECT_NE(r.source().find("const long long ROW_TILES = (SEQ_Q * (1LL + PACK_GQA * (HEADS / HEADS_KV - 1LL)) + BLOCK_M - 1LL) / BLOCK_M;"),
            std::string::npos);
  EXPECT_NE(r.source().find("static constexpr long long WARPS_M = evo_min(WARPS, BLOCK_M / 16LL);"),
            std::string::npos);
  const std::string& src = r.source();
  // The space's min_registers: a build compiled to fewer registers than a register hand-over
  // draws on is refused before its first launch instead of waiting forever.
  EXPECT_NE(src.find("set_up_launch(kernel, devices, threads, smem, (PRODUCER * (WARPS == 8LL) * (HEAD_DIM == 128LL) * "
                     "168LL), &resident);"),
            std::string::npos)
      << src.substr(src.find("static LaunchSetup devices"), 600);
  EXPECT_NE(src.find("if (e == cudaSuccess && attrs.numRegs < min_registers) e = cudaErrorLaunchOutOfResources;"),
            std::string::npos);
  // The space's persistent: such a kernel's blocks share the grid's work tiles, as many of them
  // as the device runs at once, counted after the shared-memory limit is raised.
  const size_t raised = src.find("cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize");
  ASSERT_NE(raised, std::string::npos);
  EXPECT_NE(src.find("cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel,", raised), std::string::npos);
  const size_t persistent = src.find("      if (PERSISTENT) {");
  ASSERT_NE(persistent, std::string::npos) << src.substr(src.find("static LaunchSetup devices"), 900);
  EXPECT_NE(src.find("blocks_x = std::min(grid_x * grid_y, resident);", persistent), std::string::npos);
  EXPECT_NE(src.find("config.gridDim = dim3(static_cast<unsigned>(blocks_x), static_cast<unsigned>(blocks_y),"),
            std::string::npos);
}

// Function attributes live in each device's context, and the blocks a device runs at once depend
// on its SMs: a process launching on several GPUs sets each kernel up once per device, never once
// per process (a second GPU would then launch without its shared-memory opt-in and fail).
TEST(Exporter, EachVariantIsSetUpOncePerDevice) {
  const Genome a = default_genome();
  auto genes = a.genes();
  for (auto& [name, value] : genes)
    if (name == "BLOCK_M") value = 64;
  attention::Shape other;
  other.batch = 2;
  const auto r = export_dispatch_table({{a, {shape_1x8x512x64()}, measured_evaluation(false)},
                                        {Genome(a.template_id(), genes), {attention::to_problem(other)},
                                         measured_evaluation(false)}});
  const std::string& src = r.source();
  size_t setups = 0;
  for (size_t at = src.find("static LaunchSetup devices[kSetUpDevices];"); at != std::string::npos;
       at = src.find("static LaunchSetup devices[kSetUpDevices];", at + 1))
    ++setups;
  EXPECT_EQ(setups, 2u) << "each variant keeps its own table of devices";
  EXPECT_NE(src.find("LaunchSetup& setup = device >= 0 && device < kSetUpDevices ? devices[device] : uncached;"),
            std::string::npos);
  const size_t helper = src.find("static cudaError_t set_up_launch(");
  ASSERT_NE(helper, std::string::npos);
  EXPECT_LT(src.find("cudaGetDevice(&device);", helper), src.find("if (setup.done.load())", helper));
  // No setup is kept for the whole process.
  EXPECT_EQ(src.find("static std::atomic"), std::string::npos) << src.substr(src.find("static std::atomic"), 300);
}

// Constraints over the genes and head dim are compile-time (an invalid pair is never
// instantiated); those that read the call's shape are checked at every call.
TEST(Exporter, EveryConstraintIsCheckedAtCompileOrCallTime) {
  const auto r = export_standalone(default_genome(), {shape_1x8x512x64()}, measured_evaluation(false));
  const auto space = nlohmann::json::parse(find_template("fa_s512_v3")->space_json);
  // The call's sizes, and the derived values that read them (in order, so that one reading another counts).
  std::string call_time = "BATCH|HEADS|HEADS_KV|SEQ_Q|SEQ_K";
  for (const auto& d : space.at("derived"))
    if (std::regex_search(d.at("expr").get<std::string>(), std::regex("\\b(" + call_time + ")\\b")))
      call_time += "|" + d.at("name").get<std::string>();
  const std::regex call_time_name("\\b(" + call_time + ")\\b");
  for (const auto& c : space.at("constraints")) {
    const std::string name = c.at("name"), expr = c.at("expr");
    if (std::regex_search(expr, call_time_name))
      EXPECT_NE(r.source().find(") return cudaErrorInvalidValue;  // " + name), std::string::npos) << name;
    else
      EXPECT_NE(r.source().find("/* " + name + " */"), std::string::npos) << name;
  }
}

// The exporter reads a space through SearchSpace, as evod and the worker do: a formula naming
// something the space does not define is the same one error.
TEST(Exporter, ASpaceSearchSpaceRefusesIsRefused) {
  const KernelTemplate* real = find_template("fa_s512_v3");
  auto space = nlohmann::json::parse(real->space_json);
  space["launch"]["grid_x"] = "SEQ_Q / NOPE";
  const std::string space_text = space.dump();
  const KernelTemplate bad{real->id, real->family, real->source, space_text};
  try {
    export_dispatch_table(bad, {{default_genome(), {shape_1x8x512x64()}, measured_evaluation(false)}});
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(), "bad search space: launch.grid_x reads unknown identifier 'NOPE'");
  }
}

// A space may ask for a per-launch scratch buffer (the real one does, for splits merged in
// memory); the export then keeps one per stream, allocated and zeroed in stream order.
TEST(Exporter, WorkspaceIsStreamOrderedWhenTheSpaceAsksForOne) {
  const auto r = export_dispatch_table(*find_template("fa_s512_v3"),
                                       {{default_genome(), {shape_1x8x512x64()}, measured_evaluation(false)}});
  EXPECT_NE(r.source().find("const long long workspace_bytes = SPLIT_IN_MEMORY * 4LL * (SPLIT_COUNTERS + ROW_TILES"),
            std::string::npos);
  EXPECT_NE(r.source().find("cudaMallocAsync"), std::string::npos);
  EXPECT_NE(r.source().find("cudaMemsetAsync(fresh, 0"), std::string::npos);
  EXPECT_NE(r.source().find("const long long workspace_zeroed_bytes = SPLIT_IN_MEMORY * 4LL * ROW_TILES"),
            std::string::npos);
  EXPECT_NE(r.source().find("workspace_for(stream, workspace_bytes, workspace_zeroed_bytes, &args.workspace, workspace_lease)"),
            std::string::npos);
  EXPECT_NE(r.source().find("e = zeroed_buffer(stream, bytes, zeroed, out);"), std::string::npos)
      << "a captured launch zeroes only its own counters";
  EXPECT_NE(r.source().find("cudaStreamIsCapturing"), std::string::npos) << "a captured launch gets a buffer of the graph's own";
  EXPECT_EQ(r.source().find("cudaMalloc("), std::string::npos) << "cudaMalloc may synchronize";
  // Without the formula there is no workspace code at all.
  const KernelTemplate* real = find_template("fa_s512_v3");
  auto space = nlohmann::json::parse(real->space_json);
  space["launch"].erase("workspace_bytes");
  space["launch"].erase("workspace_zeroed_bytes");
  const std::string space_text = space.dump();
  const KernelTemplate without{real->id, real->family, real->source, space_text};
  const auto plain = export_dispatch_table(without, {{default_genome(), {shape_1x8x512x64()}, measured_evaluation(false)}});
  EXPECT_EQ(plain.source().find("workspace_for"), std::string::npos);
}

// A TMA genome's launch encodes the tensor maps, with the encoder the template ships for the
// host; the encoder is part of the file, so the export still needs no evo header.
TEST(Exporter, TmaGenomesEncodeTheirTensorMapsBeforeTheLaunch) {
  Genome g = default_genome();
  for (const auto& [gene, value] : std::vector<std::pair<std::string, int64_t>>{
           {"BLOCK_M", 64}, {"BLOCK_N", 128}, {"WARPS", 4}, {"WGMMA", 1}, {"SCHEDULE", 3 /* tma */}})
    g.set(gene, value);
  const auto r = export_standalone(g, {shape_1x8x512x64()}, measured_evaluation(false));
  EXPECT_NE(r.source().find("      const long long tensor_map_box_rows = TMA * evo_min(TMA_BOX_ROWS, BLOCK_N);\n"
                            "      const long long tensor_map_q_box_rows = TMA * evo_min(TMA_BOX_ROWS, BLOCK_M);\n"
                            "      if (tensor_map_box_rows > 0) {"),
            std::string::npos)
      << r.source();
  EXPECT_NE(r.source().find("evo::encode_attention_tensor_maps(\n"
                            "            args, static_cast<evo::DType>(DTYPE_), HEAD_DIM_, "
                            "static_cast<int>(tensor_map_box_rows),\n"
                            "            static_cast<int>(tensor_map_q_box_rows));"),
            std::string::npos);
  // The kernel's text and the encoder each inline the dtypes, behind one include guard, so that the
  // compiler reads them once (the nvcc build of this genome's export proves it).
  EXPECT_NE(r.source().find("#ifndef EVO_ATTENTION_DTYPE_H"), r.source().rfind("#ifndef EVO_ATTENTION_DTYPE_H"));
  EXPECT_NE(r.source().find("static constexpr long long TMA_BOX_ROWS = 64LL;"), std::string::npos);
  EXPECT_NE(r.source().find("inline cudaError_t encode_attention_tensor_map("), std::string::npos);
  EXPECT_EQ(r.source().find("#pragma once"), std::string::npos);
}

TEST(Exporter, ReportCarriesTheEvidence) {
  const auto r = export_standalone(default_genome(), {shape_1x8x512x64()}, measured_evaluation(false));
  for (const char* needle : {"NVIDIA H100 80GB HBM3", "--gpu-architecture=sm_90a -O3 --ptxas-options=-v",
                             "| 96 |", "| 7.25 | 7.10 | 7.60 | 6.15 | 74.10 |", "0.00031", "passed — 0 errors",
                             "NVRTC 13.0", "nvcc -O3 -shared -Xcompiler -fPIC -arch=sm_90a", "1x8x512x64",
                             "- timing: graph replays of 20+ back-to-back programmatic launches",
                             "| sanitizer | passed | 4120 | 0 errors |",
                             "The evaluation took 9876 ms on the worker, 4120 of them in the gates"})
    EXPECT_NE(r.report().find(needle), std::string::npos) << needle;
  EXPECT_EQ(r.report().find("ESTIMATED"), std::string::npos);
}

// A winner of a run that ranked by L2-resident inputs says so, with the figure that ranked it;
// one of a run that ranked by rotated inputs does not.
TEST(Exporter, ReportSaysWhichTimeRankedTheRun) {
  const auto resident = export_dispatch_table(
      {{default_genome(), {shape_1x8x512x64()}, measured_evaluation(false), "run-0008", v1::FITNESS_INPUTS_RESIDENT}});
  EXPECT_NE(resident.report().find("Run run-0008 ranked its candidates by L2-resident inputs: geometric mean "
                                   "of the resident times 6.15 µs."),
            std::string::npos)
      << resident.report();
  const auto rotated =
      export_dispatch_table({{default_genome(), {shape_1x8x512x64()}, measured_evaluation(false), "run-0002"}});
  EXPECT_EQ(rotated.report().find("ranked its candidates"), std::string::npos);
}

// The report's build line names the file the client writes (best.cu unless it says otherwise).
TEST(Exporter, ReportBuildsTheFileItWasAskedFor) {
  const auto plain = export_standalone(default_genome(), {shape_1x8x512x64()}, measured_evaluation(false));
  EXPECT_NE(plain.report().find("-o libbest.so best.cu`"), std::string::npos) << plain.report();
  ExportOptions options;
  options.source_name = "table.cu";
  const auto named = export_standalone(default_genome(), {shape_1x8x512x64()}, measured_evaluation(false), options);
  EXPECT_NE(named.report().find("-o libtable.so table.cu`"), std::string::npos) << named.report();
}

// A file name is the user's text: pasted into a shell, the build line must run nvcc on that file
// and nothing else.
TEST(Exporter, ReportBuildLineQuotesTheFileNameForTheShell) {
  ExportOptions options;
  options.source_name = "x;rm -rf $HOME.cu";
  const auto r = export_standalone(default_genome(), {shape_1x8x512x64()}, measured_evaluation(false), options);
  EXPECT_NE(r.report().find("-o 'libx;rm -rf $HOME.so' 'x;rm -rf $HOME.cu'`"), std::string::npos) << r.report();
  options.source_name = "it's `here`.cu";
  const auto q = export_standalone(default_genome(), {shape_1x8x512x64()}, measured_evaluation(false), options);
  EXPECT_NE(q.report().find("Build: `` nvcc -O3 -shared -Xcompiler -fPIC -arch=sm_90a -o 'libit'\\''s `here`.so' "
                            "'it'\\''s `here`.cu' ``"),
            std::string::npos)
      << q.report();
}

TEST(Exporter, ShellQuoteLeavesPlainWordsAndQuotesTheRest) {
  EXPECT_EQ(shell_quote("best.cu"), "best.cu");
  EXPECT_EQ(shell_quote("/tmp/a-b_c/x+y=1,2@3%.cu"), "/tmp/a-b_c/x+y=1,2@3%.cu");
  EXPECT_EQ(shell_quote(""), "''");
  EXPECT_EQ(shell_quote("a b"), "'a b'");
  EXPECT_EQ(shell_quote("$(id)"), "'$(id)'");
  EXPECT_EQ(shell_quote("it's"), "'it'\\''s'");
}

// The response names the target the source builds for, as a field evoctl reads: the measuring
// device's architecture, else sm_90a; and each bucket says whether its winner was estimated.
TEST(Exporter, ResponseNamesTheArchitectureAndWhatWasEstimated) {
  v1::Evaluation blackwell = measured_evaluation(true);
  blackwell.mutable_device()->set_arch("sm_100a");
  const auto r = export_standalone(default_genome(), {shape_1x8x512x64()}, blackwell);
  EXPECT_EQ(r.arch(), "sm_100a");
  EXPECT_NE(r.report().find("-arch=sm_100a -o libbest.so best.cu`"), std::string::npos) << r.report();
  ASSERT_EQ(r.buckets_size(), 1);
  EXPECT_TRUE(r.buckets(0).estimated());
  v1::Evaluation unnamed = measured_evaluation(false);
  unnamed.mutable_device()->clear_arch();
  const auto plain = export_standalone(default_genome(), {shape_1x8x512x64()}, unnamed);
  EXPECT_EQ(plain.arch(), "sm_90a");
  EXPECT_FALSE(plain.buckets(0).estimated());
}

TEST(Exporter, EstimatedEvidenceIsSaidLoudly) {
  const auto r = export_standalone(default_genome(), {shape_1x8x512x64()}, measured_evaluation(true));
  EXPECT_NE(r.report().find("**ESTIMATED (model evaluator, no GPU).**"), std::string::npos);
  EXPECT_NE(r.source().find("ESTIMATED"), std::string::npos);
  // No kernel ran: the error and output checks are not applicable, not zero.
  EXPECT_NE(r.report().find(" | n/a | n/a | n/a | n/a | "), std::string::npos) << r.report();
}

TEST(Exporter, UnknownTemplateIsAnInputError) {
  Genome g("no_such_kernel", {{"BLOCK_M", 32}});
  EXPECT_THROW(export_standalone(g, {}, measured_evaluation(false)), InputError);
}

TEST(Exporter, GenomeMissingAGeneIsAnInputError) {
  Genome g = default_genome();
  auto genes = g.genes();
  genes.pop_back();
  try {
    export_standalone(Genome(g.template_id(), genes), {}, measured_evaluation(false));
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("lacks gene"), std::string::npos) << e.what();
  }
}

TEST(Exporter, GenomeWithAForeignGeneIsAnInputError) {
  Genome g = default_genome();
  auto genes = g.genes();
  genes.emplace_back("UNROLL", 2);
  EXPECT_THROW(export_standalone(Genome(g.template_id(), genes), {}, measured_evaluation(false)), InputError);
}

TEST(Exporter, DispatchTableRoutesBucketsToTheirVariants) {
  Genome a = default_genome();
  auto genes = a.genes();
  for (auto& [name, value] : genes)
    if (name == "BLOCK_M") value = 64;
  Genome b(a.template_id(), genes);
  attention::Shape big_shape;
  big_shape.batch = 16;
  big_shape.heads = big_shape.heads_kv = 16;
  const Problem big = attention::to_problem(big_shape);
  const auto r = export_dispatch_table(
      {{a, {shape_1x8x512x64()}, measured_evaluation(false)}, {b, {big}, measured_evaluation(false)}});
  EXPECT_NE(r.source().find("struct Variant1"), std::string::npos);
  EXPECT_NE(r.source().find("{1, 8, 8, 512, 512, 64, 0, 0, 0, 0},"), std::string::npos);
  EXPECT_NE(r.source().find("{16, 16, 16, 512, 512, 64, 0, 0, 0, 1},"), std::string::npos);
  EXPECT_NE(r.report().find("## Variant 1"), std::string::npos);
  EXPECT_NE(r.genome().find(";"), std::string::npos);
}

// Each bucket lists the figure its run ranked by: a resident run's winner its resident mean,
// marked, in the table and in the response; a rotated run's its fitness, unmarked.
TEST(Exporter, BucketsCarryTheFitnessTheirRunRankedBy) {
  const Genome a = default_genome();
  auto genes = a.genes();
  for (auto& [name, value] : genes)
    if (name == "BLOCK_M") value = 64;
  const Genome b(a.template_id(), genes);
  attention::Shape big_shape;
  big_shape.batch = 16;
  big_shape.heads = 16;
  const Problem big = attention::to_problem(big_shape);
  const auto r = export_dispatch_table(
      {{a, {shape_1x8x512x64()}, measured_evaluation(false), "run-0008", v1::FITNESS_INPUTS_RESIDENT},
       {b, {big}, measured_evaluation(false), "run-0003"}});
  ASSERT_EQ(r.buckets_size(), 2);
  EXPECT_DOUBLE_EQ(r.buckets(0).fitness_us(), 6.15);
  EXPECT_DOUBLE_EQ(r.buckets(1).fitness_us(), 7.25);
  EXPECT_NE(r.report().find("1x8x512x64 7.25 | 6.15 (resident) | measured on"), std::string::npos) << r.report();
  EXPECT_NE(r.report().find("1x8x512x64 7.25 | 7.25 | measured on"), std::string::npos) << r.report();
  EXPECT_NE(r.report().find("or where marked (resident) the time with one input set left in L2"), std::string::npos);
}

// The template with its space's "dtypes" and kernel pattern replaced: how the exporter treats a
// kernel of one dtype or of two, whatever fa_s512_v3's space lists today.
KernelTemplate with_dtypes(const std::string& dtypes, std::string& space_storage) {
  KernelTemplate t = *find_template("fa_s512_v3");
  auto j = nlohmann::json::parse(t.space_json);
  j["serves"]["DTYPE"] = nlohmann::json::parse(dtypes);
  std::string pattern = j.at("kernel").get<std::string>();
  if (pattern.find("{DTYPE}") == std::string::npos) pattern.replace(pattern.find('<') + 1, 0, "{DTYPE}, ");
  j["kernel"] = pattern;
  space_storage = j.dump();
  t.space_json = space_storage;
  return t;
}

// The dispatch table keys on dtype: each variant is instantiated for the dtypes of the shapes it
// was tuned on, and a bucket names its dtype.
TEST(Exporter, DispatchTableKeysOnDtype) {
  std::string space;
  const KernelTemplate t = with_dtypes(R"(["fp16", "bf16"])", space);
  const Problem bf16 = shape_1x8x512x64(false, DType::kBF16);
  const Genome a = default_genome();
  const auto r = export_dispatch_table(
      t, {{a, {shape_1x8x512x64()}, measured_evaluation(false)}, {a, {bf16}, measured_evaluation(false)}}, {});
  EXPECT_NE(r.source().find("{1, 8, 8, 512, 512, 64, 0, 0, 0, 0},"), std::string::npos);
  EXPECT_NE(r.source().find("{1, 8, 8, 512, 512, 64, 0, 1, 0, 1},"), std::string::npos);
  EXPECT_NE(r.source().find("Variant0<0, 0, 64, 0>::launch"), std::string::npos);
  EXPECT_EQ(r.source().find("Variant0<1, 0, 64, 0>::launch"), std::string::npos) << "variant 0 never saw bf16";
  EXPECT_NE(r.source().find("Variant1<1, 0, 64, 0>::launch"), std::string::npos);
  EXPECT_NE(r.source().find("b.dtype != dtype"), std::string::npos);
  EXPECT_NE(r.source().find("evo::fa_s512_v3_kernel<DTYPE_, CAUSAL_, HEAD_DIM_,"), std::string::npos);
  ASSERT_EQ(r.buckets_size(), 2);
  EXPECT_EQ(r.buckets(1).shapes(0), "1x8x512x64:bf16");
  EXPECT_NE(r.report().find("1x8x512x64:bf16"), std::string::npos);
}

// A shape of a dtype the kernel does not serve cannot be exported: the table would have no
// instantiation for it.
TEST(Exporter, AShapeOfAnUnservedDtypeIsRefused) {
  std::string space;
  const KernelTemplate t = with_dtypes(R"(["fp16"])", space);
  const Problem bf16 = shape_1x8x512x64(true, DType::kBF16);
  try {
    export_dispatch_table(t, {{default_genome(), {bf16}, measured_evaluation(false), "run-0004"}}, {});
    ADD_FAILURE() << "a bf16 bucket was exported from a kernel of fp16 alone";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()), "cannot export shape '1x8x512x64:causal:bf16' of run-0004: dtype bf16 is not "
                                     "served by fa_s512_v3 (it serves fp16)");
  }
}

// The exporter writes what every family shares and asks the family for the rest: a family whose
// FamilyExport names other variables, params and entry points gets them in its file, and nothing
// of attention's that the family did not write.
const FamilyExport& toy_export() {
  static const FamilyExport e = [] {
    FamilyExport t = find_template("fa_s512_v3")->family->export_entry();
    t.kind = "toy";
    t.entry_point = "toy_forward";
    t.params_type = "toy::Params";
    t.runtime = {{"BATCH", "p.rows"}, {"HEADS", "1"}, {"SEQ_Q", "p.rows"}, {"SEQ_K", "p.cols"}};
    t.report_entry_points = "Entry point: `toy_forward(...)`.";
    t.launch_arguments = [](const std::map<std::string, std::string>&) {
      return std::string("      const toy::Params& args = p;\n");
    };
    t.dispatch = [](const ExportTable& table) {
      return "static int toy_pick() { return " + std::to_string(table.problems.size()) + "; }\n";
    };
    t.entry_points = [](const ExportTable&) { return std::string("extern \"C\" int toy_forward() { return 0; }\n"); };
    return t;
  }();
  return e;
}

TEST(Exporter, TheFamilyWritesItsOwnPartOfTheFile) {
  const KernelTemplate* real = find_template("fa_s512_v3");
  KernelFamily toy = *real->family;
  toy.export_entry = &toy_export;
  const KernelTemplate t{real->id, &toy, real->source, real->space_json};
  const auto r = export_dispatch_table(t, {{default_genome(), {shape_1x8x512x64()}, measured_evaluation(false)}}, {});
  EXPECT_NE(r.source().find("the fa_s512_v3 toy kernel with the winning genome"), std::string::npos);
  EXPECT_NE(r.source().find("// Call toy_forward (bottom of this file)"), std::string::npos);
  EXPECT_NE(r.source().find("  static int launch(const toy::Params& p, cudaStream_t stream, bool programmatic) {"),
            std::string::npos);
  EXPECT_NE(r.source().find("      const long long BATCH = p.rows, HEADS = 1, SEQ_Q = p.rows, SEQ_K = p.cols;\n"
                            "      (void)BATCH; (void)HEADS; (void)SEQ_Q; (void)SEQ_K;\n"),
            std::string::npos);
  EXPECT_NE(r.source().find("      const toy::Params& args = p;\n"), std::string::npos);
  EXPECT_NE(r.source().find("static int toy_pick() { return 1; }\n}  // namespace evo_export\n\n"
                            "extern \"C\" int toy_forward() { return 0; }\n"),
            std::string::npos);
  EXPECT_EQ(r.source().find("evo_attention_forward"), std::string::npos);
  EXPECT_EQ(r.source().find("launch(const evo::FaParams& p"), std::string::npos);
  EXPECT_EQ(r.source().find("struct Bucket"), std::string::npos);
  EXPECT_NE(r.report().find("Entry point: `toy_forward(...)`."), std::string::npos);
  EXPECT_EQ(r.report().find("evo_attention_forward"), std::string::npos);
}

TEST(Exporter, DispatchTableOfMixedTemplatesIsRefused) {
  Genome other("other_template", default_genome().genes());
  EXPECT_THROW(export_dispatch_table({{default_genome(), {}, measured_evaluation(false)},
                                      {other, {}, measured_evaluation(false)}}),
               InputError);
  EXPECT_THROW(export_dispatch_table({}), InputError);
}

}  // namespace
}  // namespace evo
