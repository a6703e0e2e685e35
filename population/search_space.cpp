#include "search_space.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <iterator>
#include <limits>
#include <mutex>
#include <set>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "errors.h"
#include "expression.h"
#include "template_registry.h"

namespace evo {

using json = nlohmann::json;

namespace {

struct Named {
  std::string name;
  Expression expr;
  bool reads_arch = false;  // reads SM_ARCH, maybe through a derived value: skipped while unknown
};

// Genes of older genome texts that one gene replaced (the space's "retired_genes"); parse()
// translates them into that gene.
struct RetiredGroup {
  size_t into = 0;                        // index of the replacing gene
  std::vector<std::string> names;         // the retired genes, in the space's order
  std::vector<int64_t> defaults;          // what an old text that omits one meant
  // Per value index of `into` that an old text can mean (its first `into_values`, those it had
  // when the genes retired): the retired genes' values.
  std::vector<std::vector<int64_t>> was;
};

}  // namespace

struct SearchSpace::Impl {
  std::shared_ptr<const GeneLabels> labels;          // per gene; every genome of the space holds it
  std::vector<std::optional<Expression>> used_when;  // per gene, in gene order; nullopt: always
  std::vector<Named> derived;      // evaluated in order; each may read the ones before it
  std::vector<Named> constraints;  // checked in order; the first that is 0 is reported
  std::vector<RetiredGroup> retired;
  std::string kernel_pattern;      // "{NAME}" placeholders
  Expression threads, grid_x, grid_y, grid_z, smem_bytes;
  std::optional<Expression> workspace_bytes;  // optional: scratch memory the kernel needs
  std::optional<Expression> workspace_zeroed_bytes;  // optional: its leading bytes that must be zero
  std::optional<Expression> tensor_map_box_rows;  // optional: TMA box rows, 0 without TMA
  std::optional<Expression> tensor_map_q_box_rows;  // optional: Q/O box rows, else K/V's
  std::optional<Expression> min_registers;  // optional: registers a thread must hold at launch
  std::optional<Expression> persistent;     // optional: nonzero for a persistent kernel
  std::optional<Expression> flops;
  // The derived values and the constraints again, their identifiers bound to slots of one array:
  // the problem's variables (in the family's order), the genes (in the space's), SMEM_LIMIT,
  // SM_ARCH, then each derived value. violated_constraint() reads these, so that checking a genome
  // builds no map of names (a sweep checks every genome of the space).
  std::vector<Expression::Bound> bound_derived, bound_constraints;
  size_t genes_slot = 0, limit_slot = 0, derived_slot = 0, slots = 0;

  // The launch formulas of the space's "launch" object, each checked against the names known.
  void read_launch(const json& launch, const std::set<std::string>& known);

