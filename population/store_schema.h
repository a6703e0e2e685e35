#pragma once
// The store's schema, as the numbered migrations that build it: entry i takes a database from
// version i to i+1, by its SQL and then, where SQL cannot say it, a function over the rows
// (store_genome_rewrite.h). A new column or table is a new migration appended here, with
// Store::kSchemaVersion one higher; one that has shipped is never edited. Store::migrate runs them
// in one transaction.
#include "store_sqlite.h"

namespace evo {

struct Migration {
  const char* sql;                                  // "" where the step is the rewrite alone
  void (*rewrite)(SqliteConnection&) = nullptr;
};

// The migration from `from_version` to the next (0 .. Store::kSchemaVersion - 1); StoreError else.
const Migration& schema_migration(int from_version);

}  // namespace evo
