#pragma once
// What a host gives its workers: its cores, its GPUs, and each worker's share of the cores for
// compiling. One worker runs per GPU (the deployment's unit: `evo-worker --all-gpus`, or the
// systemd template once per GPU), so a cuda worker counts the host's visible GPUs as the workers
// that share its cores.
#include <string>

namespace evo {

// The cores this process may run on (its CPU affinity, so a cpuset or `taskset` counts), at least 1.
int host_cores();

// The GPUs the CUDA runtime sees (CUDA_VISIBLE_DEVICES applies). Throws std::runtime_error with
// one line for people when there is none: "no GPU found (...); use --backend model"; a build
// without the cuda evaluator says so.
int visible_gpu_count();

// Each worker's compile threads: the host's cores divided by the workers on the host, at least 1.
int default_compile_threads(int host_cores, int workers_on_host);

// The workers a lone worker of this backend assumes share its host: a cuda worker, one per
// visible GPU (1 when the GPUs cannot be counted: the evaluator then says why); a model worker, 1.
int workers_on_host_for(const std::string& backend);

}  // namespace evo