  void bind_slots(const std::vector<std::string>& problem_names, const std::vector<Gene>& genes) {
    std::map<std::string, size_t> slot;
    for (const auto& name : problem_names) slot.emplace(name, slot.size());
    genes_slot = slot.size();
    for (const auto& g : genes) slot.emplace(g.name, slot.size());
    limit_slot = slot.size();
    for (const char* name : {"SMEM_LIMIT", "SM_ARCH"}) slot.emplace(name, slot.size());
    derived_slot = slot.size();
    for (const auto& d : derived) slot.emplace(d.name, slot.size());
    slots = slot.size();
    auto slot_of = [&](const std::string& name) {
      const auto it = slot.find(name);
      if (it == slot.end()) throw InputError("unknown identifier '" + name + "'");
      return it->second;
    };
    for (const auto& d : derived) bound_derived.push_back(d.expr.bind(slot_of));
    for (const auto& c : constraints) bound_constraints.push_back(c.expr.bind(slot_of));
  }
};

namespace {

// Every expression may read the problem's variables (KernelFamily::problem_variables) and the
// device; a gene's used_when the problem's alone, so that whether a gene matters to a run does not
// depend on the other genes (nor on the device).
const char* const kDeviceVariables[] = {"SMEM_LIMIT", "SM_ARCH"};

[[noreturn]] void bad_space(const std::string& why) {
  throw InputError("bad search space: " + why);
}

const json& field(const json& obj, const char* key, const std::string& where) {
  if (!obj.is_object()) bad_space(where + " must be an object");
  auto it = obj.find(key);
  if (it == obj.end()) bad_space(where + " lacks \"" + key + "\"");
  return *it;
}

std::string string_field(const json& obj, const char* key, const std::string& where) {
  const json& v = field(obj, key, where);
  if (!v.is_string() || v.get<std::string>().empty())
    bad_space(where + "." + key + " must be a non-empty string");
  return v.get<std::string>();
}

int64_t int_value(const json& v, const std::string& where) {
  if (!v.is_number_integer()) bad_space(where + " must be an integer");
  return v.get<int64_t>();
}

// "serves": {"HEAD_DIM": [64, 128], "DTYPE": ["fp16", "bf16"]}: for each variable the family
// lists (KernelFamily::served_variables), the values the kernel is written for, as numbers or as
// the family's labels.
ServedValues read_serves(const json& doc, const KernelFamily& family) {
  const std::vector<std::string>& required = family.served_variables();
  std::string listed;
  for (const auto& name : required) listed += (listed.empty() ? "" : ", ") + name;
  const json& serves = field(doc, "serves", "space");
  if (!serves.is_object()) bad_space("serves must be an object listing the values of " + listed);
  const auto& variables = family.problem_variables();
  ServedValues out;
  for (const auto& [name, values] : serves.items()) {
    if (std::find(variables.begin(), variables.end(), name) == variables.end())
      bad_space("serves names '" + name + "', which is not a variable of the " + std::string(family.id) + " problem");
    const std::string where = "serves." + name;
    if (!values.is_array() || values.empty()) bad_space(where + " must be a non-empty array");
    for (const auto& v : values) {
      if (v.is_number_integer()) {
        out[name].push_back(v.get<int64_t>());
        continue;
      }
      if (!v.is_string()) bad_space(where + "[] must be numbers or labels such as \"fp16\"");
      try {
        out[name].push_back(family.value_of_label(name, v.get<std::string>()));
      } catch (const InputError& e) {
        bad_space(where + ": " + e.what());
      }
    }
  }
  for (const auto& name : required)
    if (!out.count(name)) bad_space("serves must list " + name + " (the " + std::string(family.id) +
                                    " family's kernels each name the values of " + listed + " they serve)");
  return out;
}

bool is_identifier(std::string_view s) {
  if (s.empty() || !(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_')) return false;
  for (char c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_')) return false;
  return true;
}

// Parses an expression and checks that it reads only names defined before it.
Expression checked_expression(const json& v, const std::string& where,
                              const std::set<std::string>& known) {
  if (!v.is_string()) bad_space(where + " must be an expression string");
  Expression e;
  try {
    e = Expression::parse(v.get<std::string>());
  } catch (const InputError& err) {
    bad_space(where + ": " + err.what());
  }
  for (const auto& id : e.identifiers())
    if (!known.count(id)) bad_space(where + " reads unknown identifier '" + id + "'");
  return e;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

std::string join(const std::vector<std::string>& items, const char* separator = ", ") {
  std::string t;
  for (size_t i = 0; i < items.size(); ++i) t += (i ? separator : "") + items[i];
  return t;
}

// "{16, 32, 64}", or an enumerated gene's labels: "{sync, cp_async, ...}".
// The gene's first `count` values (all of them by default), as labels where it has them.
std::string domain_text(const Gene& g, size_t count = std::numeric_limits<size_t>::max()) {
  std::vector<std::string> values;
  for (size_t i = 0; i < g.values.size() && i < count; ++i)
    values.push_back(g.labels.empty() ? std::to_string(g.values[i]) : g.labels[i]);
  return "{" + join(values) + "}";
}

// Every {NAME} in the pattern, in order; throws for unbalanced braces.
std::vector<std::string> placeholders(const std::string& pattern) {
  std::vector<std::string> names;
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] == '}') bad_space("kernel pattern '" + pattern + "' has an unmatched '}'");
    if (pattern[i] != '{') continue;
    size_t close = pattern.find('}', i);
    if (close == std::string::npos) bad_space("kernel pattern '" + pattern + "' has an unclosed '{'");
    names.push_back(pattern.substr(i + 1, close - i - 1));
    i = close;
  }
  return names;
}

// One entry of "genes": integer "values", or enumerated "labels" whose i-th label is value i
// (its default then a label too).
Gene read_gene(const json& j, const std::string& where) {
  Gene g;
  g.name = string_field(j, "name", where);
  const bool enumerated = j.is_object() && j.contains("labels");
  if (enumerated && j.contains("values")) bad_space("gene " + g.name + " has both values and labels");
  const json& values = field(j, enumerated ? "labels" : "values", where);
  if (!values.is_array() || values.empty())
    bad_space(where + (enumerated ? ".labels" : ".values") + " must be a non-empty array");
  for (const auto& v : values) {
    if (enumerated) {
      if (!v.is_string() || !is_identifier(v.get<std::string>()))
        bad_space("gene " + g.name + " label " + v.dump() + " is not an identifier");
      if (std::find(g.labels.begin(), g.labels.end(), v.get<std::string>()) != g.labels.end())
        bad_space("gene " + g.name + " lists " + v.get<std::string>() + " twice");
      g.values.push_back(static_cast<int64_t>(g.labels.size()));
      g.labels.push_back(v.get<std::string>());
    } else {
      g.values.push_back(int_value(v, where + ".values[]"));
      if (std::count(g.values.begin(), g.values.end(), g.values.back()) > 1)
        bad_space("gene " + g.name + " lists " + std::to_string(g.values.back()) + " twice");
    }
  }
  const json& def = field(j, "default", where);
  if (enumerated) {
    auto it = def.is_string() ? std::find(g.labels.begin(), g.labels.end(), def.get<std::string>())
                              : g.labels.end();
    if (it == g.labels.end())
      bad_space("gene " + g.name + " default " + def.dump() + " is not one of its labels " + domain_text(g));
    g.default_value = it - g.labels.begin();
  } else {
    g.default_value = int_value(def, where + ".default");
    if (std::find(g.values.begin(), g.values.end(), g.default_value) == g.values.end())
      bad_space("gene " + g.name + " default " + std::to_string(g.default_value) +
                " is outside its domain " + domain_text(g));
  }
  if (auto doc_it = j.find("doc"); doc_it != j.end() && doc_it->is_string()) g.doc = doc_it->get<std::string>();
  return g;
}

// "retired_genes": genes of older genome texts, each {"name", "default", "into"} and optionally
// "into_values", how many of `into`'s first values existed when the gene retired (all, if
// absent): values added since may repeat an older value's retired genes, and no old text names
// them. The derived value of the same name, which may read only the gene `into`, says what each
// of those values of `into` was in the retired genes; parse() picks the value whose retired genes
// match the text.
std::vector<RetiredGroup> read_retired(const json& list, const std::vector<Gene>& genes,
                                       const std::vector<Named>& derived) {
  using Group = RetiredGroup;
  std::vector<Group> groups;
  if (!list.is_array()) bad_space("retired_genes must be an array");
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string where = "retired_genes[" + std::to_string(i) + "]";
    const std::string name = string_field(list[i], "name", where);
    const std::string into = string_field(list[i], "into", where);
    const int64_t default_value = int_value(field(list[i], "default", where), where + ".default");
    auto gene = std::find_if(genes.begin(), genes.end(), [&](const Gene& g) { return g.name == into; });
    if (gene == genes.end()) bad_space("retired gene " + name + " goes into unknown gene '" + into + "'");
    size_t into_values = gene->values.size();
    if (auto it = list[i].find("into_values"); it != list[i].end()) {
      const int64_t n = int_value(*it, where + ".into_values");
      if (n < 1 || static_cast<size_t>(n) > gene->values.size())
        bad_space("retired gene " + name + " names " + std::to_string(n) + " values of " + into + ", which has " +
                  std::to_string(gene->values.size()));
      into_values = static_cast<size_t>(n);
    }
    auto d = std::find_if(derived.begin(), derived.end(), [&](const auto& n) { return n.name == name; });
    if (d == derived.end()) bad_space("retired gene " + name + " has no derived value of its name");
    for (const auto& id : d->expr.identifiers())
      if (id != into) bad_space("derived value " + name + " of a retired gene reads '" + id + "', not only " + into);
    const size_t into_index = static_cast<size_t>(gene - genes.begin());
    auto group = std::find_if(groups.begin(), groups.end(), [&](const Group& g) { return g.into == into_index; });
    if (group == groups.end()) {
      groups.push_back({into_index, {}, {}, std::vector<std::vector<int64_t>>(into_values)});
      group = groups.end() - 1;
    }
    if (group->was.size() != into_values)
      bad_space("the genes retired into " + into + " name different numbers of its values (into_values)");
    if (std::find(group->names.begin(), group->names.end(), name) != group->names.end())
      bad_space("retired gene " + name + " is listed twice");
    group->names.push_back(name);
    group->defaults.push_back(default_value);
    for (size_t v = 0; v < into_values; ++v)
      group->was[v].push_back(d->expr.eval({{into, gene->values[v]}}));
  }
  for (const Group& g : groups) {
    const Gene& gene = genes[g.into];
    for (size_t a = 0; a < g.was.size(); ++a)
      for (size_t b = a + 1; b < g.was.size(); ++b)
        if (g.was[a] == g.was[b])
          bad_space("the genes retired into " + gene.name + " do not tell its values " +
                    gene.value_text(gene.values[a]) + " and " + gene.value_text(gene.values[b]) + " apart");
  }
  return groups;
}

}  // namespace

std::string Gene::value_text(int64_t value) const {
  if (value >= 0 && static_cast<size_t>(value) < labels.size()) return labels[static_cast<size_t>(value)];
  return std::to_string(value);
}

SearchSpace SearchSpace::from_json(std::string_view text) { return from_json(text, *families().front()); }

void SearchSpace::Impl::read_launch(const json& launch, const std::set<std::string>& known) {
  auto launch_expr = [&](const char* key) {
    return checked_expression(field(launch, key, "launch"), std::string("launch.") + key, known);
  };
  auto optional_expr = [&](const char* key) -> std::optional<Expression> {
    if (launch.is_object() && launch.contains(key)) return launch_expr(key);
    return std::nullopt;
  };
  threads = launch_expr("threads");
  grid_x = launch_expr("grid_x");
  grid_y = launch_expr("grid_y");
  grid_z = launch_expr("grid_z");
  smem_bytes = launch_expr("smem_bytes");
  workspace_bytes = optional_expr("workspace_bytes");
  workspace_zeroed_bytes = optional_expr("workspace_zeroed_bytes");
  if (workspace_zeroed_bytes && !workspace_bytes)
    bad_space("launch.workspace_zeroed_bytes needs launch.workspace_bytes (the buffer it is part of)");
  tensor_map_box_rows = optional_expr("tensor_map_box_rows");
  tensor_map_q_box_rows = optional_expr("tensor_map_q_box_rows");
  if (tensor_map_q_box_rows && !tensor_map_box_rows)
    bad_space("launch.tensor_map_q_box_rows needs launch.tensor_map_box_rows (the K/V boxes)");
  min_registers = optional_expr("min_registers");
  persistent = optional_expr("persistent");
}

SearchSpace SearchSpace::from_json(std::string_view text, const KernelFamily& family) {
  json doc;
  try {
    doc = json::parse(text);
  } catch (const json::parse_error& e) {
    bad_space(std::string("not valid JSON (") + e.what() + ")");
  }
  if (!doc.is_object()) bad_space("the document must be a JSON object");

  SearchSpace space;
  space.family_ = &family;
  auto impl = std::make_shared<Impl>();
  space.id_ = string_field(doc, "template", "space");
  if (!is_identifier(space.id_)) bad_space("template id '" + space.id_ + "' is not an identifier");

  space.served_ = read_serves(doc, family);

  const std::set<std::string> problem_names(family.problem_variables().begin(), family.problem_variables().end());
  std::set<std::string> known = problem_names;
  known.insert(std::begin(kDeviceVariables), std::end(kDeviceVariables));
  auto define = [&](const std::string& name, const std::string& where) {
    if (!is_identifier(name)) bad_space(where + " name '" + name + "' is not an identifier");
    if (name == "min" || name == "max") bad_space(where + " name '" + name + "' is reserved");
    if (!known.insert(name).second) bad_space(where + " name '" + name + "' is defined twice");
  };

  const json& genes = field(doc, "genes", "space");
  if (!genes.is_array() || genes.empty()) bad_space("genes must be a non-empty array");
  unsigned __int128 size = 1;
  auto labels = std::make_shared<GeneLabels>();
  for (size_t i = 0; i < genes.size(); ++i) {
    Gene g = read_gene(genes[i], "genes[" + std::to_string(i) + "]");
    define(g.name, "gene");
    std::optional<Expression> used_when;
    if (auto it = genes[i].find("used_when"); it != genes[i].end()) {
      used_when = checked_expression(*it, "gene " + g.name + " used_when", problem_names);
      g.used_when = used_when->text();
    }
    impl->used_when.push_back(std::move(used_when));
    labels->push_back(g.labels);
    size *= g.values.size();
    if (size > std::numeric_limits<uint64_t>::max() / 2) bad_space("the space has too many genomes");
    space.genes_.push_back(std::move(g));
  }
  impl->labels = std::move(labels);

  // SM_ARCH and the derived values that read it, directly or through another.
  std::set<std::string> arch_names = {"SM_ARCH"};
  auto reads_any = [](const Expression& e, const std::set<std::string>& names) {
    for (const auto& id : e.identifiers())
      if (names.count(id)) return true;
    return false;
  };
  if (auto it = doc.find("derived"); it != doc.end()) {
    if (!it->is_array()) bad_space("derived must be an array");
    for (size_t i = 0; i < it->size(); ++i) {
      const std::string where = "derived[" + std::to_string(i) + "]";
      std::string name = string_field((*it)[i], "name", where);
      Expression e = checked_expression(field((*it)[i], "expr", where), where + " (" + name + ")", known);
      define(name, "derived value");
      if (reads_any(e, arch_names)) arch_names.insert(name);
      impl->derived.push_back({name, e});
    }
  }
  if (auto it = doc.find("retired_genes"); it != doc.end())
    impl->retired = read_retired(*it, space.genes_, impl->derived);

  const json& constraints = field(doc, "constraints", "space");
  if (!constraints.is_array()) bad_space("constraints must be an array");
  std::set<std::string> constraint_names;
  for (size_t i = 0; i < constraints.size(); ++i) {
    const std::string where = "constraints[" + std::to_string(i) + "]";
    std::string name = string_field(constraints[i], "name", where);
    if (!constraint_names.insert(name).second) bad_space("constraint '" + name + "' is defined twice");
    Expression expr = checked_expression(field(constraints[i], "expr", where), "constraint " + name, known);
    const bool reads_arch = reads_any(expr, arch_names);
    impl->constraints.push_back({name, std::move(expr), reads_arch});
  }

  impl->kernel_pattern = string_field(doc, "kernel", "space");
  const std::vector<std::string> named = placeholders(impl->kernel_pattern);
  for (const auto& name : named)
    if (!known.count(name))
      bad_space("kernel pattern reads unknown placeholder '{" + name + "}'");
  // One kernel name for two served values would run one's code on the other's problems (one
  // element type's on another's tensors).
  for (const auto& [name, values] : space.served_)
    if (values.size() > 1 && std::find(named.begin(), named.end(), name) == named.end())
      bad_space("a kernel that serves more than one " + name + " must name {" + name + "} in its kernel pattern");

  impl->read_launch(field(doc, "launch", "space"), known);

  if (auto it = doc.find("flops"); it != doc.end()) impl->flops = checked_expression(*it, "flops", known);

  impl->bind_slots(family.problem_variables(), space.genes_);
  space.impl_ = std::move(impl);
  return space;
}

const SearchSpace& SearchSpace::for_template(std::string_view template_id) {
  static std::mutex mutex;
  static std::map<std::string, std::unique_ptr<const SearchSpace>, std::less<>> cache;
  std::lock_guard<std::mutex> lock(mutex);
  if (auto it = cache.find(template_id); it != cache.end()) return *it->second;
  const KernelTemplate* t = find_template(template_id);
  if (!t) {
    std::string known;
    for (const auto& id : template_ids()) known += (known.empty() ? "" : ", ") + id;
    throw InputError("unknown seed '" + std::string(template_id) + "' (known: " + known + ")");
  }
  auto space = std::make_unique<const SearchSpace>(from_json(t->space_json, *t->family));
  const SearchSpace& ref = *space;
  cache.emplace(std::string(template_id), std::move(space));
  return ref;
}

Genome SearchSpace::default_genome() const {
  std::vector<std::pair<std::string, int64_t>> genes;
  for (const auto& g : genes_) genes.emplace_back(g.name, g.default_value);
  return Genome(id_, std::move(genes), impl_->labels);
}

namespace {

// "NAME=VALUE,..." split into trimmed (name, value text) pairs; throws for a malformed item.
std::vector<std::pair<std::string, std::string_view>> gene_items(std::string_view body, const std::string& whole) {
  std::vector<std::pair<std::string, std::string_view>> items;
  size_t start = 0;
  while (start <= body.size()) {
    size_t comma = body.find(',', start);
    std::string_view item = body.substr(start, comma == std::string_view::npos ? comma : comma - start);
    start = comma == std::string_view::npos ? body.size() + 1 : comma + 1;
    size_t eq = item.find('=');
    std::string name(trim(item.substr(0, eq)));
    std::string_view value = eq == std::string_view::npos ? std::string_view() : trim(item.substr(eq + 1));
    if (name.empty() || value.empty())
      throw InputError("malformed genome '" + whole + "': expected NAME=VALUE,...");
    items.emplace_back(std::move(name), value);
  }
  return items;
}

int64_t integer_value(std::string_view text, const std::string& whole) {
  int64_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size())
    throw InputError("malformed genome '" + whole + "': expected NAME=VALUE,...");
  return value;
}

InputError unknown_gene(const std::vector<Gene>& genes, const std::string& name) {
  std::vector<std::string> names;
  for (const auto& g : genes) names.push_back(g.name);
  return InputError("unknown gene '" + name + "' (genes: " + join(names) + ")");
}

// A gene's value from its text: a label of an enumerated gene, else an integer of its domain.
int64_t gene_value(const Gene& gene, std::string_view text, const std::string& whole) {
  const auto outside = [&] {
    return InputError(gene.name + "=" + std::string(text) + " is outside its domain " + domain_text(gene));
  };
  if (!gene.labels.empty()) {
    auto it = std::find(gene.labels.begin(), gene.labels.end(), text);
    if (it == gene.labels.end()) throw outside();
    return gene.values[static_cast<size_t>(it - gene.labels.begin())];
  }
  const int64_t value = integer_value(text, whole);
  if (std::find(gene.values.begin(), gene.values.end(), value) == gene.values.end()) throw outside();
  return value;
}

}  // namespace

