// The watchdogged child machinery, without a GPU: this binary is its own child, and
// EVO_GPU_TESTS_CHILD_FAULT makes that child hang or crash (see gpu_test_main.cpp).
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "attention/problem.h"
#include "attention/tensor_maps.h"
#include "child_main.h"
#include "child_process.h"
#include "eval_request.h"
#include "evaluation_child.h"
#include "evaluation_server.h"
#include "sanitizer_gate.h"

namespace evo::cuda {
namespace {

Problem problem(std::string_view text, bool causal_default = false) {
  return attention::to_problem(attention::parse_shape(text, causal_default));
}

class ChildFault : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = (std::filesystem::temp_directory_path() /
            ("evo-gpu-tests-" + std::to_string(::getpid()) + "-" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name()))
               .string();
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override {
    unsetenv("EVO_GPU_TESTS_CHILD_FAULT");
    std::filesystem::remove_all(dir_);
  }
  ChildOutcome run_with_fault(const char* fault, int timeout_ms) {
    if (fault) setenv("EVO_GPU_TESTS_CHILD_FAULT", fault, 1);
    ChildLaunch how;
    how.exe = self_executable();
    how.timeout_ms = timeout_ms;
    how.work_dir = dir_;
    how.tag = "t";
    return run_evaluation_child(EvalRequest{}, how);
  }
  std::string dir_;
};

TEST_F(ChildFault, HungChildIsKilledByTheWatchdogAsTimeout) {
  const auto start = std::chrono::steady_clock::now();
  const ChildOutcome o = run_with_fault("sleep", 300);
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(o.evaluation.status(), v1::TIMEOUT);
  EXPECT_EQ(o.evaluation.message(), "timeout: no result after 300 ms");
  EXPECT_GE(ms, 300);
  EXPECT_LT(ms, 5000);
}

TEST_F(ChildFault, ChildKilledBySegvIsACrash) {
  const ChildOutcome o = run_with_fault("segv", 10000);
  EXPECT_EQ(o.evaluation.status(), v1::CRASH);
  EXPECT_NE(o.evaluation.message().find("SIGSEGV"), std::string::npos) << o.evaluation.message();
}

TEST_F(ChildFault, ChildThatExitsWithoutAResultIsACrash) {
  // A child that neither answers nor dies of a signal: `false __child <request>` exits 1.
  ChildLaunch how;
  how.exe = "/bin/false";
  how.timeout_ms = 5000;
  how.work_dir = dir_;
  how.tag = "t";
  const ChildOutcome o = run_evaluation_child(EvalRequest{}, how);
  EXPECT_EQ(o.evaluation.status(), v1::CRASH);
  EXPECT_NE(o.evaluation.message().find("exited with code 1 and no result"), std::string::npos)
      << o.evaluation.message();
}

TEST_F(ChildFault, MalformedRequestExitsTwoWithOneLine) {
  const std::string path = dir_ + "/bad.json";
  std::ofstream(path) << "{\"device\": 0}";
  const ChildExit e = run_child({self_executable(), "__child", path}, 10000, dir_ + "/bad.log");
  EXPECT_FALSE(e.timed_out);
  EXPECT_EQ(e.exit_code, 2);
  EXPECT_NE(e.stderr_tail.find("evaluation request lacks 'seed'"), std::string::npos) << e.stderr_tail;
}

TEST_F(ChildFault, ChildEntryTakesTheRequestAsLastArgumentShiftedOrNot) {
  // evo-worker's main hands over argv shifted by one; this binary's main does not.
  const std::string path = dir_ + "/bad.json";
  std::ofstream(path) << "{\"device\": 0}";
  std::string child = "__child", prog = "evo-worker";
  std::vector<char*> shifted = {child.data(), const_cast<char*>(path.c_str())};
  EXPECT_EQ(run_eval_child(2, shifted.data()), 2);
  std::vector<char*> whole = {prog.data(), child.data(), const_cast<char*>(path.c_str())};
  EXPECT_EQ(run_eval_child(3, whole.data()), 2);
  std::vector<char*> no_request = {prog.data(), child.data()};
  EXPECT_EQ(run_eval_child(2, no_request.data()), 2);
}

// The serving child (evaluation_server.h), without a GPU: this binary serves as it (see
// gpu_test_main.cpp), answering OK or INCORRECT, hanging or dying as EVO_GPU_TESTS_CHILD_FAULT says.
class ServingChild : public ChildFault {
 protected:
  ChildOutcome evaluate(EvaluationServer& server, int timeout_ms = 10000) {
    ChildLaunch how;
    how.exe = self_executable();
    how.timeout_ms = timeout_ms;
    how.work_dir = dir_;
    how.tag = "r" + std::to_string(++requests_);
    return server.evaluate(EvalRequest{}, how);
  }
  int requests_ = 0;
};

TEST_F(ServingChild, AnswersRequestAfterRequestFromOneProcess) {
  setenv("EVO_GPU_TESTS_CHILD_FAULT", "ok", 1);
  EvaluationServer server(self_executable(), dir_);
  for (int i = 0; i < 3; ++i) {
    const ChildOutcome o = evaluate(server);
    EXPECT_EQ(o.evaluation.status(), v1::OK) << o.evaluation.message();
    EXPECT_TRUE(o.result_written);
  }
  EXPECT_EQ(server.starts(), 1);
}

TEST_F(ServingChild, AnAnswerThatIsNotOkEndsTheProcessAndTheNextRequestStartsAnother) {
  setenv("EVO_GPU_TESTS_CHILD_FAULT", "incorrect", 1);
  EvaluationServer server(self_executable(), dir_);
  EXPECT_EQ(evaluate(server).evaluation.status(), v1::INCORRECT);
  EXPECT_EQ(server.starts(), 1);
  setenv("EVO_GPU_TESTS_CHILD_FAULT", "ok", 1);
  EXPECT_EQ(evaluate(server).evaluation.status(), v1::OK);
  EXPECT_EQ(server.starts(), 2) << "a process that answered INCORRECT serves nothing more";
  EXPECT_EQ(evaluate(server).evaluation.status(), v1::OK);
  EXPECT_EQ(server.starts(), 2);
}

TEST_F(ServingChild, AHungProcessIsKilledAsATimeoutAndReplaced) {
  setenv("EVO_GPU_TESTS_CHILD_FAULT", "sleep", 1);
  EvaluationServer server(self_executable(), dir_);
  const auto start = std::chrono::steady_clock::now();
  const ChildOutcome o = evaluate(server, 300);
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(o.evaluation.status(), v1::TIMEOUT);
  EXPECT_EQ(o.evaluation.message(), "timeout: no result after 300 ms");
  EXPECT_GE(ms, 300);
  EXPECT_LT(ms, 5000);
  setenv("EVO_GPU_TESTS_CHILD_FAULT", "ok", 1);
  EXPECT_EQ(evaluate(server).evaluation.status(), v1::OK);
  EXPECT_EQ(server.starts(), 2);
}

TEST_F(ServingChild, AProcessThatDiesIsACrashNamingItsSignal) {
  setenv("EVO_GPU_TESTS_CHILD_FAULT", "segv", 1);
  EvaluationServer server(self_executable(), dir_);
  const ChildOutcome o = evaluate(server);
  EXPECT_EQ(o.evaluation.status(), v1::CRASH);
  EXPECT_NE(o.evaluation.message().find("SIGSEGV"), std::string::npos) << o.evaluation.message();
  setenv("EVO_GPU_TESTS_CHILD_FAULT", "ok", 1);
  EXPECT_EQ(evaluate(server).evaluation.status(), v1::OK) << "the worker's side lives on";
}

TEST_F(ServingChild, AProcessKilledWhileIdleIsReplacedWithoutFailingTheNextCandidate) {
  setenv("EVO_GPU_TESTS_CHILD_FAULT", "ok", 1);
  EvaluationServer server(self_executable(), dir_);
  ASSERT_EQ(evaluate(server).evaluation.status(), v1::OK);
  // Kill the idle server from outside, as the OOM killer or an operator might (its pid only:
  // other tests' servers may run beside it).
  const pid_t pid = server.process_id();
  ASSERT_GT(pid, 0);
  ASSERT_EQ(::kill(pid, SIGKILL), 0);
  siginfo_t info{};
  ASSERT_EQ(::waitid(P_PID, pid, &info, WEXITED | WNOWAIT), 0);  // dead, left for the server to reap
  const ChildOutcome o = evaluate(server);
  EXPECT_EQ(o.evaluation.status(), v1::OK) << o.evaluation.message();
  EXPECT_EQ(server.starts(), 2);
}

TEST(RunChild, WatchdogKillsTheWholeProcessGroup) {
  // The shell's background sleep would outlive a kill of the shell alone and keep the log open.
  const auto start = std::chrono::steady_clock::now();
  const std::string log = (std::filesystem::temp_directory_path() / "evo-gpu-tests-group.log").string();
  const ChildExit e = run_child({"/bin/sh", "-c", "sleep 30 & wait"}, 200, log);
  EXPECT_TRUE(e.timed_out);
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(ms, 5000);
  std::filesystem::remove(log);
}

TEST(RunChild, MissingExecutableIsReportedNotFatal) {
  const std::string log = (std::filesystem::temp_directory_path() / "evo-gpu-tests-missing.log").string();
  // posix_spawn reports a missing program either at once or as exit 127 of the child.
  try {
    const ChildExit e = run_child({"/nonexistent/evo-child"}, 1000, log);
    EXPECT_EQ(e.exit_code, 127);
  } catch (const std::runtime_error& err) {
    EXPECT_NE(std::string(err.what()).find("cannot start child"), std::string::npos);
  }
  std::filesystem::remove(log);
}

TEST(EvalRequestJson, RoundTrips) {
  EvalRequest r;
  r.seed = 42;
  r.repeated_launches = 64;
  r.launches_per_sample = 20;
  r.reference_cubin = "/tmp/reference.cubin";
  ShapeJob j;
  j.shape = problem("1x4x1000x64:bf16", true);
  j.flops = 1.5e9;
  j.kernel = "_Z3foo";
  j.grid = {32, 4, 1};
  j.threads = 128;
  j.smem_bytes = 65536;
  j.workspace_bytes = 4096;
  j.tensor_map_box_rows = 256;
  j.tensor_map_q_box_rows = 32;
  j.persistent = true;
  j.persistent_blocks = 3;
  r.shapes.push_back(j);
  const EvalRequest back = request_from_json(to_json(r));
  EXPECT_EQ(back.seed, 42u);
  EXPECT_EQ(back.repeated_launches, 64);
  EXPECT_EQ(back.launches_per_sample, 20);
  ASSERT_EQ(back.shapes.size(), 1u);
  EXPECT_EQ(back.shapes[0].shape, j.shape);
  EXPECT_EQ(back.shapes[0].grid, j.grid);
  EXPECT_EQ(back.shapes[0].smem_bytes, 65536);
  EXPECT_EQ(back.shapes[0].workspace_bytes, 4096);
  EXPECT_EQ(back.shapes[0].tensor_map_box_rows, 256);
  EXPECT_EQ(back.shapes[0].tensor_map_q_box_rows, 32);
  EXPECT_TRUE(back.shapes[0].persistent);
  EXPECT_EQ(back.shapes[0].persistent_blocks, 3);
  EXPECT_EQ(back.shapes[0].kernel, "_Z3foo");
  EXPECT_EQ(attention::shape_of(back.shapes[0].shape).dtype, evo::DType::kBF16);
  EXPECT_EQ(back.reference_cubin, "/tmp/reference.cubin");
  // A dtype this build does not know is a malformed request, not an fp16 check.
  std::string text = to_json(r);
  const std::string bf16 = "\"dtype\": \"DTYPE_BF16\"";
  ASSERT_NE(text.find(bf16), std::string::npos) << text;
  text.replace(text.find(bf16), bf16.size(), "\"dtype\": 9");
  EXPECT_THROW(request_from_json(text), std::runtime_error);
}

// A view the driver cannot describe (no rows), or a host without a driver, is an error code the
// caller reports, never a call through a missing entry point.
TEST(TensorMaps, AnUnencodableViewIsAnErrorNotACrash) {
  alignas(64) unsigned char map[128] = {};
  alignas(16) static unsigned char base[256] = {};
  EXPECT_NE(evo::encode_attention_tensor_map(map, base, evo::DType::kF16, evo::dense_view(1, 0, 64), 64), cudaSuccess);
}

// The kernels' tiles are whole boxes of 32 or 64 rows, or one box of 128, 192 or 256 (a whole
// tile); any other height is refused before the driver is asked, so a space that names one fails
// its first evaluation, not a later launch.
TEST(TensorMaps, BoxHeightsTheKernelsNeverUseAreRefused) {
  alignas(64) unsigned char map[128] = {};
  alignas(16) static unsigned char base[64 * 64 * 2] = {};
  for (int rows : {0, 16, 48, 96, 160, 320, 512, -64})
    EXPECT_EQ(evo::encode_attention_tensor_map(map, base, evo::DType::kF16, evo::dense_view(1, 64, 64), rows), cudaErrorInvalidValue)
        << rows;
}

// What an earlier call left remembered for a 1 x rows x 64 view of `base` in 64-row boxes; the
// map's bytes are a marker no encoder writes.
evo::RememberedTensorMap remembered_marker(const void* base, int rows) {
  evo::RememberedTensorMap last;
  last.base = base;
  last.view = evo::dense_view(1, rows, 64);
  last.box_rows = 64;
  std::memset(&last.map, 0xab, sizeof last.map);
  return last;
}

// A failed encode writes into the remembered map before it fails: the next call for the view that
// map described must encode afresh, not hand out what the failed call left behind.
TEST(TensorMaps, AFailedEncodeForgetsTheRememberedMap) {
  alignas(16) static unsigned char base[4096] = {};
  evo::RememberedTensorMap last = remembered_marker(base, 8);
  alignas(64) unsigned char out[128] = {};
  EXPECT_NE(evo::encode_remembered(last, out, base, evo::DType::kF16, evo::dense_view(1, 0, 64), 64), cudaSuccess);

  alignas(64) unsigned char fresh[128] = {};
  const cudaError_t want = evo::encode_attention_tensor_map(fresh, base, evo::DType::kF16, evo::dense_view(1, 8, 64), 64);
  EXPECT_EQ(evo::encode_remembered(last, out, base, evo::DType::kF16, evo::dense_view(1, 8, 64), 64), want);
  if (want == cudaSuccess) {
    EXPECT_EQ(std::memcmp(out, fresh, sizeof out), 0);
  }
}

// Two genomes of one export may read the same tensors in boxes of different heights: the map
// remembered for one box must not be handed to a kernel that copies the other.
TEST(TensorMaps, AnotherBoxHeightIsAnotherMap) {
  alignas(16) static unsigned char base[4096] = {};
  evo::RememberedTensorMap last = remembered_marker(base, 32);
  alignas(64) unsigned char out[128] = {};
  alignas(64) unsigned char fresh[128] = {};
  const cudaError_t want = evo::encode_attention_tensor_map(fresh, base, evo::DType::kF16, evo::dense_view(1, 32, 64), 32);
  EXPECT_EQ(evo::encode_remembered(last, out, base, evo::DType::kF16, evo::dense_view(1, 32, 64), 32), want);
  if (want == cudaSuccess) {
    EXPECT_EQ(std::memcmp(out, fresh, sizeof out), 0);
    EXPECT_EQ(last.box_rows, 32);
  }
}

// A bf16 tensor is another map than an fp16 one over the same bytes: the copy engine's element
// type differs, and a map remembered for one must not serve the other.
TEST(TensorMaps, AnotherDtypeIsAnotherMap) {
  alignas(16) static unsigned char base[4096] = {};
  evo::RememberedTensorMap last = remembered_marker(base, 32);
  alignas(64) unsigned char out[128] = {};
  alignas(64) unsigned char fresh[128] = {};
  const cudaError_t want = evo::encode_attention_tensor_map(fresh, base, evo::DType::kBF16, evo::dense_view(1, 32, 64), 64);
  EXPECT_EQ(evo::encode_remembered(last, out, base, evo::DType::kBF16, evo::dense_view(1, 32, 64), 64), want);
  if (want == cudaSuccess) {
    EXPECT_EQ(std::memcmp(out, fresh, sizeof out), 0);
    EXPECT_EQ(last.dtype, evo::DType::kBF16);
  }
}

// A packed batch's view (one slice per head over every token) is another map than the dense view
// of the same bytes.
TEST(TensorMaps, APackedViewIsAnotherMap) {
  alignas(16) static unsigned char base[4096] = {};
  evo::RememberedTensorMap last = remembered_marker(base, 32);
  alignas(64) unsigned char out[128] = {};
  alignas(64) unsigned char fresh[128] = {};
  const evo::TensorMapView packed = evo::packed_view(1, 32, 64);
  EXPECT_FALSE(packed == evo::dense_view(1, 32, 64));  // rows heads * 64 apart, heads 64 apart
  const cudaError_t want = evo::encode_attention_tensor_map(fresh, base, evo::DType::kF16, packed, 64);
  EXPECT_EQ(evo::encode_remembered(last, out, base, evo::DType::kF16, packed, 64), want);
  if (want == cudaSuccess) {
    EXPECT_EQ(std::memcmp(out, fresh, sizeof out), 0);
    EXPECT_TRUE(last.view == packed);
  }
}

TEST(TensorMaps, AnUnknownDtypeIsRefusedBeforeTheDriver) {
  alignas(64) unsigned char map[128] = {};
  alignas(16) static unsigned char base[64 * 64 * 2] = {};
  EXPECT_EQ(evo::encode_attention_tensor_map(map, base, static_cast<evo::DType>(7), evo::dense_view(1, 64, 64), 64),
            cudaErrorInvalidValue);
}

TEST(EvalRequestJson, MalformedIsOneLine) {
  EXPECT_THROW(request_from_json("not json"), std::runtime_error);
  try {
    request_from_json("{}");
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "evaluation request lacks 'device'");
  }
}

