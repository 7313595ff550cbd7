/* IEEE 754 binary16 <-> binary32 conversion: safetensors F16 weights, and the float16 copies of
 * inputs the audit log may keep for re-scoring. */
#ifndef PGCL_F16_H
#define PGCL_F16_H

#include <stdint.h>

/* Exact: every binary16 value (subnormals, infinities, NaN) has a binary32 equal. */
float pgcl_f16_to_f32(uint16_t h);

/* Round to nearest, ties to even; overflow gives infinity, NaN stays NaN (quiet). */
uint16_t pgcl_f32_to_f16(float f);

#endif
