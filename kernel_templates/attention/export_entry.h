#pragma once
// The attention family's part of an exported .cu (kernel_templates/family_export.h): its problem
// variables as the variants name them, how a launch fills evo::FaParams (workspace, tensor maps),
// the dispatch table (a shape bucket per exported genome, keyed on dtype, causality and head_dim)
// and the C entry points evo_attention_forward, evo_attention_forward_ex and
// evo_attention_forward_dtype, whose signatures DESIGN.md fixes.
#include "family_export.h"

namespace evo::attention {

const FamilyExport& export_entry();

}  // namespace evo::attention
