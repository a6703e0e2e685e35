#pragma once
// How far a candidate's output may be from its family's float32 reference and still pass the
// correctness gate. Each family says what it allows per problem (attention/tolerances.h).
namespace evo {

struct Tolerance {
  double max_rel_l2_error;  // ||out - ref|| / ||ref||
  double max_abs_error;     // the largest |out - ref| of one element
};

}  // namespace evo