// Old genome texts name retired genes instead of the gene that replaced them: the replacing
// gene's value is the one whose retired genes (those the text omits at their old defaults) match.
void SearchSpace::translate_retired(Genome& genome, const std::map<std::string, int64_t>& retired,
                                    const std::set<std::string>& given, const std::string& whole) const {
  for (const auto& group : impl_->retired) {
    const Gene& into = genes_[group.into];
    std::vector<int64_t> values = group.defaults;
    bool named = false;
    for (size_t i = 0; i < group.names.size(); ++i)
      if (auto it = retired.find(group.names[i]); it != retired.end()) {
        values[i] = it->second;
        named = true;
      }
    if (!named) continue;
    if (given.count(into.name))
      throw InputError("genome '" + whole + "' mixes " + into.name + " with the genes it replaced (" +
                       join(group.names) + "); give " + into.name + " alone");
    auto match = std::find(group.was.begin(), group.was.end(), values);
    if (match == group.was.end()) {
      std::vector<std::string> old;
      for (size_t i = 0; i < group.names.size(); ++i) old.push_back(group.names[i] + "=" + std::to_string(values[i]));
      throw InputError("no " + into.name + " matches the retired genes " + join(old, ",") + " of genome '" +
                       whole + "' (" + into.name + " " + domain_text(into, group.was.size()) + " replaced them)");
    }
    genome.set(into.name, into.values[static_cast<size_t>(match - group.was.begin())]);
  }
}

