#pragma once
// Mainloop::kPingpong (schedule pingpong): the kPvAsync mainloop with two warpgroups taking
// turns on the tensor cores, as in FlashAttention-3: a warpgroup issues its tile's two GEMMs only
// when the other has issued its own, so one warpgroup's softmax runs while the other's GEMMs
// occupy the tensor cores. It runs on the release pipeline, whose warpgroups need not move in
// step. At head dim 128 each tile's P has a register set of its own (KernelTraits::kPBuffers).
#include "mainloop_pv_async.cuh"

namespace evo {
namespace fa {

// Named barriers 1 and 2 pass the turn: `sync` waits for the 128 arrivals of the other
// warpgroup, `arrive` gives them without waiting. Every turn given is taken: a warpgroup gives one
// per tile but warpgroup 1 not after its last, so no arrival outlives the kernel.
struct PingpongTurns {
  template <class B>
  __device__ __forceinline__ static void start(const B& b) {  // warpgroup 0 takes the first turn
    if (b.warpgroup == 1 && b.n_tiles > 0) named_barrier_arrive(1, 256);
  }
  template <class B>
  __device__ __forceinline__ static void take(const B& b) {
    named_barrier_sync(1 + b.warpgroup, 256);
  }
  template <class B>
  __device__ __forceinline__ static void give(const B& b, int t) {
    if (b.warpgroup == 0 || t + 1 < b.n_tiles) named_barrier_arrive(2 - b.warpgroup, 256);
  }
};

template <class T, class Pipe>
using MainloopPingpong = MainloopPvAsync<T, Pipe, PingpongTurns>;

}  // namespace fa
}  // namespace evo
