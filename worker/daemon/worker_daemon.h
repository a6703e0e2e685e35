#pragma once
// The evo-worker daemon: registers with evod, leases candidates, compiles the next ones while the
// current one is evaluated, reports results, and keeps its leases alive with heartbeats.
//   evo-worker [--coordinator 127.0.0.1:50051] [--gpu 0] [--backend cuda|model] [--name N]
//              [--max-inflight 2] [--compile-threads N] [-v]
// argv[0] is the program name. Returns the process exit status. (--all-gpus and --workers N,
// several workers from one command, are host_workers.h's: main() sends them there.)

namespace evo {

int run_worker_daemon(int argc, char** argv);

// The options' check alone: -1 when run_worker_daemon would run, else the status it would exit
// with, having printed why (or --help's text).
int check_worker_daemon_args(int argc, char** argv);

}  // namespace evo