Genome SearchSpace::parse(std::string_view text) const {
  const std::string whole(text);
  std::string_view body = trim(text);
  if (auto colon = body.find(':'); colon != std::string_view::npos) {
    std::string_view template_id = trim(body.substr(0, colon));
    if (template_id != id_)
      throw InputError("genome is for template '" + std::string(template_id) + "', not '" + id_ + "'");
    body = trim(body.substr(colon + 1));
  }
  Genome genome = default_genome();
  if (body.empty()) return genome;  // every gene at its default

  std::set<std::string> given;
  std::map<std::string, int64_t> retired;
  for (const auto& [name, value_text] : gene_items(body, whole)) {
    if (!given.insert(name).second)
      throw InputError("gene '" + name + "' is given twice in genome '" + whole + "'");
    auto gene = std::find_if(genes_.begin(), genes_.end(), [&](const Gene& g) { return g.name == name; });
    if (gene != genes_.end()) {
      genome.set(name, gene_value(*gene, value_text, whole));
      continue;
    }
    bool is_retired = false;
    for (const auto& group : impl_->retired)
      is_retired = is_retired || std::count(group.names.begin(), group.names.end(), name) > 0;
    if (!is_retired) throw unknown_gene(genes_, name);
    retired[name] = integer_value(value_text, whole);
  }
  if (!retired.empty()) translate_retired(genome, retired, given, whole);
  return genome;
}

