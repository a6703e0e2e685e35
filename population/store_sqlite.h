#pragma once
// A thin RAII layer over the SQLite C API for the Store: one connection, prepared statements with
// bound parameters only (no SQL is ever built from values), errors as StoreError with SQLite's
// message attached.
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

struct sqlite3;
struct sqlite3_stmt;

namespace evo {

// What kind of storage problem a StoreError is, so that evod can answer with a fitting status
// (a full disk is RESOURCE_EXHAUSTED, a read-only, vanished or corrupt file UNAVAILABLE) instead of
// INTERNAL.
enum class StoreFault {
  kOther,        // a statement failed for another reason (a constraint, a bug)
  kFull,         // the disk or the database's size limit is full (SQLITE_FULL, ENOSPC, EDQUOT, EFBIG)
  kReadOnly,     // the file or its file system cannot be written
  kUnavailable,  // I/O error, a file was removed or replaced, or it cannot be opened
  kCorrupt,      // the file is not a database or its pages are damaged (SQLITE_CORRUPT, SQLITE_NOTADB)
};
const char* to_string(StoreFault fault);

// The database could not be opened, or a statement failed for a reason other than bad input.
class StoreError : public std::runtime_error {
 public:
  explicit StoreError(const std::string& what, StoreFault fault = StoreFault::kOther)
      : std::runtime_error(what), fault_(fault) {}
  StoreFault fault() const { return fault_; }

 private:
  StoreFault fault_;
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
  // Rows changed by this connection since it opened (tells a write from a read-only transaction).
  int64_t total_changes();
  // True when the file could only be opened for reading (permissions, a read-only mount).
  bool read_only();
  // Which of the connection's files is gone from its path or is another file there now (deleted,
  // renamed, replaced, its directory removed), as "database file '...'", "WAL file '...'" or
  // "shared-memory file '...'"; nullopt when none. SQLite would go on writing to the orphaned
  // inode: into a removed WAL, every commit is lost when the process ends. The WAL and -shm files
  // are known from the first call that finds them (remember_journal_files).
  std::optional<std::string> moved_file();
  // Notes which files the -wal and -shm paths name now (call once they exist: after the first write).
  void remember_journal_files();
  // Copies every committed transaction in the WAL into the database file (PRAGMA wal_checkpoint
  // (FULL)) through the files the connection holds open; true when all of it was copied.
  bool checkpoint();
  // PRAGMA quick_check: empty when the file is sound, else SQLite's first problem lines (at most
  // max_lines) and, when there are more, a last line "N more". Throws StoreError when the file
  // cannot even be read that far.
  std::vector<std::string> quick_check(int max_lines);
  // Closing the last connection of a WAL database copies the WAL into the file; this one will not
  // (for a file evod refuses: it must be left as it was found).
  void leave_file_untouched_on_close();
  // Caps the database at max_bytes (rounded down to whole pages); writes beyond it fail as full.
  void limit_size(int64_t max_bytes);

 private:
  // A file's identity (device and inode), 0/0 while not known yet.
  struct FileId {
    uint64_t dev = 0, ino = 0;
    bool known() const { return dev != 0 || ino != 0; }
    bool operator==(const FileId& o) const { return dev == o.dev && ino == o.ino; }
  };

  sqlite3* db_ = nullptr;
  std::string path_;
  FileId wal_, shm_;
};

}  // namespace evo
