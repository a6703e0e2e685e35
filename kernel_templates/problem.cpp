#include "problem.h"

#include <stdexcept>

#include "family.h"

namespace evo {

Problem::Problem(const KernelFamily& family, std::vector<int64_t> values, std::vector<int64_t> extents)
    : family_(&family), values_(std::move(values)), extents_(std::move(extents)) {
  if (values_.size() != family.problem_variables().size())
    throw std::invalid_argument("a " + std::string(family.id) + " problem has " +
                                std::to_string(family.problem_variables().size()) + " values, not " +
                                std::to_string(values_.size()));
}

const KernelFamily& Problem::family() const {
  if (!family_) throw std::logic_error("an empty Problem has no family");
  return *family_;
}

int64_t Problem::value(std::string_view name) const {
  const auto& names = family().problem_variables();
  for (size_t i = 0; i < names.size(); ++i)
    if (names[i] == name) return values_[i];
  throw std::out_of_range("a " + std::string(family_->id) + " problem has no variable '" + std::string(name) + "'");
}

std::map<std::string, int64_t> Problem::variables() const {
  const auto& names = family().problem_variables();
  std::map<std::string, int64_t> out;
  for (size_t i = 0; i < names.size(); ++i) out.emplace(names[i], values_[i]);
  return out;
}

std::string Problem::text() const { return family().text(*this); }

double Problem::flops() const { return family().flops(*this); }

double Problem::bytes_moved() const { return family().bytes_moved(*this); }

}  // namespace evo
