// evoctl: the command-line client of evod. See `evoctl --help`.
#include <unistd.h>

#include <cstdlib>
#include <iostream>

#include "evoctl.h"

int main(int argc, char** argv) {
  evo::cli::Environment env;
  env.stdout_is_tty = isatty(STDOUT_FILENO) != 0;
  if (const char* c = std::getenv("EVO_COORDINATOR")) env.coordinator = c;
  if (const char* t = std::getenv("EVO_TOKEN")) env.token = t;
  if (const char* s = std::getenv("EVO_CONNECT_TIMEOUT_S")) env.connect_timeout_s = s;
  return evo::cli::run_evoctl(std::vector<std::string>(argv + 1, argv + argc), std::cout, std::cerr, env);
}
