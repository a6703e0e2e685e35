#pragma once
// The evaluation child: `<evo-worker> __child <request.json>`. Loads the cubins named in the
// request, runs gates 4 (correct) and 5 (timed) on the GPU and writes a serialized
// v1::Evaluation to the request's result_path. Exit codes: 0 a result was written (whatever its
// status), 2 bad request or no result could be written, 3 a CUDA failure (a result was written
// if at all possible). A kernel that hangs or kills the process is the parent's watchdog's job.
namespace evo {

// The request file is the last argument: `evo-worker __child <request>` passed whole or with the
// program name shifted off (argv[0] == "__child") both work.
int run_eval_child(int argc, char** argv);

// The serving child: `<evo-worker> __child_server` (evaluation_server.h). Reads request paths, one
// a line, from standard input and answers each as run_eval_child would, then writes
// "done <exit code>" on kServerAnswerFd. It keeps its CUDA context and reference kernels between
// requests, and ends after any answer but an OK result with exit code 0 (the parent then starts a
// new one), or when standard input closes.
int run_eval_child_server();

}  // namespace evo
