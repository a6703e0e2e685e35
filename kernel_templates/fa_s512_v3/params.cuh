#pragma once
// fa_s512_v3's one kernel parameter: the attention family's FaParams (one definition for the
// kernel, the worker and the tests).
#include "../attention/params.h"
