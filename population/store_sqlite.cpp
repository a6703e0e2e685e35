#include "store_sqlite.h"

#include <sqlite3.h>

namespace evo {

namespace {
[[noreturn]] void fail(sqlite3* db, const std::string& what) {
  throw StoreError(what + ": " + (db ? sqlite3_errmsg(db) : "out of memory"));
}
}  // namespace

SqliteStatement::SqliteStatement(sqlite3* db, std::string_view sql) : db_(db) {
  if (sqlite3_prepare_v2(db_, sql.data(), static_cast<int>(sql.size()), &stmt_, nullptr) != SQLITE_OK)
    fail(db_, "prepare '" + std::string(sql.substr(0, 60)) + "'");
}

SqliteStatement::~SqliteStatement() { sqlite3_finalize(stmt_); }

SqliteStatement& SqliteStatement::bind(int index, int64_t value) {
  if (sqlite3_bind_int64(stmt_, index, value) != SQLITE_OK) fail(db_, "bind");
  return *this;
}
SqliteStatement& SqliteStatement::bind(int index, double value) {
  if (sqlite3_bind_double(stmt_, index, value) != SQLITE_OK) fail(db_, "bind");
  return *this;
}
SqliteStatement& SqliteStatement::bind(int index, std::string_view text) {
  if (sqlite3_bind_text(stmt_, index, text.data(), static_cast<int>(text.size()), SQLITE_TRANSIENT) !=
      SQLITE_OK)
    fail(db_, "bind");
  return *this;
}
SqliteStatement& SqliteStatement::bind_blob(int index, const std::string& bytes) {
  if (sqlite3_bind_blob(stmt_, index, bytes.data(), static_cast<int>(bytes.size()), SQLITE_TRANSIENT) !=
      SQLITE_OK)
    fail(db_, "bind");
  return *this;
}
SqliteStatement& SqliteStatement::bind_null(int index) {
  if (sqlite3_bind_null(stmt_, index) != SQLITE_OK) fail(db_, "bind");
  return *this;
}
SqliteStatement& SqliteStatement::bind(int index, const std::optional<double>& value) {
  return value ? bind(index, *value) : bind_null(index);
}

bool SqliteStatement::step() {
  int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  fail(db_, "step");
}

void SqliteStatement::run() {
  while (step()) {
  }
}

int SqliteStatement::column_count() const { return sqlite3_column_count(stmt_); }
int64_t SqliteStatement::column_int(int column) const { return sqlite3_column_int64(stmt_, column); }
double SqliteStatement::column_double(int column) const { return sqlite3_column_double(stmt_, column); }
std::string SqliteStatement::column_text(int column) const {
  const unsigned char* text = sqlite3_column_text(stmt_, column);
  return text ? std::string(reinterpret_cast<const char*>(text),
                            static_cast<size_t>(sqlite3_column_bytes(stmt_, column)))
              : std::string();
}
std::string SqliteStatement::column_blob(int column) const {
  const void* data = sqlite3_column_blob(stmt_, column);
  return data ? std::string(static_cast<const char*>(data),
                            static_cast<size_t>(sqlite3_column_bytes(stmt_, column)))
              : std::string();
}
bool SqliteStatement::column_is_null(int column) const {
  return sqlite3_column_type(stmt_, column) == SQLITE_NULL;
}
std::optional<double> SqliteStatement::column_optional_double(int column) const {
  if (column_is_null(column)) return std::nullopt;
  return column_double(column);
}

SqliteConnection::SqliteConnection(const std::string& path) {
  // No SQLITE_OPEN_CREATE of directories exists: a missing directory fails here, and the Store
  // checks for it first to give the person a better line than "unable to open database file".
  int rc = sqlite3_open_v2(path.c_str(), &db_,
                           SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX, nullptr);
  if (rc != SQLITE_OK) {
    std::string msg = db_ ? sqlite3_errmsg(db_) : "out of memory";
    sqlite3_close(db_);
    db_ = nullptr;
    throw StoreError("cannot open database '" + path + "': " + msg);
  }
}

SqliteConnection::~SqliteConnection() { sqlite3_close(db_); }

int64_t SqliteConnection::last_insert_rowid() { return sqlite3_last_insert_rowid(db_); }

void SqliteConnection::exec(const char* sql) {
  char* err = nullptr;
  if (sqlite3_exec(db_, sql, nullptr, nullptr, &err) != SQLITE_OK) {
    std::string msg = err ? err : "unknown error";
    sqlite3_free(err);
    throw StoreError(std::string("exec: ") + msg);
  }
}

}  // namespace evo
