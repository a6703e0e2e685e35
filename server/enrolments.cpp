#include "enrolments.h"

#include <cctype>
#include <ctime>

#include <spdlog/spdlog.h>

#include "errors.h"
#include "worker_registry.h"

namespace evo {

namespace {

EnrolmentRecord existing(Store& store, const std::string& name) {
  const auto e = store.get_enrolment(name);
  if (!e) throw InputError("there is no enrolment '" + name + "' (evod enrol --list shows them)");
  return *e;
}

std::string utc_text(int64_t unix_ms) {
  const std::time_t t = static_cast<std::time_t>(unix_ms / 1000);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char out[32];
  std::strftime(out, sizeof out, "%Y-%m-%d %H:%M:%S UTC", &tm);
  return out;
}

}  // namespace

std::string bad_enrolment_name(const std::string& name) {
  if (name.empty() || name.size() > 64) return "an enrolment name has 1 to 64 characters";
  for (char ch : name)
    if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '.' && ch != '_' && ch != ':' && ch != '-')
      return "an enrolment name holds only letters, digits and . _ : - ('" + name + "' does not)";
  if (name[0] == '-') return "an enrolment name does not start with '-' ('" + name + "')";
  return "";
}

std::string enrol(Store& store, const std::string& name, int64_t now_ms) {
  if (const std::string why = bad_enrolment_name(name); !why.empty()) throw InputError(why);
  const std::string key = new_secret();
  bool replaced = false;
  store.transaction([&] {
    replaced = store.get_enrolment(name).has_value();
    store.put_enrolment({name, secret_hash(key), now_ms, ""});
  });
  spdlog::info("event=enrolment_made enrolment={} new_key_for_existing={}", name, replaced);
  return key;
}

void revoke_enrolment(Store& store, const std::string& name, const std::string& reason) {
  store.transaction([&] {
    existing(store, name);
    store.quarantine_enrolment(name, reason);
  });
  spdlog::warn("event=enrolment_revoked enrolment={} reason=\"{}\"", name, reason);
}

void release_enrolment(Store& store, const std::string& name) {
  store.transaction([&] {
    existing(store, name);
    store.release_enrolment(name);
  });
  spdlog::info("event=enrolment_released enrolment={}", name);
}

std::vector<std::string> enrolment_lines(Store& store) {
  std::vector<std::string> lines;
  store.transaction([&] {
    for (const auto& e : store.enrolments())
      lines.push_back(e.name + "  key made " + utc_text(e.created_ms) + "  " +
                      (e.refused.empty() ? "admitted" : "REFUSED: " + e.refused));
  });
  return lines;
}

}  // namespace evo