Genome SearchSpace::from_genes(const std::map<std::string, int64_t>& genes) const {
  Genome genome = default_genome();
  for (const auto& [name, value] : genes) {
    auto gene = std::find_if(genes_.begin(), genes_.end(), [&](const Gene& g) { return g.name == name; });
    if (gene == genes_.end()) throw unknown_gene(genes_, name);
    if (std::find(gene->values.begin(), gene->values.end(), value) == gene->values.end())
      throw InputError(name + "=" + std::to_string(value) + " is outside its domain " + domain_text(*gene) +
                       (gene->labels.empty() ? "" : " (a label's index)"));
    genome.set(name, value);
  }
  return genome;
}

std::vector<size_t> SearchSpace::unused_genes(const std::vector<Problem>& shapes) const {
  std::vector<size_t> unused;
  if (shapes.empty()) return unused;
  for (size_t i = 0; i < genes_.size(); ++i) {
    const auto& used_when = impl_->used_when[i];
    if (!used_when) continue;
    bool used = false;
    for (const auto& shape : shapes) used = used || used_when->eval(shape.variables()) != 0;
    if (!used) unused.push_back(i);
  }
  return unused;
}

void SearchSpace::require_serves(const Problem& problem, std::string_view text) const {
  if (std::string why = unserved(served_, problem, id_); !why.empty())
    throw InputError("shape '" + std::string(text) + "': " + why);
}

