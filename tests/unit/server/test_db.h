#pragma once
// A fresh database file in a temporary directory per test, removed afterwards; a table of one
// damaged on purpose.
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>

#include "store_sqlite.h"

namespace evo::test {

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "evo-server-test-XXXXXX").string();
    path_ = mkdtemp(tmpl.data());
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// Overwrites the first page of `table` (4096-byte pages) in the closed database file with garbage:
// the table's own root page, read from sqlite_master, not a guess at where it lies.
inline void damage_table(const std::string& path, const char* table) {
  int64_t page = 0;
  {
    SqliteConnection db(path);
    auto s = db.prepare("SELECT rootpage FROM sqlite_master WHERE name = ?");
    s.bind(1, table);
    if (!s.step()) throw std::runtime_error(std::string("no table ") + table + " in " + path);
    page = s.column_int(0);
  }
  std::fstream f(path, std::ios::binary | std::ios::in | std::ios::out);
  f.seekp(static_cast<std::streamoff>(page - 1) * 4096);
  const std::string garbage(4096, '\xff');
  f.write(garbage.data(), static_cast<std::streamsize>(garbage.size()));
}

}  // namespace evo::test
