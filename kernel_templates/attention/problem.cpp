#include "attention/problem.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <iterator>
#include <stdexcept>

#include "errors.h"

namespace evo::attention {
namespace {

constexpr int64_t kMaxDim = int64_t{1} << 20;
constexpr int64_t kMaxElements = int64_t{1} << 31;

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

[[noreturn]] void fail(std::string_view text, const std::string& why) {
  throw InputError("malformed shape '" + std::string(text) + "': " + why);
}

// One dimension: decimal digits only (no sign, no spaces), 1..2^20.
int parse_dim(std::string_view whole, std::string_view part, const char* what) {
  if (part.empty()) fail(whole, std::string("empty ") + what);
  for (char c : part)
    if (!std::isdigit(static_cast<unsigned char>(c)))
      fail(whole, std::string(what) + " '" + std::string(part) + "' is not a positive integer");
  int64_t v = 0;
  auto [end, ec] = std::from_chars(part.data(), part.data() + part.size(), v);
  if (ec != std::errc() || end != part.data() + part.size() || v > kMaxDim)
    fail(whole, std::string(what) + " " + std::string(part) + " exceeds 2^20 (1048576)");
  if (v < 1) fail(whole, std::string(what) + " must be at least 1");
  return static_cast<int>(v);
}

// Elements of a [b, h, s, d] tensor, or kMaxElements once it reaches that (no overflow: each
// factor is at most 2^20 and the running product stays under 2^31 before each multiply).
int64_t elements(int64_t b, int64_t h, int64_t s, int64_t d) {
  int64_t n = 1;
  for (int64_t f : {b, h, s, d}) {
    n *= f;
    if (n >= kMaxElements) return kMaxElements;
  }
  return n;
}

struct DTypeName {
  DType dtype;
  std::string_view name;
};
constexpr DTypeName kDTypes[] = {{DType::kF16, "fp16"}, {DType::kBF16, "bf16"}, {DType::kE4M3, "e4m3"}};

const DTypeName* find_dtype(std::string_view name) {
  for (const auto& d : kDTypes)
    if (d.name == name) return &d;
  return nullptr;
}

// "fp16, bf16 or e4m3"
std::string dtype_choices() {
  std::string out;
  for (size_t i = 0; i < std::size(kDTypes); ++i) {
    if (i > 0) out += i + 1 == std::size(kDTypes) ? " or " : ", ";
    out += kDTypes[i].name;
  }
  return out;
}

// ":kv8"'s 8, or 0 where the suffix is not "kv" and digits.
int kv_heads_suffix(std::string_view whole, std::string_view suffix) {
  if (suffix.size() < 3 || suffix.substr(0, 2) != "kv" || !std::isdigit(static_cast<unsigned char>(suffix[2])))
    return 0;
  return parse_dim(whole, suffix.substr(2), "K/V heads");
}

// The suffixes after the dimensions, ":causal:bf16" without its first colon: sets what they name.
// Returns the K/V heads a ":kvN" names, 0 where none does.
int parse_suffixes(std::string_view whole, std::string_view suffixes, Shape& shape) {
  bool mask_named = false, dtype_named = false;
  int heads_kv = 0;
  while (true) {
    const size_t colon = suffixes.find(':');
    const std::string_view suffix = suffixes.substr(0, colon);
    if (const int kv = kv_heads_suffix(whole, suffix); kv > 0) {
      if (heads_kv > 0) fail(whole, "more than one ':kv' suffix");
      heads_kv = kv;
    } else if (suffix == "causal" || suffix == "nc") {
      if (mask_named) fail(whole, "more than one of ':causal' and ':nc'");
      mask_named = true;
      shape.causal = suffix == "causal";
    } else if (const DTypeName* d = find_dtype(suffix)) {
      if (dtype_named) fail(whole, "more than one dtype suffix");
      dtype_named = true;
      shape.dtype = d->dtype;
    } else if (!suffix.empty() && std::isdigit(static_cast<unsigned char>(suffix.back()))) {
      throw InputError("unknown dtype '" + std::string(suffix) + "' in shape '" + std::string(whole) +
                       "': expected " + dtype_choices());
    } else {
      fail(whole, "unknown suffix ':" + std::string(suffix) + "' (expected ':causal', ':nc', ':kvN' or a dtype: " +
                      dtype_choices() + ")");
    }
    if (colon == std::string_view::npos) return heads_kv;
    suffixes.remove_prefix(colon + 1);
  }
}


constexpr size_t kMaxPackedSequences = 4096;

// "17+300/4096": each item one sequence, "L" (as many keys as queries) or "Lq/Lk". ('+', not ',':
// a run's shapes are stored and listed comma-separated.)
void parse_lengths(std::string_view whole, std::string_view list, Shape& shape) {
  std::vector<int> queries, keys;
  size_t start = 0;
  while (true) {
    const size_t plus = list.find('+', start);
    const std::string_view item = list.substr(start, plus == std::string_view::npos ? plus : plus - start);
    const size_t slash = item.find('/');
    const int q = parse_dim(whole, item.substr(0, slash), "sequence length");
    queries.push_back(q);
    keys.push_back(slash == std::string_view::npos ? q : parse_dim(whole, item.substr(slash + 1), "key length"));
    if (queries.size() > kMaxPackedSequences)
      fail(whole, "a packed batch holds at most " + std::to_string(kMaxPackedSequences) + " sequences");
    if (plus == std::string_view::npos) break;
    start = plus + 1;
  }
  shape.pack(std::move(queries), std::move(keys));
}

}  // namespace

Problem to_problem(const Shape& s) {
  // A packed batch's extents: the query lengths, then the key lengths.
  std::vector<int64_t> extents(s.lens_q.begin(), s.lens_q.end());
  extents.insert(extents.end(), s.lens_k.begin(), s.lens_k.end());
  return Problem(family(),
                 {s.batch, s.heads, s.kv_heads(), s.seq_q, s.seq_k, s.head_dim, s.causal ? 1 : 0,
                  static_cast<int64_t>(s.dtype), s.varlen() ? 1 : 0},
                 std::move(extents));
}

Shape shape_of(const Problem& p) {
  if (&p.family() != &family())
    throw std::invalid_argument("a " + std::string(p.family().id) + " problem is not an attention shape");
  const auto& v = p.values();  // in family.cpp's variable order
  Shape s;
  s.batch = static_cast<int>(v[0]);
  s.heads = static_cast<int>(v[1]);
  s.heads_kv = static_cast<int>(v[2]);
  s.seq_q = static_cast<int>(v[3]);
  s.seq_k = static_cast<int>(v[4]);
  s.head_dim = static_cast<int>(v[5]);
  s.causal = v[6] != 0;
  s.dtype = static_cast<DType>(v[7]);
  const auto& e = p.extents();
  const size_t n = e.size() / 2;
  s.lens_q.assign(e.begin(), e.begin() + static_cast<long>(n));
  s.lens_k.assign(e.begin() + static_cast<long>(n), e.end());
  return s;
}

std::string_view dtype_name(DType d) {
  for (const auto& n : kDTypes)
    if (n.dtype == d) return n.name;
  return "unknown";
}

DType parse_dtype(std::string_view name) {
  if (const DTypeName* d = find_dtype(name)) return d->dtype;
  throw InputError("unknown dtype '" + std::string(name) + "': expected " + dtype_choices());
}

void Shape::pack(std::vector<int> queries, std::vector<int> keys) {
  if (queries.size() != keys.size() || queries.empty())
    throw std::invalid_argument("a packed batch needs as many key lengths as query lengths, at least one");
  lens_q = std::move(queries);
  lens_k = std::move(keys);
  batch = static_cast<int>(lens_q.size());
  seq_q = *std::max_element(lens_q.begin(), lens_q.end());
  seq_k = *std::max_element(lens_k.begin(), lens_k.end());
}

long long Shape::total_q() const {
  if (!varlen()) return static_cast<long long>(batch) * seq_q;
  long long n = 0;
  for (int l : lens_q) n += l;
  return n;
}

long long Shape::total_k() const {
  if (!varlen()) return static_cast<long long>(batch) * seq_k;
  long long n = 0;
  for (int l : lens_k) n += l;
  return n;
}

std::string Shape::text() const {
  std::string t;
  if (varlen()) {
    for (size_t i = 0; i < lens_q.size(); ++i) {
      if (i > 0) t += "+";
      t += std::to_string(lens_q[i]);
      // (One sequence of equal lengths prints both: a list says it is one by a '+' or a '/'.)
      if (lens_k[i] != lens_q[i] || lens_q.size() == 1) t += "/" + std::to_string(lens_k[i]);
    }
  } else {
    t = std::to_string(batch) + "x" + std::to_string(heads) + "x" + std::to_string(seq_q);
    if (seq_k != seq_q) t += "x" + std::to_string(seq_k);
  }
  if (varlen()) t += "x" + std::to_string(heads);
  t += "x" + std::to_string(head_dim);
  if (kv_heads() != heads) t += ":kv" + std::to_string(kv_heads());
  if (causal) t += ":causal";
  if (dtype != DType::kF16) t += ":" + std::string(dtype_name(dtype));
  return t;
}

double Shape::flops() const {
  auto pairs = [&](double sq, double sk) { return causal ? sq * sk - sq * sq / 2 : sq * sk; };
  double all = 0;
  if (varlen()) {
    for (size_t i = 0; i < lens_q.size(); ++i) all += pairs(lens_q[i], lens_k[i]);
  } else {
    all = batch * pairs(seq_q, seq_k);
  }
  return 4.0 * heads * head_dim * all;
}

double Shape::bytes_moved() const {
  const double in = input_bytes(dtype), out = input_bytes(output_dtype(dtype));
  return head_dim * ((in + out) * heads * static_cast<double>(total_q()) +
                     2.0 * in * kv_heads() * static_cast<double>(total_k()));
}

Shape parse_shape(std::string_view text, bool causal_default, DType dtype_default) {
  const std::string_view whole = text;
  text = trim(text);
  Shape shape;
  shape.causal = causal_default;
  shape.dtype = dtype_default;

  int heads_kv = 0;
  if (auto colon = text.find(':'); colon != std::string_view::npos) {
    heads_kv = parse_suffixes(whole, text.substr(colon + 1), shape);
    text = text.substr(0, colon);
  }

  std::vector<std::string_view> parts;
  size_t start = 0;
  while (true) {
    size_t x = text.find('x', start);
    parts.push_back(text.substr(start, x == std::string_view::npos ? x : x - start));
    if (x == std::string_view::npos) break;
    start = x + 1;
  }
  // A packed batch's list holds a '+' or a '/' (one sequence: "3000/3000"), so that "1x8x512" stays
  // a shape with a dimension left out, not a batch of one token.
  const bool packed = parts.size() == 3 && parts[0].find_first_of("+/") != std::string_view::npos;
  if (!packed && parts.size() != 4 && parts.size() != 5)
    fail(whole, "expected BxHxSxD, BxHxSqxSkxD or LENSxHxD (a packed batch's lengths, '17+300/4096')");

  if (packed) {
    parse_lengths(whole, parts[0], shape);
    shape.heads = parse_dim(whole, parts[1], "heads");
  } else {
    shape.batch = parse_dim(whole, parts[0], "batch");
    shape.heads = parse_dim(whole, parts[1], "heads");
    shape.seq_q = parse_dim(whole, parts[2], parts.size() == 4 ? "seq" : "seq_q");
    shape.seq_k = parts.size() == 4 ? shape.seq_q : parse_dim(whole, parts[3], "seq_k");
  }
  shape.head_dim = parse_dim(whole, parts.back(), "head_dim");
  shape.heads_kv = heads_kv > 0 ? heads_kv : shape.heads;
  if (shape.heads % shape.heads_kv != 0)
    fail(whole, "K/V heads " + std::to_string(shape.heads_kv) + " do not divide the " + std::to_string(shape.heads) +
                    " query heads");

  const int64_t longest = std::max(shape.seq_q, shape.seq_k);
  if (elements(shape.batch, shape.heads, longest, shape.head_dim) >= kMaxElements ||
      elements(std::max(shape.total_q(), shape.total_k()), shape.heads, 1, shape.head_dim) >= kMaxElements)
    fail(whole, "a tensor of this shape has 2^31 elements or more");
  return shape;
}

void require_servable_causal(const Shape& shape, std::string_view text) {
  if (!shape.causal) return;
  auto refuse = [&](int q, int k, const std::string& which) {
    throw InputError("shape '" + std::string(text) + "': causal needs seq_q <= seq_k" + which + " (" +
                     std::to_string(q) + " > " + std::to_string(k) +
                     ": the diagonal is aligned bottom-right, so the first rows would see no key)");
  };
  if (!shape.varlen() && shape.seq_q > shape.seq_k) refuse(shape.seq_q, shape.seq_k, "");
  for (size_t i = 0; i < shape.lens_q.size(); ++i)
    if (shape.lens_q[i] > shape.lens_k[i]) refuse(shape.lens_q[i], shape.lens_k[i], " in sequence " + std::to_string(i));
}



std::string workload_group(const Shape& s) {
  const char* phase = s.seq_q <= kDecodeMaxQueries && s.seq_q < s.seq_k ? "decode"
                      : s.seq_q < s.seq_k                                 ? "chunk"
                                                                          : "prefill";
  return "heads " + std::to_string(s.heads) + "/" + std::to_string(s.kv_heads()) + ", head dim " +
         std::to_string(s.head_dim) + ", " + (s.causal ? "causal" : "non-causal") + ", " +
         std::string(dtype_name(s.dtype)) + ", " + phase + (s.varlen() ? " (packed)" : "");
}

double shape_distance(const Shape& a, const Shape& b) {
  auto log_ratio = [](int x, int y) { return std::fabs(std::log(static_cast<double>(x) / y)); };
  return log_ratio(a.batch, b.batch) + log_ratio(a.seq_q, b.seq_q) + log_ratio(a.seq_k, b.seq_k);
}

v1::Shape shape_to_proto(const Shape& p) {
  v1::Shape s;
  s.set_batch(p.batch);
  s.set_heads(p.heads);
  // Equal heads travel as 0, as a peer from before grouped queries sends them.
  s.set_heads_kv(p.kv_heads() == p.heads ? 0 : p.kv_heads());
  s.set_seq_q(p.seq_q);
  s.set_seq_k(p.seq_k);
  s.set_head_dim(p.head_dim);
  s.set_causal(p.causal);
  s.set_dtype(dtype_to_proto(p.dtype));
  for (int l : p.lens_q) s.add_seq_lens_q(l);
  for (int l : p.lens_k) s.add_seq_lens_k(l);
  return s;
}

Shape shape_from_proto(const v1::Shape& s) {
  Shape p;
  p.batch = s.batch();
  p.heads = s.heads();
  p.heads_kv = s.heads_kv() == 0 ? s.heads() : s.heads_kv();
  if (p.heads_kv < 0 || p.heads_kv > p.heads || (p.heads_kv > 0 && p.heads % p.heads_kv != 0))
    throw InputError("K/V heads " + std::to_string(p.heads_kv) + " do not divide the " + std::to_string(p.heads) +
                     " query heads");
  p.seq_q = s.seq_q();
  p.seq_k = s.seq_k();
  p.head_dim = s.head_dim();
  p.causal = s.causal();
  p.dtype = dtype_from_proto(s.dtype());
  if (s.seq_lens_q_size() > 0 || s.seq_lens_k_size() > 0) {
    if (s.seq_lens_q_size() != s.seq_lens_k_size() || s.seq_lens_q_size() > static_cast<int>(kMaxPackedSequences))
      throw InputError("a packed batch has " + std::to_string(s.seq_lens_q_size()) + " query lengths and " +
                       std::to_string(s.seq_lens_k_size()) + " key lengths: expected as many, at most " +
                       std::to_string(kMaxPackedSequences));
    for (int l : s.seq_lens_q())
      if (l < 1) throw InputError("a packed batch's sequence lengths are at least 1");
    for (int l : s.seq_lens_k())
      if (l < 1) throw InputError("a packed batch's key lengths are at least 1");
    p.pack({s.seq_lens_q().begin(), s.seq_lens_q().end()}, {s.seq_lens_k().begin(), s.seq_lens_k().end()});
  }
  return p;
}

v1::DType dtype_to_proto(DType d) {
  switch (d) {
    case DType::kBF16:
      return v1::DTYPE_BF16;
    case DType::kE4M3:
      return v1::DTYPE_E4M3;
    case DType::kF16:
      break;
  }
  return v1::DTYPE_FP16;
}

DType dtype_from_proto(v1::DType d) {
  switch (d) {
    case v1::DTYPE_FP16:
      return DType::kF16;
    case v1::DTYPE_BF16:
      return DType::kBF16;
    case v1::DTYPE_E4M3:
      return DType::kE4M3;
    default:
      // An enum value from a newer peer: proto3 keeps it, and guessing fp16 would tune, time or
      // export the wrong kernel.
      throw InputError("unknown dtype " + std::to_string(static_cast<int>(d)) + ": expected " + dtype_choices());
  }
}

}  // namespace evo::attention
