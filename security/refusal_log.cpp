#include "refusal_log.h"

#include <ctime>

#include <spdlog/spdlog.h>

namespace evo::security {

namespace {

std::string utc_now_text() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace

void RefusalLog::write_count_locked() {
  if (counted_ > 0)
    spdlog::warn("event=unauthenticated_more count={} since={} last_peer={} (refused calls not logged one by one)",
                 counted_, since_, last_peer_);
  counted_ = 0;
}

void RefusalLog::refused(const std::string& rpc, const std::string& peer, const std::string& reason,
                         Clock::time_point now) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (open_ && now - logged_at_ < interval_) {
    ++counted_;
    last_peer_ = peer;
    return;
  }
  write_count_locked();
  open_ = true;
  logged_at_ = now;
  since_ = utc_now_text();
  spdlog::warn("event=unauthenticated rpc={} peer={} reason=\"{}\" (more refusals within {} s are counted, not "
               "logged one by one)",
               rpc, peer, reason, std::chrono::duration_cast<std::chrono::seconds>(interval_).count());
}

void RefusalLog::flush(Clock::time_point now) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!open_ || now - logged_at_ < interval_) return;
  write_count_locked();
  open_ = false;
}

uint64_t RefusalLog::pending() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return counted_;
}

}  // namespace evo::security
