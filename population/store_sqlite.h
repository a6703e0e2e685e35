#pragma once
// A thin RAII layer over the SQLite C API for the Store: one connection, prepared statements with
// bound parameters only (no SQL is ever built from values), errors as StoreError with SQLite's
// message attached.
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

struct sqlite3;
struct sqlite3_stmt;

namespace evo {

// The database could not be opened, or a statement failed for a reason other than bad input.
class StoreError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class SqliteStatement {
 public:
  SqliteStatement(sqlite3* db, std::string_view sql);
  ~SqliteStatement();
  SqliteStatement(const SqliteStatement&) = delete;
  SqliteStatement& operator=(const SqliteStatement&) = delete;

  // Parameters are 1-based, as in SQLite. Each returns *this so that binds chain.
  SqliteStatement& bind(int index, int64_t value);
  SqliteStatement& bind(int index, int value) { return bind(index, static_cast<int64_t>(value)); }
  SqliteStatement& bind(int index, bool value) { return bind(index, static_cast<int64_t>(value)); }
  SqliteStatement& bind(int index, double value);
  SqliteStatement& bind(int index, std::string_view text);
  SqliteStatement& bind(int index, const char* text) { return bind(index, std::string_view(text)); }
  SqliteStatement& bind(int index, const std::string& text) { return bind(index, std::string_view(text)); }
  SqliteStatement& bind_blob(int index, const std::string& bytes);
  SqliteStatement& bind_null(int index);
  SqliteStatement& bind(int index, const std::optional<double>& value);

  // true while a row is available; false once done. Throws StoreError on failure (a unique
  // constraint included: callers check for duplicates first).
  bool step();
  // Runs a statement that returns no rows.
  void run();

  int column_count() const;
  int64_t column_int(int column) const;
  double column_double(int column) const;
  std::string column_text(int column) const;
  std::string column_blob(int column) const;
  bool column_is_null(int column) const;
  std::optional<double> column_optional_double(int column) const;

 private:
  sqlite3* db_;
  sqlite3_stmt* stmt_ = nullptr;
};

class SqliteConnection {
 public:
  // Opens (creating the file, never the directory) the database at path.
  explicit SqliteConnection(const std::string& path);
  ~SqliteConnection();
  SqliteConnection(const SqliteConnection&) = delete;
  SqliteConnection& operator=(const SqliteConnection&) = delete;

  SqliteStatement prepare(std::string_view sql) { return SqliteStatement(db_, sql); }
  // For fixed statements with no parameters only (pragmas, schema).
  void exec(const char* sql);
  int64_t last_insert_rowid();

 private:
  sqlite3* db_ = nullptr;
};

}  // namespace evo
