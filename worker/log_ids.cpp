#include "log_ids.h"

#include <utility>

namespace evo {
namespace {
thread_local std::string current_ids;
}  // namespace

const std::string& log_ids() { return current_ids; }

LogIdsScope::LogIdsScope(const std::string& run_id, const std::string& candidate_id)
    : LogIdsScope("run_id=" + run_id + " candidate_id=" + candidate_id + " ") {}

LogIdsScope::LogIdsScope(std::string ids) : saved_(std::exchange(current_ids, std::move(ids))) {}

LogIdsScope::~LogIdsScope() { current_ids = std::move(saved_); }

}  // namespace evo