TEST(SanitizerLog, FirstErrorLineSkipsBannerDetailAndSummary) {
  const std::string log =
      "========= COMPUTE-SANITIZER\n"
      "evaluation child: ok\n"
      "========= Invalid __global__ write of size 2 bytes\n"
      "=========     at planted::off_by_one_write<0>(planted::FaParams)+0x1a0\n"
      "========= \n"
      "========= ERROR SUMMARY: 1 error\n";
  EXPECT_EQ(first_sanitizer_error(log), "Invalid __global__ write of size 2 bytes");
  EXPECT_EQ(first_sanitizer_error("========= COMPUTE-SANITIZER\n========= ERROR SUMMARY: 0 errors\n"), "");
  // A race names both accesses: the second is on the indented line that follows.
  const std::string race =
      "========= Error: Race reported between Read access at void k(P)+0x8db0\n"
      "=========     and Write access at void k(P)+0x9a40 [4 hazards]\n"
      "========= \n"
      "========= RACECHECK SUMMARY: 1 hazard displayed (1 error, 0 warnings)\n";
  EXPECT_EQ(first_sanitizer_error(race),
            "Error: Race reported between Read access at void k(P)+0x8db0 and Write access at void k(P)+0x9a40 "
            "[4 hazards]");
}

TEST(SanitizerGate, SkippedWithoutComputeSanitizer) {
  const SanitizerVerdict v = run_sanitizer_gate("", self_executable(), EvalRequest{},
                                                std::filesystem::temp_directory_path().string(), 1000);
  EXPECT_FALSE(v.failed);
  EXPECT_EQ(v.gate.kind(), v1::GATE_SANITIZER);
  EXPECT_EQ(v.gate.outcome(), v1::VERDICT_SKIPPED);
}

