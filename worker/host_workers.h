#pragma once
// Several workers on one host from one command (the supervisor runs them, supervisor.h):
//   evo-worker --all-gpus [daemon options]                   one cuda worker per visible GPU
//   evo-worker --backend model --workers N [daemon options]  N model workers (no GPU)
// Worker K of the first is `--gpu K --name HOST:gpuK`, of the second `--name HOST:modelK`
// (`--name P` replaces HOST by P); each gets `--compile-threads T`, T given or the host's cores
// divided by the workers (host_resources.h); every other option is passed on to each as given.
// Refused, one line each: --all-gpus with --gpu (CUDA_VISIBLE_DEVICES chooses the GPUs), with
// --backend model, or with --workers; --workers without --backend model; --all-gpus with no GPU.
#include <functional>
#include <string>
#include <vector>

#include "supervisor.h"

namespace evo {

// Whether argv (as main gets it) asks for several workers: --all-gpus or --workers.
bool asks_for_host_workers(int argc, char** argv);

// What plan_host_workers needs to know of the host; tests give their own.
struct HostFacts {
  std::string self_exe;            // the evo-worker binary each child executes
  std::string host_name;
  int cores = 1;
  std::function<int()> gpu_count;  // throws std::runtime_error with one line when there is none
};

struct HostWorkersPlan {
  int exit_status = -1;            // -1: start the workers; else exit with it after `error`
  std::string error;               // one line, without the "evo-worker: " prefix
  std::vector<SupervisedWorker> workers;
  int compile_threads = 0;
};

// args: argv without the program name.
HostWorkersPlan plan_host_workers(const std::vector<std::string>& args, const HostFacts& facts);

// The daemon's own check of one worker's argv (argv[0] the program): -1 when it would run, else
// the status to exit with, having printed why (or --help's text).
using WorkerArgsCheck = std::function<int(const std::vector<std::string>& argv)>;

// Plans, checks the first worker's options with `check`, and supervises. Returns the exit status.
int run_host_workers(int argc, char** argv, const WorkerArgsCheck& check);

}  // namespace evo
