#pragma once
// The SCHEDULE gene: how a block moves K/V tiles into shared memory (its pipeline) and how it
// orders the two GEMMs and the softmax of each tile (its mainloop). Each value names one pair;
// the codes are the gene's values in the search space (space.json), in this order.
// Plain constexpr C++, so that host code can include it.

// The plan and the rules are constexpr functions that host code calls too; NVRTC accepts in device
// code only functions marked for it.
#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define EVO_HOST_DEVICE __host__ __device__
#else
#define EVO_HOST_DEVICE
#endif

namespace evo {
namespace fa {

enum class Schedule : int {
  kSync = 0,             // plain loads through registers, one stage, a barrier per tile
  kCpAsync = 1,          // cp.async pipeline of STAGES tiles, a barrier per tile
  kCpAsyncPv = 2,        // ... with each tile's P*V (wgmma) in flight under the next softmax
  kTma = 3,              // bulk tensor copies completing on mbarriers, a barrier per refill
  kTmaPv = 4,            // ... with P*V in flight
  kTmaRelease = 5,       // TMA, each stage refilled by the last warp to leave it: no barrier
  kTmaReleasePv = 6,     // ... with P*V in flight
  kPingpong = 7,         // TMA release, P*V in flight, two warpgroups taking turns on the GEMMs
  kQkAhead = 8,          // TMA, P*V in flight beside the next tile's QK^T
  kQkAheadRelease = 9,   // ... with stage release
  // A producer warpgroup of its own issues the copies, as in FlashAttention-3: the warpgroups
  // that compute free each stage on an mbarrier and never issue a copy; the producer gives its
  // registers to them (setmaxnreg).
  kWarpSpecialized = 10,         // producer, P*V in flight
  kWarpSpecializedPingpong = 11, // producer, P*V in flight, two warpgroups taking turns
  // ... persistent (FlashAttention-3's and CUTLASS's persistent kernels): as many blocks as the
  // device runs at once, each taking work tile after work tile, its producer running ahead into
  // the next one's K, V and Q under the last one's epilogue (kernel_traits.cuh, Plan::persistent).
  kWarpSpecializedPersistent = 12,
  kWarpSpecializedPingpongPersistent = 13,
};

// How tiles arrive.
enum class Pipeline : int {
  kSync,         // pipeline_copy.cuh
  kCpAsync,      // pipeline_copy.cuh
  kTma,          // pipeline_tma.cuh
  kTmaRelease,   // pipeline_tma.cuh
  kTmaProducer,  // pipeline_producer.cuh
};
// How a tile's GEMMs and softmax are ordered.
enum class Mainloop : int {
  kSerial,    // QK^T, softmax, P*V, one after the other (mainloop_serial.cuh)
  kPvAsync,   // P*V(t-1) in flight under softmax(t) (mainloop_pv_async.cuh)
  kPingpong,  // kPvAsync with turns between two warpgroups (mainloop_pingpong.cuh)
  kQkAhead,   // P*V(t-1) and QK^T(t+1) in flight under softmax(t) (mainloop_qk_ahead.cuh)
};

struct ScheduleInfo {
  Pipeline pipeline;
  Mainloop mainloop;
  bool persistent = false;  // a block takes work tile after work tile
};

EVO_HOST_DEVICE constexpr ScheduleInfo schedule_info(Schedule s) {
  switch (s) {
    case Schedule::kSync: return {Pipeline::kSync, Mainloop::kSerial};
    case Schedule::kCpAsync: return {Pipeline::kCpAsync, Mainloop::kSerial};
    case Schedule::kCpAsyncPv: return {Pipeline::kCpAsync, Mainloop::kPvAsync};
    case Schedule::kTma: return {Pipeline::kTma, Mainloop::kSerial};
    case Schedule::kTmaPv: return {Pipeline::kTma, Mainloop::kPvAsync};
    case Schedule::kTmaRelease: return {Pipeline::kTmaRelease, Mainloop::kSerial};
    case Schedule::kTmaReleasePv: return {Pipeline::kTmaRelease, Mainloop::kPvAsync};
    case Schedule::kPingpong: return {Pipeline::kTmaRelease, Mainloop::kPingpong};
    case Schedule::kQkAhead: return {Pipeline::kTma, Mainloop::kQkAhead};
    case Schedule::kQkAheadRelease: return {Pipeline::kTmaRelease, Mainloop::kQkAhead};
    case Schedule::kWarpSpecialized: return {Pipeline::kTmaProducer, Mainloop::kPvAsync};
    case Schedule::kWarpSpecializedPingpong: return {Pipeline::kTmaProducer, Mainloop::kPingpong};
    case Schedule::kWarpSpecializedPersistent: return {Pipeline::kTmaProducer, Mainloop::kPvAsync, true};
    case Schedule::kWarpSpecializedPingpongPersistent: return {Pipeline::kTmaProducer, Mainloop::kPingpong, true};
  }
  return {Pipeline::kSync, Mainloop::kSerial};
}

EVO_HOST_DEVICE constexpr bool schedule_is_valid(int code) { return code >= 0 && code <= 13; }

}  // namespace fa
}  // namespace evo
