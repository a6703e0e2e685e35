#include "template_registry.h"

#include <cstdint>
#include <cstdio>

extern const char kFaS512V3Source[];
extern const char kFaS512V3Space[];
extern const char kReferenceAttentionSource[];
extern const char kAttentionTensorMapsSource[];

namespace evo {
namespace {
const KernelTemplate kTemplates[] = {
    {"fa_s512_v3", kFaS512V3Source, kFaS512V3Space, kAttentionTensorMapsSource},
};
}  // namespace

const KernelTemplate* find_template(std::string_view id) {
  for (const auto& t : kTemplates)
    if (t.id == id) return &t;
  return nullptr;
}

std::vector<std::string> template_ids() {
  std::vector<std::string> ids;
  for (const auto& t : kTemplates) ids.emplace_back(t.id);
  return ids;
}

std::string_view reference_attention_source() { return kReferenceAttentionSource; }

std::string fnv1a_hex(std::string_view text) {
  uint64_t h = 14695981039346656037ull;
  for (unsigned char c : text) {
    h ^= c;
    h *= 1099511628211ull;
  }
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

}  // namespace evo
