#pragma once
// The model evaluator's device catalog: the figures of DeviceModel (kernel_templates/device_model.h)
// per architecture, for an evaluator that has no GPU to ask. The limits (shared memory, registers,
// threads and blocks per SM) are the architecture's, from device_limits.h; every other number is an
// assumption taken from the vendor's public data sheet of one representative card, not a
// measurement; they exist so that estimates rank variants sensibly, not to predict microseconds.
#include <string>
#include <string_view>

#include "device_model.h"

namespace evo {

// nullptr for an arch without a model. "sm_90" and "sm_90a" share Hopper's figures.
const DeviceModel* find_device_model(std::string_view arch);
// "sm_80, sm_89, sm_90, sm_90a", for error messages.
std::string modeled_archs();

}  // namespace evo
