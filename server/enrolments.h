#pragma once
// Enrolments: the operator of evod's host admits workers under a name and a key, so that what
// counts as one party in confirmations (worker_registry.h) is decided by who holds a key, not by
// how many registrations a holder of the shared token makes. These run on the database directly
// (`evod enrol`), on the host that holds it: whoever may write evod's database is already trusted
// with everything in it. Each is one transaction.
#include <cstdint>
#include <string>
#include <vector>

#include "store.h"

namespace evo {

// Why a name cannot be an enrolment's, or "" when it can: 1 to 64 of letters, digits and . _ : -.
std::string bad_enrolment_name(const std::string& name);

// Makes the enrolment, or a new key for it (the old key stops working; a refusal stays), and
// returns the key: shown only here, kept only as its hash. Throws InputError for a bad name.
std::string enrol(Store& store, const std::string& name, int64_t now_ms);

// Refuses the enrolment's registrations and quarantines its workers, for reason; lifts that.
// Each throws InputError naming the enrolment when there is none by that name.
void revoke_enrolment(Store& store, const std::string& name, const std::string& reason);
void release_enrolment(Store& store, const std::string& name);

// One line per enrolment: its name, when its key was made, and whether it is refused and why.
std::vector<std::string> enrolment_lines(Store& store);

}  // namespace evo