Genome SearchSpace::at_defaults(const Genome& g, const std::vector<size_t>& indices) const {
  Genome out = g;
  if (g.template_id() != id_ || g.genes().size() != genes_.size()) return out;
  for (size_t i : indices)
    if (g.genes()[i].first == genes_[i].name) out.set(genes_[i].name, genes_[i].default_value);
  return out;
}

void SearchSpace::require_fits(const Genome& g) const {
  bool fits = g.template_id() == id_ && g.genes().size() == genes_.size();
  for (size_t i = 0; fits && i < genes_.size(); ++i) fits = g.genes()[i].first == genes_[i].name;
  if (!fits) throw InputError("genome '" + g.text() + "' does not fit the " + id_ + " search space");
}

std::map<std::string, int64_t> SearchSpace::variables(const Genome& g, const Problem& p,
                                                      int64_t smem_limit, int sm_arch) const {
  require_fits(g);
  std::map<std::string, int64_t> vars = p.variables();
  vars.insert(g.genes().begin(), g.genes().end());
  vars["SMEM_LIMIT"] = smem_limit;
  vars["SM_ARCH"] = sm_arch;
  for (const auto& d : impl_->derived) vars[d.name] = d.expr.eval(vars);
  return vars;
}

std::optional<std::string> SearchSpace::violated_constraint(const Genome& g, const Problem& p,
                                                            int64_t smem_limit, int sm_arch) const {
  require_fits(g);
  if (&p.family() != family_)
    throw InputError("a " + std::string(p.family().id) + " problem is not one the " + id_ + " search space reads");
  const Impl& s = *impl_;
  // The slots bind_slots() laid out; small enough for the stack.
  int64_t stack[64];
  std::vector<int64_t> heap;
  int64_t* v = stack;
  if (s.slots > std::size(stack)) {
    heap.resize(s.slots);
    v = heap.data();
  }
  std::copy(p.values().begin(), p.values().end(), v);
  for (size_t i = 0; i < genes_.size(); ++i) v[s.genes_slot + i] = g.genes()[i].second;
  v[s.limit_slot] = smem_limit;
  v[s.limit_slot + 1] = sm_arch;
  for (size_t i = 0; i < s.bound_derived.size(); ++i) v[s.derived_slot + i] = s.bound_derived[i].eval(v);
  for (size_t i = 0; i < s.constraints.size(); ++i) {
    if (s.constraints[i].reads_arch && sm_arch == kUnknownArch) continue;
    if (s.bound_constraints[i].eval(v) == 0) return s.constraints[i].name;
  }
  return std::nullopt;
}

