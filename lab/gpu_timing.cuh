#pragma once
// Timing helpers shared by the standalone GPU programs of lab/ (variant_sweep, smem_fill_probe):
// a CUDA call that fails ends the program with its line, and two medians, per launch by events and
// per call by replaying a captured CUDA graph.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CHECK(x)                                                                           \
  do {                                                                                     \
    const cudaError_t e_ = (x);                                                            \
    if (e_ != cudaSuccess) {                                                               \
      std::printf("CUDA error %s at line %d: %s\n", #x, __LINE__, cudaGetErrorString(e_)); \
      std::exit(1);                                                                        \
    }                                                                                      \
  } while (0)

// Median over `samples` of the event-timed `enqueue(stream)`, divided by the calls it makes.
template <class Enqueue>
float median_us(cudaStream_t stream, Enqueue enqueue, int samples, int calls_per_sample) {
  cudaEvent_t e0, e1;
  CHECK(cudaEventCreate(&e0));
  CHECK(cudaEventCreate(&e1));
  std::vector<float> us;
  for (int i = 0; i < samples; ++i) {
    CHECK(cudaEventRecord(e0, stream));
    enqueue(stream);
    CHECK(cudaEventRecord(e1, stream));
    CHECK(cudaEventSynchronize(e1));
    float ms = 0;
    CHECK(cudaEventElapsedTime(&ms, e0, e1));
    us.push_back(ms * 1000 / calls_per_sample);
  }
  CHECK(cudaEventDestroy(e0));
  CHECK(cudaEventDestroy(e1));
  std::sort(us.begin(), us.end());
  return us[us.size() / 2];
}

// Per-call time of `calls` launches captured in one graph, median over `replays` replays.
template <class Launch>
float median_graph_us(Launch launch, int calls, int replays) {
  cudaStream_t st;
  CHECK(cudaStreamCreate(&st));
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  CHECK(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal));
  for (int i = 0; i < calls; ++i) launch(st);
  CHECK(cudaStreamEndCapture(st, &graph));
  CHECK(cudaGraphInstantiate(&exec, graph, 0));
  CHECK(cudaGraphLaunch(exec, st));  // the first replay uploads the graph: not timed
  const float us = median_us(
      st, [&](cudaStream_t s) { CHECK(cudaGraphLaunch(exec, s)); }, replays, calls);
  CHECK(cudaGraphExecDestroy(exec));
  CHECK(cudaGraphDestroy(graph));
  CHECK(cudaStreamDestroy(st));
  return us;
}
