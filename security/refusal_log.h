#pragma once
// Refused unauthenticated calls in the log without a flood: a peer without the token can make
// thousands of calls a second, and a line for each would fill the disk. The first refusal of a
// quiet spell is logged whole (event=unauthenticated: rpc, peer, reason); those that follow within
// the interval are only counted, and one line (event=unauthenticated_more count=N since=...) says
// how many there were, at the next refusal after the interval or at the next flush(), whichever
// comes first.
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>

namespace evo::security {

class RefusalLog {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr std::chrono::seconds kDefaultInterval{10};

  explicit RefusalLog(Clock::duration interval = kDefaultInterval) : interval_(interval) {}

  void refused(const std::string& rpc, const std::string& peer, const std::string& reason,
               Clock::time_point now = Clock::now());
  // Writes the count line once the interval since the last logged refusal has passed (evod calls
  // this periodically, so that the last burst is counted even when no call follows it).
  void flush(Clock::time_point now = Clock::now());

  // Refused calls counted but not yet logged (for tests).
  uint64_t pending() const;

 private:
  void write_count_locked();

  const Clock::duration interval_;
  mutable std::mutex mutex_;
  bool open_ = false;             // a refusal was logged and its interval has not ended
  Clock::time_point logged_at_;   // when the last whole line was written
  std::string since_;             // that moment as wall-clock text, for the count line
  uint64_t counted_ = 0;          // refusals since then, not logged one by one
  std::string last_peer_;         // the most recent of them
};

}  // namespace evo::security
