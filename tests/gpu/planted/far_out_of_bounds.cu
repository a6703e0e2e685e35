// Planted fault: writes a terabyte past the output. The launch fails with an illegal address: the
// child reports CRASH and the parent survives.
namespace planted {
template <int CAUSAL>
__global__ void far_out_of_bounds(const FaParams p) {
  const long long far = 1ll << 40;
  o_of(p)[far + threadIdx.x] = q_of(p)[threadIdx.x];
}
}  // namespace planted
