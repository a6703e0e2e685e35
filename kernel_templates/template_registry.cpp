#include "template_registry.h"

#include <cstdint>
#include <cstdio>
#include <iterator>
#include <string>
#include <vector>

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

std::string_view reference_attention_kernel(DType d) {
  return d == DType::kBF16 ? "evo_reference_attention_bf16" : "evo_reference_attention_fp16";
}

namespace {
// One per template, in kTemplates' order. The templates are compiled in, and evod asks for every
// lease and result: hash each once.
const std::vector<std::string>& fingerprints() {
  static const std::vector<std::string> all = [] {
    std::vector<std::string> out;
    for (const auto& t : kTemplates) {
      std::string material;
      for (std::string_view part : {t.source, t.space_json, t.host_source})
        material += fnv1a_hex(part);  // per part, so that no two splits of one text collide
      out.push_back(std::string(t.id) + "@" + fnv1a_hex(material));
    }
    return out;
  }();
  return all;
}
}  // namespace

std::string template_fingerprint(std::string_view id) {
  for (size_t i = 0; i < std::size(kTemplates); ++i)
    if (kTemplates[i].id == id) return fingerprints()[i];
  return std::string(id);
}

std::vector<std::string> template_fingerprints() { return fingerprints(); }

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
