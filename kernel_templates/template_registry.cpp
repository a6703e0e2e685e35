#include "template_registry.h"

#include <cstdint>
#include <cstdio>
#include <iterator>
#include <string>
#include <vector>

#include "attention/problem.h"
#include "embedded_texts.h"

// A kernel's texts, by the names kernel_templates/CMakeLists.txt gives them.
#define EVO_KERNEL(fam, kernel)                                                          \
  KernelTemplate {                                                                       \
    #kernel, &fam::family(), kEmbedded_##fam##_##kernel##_source, kEmbedded_##fam##_##kernel##_space \
  }

namespace evo {
namespace {

// The kernels: one line each, naming the family (its folder and namespace) they belong to.
const KernelTemplate kTemplates[] = {
    EVO_KERNEL(attention, fa_s512_v3),
};

}  // namespace

// The families: one line each, the KernelFamily of kernel_templates/<family>/family.cpp.
const std::vector<const KernelFamily*>& families() {
  static const std::vector<const KernelFamily*> all = {
      &attention::family(),
  };
  return all;
}

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

const KernelFamily* find_family(std::string_view id) {
  for (const KernelFamily* f : families())
    if (f->id == id) return f;
  return nullptr;
}

namespace {
// One per template, in kTemplates' order. The templates are compiled in, and evod asks for every
// lease and result: hash each once.
const std::vector<std::string>& fingerprints() {
  static const std::vector<std::string> all = [] {
    std::vector<std::string> out;
    for (const auto& t : kTemplates) {
      std::string material;
      for (std::string_view part :
           {t.source, t.space_json, t.family->host_source, t.family->reference_source})
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
