#pragma once
// `evo-worker eval`: evaluate one genome once, print each gate's verdict, the resource report,
// the error figures and timings (or the Evaluation as JSON), and exit 0 (ok), 1 (the candidate
// failed a gate) or 2 (bad input or no usable backend).
namespace evo {

// argv[0] is "eval".
int run_eval_command(int argc, char** argv);

}  // namespace evo
