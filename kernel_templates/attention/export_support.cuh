// The host support an exported attention file carries beside its kernels (family.cpp names this
// text): the tensor maps its TMA genomes read through, and the FP8 quantizer a caller with 16-bit
// tensors runs before the e4m3 kernels.
#include "tensor_maps.h"
#include "quantize_fp8.cuh"
