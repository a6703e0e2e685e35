#pragma once
// ProblemShape <-> evo.v1.Shape, the one place the two spellings of a shape meet.
#include "evo/evo.pb.h"
#include "shape.h"

namespace evo {

v1::Shape shape_to_proto(const ProblemShape& p);
ProblemShape shape_from_proto(const v1::Shape& s);

}  // namespace evo
