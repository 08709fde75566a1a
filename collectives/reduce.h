// Elementwise reduction kernels used by every CPU algorithm. 16-bit types are widened to
// fp32, reduced, and rounded once per call (round to nearest even), so one pairwise step
// accumulates in fp32. Pure functions; thread-safe.
#pragma once

#include <cstddef>

#include "collectives/types.h"

namespace retort::collectives {

// dst[i] = (a[i] + b[i]) * scale for i in [0, count). dst may be exactly a or b (no other
// overlap). scale is 1 for a plain sum; the last step of an average passes 1/n so the
// division happens in fp32 before rounding.
void ReduceTo(void* dst, const void* a, const void* b, size_t count, DataType dtype,
              float scale = 1.0f);

// dst[i] = src[i] * scale (used by averages that have nothing to add, e.g. world size 1).
void ScaleInto(void* dst, const void* src, size_t count, DataType dtype, float scale);

// Scalar conversions, exposed for tests and reference implementations.
float BFloat16ToFloat(uint16_t v);
uint16_t FloatToBFloat16(float f);
float HalfToFloat(uint16_t v);
uint16_t FloatToHalf(float f);

}  // namespace retort::collectives
