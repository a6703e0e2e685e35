#pragma once
// Rewriting stored genome texts after a search space changed how genomes are spelled (schema 4 ->
// 5: fa_s512_v3's six boolean schedule genes became one SCHEDULE gene). Part of the Store's
// migration, inside its transaction.
#include "store_sqlite.h"

namespace evo {

// Every stored genome text (candidates, their parents, runs' start genomes) becomes its canonical
// text today, read through the run's search space (SearchSpace::parse translates retired genes),
// and every stored hash of it (candidates, the result cache) that text's hash. A genome that no longer
// parses keeps its row and its old text and is logged: it leaves the leaderboard (not elite
// eligible), a candidate not yet done is closed as INVALID with its active leases expired, its run
// fails naming it unless it already ended, and a start genome is dropped from its run's list.
// Runs of a template this build does not know are left as they are.
void rewrite_genome_texts(SqliteConnection& db);

}  // namespace evo
