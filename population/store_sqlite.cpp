#include "store_sqlite.h"

#include <sqlite3.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <sstream>
#include <utility>

#include <sys/stat.h>

namespace evo {

namespace {

StoreFault fault_of(sqlite3* db) {
  if (!db) return StoreFault::kOther;
  int primary = sqlite3_extended_errcode(db) & 0xff;
  int sys = sqlite3_system_errno(db);
  // A write the OS refused for lack of room comes back as SQLITE_FULL or as an I/O error whose
  // errno says why; both are a full disk to the person who has to free space.
  if (primary == SQLITE_FULL || (primary == SQLITE_IOERR && (sys == ENOSPC || sys == EDQUOT || sys == EFBIG)))
    return StoreFault::kFull;
  if (primary == SQLITE_READONLY || (primary == SQLITE_IOERR && sys == EROFS)) return StoreFault::kReadOnly;
  if (primary == SQLITE_CORRUPT || primary == SQLITE_NOTADB) return StoreFault::kCorrupt;
  if (primary == SQLITE_IOERR || primary == SQLITE_CANTOPEN) return StoreFault::kUnavailable;
  return StoreFault::kOther;
}

// SQLite's message, plus the OS's reason when a system call failed ("disk I/O error (File too large)").
std::string message_of(sqlite3* db) {
  if (!db) return "out of memory";
  std::string msg = sqlite3_errmsg(db);
  int primary = sqlite3_extended_errcode(db) & 0xff;
  int sys = sqlite3_system_errno(db);
  if (sys != 0 && (primary == SQLITE_IOERR || primary == SQLITE_CANTOPEN || primary == SQLITE_FULL))
    msg += std::string(" (") + std::strerror(sys) + ")";
  return msg;
}

[[noreturn]] void fail(sqlite3* db, const std::string& what) {
  throw StoreError(what + ": " + message_of(db), fault_of(db));
}

}  // namespace

const char* to_string(StoreFault fault) {
  switch (fault) {
    case StoreFault::kOther: return "other";
    case StoreFault::kFull: return "full";
    case StoreFault::kReadOnly: return "read_only";
    case StoreFault::kUnavailable: return "unavailable";
    case StoreFault::kCorrupt: return "corrupt";
  }
  return "other";
}

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

SqliteConnection::SqliteConnection(const std::string& path) : path_(path) {
  // No SQLITE_OPEN_CREATE of directories exists: a missing directory fails here, and the Store
  // checks for it first to give the person a better line than "unable to open database file".
  int rc = sqlite3_open_v2(path.c_str(), &db_,
                           SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX, nullptr);
  if (rc != SQLITE_OK) {
    std::string msg = message_of(db_);
    StoreFault fault = db_ ? fault_of(db_) : StoreFault::kOther;
    sqlite3_close(db_);
    db_ = nullptr;
    throw StoreError("cannot open database '" + path + "': " + msg, fault);
  }
}

SqliteConnection::~SqliteConnection() { sqlite3_close(db_); }

int64_t SqliteConnection::last_insert_rowid() { return sqlite3_last_insert_rowid(db_); }

int64_t SqliteConnection::total_changes() { return sqlite3_total_changes64(db_); }

void SqliteConnection::exec(const char* sql) {
  char* err = nullptr;
  if (sqlite3_exec(db_, sql, nullptr, nullptr, &err) != SQLITE_OK) {
    std::string msg = err ? err : "unknown error";
    sqlite3_free(err);
    StoreFault fault = fault_of(db_);
    int sys = sqlite3_system_errno(db_);
    if (sys != 0 && fault != StoreFault::kOther) msg += std::string(" (") + std::strerror(sys) + ")";
    throw StoreError(std::string("exec: ") + msg, fault);
  }
}

bool SqliteConnection::read_only() { return sqlite3_db_readonly(db_, "main") == 1; }

namespace {

// What a path names now; nullopt when nothing is there.
std::optional<std::pair<uint64_t, uint64_t>> identity_of(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return std::nullopt;
  return std::make_pair(static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino));
}

}  // namespace

void SqliteConnection::remember_journal_files() {
  for (auto [suffix, id] : {std::make_pair("-wal", &wal_), std::make_pair("-shm", &shm_)}) {
    if (id->known()) continue;
    if (auto now = identity_of(path_ + suffix)) *id = FileId{now->first, now->second};
  }
}

std::optional<std::string> SqliteConnection::moved_file() {
  int moved = 0;
  // The unix VFS answers by comparing the open file's inode with what the path names now.
  if (sqlite3_file_control(db_, "main", SQLITE_FCNTL_HAS_MOVED, &moved) == SQLITE_OK && moved != 0)
    return "database file '" + path_ + "'";
  // SQLite keeps the WAL and -shm open for the connection's life and never replaces them, so
  // another file (or none) at their paths means someone else removed or replaced them.
  remember_journal_files();
  const struct {
    const char* what;
    const char* suffix;
    const FileId& id;
  } journal[] = {{"WAL file", "-wal", wal_}, {"shared-memory file", "-shm", shm_}};
  for (const auto& j : journal) {
    if (!j.id.known()) continue;
    auto now = identity_of(path_ + j.suffix);
    if (!now || !(FileId{now->first, now->second} == j.id))
      return std::string(j.what) + " '" + path_ + j.suffix + "'";
  }
  return std::nullopt;
}

bool SqliteConnection::checkpoint() {
  auto s = prepare("PRAGMA wal_checkpoint(FULL)");
  // One row: busy (1 when it could not finish), frames in the WAL, frames copied.
  if (!s.step()) return false;
  return s.column_int(0) == 0 && s.column_int(1) == s.column_int(2);
}

std::vector<std::string> SqliteConnection::quick_check(int max_lines) {
  auto s = prepare("PRAGMA quick_check");
  std::vector<std::string> problems;
  int more = 0;
  try {
    while (s.step()) {
      // A row may hold several lines, the first naming the schema ("*** in database main ***").
      std::istringstream row(s.column_text(0));
      for (std::string line; std::getline(row, line);) {
        if (line == "ok" || line.empty() || line.rfind("*** in database", 0) == 0) continue;
        if (static_cast<int>(problems.size()) < max_lines) problems.push_back(line);
        else ++more;
      }
    }
  } catch (const StoreError& e) {
    // A page so damaged that the check itself stops ("database disk image is malformed").
    if (e.fault() != StoreFault::kCorrupt) throw;
    problems.push_back(sqlite3_errmsg(db_));
  }
  if (more > 0) problems.push_back(std::to_string(more) + " more");
  return problems;
}

void SqliteConnection::leave_file_untouched_on_close() {
  sqlite3_db_config(db_, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, nullptr);
}

void SqliteConnection::limit_size(int64_t max_bytes) {
  auto s = prepare("PRAGMA page_size");
  int64_t page = s.step() ? s.column_int(0) : 4096;
  // PRAGMA takes no bound parameters; the value is a number computed here, never text from outside.
  std::string sql = "PRAGMA max_page_count = " + std::to_string(std::max<int64_t>(1, max_bytes / page));
  exec(sql.c_str());
}

}  // namespace evo