std::vector<std::string> SearchSpace::constraint_names() const {
  std::vector<std::string> names;
  for (const auto& c : impl_->constraints) names.push_back(c.name);
  return names;
}

std::vector<Formula> SearchSpace::derived() const {
  std::vector<Formula> out;
  for (const auto& d : impl_->derived) out.push_back({d.name, d.expr});
  return out;
}

std::vector<Formula> SearchSpace::constraints() const {
  std::vector<Formula> out;
  for (const auto& c : impl_->constraints) out.push_back({c.name, c.expr});
  return out;
}

std::vector<Formula> SearchSpace::launch_formulas() const {
  std::vector<Formula> out = {{"threads", impl_->threads},
                              {"grid_x", impl_->grid_x},
                              {"grid_y", impl_->grid_y},
                              {"grid_z", impl_->grid_z},
                              {"smem_bytes", impl_->smem_bytes}};
  if (impl_->workspace_bytes) out.push_back({"workspace_bytes", *impl_->workspace_bytes});
  if (impl_->workspace_zeroed_bytes) out.push_back({"workspace_zeroed_bytes", *impl_->workspace_zeroed_bytes});
  if (impl_->tensor_map_box_rows) out.push_back({"tensor_map_box_rows", *impl_->tensor_map_box_rows});
  if (impl_->tensor_map_q_box_rows) out.push_back({"tensor_map_q_box_rows", *impl_->tensor_map_q_box_rows});
  if (impl_->min_registers) out.push_back({"min_registers", *impl_->min_registers});
  if (impl_->persistent) out.push_back({"persistent", *impl_->persistent});
  return out;
}

