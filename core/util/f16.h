/* IEEE 754 binary16 <-> binary32 conversion: safetensors F16 weights, and the float16 copies of
 * inputs the audit log may keep for re-scoring. */
#ifndef PGCL_F16_H
#define PGCL_F16_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Exact: every binary16 value (subnormals, infinities, NaN) has a binary32 equal. */
float pgcl_f16_to_f32(uint16_t h);

/* Round to nearest, ties to even; overflow gives infinity, NaN stays NaN (quiet). */
uint16_t pgcl_f32_to_f16(float f);

/* out[i] = pgcl_f32_to_f16(in[i]) for i < n, 8 at a time with the CPU's F16C instructions where it
 * has them (the audit log converts every stored input: 1024 values per scored item). Identical
 * to the scalar function for every non-NaN value; a NaN stays a quiet NaN of the same sign. */
void pgcl_f32_to_f16_array(const float *in, uint16_t *out, size_t n);

/* True when every one of the n binary16 values is finite (no infinity, no NaN): a finite float32
 * above 65504 in magnitude converts to infinity, and such a copy no longer holds the input. */
bool pgcl_f16_all_finite(const uint16_t *h, size_t n);

#endif