// A stand-in for compute-sanitizer, no GPU needed: every tool "finds" an error, memcheck last of
// all; each run notes how many tools' processes were running when it finished its sleep.
class FakeSanitizer : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = (std::filesystem::temp_directory_path() /
            ("evo-fake-sanitizer-" + std::to_string(::getpid()) + "-" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name()))
               .string();
    std::filesystem::create_directories(dir_);
    script_ = dir_ + "/compute-sanitizer";
    std::ofstream f(script_);
    f << "#!/bin/sh\n"
         "tool=$2\n"
         "touch '" << dir_ << "/running.'$tool\n"
         "if [ \"$tool\" = memcheck ]; then sleep 2; else sleep 1; fi\n"
         "ls '" << dir_ << "' | grep -c '^running\\.' > '" << dir_ << "/seen.'$tool\n"
         "rm -f '" << dir_ << "/running.'$tool\n"
         "echo \"========= fake error from $tool\"\n"
         "exit " << kSanitizerErrorExit << "\n";
    f.close();
    std::filesystem::permissions(script_, std::filesystem::perms::owner_all);
  }
  void TearDown() override {
    unsetenv("EVO_SANITIZER_JOBS");
    std::filesystem::remove_all(dir_);
  }
  int seen(const std::string& tool) const {
    std::ifstream f(dir_ + "/seen." + tool);
    int n = 0;
    f >> n;
    return n;
  }
  SanitizerVerdict run(const EvalRequest& req = {}) const {
    return run_sanitizer_gate(script_, self_executable(), req, dir_, 20000);
  }

  std::string dir_, script_;
};