const std::string& SearchSpace::kernel_pattern() const { return impl_->kernel_pattern; }

// Launch formulas describe the kernel, not the device: SMEM_LIMIT reads as "no limit" here.
LaunchConfig SearchSpace::launch(const Genome& g, const Problem& p) const {
  const auto vars = variables(g, p, std::numeric_limits<int32_t>::max());
  LaunchConfig l;
  l.threads = impl_->threads.eval(vars);
  l.grid_x = impl_->grid_x.eval(vars);
  l.grid_y = impl_->grid_y.eval(vars);
  l.grid_z = impl_->grid_z.eval(vars);
  l.smem_bytes = impl_->smem_bytes.eval(vars);
  l.workspace_bytes = impl_->workspace_bytes ? impl_->workspace_bytes->eval(vars) : 0;
  l.workspace_zeroed_bytes = impl_->workspace_zeroed_bytes ? impl_->workspace_zeroed_bytes->eval(vars)
                                                           : l.workspace_bytes;
  l.tensor_map_box_rows = impl_->tensor_map_box_rows ? impl_->tensor_map_box_rows->eval(vars) : 0;
  l.tensor_map_q_box_rows = impl_->tensor_map_q_box_rows ? impl_->tensor_map_q_box_rows->eval(vars)
                                                         : l.tensor_map_box_rows;
  l.min_registers = impl_->min_registers ? impl_->min_registers->eval(vars) : 0;
  l.persistent = impl_->persistent ? impl_->persistent->eval(vars) : 0;
  return l;
}

std::string SearchSpace::kernel_name(const Genome& g, const Problem& p) const {
  const auto vars = variables(g, p, std::numeric_limits<int32_t>::max());
  const std::string& pattern = impl_->kernel_pattern;
  std::string name;
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] != '{') {
      name += pattern[i];
      continue;
    }
    size_t close = pattern.find('}', i);  // balanced: checked at load
    name += std::to_string(vars.at(pattern.substr(i + 1, close - i - 1)));
    i = close;
  }
  return name;
}

double SearchSpace::flops(const Genome& g, const Problem& p) const {
  if (!impl_->flops) return p.flops();
  return static_cast<double>(impl_->flops->eval(variables(g, p, std::numeric_limits<int32_t>::max())));
}

uint64_t SearchSpace::size() const {
  uint64_t n = 1;
  for (const auto& g : genes_) n *= g.values.size();  // bounded at load
  return n;
}

Genome SearchSpace::at(uint64_t index) const {
  if (index >= size())
    throw std::out_of_range("genome index " + std::to_string(index) + " >= space size " +
                            std::to_string(size()));
  std::vector<std::pair<std::string, int64_t>> genes(genes_.size());
  // Mixed radix, last gene fastest.
  for (size_t i = genes_.size(); i-- > 0;) {
    const auto& values = genes_[i].values;
    genes[i] = {genes_[i].name, values[index % values.size()]};
    index /= values.size();
  }
  return Genome(id_, std::move(genes), impl_->labels);
}

int sm_arch_number(std::string_view arch) {
  // "sm_90a" -> 90, "sm_100f" -> 100; anything else is unknown.
  if (arch.substr(0, 3) != "sm_") return SearchSpace::kUnknownArch;
  int n = 0;
  size_t i = 3;
  for (; i < arch.size() && arch[i] >= '0' && arch[i] <= '9' && i < 6; ++i) n = n * 10 + (arch[i] - '0');
  return i > 3 ? n : SearchSpace::kUnknownArch;
}

}  // namespace evo
