#include "compile_cache.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>

#include "template_registry.h"
#include "wire_labels.h"

namespace evo {
namespace fs = std::filesystem;
namespace {

std::optional<std::string> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// A name no other thread or process uses at the same time: pid + a per-process counter.
std::string unique_temp_path(const std::string& final_path) {
  static std::atomic<unsigned long> counter{0};
  return final_path + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter++);
}

void write_atomically(const std::string& path, std::string_view bytes) {
  const std::string tmp = unique_temp_path(path);
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw std::runtime_error("cannot write compile cache file " + tmp + ": " +
                                       std::strerror(errno));
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    out.flush();
    if (!out) {
      std::remove(tmp.c_str());
      throw std::runtime_error("cannot write compile cache file " + tmp);
    }
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);  // atomic on POSIX: readers see the old file or the whole new one
  if (ec) {
    std::remove(tmp.c_str());
    throw std::runtime_error("cannot rename " + tmp + " into the compile cache: " + ec.message());
  }
}

nlohmann::json resources_to_json(const v1::ResourceReport& r) {
  return {{"registers", r.registers()},
          {"spill_store_bytes", r.spill_store_bytes()},
          {"spill_load_bytes", r.spill_load_bytes()},
          {"stack_frame_bytes", r.stack_frame_bytes()},
          {"static_smem_bytes", r.static_smem_bytes()},
          {"ptxas_log", r.ptxas_log()}};
}

v1::ResourceReport resources_from_json(const nlohmann::json& j) {
  v1::ResourceReport r;
  r.set_registers(j.at("registers").get<int>());
  r.set_spill_store_bytes(j.at("spill_store_bytes").get<int>());
  r.set_spill_load_bytes(j.at("spill_load_bytes").get<int>());
  r.set_stack_frame_bytes(j.at("stack_frame_bytes").get<int>());
  r.set_static_smem_bytes(j.at("static_smem_bytes").get<int>());
  r.set_ptxas_log(j.at("ptxas_log").get<std::string>());
  return r;
}

}  // namespace

CompileCache::CompileCache(std::string dir) : dir_(std::move(dir)) {
  std::error_code ec;
  fs::create_directories(dir_, ec);
  if (ec || !fs::is_directory(dir_))
    throw std::runtime_error("cannot create compile cache directory '" + dir_ +
                             "': " + (ec ? ec.message() : "not a directory") +
                             " (set --cache-dir or EVO_CACHE_DIR)");
}

std::string CompileCache::key(std::string_view source, std::string_view name_expression,
                              std::string_view arch, std::string_view nvrtc_version,
                              std::string_view options) {
  // Hash the source separately so that the key text stays small; fields are separated by a byte
  // that none of them contains.
  std::string material = fnv1a_hex(source);
  for (std::string_view part : {name_expression, arch, nvrtc_version, options}) {
    material += '\x1f';
    material += part;
  }
  return fnv1a_hex(material);
}

std::string CompileCache::cubin_path(const std::string& key) const {
  return (fs::path(dir_) / (key + ".cubin")).string();
}
std::string CompileCache::sidecar_path(const std::string& key) const {
  return (fs::path(dir_) / (key + ".json")).string();
}

std::optional<CacheEntry> CompileCache::load(const std::string& key) const {
  const auto sidecar = read_file(sidecar_path(key));
  if (!sidecar) return std::nullopt;  // plain miss
  try {
    const auto j = nlohmann::json::parse(*sidecar);
    const auto cubin = read_file(cubin_path(key));
    if (!cubin) throw std::runtime_error("cubin missing");
    if (cubin->size() != j.at("cubin_bytes").get<size_t>() ||
        fnv1a_hex(*cubin) != j.at("cubin_fnv1a").get<std::string>())
      throw std::runtime_error("cubin does not match its sidecar");
    CacheEntry e;
    e.cubin_path = cubin_path(key);
    e.lowered_name = j.at("lowered_name").get<std::string>();
    e.name_expression = j.at("name_expression").get<std::string>();
    e.options = j.at("options").get<std::string>();
    e.resources = resources_from_json(j.at("resources"));
    // (A verdict without its counts, from before the counts were kept, is read again.)
    if (j.contains("tensor_cores") && j.at("tensor_cores").contains("ops")) {
      const auto& t = j.at("tensor_cores");
      const auto verdict = t.at("verdict").get<std::string>();  // its label: the sidecar is text
      const auto parsed = parse_label<v1::Verdict>(verdict);
      if (parsed != v1::VERDICT_PASSED && parsed != v1::VERDICT_FAILED)
        throw std::runtime_error("SASS verdict '" + verdict + "'");
      e.tensor_cores = SassVerdict{*parsed, t.at("detail").get<std::string>(), t.at("ops").get<TensorCoreOps>()};
    }
    if (e.lowered_name.empty()) throw std::runtime_error("empty lowered name");
    return e;
  } catch (const std::exception& ex) {
    spdlog::warn("event=compile_cache_corrupt key={} error=\"{}\" recompiling", key, ex.what());
    return std::nullopt;
  }
}

CacheEntry CompileCache::store(const std::string& key, std::string_view cubin,
                               CacheEntry entry) const {
  entry.cubin_path = cubin_path(key);
  nlohmann::json j = {{"lowered_name", entry.lowered_name},
                      {"name_expression", entry.name_expression},
                      {"options", entry.options},
                      {"cubin_bytes", cubin.size()},
                      {"cubin_fnv1a", fnv1a_hex(cubin)},
                      {"resources", resources_to_json(entry.resources)}};
  if (entry.tensor_cores && entry.tensor_cores->verdict != v1::VERDICT_SKIPPED)
    j["tensor_cores"] = {{"verdict", label(entry.tensor_cores->verdict)},
                         {"detail", entry.tensor_cores->detail},
                         {"ops", entry.tensor_cores->ops}};
  // Cubin first: a sidecar in place always describes a complete cubin. A concurrent writer of the
  // same key writes identical bytes, so whichever rename lands last is equally right.
  write_atomically(entry.cubin_path, cubin);
  write_atomically(sidecar_path(key), j.dump(1));
  return entry;
}

}  // namespace evo
