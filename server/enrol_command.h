#pragma once
// `evod enrol ...`: enrolments made, listed, revoked and released on evod's database
// (enrolments.h). Returns the process's exit status.
namespace evo {
int enrol_command(int argc, char** argv);
extern const char* const kEnrolUsage;
}  // namespace evo
