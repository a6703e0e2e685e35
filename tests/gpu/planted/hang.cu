// Planted fault: spins forever on a flag nobody sets. The watchdog must kill the child: TIMEOUT.
namespace planted {
__device__ volatile int never_set = 0;
template <int CAUSAL>
__global__ void hang(const FaParams p) {
  while (never_set == 0) {
  }
  o_of(p)[0] = q_of(p)[0];
}
}  // namespace planted
