#include "enrol_command.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

#include <spdlog/spdlog.h>

#include "enrolments.h"
#include "errors.h"
#include "store.h"

namespace evo {

const char* const kEnrolUsage =
    "usage: evod enrol NAME [--key-file FILE] [--db PATH]   admit workers under NAME: a new key\n"
    "       evod enrol --list [--db PATH]                    the enrolments and their state\n"
    "       evod enrol --revoke NAME [--db PATH]             refuse NAME's workers from now on\n"
    "       evod enrol --release NAME [--db PATH]            admit NAME again after a quarantine\n"
    "\n"
    "Run on evod's host, on evod's database (evod may be serving it). A worker started with\n"
    "--enrolment-key-file holding NAME's key belongs to NAME: all of NAME's workers count as one\n"
    "party, so none confirms another's measurements, and a quarantine of one refuses them all,\n"
    "registrations to come included. `evod serve --enrolled-workers-only` refuses workers without\n"
    "a key. A new key for an existing NAME replaces the old one (running workers keep their\n"
    "credentials; only new registrations need the new key).\n"
    "\n"
    "  --key-file FILE  write the key into FILE (created with mode 0600; an existing file is\n"
    "                   refused) instead of printing it on standard output\n"
    "  --db PATH        evod's database (default: evo.db)\n";

namespace {

int enrol_usage_error(const std::string& line) {
  std::fprintf(stderr, "evod enrol: %s\n(see evod enrol --help)\n", line.c_str());
  return 2;
}

// Writes the key into a new file only its owner can read. Returns "" or why it could not.
std::string write_key_file(const std::string& path, const std::string& key) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0600);
  if (fd < 0)
    return errno == EEXIST ? "'" + path + "' exists: a key file is never overwritten (remove it first)"
                           : "cannot create '" + path + "': " + std::strerror(errno);
  const std::string line = key + "\n";
  const bool ok = ::write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size());
  ::close(fd);
  if (!ok) {
    ::unlink(path.c_str());
    return "cannot write '" + path + "'";
  }
  return "";
}

enum class Action { kEnrol, kList, kRevoke, kRelease };

struct EnrolOptions {
  Action action = Action::kEnrol;
  std::string name;
  std::string key_file;
  std::string db = "evo.db";
};

// Returns -1 when the command should run, else an exit status.
int parse(int argc, char** argv, EnrolOptions* opt) {
  bool action_given = false;
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    const char* next = i + 1 < argc ? argv[i + 1] : nullptr;
    if (a == "-h" || a == "--help") {
      std::fputs(kEnrolUsage, stdout);
      return 0;
    } else if (a == "--db" || a == "--key-file") {
      if (!next || !*next) return enrol_usage_error(a + " needs a path");
      (a == "--db" ? opt->db : opt->key_file) = argv[++i];
    } else if (a == "--list" || a == "--revoke" || a == "--release") {
      if (action_given) return enrol_usage_error("one of --list, --revoke and --release at a time");
      action_given = true;
      opt->action = a == "--list" ? Action::kList : a == "--revoke" ? Action::kRevoke : Action::kRelease;
      if (opt->action != Action::kList) {
        if (!next || !*next) return enrol_usage_error(a + " needs an enrolment NAME");
        opt->name = argv[++i];
      }
    } else if (!a.empty() && a[0] != '-' && opt->name.empty() && !action_given) {
      opt->name = a;
    } else {
      return enrol_usage_error("unexpected argument '" + a + "'");
    }
  }
  if (opt->action == Action::kEnrol && opt->name.empty()) return enrol_usage_error("missing the enrolment NAME");
  if (opt->action != Action::kEnrol && !opt->key_file.empty())
    return enrol_usage_error("--key-file goes with a new enrolment only");
  if (opt->action == Action::kEnrol)
    if (const std::string why = bad_enrolment_name(opt->name); !why.empty()) return enrol_usage_error(why);
  // Refused before the key is made, so that a refusal changes nothing.
  struct stat st {};
  if (!opt->key_file.empty() && ::lstat(opt->key_file.c_str(), &st) == 0)
    return enrol_usage_error("'" + opt->key_file + "' exists: a key file is never overwritten (remove it first)");
  return -1;
}

}  // namespace

int enrol_command(int argc, char** argv) {
  EnrolOptions opt;
  if (const int status = parse(argc, argv, &opt); status >= 0) return status;
  // The store's progress lines are for evod's log; a key on standard output must stand alone.
  spdlog::set_level(spdlog::level::warn);
  if (opt.action != Action::kEnrol) {
    struct stat st {};
    if (::stat(opt.db.c_str(), &st) != 0)
      return std::fprintf(stderr, "evod enrol: no database '%s' (--db names evod's)\n", opt.db.c_str()), 1;
  }
  try {
    Store store(opt.db);
    switch (opt.action) {
      case Action::kList:
        for (const auto& line : enrolment_lines(store)) std::printf("%s\n", line.c_str());
        return 0;
      case Action::kRevoke:
        revoke_enrolment(store, opt.name, "revoked by the operator of evod's host (evod enrol --revoke)");
        std::fprintf(stderr, "evod enrol: '%s' revoked: its workers are quarantined and it registers none\n",
                     opt.name.c_str());
        return 0;
      case Action::kRelease:
        release_enrolment(store, opt.name);
        std::fprintf(stderr, "evod enrol: '%s' admitted again, its workers' quarantines lifted\n", opt.name.c_str());
        return 0;
      case Action::kEnrol: {
        const std::string key = enrol(store, opt.name, now_unix_ms());
        if (opt.key_file.empty()) {
          std::printf("%s\n", key.c_str());
          std::fprintf(stderr, "evod enrol: the key of '%s' is above, shown only now: give it to its workers "
                       "(evo-worker --enrolment-key-file FILE, mode 0600)\n", opt.name.c_str());
        } else if (const std::string why = write_key_file(opt.key_file, key); !why.empty()) {
          // The enrolment holds a key nobody has: it admits nobody until a new key is made.
          std::fprintf(stderr, "evod enrol: %s; '%s' holds a key nobody has now: run evod enrol %s again\n",
                       why.c_str(), opt.name.c_str(), opt.name.c_str());
          return 1;
        } else {
          std::fprintf(stderr, "evod enrol: the key of '%s' is in %s (mode 0600)\n", opt.name.c_str(),
                       opt.key_file.c_str());
        }
        return 0;
      }
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "evod enrol: %s\n", e.what());
    return 1;
  }
  return 1;
}

}  // namespace evo
