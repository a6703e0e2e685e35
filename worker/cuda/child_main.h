#pragma once
// The evaluation child: `<evo-worker> __child <request.json>`. Loads the cubins named in the
// request, runs gates 4 (correct) and 5 (timed) on the GPU and writes a serialized
// v1::Evaluation to the request's result_path. Exit codes: 0 a result was written (whatever its
// status), 2 bad request or no result could be written, 3 a CUDA failure (a result was written
// if at all possible). A kernel that hangs or kills the process is the parent's watchdog's job.
namespace evo {

// argv[0] is the program, argv[1] "__child", argv[2] the request file.
int run_eval_child(int argc, char** argv);

}  // namespace evo