TEST_F(FakeSanitizer, ToolsRunAtOnceAndTheVerdictFollowsTheToolsOrder) {
  const SanitizerVerdict v = run();
  EXPECT_TRUE(v.failed);
  EXPECT_EQ(v.gate.outcome(), v1::VERDICT_FAILED);
  // memcheck finished last, and it is still the verdict: the first tool in order that failed.
  EXPECT_EQ(v.gate.detail(), "memcheck: fake error from memcheck");
  EXPECT_EQ(v.message, "sanitizer_error: memcheck: fake error from memcheck");
  int most = 0;
  for (const auto& tool : sanitizer_tools()) most = std::max(most, seen(tool));
  EXPECT_GE(most, 2) << "no two tools' processes overlapped";
}

TEST_F(FakeSanitizer, AFailedVerdictNamesTheShapesTheToolRan) {
  EvalRequest req;
  for (const char* shape : {"1x2x1152x64:causal", "1x2x300x64"}) {
    ShapeJob job;
    job.shape = problem(shape);
    req.shapes.push_back(job);
  }
  const SanitizerVerdict v = run(req);
  EXPECT_EQ(v.gate.detail(),
            "memcheck on 1x2x1152x64:causal, 1x2x300x64: fake error from memcheck");
  EXPECT_EQ(v.message,
            "sanitizer_error: memcheck on 1x2x1152x64:causal, 1x2x300x64: fake error from memcheck");
}

TEST_F(FakeSanitizer, OneJobRunsTheToolsOneAfterAnother) {
  setenv("EVO_SANITIZER_JOBS", "1", 1);
  ASSERT_EQ(sanitizer_jobs(), 1);
  const SanitizerVerdict v = run();
  EXPECT_EQ(v.gate.detail(), "memcheck: fake error from memcheck");
  for (const auto& tool : sanitizer_tools()) EXPECT_EQ(seen(tool), 1) << tool;
}

TEST_F(FakeSanitizer, BadJobCountIsOneClearError) {
  for (const char* bad : {"0", "-2", "two", "3x"}) {
    setenv("EVO_SANITIZER_JOBS", bad, 1);
    try {
      sanitizer_jobs();
      ADD_FAILURE() << "accepted " << bad;
    } catch (const std::runtime_error& e) {
      EXPECT_EQ(std::string(e.what()),
                std::string("EVO_SANITIZER_JOBS must be a whole number from 1, got '") + bad + "'");
    }
  }
  setenv("EVO_SANITIZER_JOBS", "64", 1);
  EXPECT_EQ(sanitizer_jobs(), static_cast<int>(sanitizer_tools().size()));
}

}  // namespace
}  // namespace evo::cuda
