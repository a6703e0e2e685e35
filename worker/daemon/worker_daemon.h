#pragma once
// The evo-worker daemon: registers with evod, leases candidates, compiles the next ones while the
// current one is evaluated, reports results, and keeps its leases alive with heartbeats.
//   evo-worker [--coordinator 127.0.0.1:50051] [--gpu 0] [--backend cuda|model] [--name N]
//              [--max-inflight 2] [-v]
// argv[0] is the program name. Returns the process exit status.

namespace evo {

int run_worker_daemon(int argc, char** argv);

}  // namespace evo
