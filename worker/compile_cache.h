#pragma once
// On-disk cache of compiled kernels: <key>.cubin plus a <key>.json sidecar (lowered name,
// resources, options, the cubin's size and hash, the SASS verdict). Files are written to a unique temp name and
// renamed into place, so concurrent writers (threads or processes) never expose half a file; a
// sidecar that does not parse or a cubin that does not match it is a miss, never trusted.
#include <optional>
#include <string>
#include <string_view>

#include "evo/evo.pb.h"
#include "sass_check.h"

namespace evo {

struct CacheEntry {
  std::string cubin_path;
  std::string lowered_name;
  std::string name_expression;
  std::string options;
  v1::ResourceReport resources;
  // Gate 3's reading of the cubin's SASS, kept so that a cache hit needs no cuobjdump run; absent
  // until judged, and never kept when it was "skipped" (no cuobjdump then, maybe one later).
  std::optional<SassVerdict> tensor_cores;
};

class CompileCache {
 public:
  // Creates the directory if needed; throws std::runtime_error (one line) if it cannot.
  explicit CompileCache(std::string dir);

  const std::string& dir() const { return dir_; }

  // fnv1a over every input that changes the cubin.
  static std::string key(std::string_view source, std::string_view name_expression,
                         std::string_view arch, std::string_view nvrtc_version,
                         std::string_view options);

  // nullopt on a miss or a corrupt entry (logged once as a warning).
  std::optional<CacheEntry> load(const std::string& key) const;
  // Writes the entry atomically and returns it with cubin_path set. Throws std::runtime_error if
  // the directory is not writable.
  CacheEntry store(const std::string& key, std::string_view cubin, CacheEntry entry) const;

  std::string cubin_path(const std::string& key) const;
  std::string sidecar_path(const std::string& key) const;

 private:
  std::string dir_;
};

}  // namespace evo
