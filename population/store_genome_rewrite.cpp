#include "store_genome_rewrite.h"

#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <spdlog/spdlog.h>

#include "errors.h"
#include "evo/evo.pb.h"
#include "search_space.h"

namespace evo {

namespace {

struct RunRow {
  std::string id, seed, start_genomes;
  int64_t state = 0;
};

struct Counts {
  int candidates = 0, start_genomes = 0, cache_entries = 0, untranslatable = 0;
};

std::vector<RunRow> runs_of(SqliteConnection& db) {
  std::vector<RunRow> runs;
  auto s = db.prepare("SELECT id, seed, start_genomes, state FROM runs ORDER BY id");
  while (s.step()) runs.push_back({s.column_text(0), s.column_text(1), s.column_text(2), s.column_int(3)});
  return runs;
}

bool ended(int64_t state) {
  return state == v1::DONE || state == v1::CANCELLED || state == v1::FAILED;
}

// A candidate whose genome no longer parses: see rewrite_genome_texts.
void retire_candidate(SqliteConnection& db, const RunRow& run, const std::string& candidate_id,
                      const std::string& genome, const std::string& why) {
  spdlog::error("event=store_genome_untranslatable run_id={} candidate_id={} genome=\"{}\" error=\"{}\" "
                "(the row is kept; the candidate leaves the leaderboard)",
                run.id, candidate_id, genome, why);
  db.prepare("UPDATE candidates SET elite_eligible = 0 WHERE id = ?").bind(1, candidate_id).run();
  db.prepare("UPDATE candidates SET state = 'done', final_status = ?, lease_id = '', lease_worker = '', "
             "lease_deadline_ms = 0 WHERE id = ? AND state != 'done'")
      .bind(1, static_cast<int64_t>(v1::INVALID)).bind(2, candidate_id).run();
  db.prepare("UPDATE leases SET outcome = 'expired' WHERE candidate_id = ? AND outcome = 'active'")
      .bind(1, candidate_id).run();
  if (ended(run.state)) return;
  db.prepare("UPDATE runs SET state = ?, message = ? WHERE id = ? AND state NOT IN (?, ?, ?)")
      .bind(1, static_cast<int64_t>(v1::FAILED))
      .bind(2, "candidate " + candidate_id + "'s genome '" + genome + "' no longer parses: " + why)
      .bind(3, run.id).bind(4, static_cast<int64_t>(v1::DONE)).bind(5, static_cast<int64_t>(v1::CANCELLED))
      .bind(6, static_cast<int64_t>(v1::FAILED)).run();
}

// ';'-separated genome texts (a run's start genomes, a candidate's parents) in today's text. One
// that no longer parses is kept as it is, or dropped where `drop_bad` (then logged).
std::string rewrite_list(const std::string& list, const SearchSpace& space, bool drop_bad, const std::string& run_id,
                         Counts& counts) {
  std::string rewritten, part;
  std::istringstream in(list);
  bool first = true;
  while (std::getline(in, part, ';')) {
    std::string text;
    try {
      text = space.parse(part).text();
    } catch (const InputError& e) {
      if (drop_bad) {
        spdlog::error("event=store_start_genome_dropped run_id={} genome=\"{}\" error=\"{}\"", run_id, part, e.what());
        ++counts.untranslatable;
        continue;
      }
      text = part;
    }
    rewritten += (first ? "" : ";") + text;
    first = false;
  }
  return rewritten;
}

// The candidates of one run; old hash -> new hash for the result cache.
void rewrite_candidates(SqliteConnection& db, const RunRow& run, const SearchSpace& space,
                        std::map<std::string, std::string>& new_hash, Counts& counts) {
  struct Row {
    std::string id, genome, hash, parents;
  };
  std::vector<Row> rows;
  {
    auto s = db.prepare("SELECT id, genome, genome_hash, parents FROM candidates WHERE run_id = ? ORDER BY seq");
    s.bind(1, run.id);
    while (s.step()) rows.push_back({s.column_text(0), s.column_text(1), s.column_text(2), s.column_text(3)});
  }
  for (const Row& row : rows) {
    const std::string parents = rewrite_list(row.parents, space, false, run.id, counts);
    if (parents != row.parents)
      db.prepare("UPDATE candidates SET parents = ? WHERE id = ?").bind(1, parents).bind(2, row.id).run();
    Genome g;
    try {
      g = space.parse(row.genome);
    } catch (const InputError& e) {
      retire_candidate(db, run, row.id, row.genome, e.what());
      ++counts.untranslatable;
      continue;
    }
    if (g.text() == row.genome && g.hash() == row.hash) continue;
    db.prepare("UPDATE candidates SET genome = ?, genome_hash = ? WHERE id = ?")
        .bind(1, g.text()).bind(2, g.hash()).bind(3, row.id).run();
    if (g.hash() != row.hash) new_hash[row.hash] = g.hash();
    ++counts.candidates;
  }
}

// A run's start genomes; one that no longer parses is dropped.
void rewrite_start_genomes(SqliteConnection& db, const RunRow& run, const SearchSpace& space, Counts& counts) {
  const std::string rewritten = rewrite_list(run.start_genomes, space, true, run.id, counts);
  if (rewritten == run.start_genomes) return;
  db.prepare("UPDATE runs SET start_genomes = ? WHERE id = ?").bind(1, rewritten).bind(2, run.id).run();
  ++counts.start_genomes;
}

}  // namespace

void rewrite_genome_texts(SqliteConnection& db) {
  Counts counts;
  std::map<std::string, std::string> new_hash;  // old genome hash -> new, for the result cache
  for (const RunRow& run : runs_of(db)) {
    const SearchSpace* space = nullptr;
    try {
      space = &SearchSpace::for_template(run.seed);
    } catch (const InputError& e) {
      spdlog::warn("event=store_genomes_kept run_id={} seed={} reason=\"{}\"", run.id, run.seed, e.what());
      continue;
    }
    rewrite_candidates(db, run, *space, new_hash, counts);
    rewrite_start_genomes(db, run, *space, counts);
  }
  const int64_t changes_before = db.total_changes();
  for (const auto& [old_hash, hash] : new_hash)
    db.prepare("UPDATE result_cache SET genome_hash = ? WHERE genome_hash = ?").bind(1, hash).bind(2, old_hash).run();
  counts.cache_entries = static_cast<int>(db.total_changes() - changes_before);
  spdlog::info("event=store_genomes_rewritten candidates={} runs_start_genomes={} result_cache_entries={} "
               "untranslatable={}",
               counts.candidates, counts.start_genomes, counts.cache_entries, counts.untranslatable);
}

}  // namespace evo
