#pragma once
// ProblemShape <-> evo.v1.Shape, the one place the two spellings of a shape meet.
#include "evo/evo.pb.h"
#include "shape.h"

namespace evo {

v1::Shape shape_to_proto(const ProblemShape& p);
// Throws InputError for a dtype this build does not know (a newer peer's enum value).
ProblemShape shape_from_proto(const v1::Shape& s);
v1::DType dtype_to_proto(DType d);
DType dtype_from_proto(v1::DType d);

}  // namespace evo
