/* binary16 conversions; see f16.h. */
#include "f16.h"

#include <string.h>

float pgcl_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h >> 15) << 31, exp = (h >> 10) & 0x1f, mant = h & 0x3ff, bits;
    if (exp == 0) {
        if (mant == 0) {
            bits = sign;
        } else { /* subnormal: normalise */
            int e = -1;
            do {
                e++;
                mant <<= 1;
            } while (!(mant & 0x400));
            bits = sign | ((uint32_t)(127 - 15 - e) << 23) | ((mant & 0x3ff) << 13);
        }
    } else if (exp == 31) {
        bits = sign | 0x7f800000u | (mant << 13);
    } else {
        bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
    }
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

uint16_t pgcl_f32_to_f16(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000);
    uint32_t exp = (x >> 23) & 0xff, mant = x & 0x7fffff;
    if (exp == 0xff) return (uint16_t)(sign | 0x7c00 | (mant ? 0x200 : 0)); /* inf, or a quiet NaN */
    int e = (int)exp - 127 + 15;
    if (e >= 31) return (uint16_t)(sign | 0x7c00); /* overflow */
    if (e <= 0) {                                  /* subnormal half, or zero */
        if (e < -10) return sign;
        mant |= 0x800000;
        int shift = 14 - e;
        uint32_t half = mant >> shift, rest = mant & ((1u << shift) - 1), mid = 1u << (shift - 1);
        if (rest > mid || (rest == mid && (half & 1))) half++;
        return (uint16_t)(sign | half);
    }
    uint32_t half = ((uint32_t)e << 10) | (mant >> 13), rest = mant & 0x1fff;
    if (rest > 0x1000 || (rest == 0x1000 && (half & 1))) half++; /* may carry into the exponent: still right */
    return (uint16_t)(sign | half);
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#include <immintrin.h>
#include <stdbool.h>

/* 8 values per instruction; round to nearest even (imm 0), like the scalar code. */
__attribute__((target("avx,f16c"))) static void f32_to_f16_f16c(const float *in, uint16_t *out, size_t n) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(in + i), _MM_FROUND_TO_NEAREST_INT);
        _mm_storeu_si128((__m128i *)(void *)(out + i), h);
    }
    for (; i < n; i++) out[i] = pgcl_f32_to_f16(in[i]);
}

/* CPUID leaf 1: ECX bit 29 is F16C, bit 28 AVX (clang's __builtin_cpu_supports knows no "f16c"). */
static bool cpu_has_f16c(void) {
    unsigned eax, ebx, ecx, edx;
    if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return false;
    return (ecx >> 29 & 1) && (ecx >> 28 & 1) && __builtin_cpu_supports("avx");
}

void pgcl_f32_to_f16_array(const float *in, uint16_t *out, size_t n) {
    static _Atomic int have = -1; /* every thread that races here computes the same answer */
    if (have < 0) have = cpu_has_f16c();
    if (have) {
        f32_to_f16_f16c(in, out, n);
        return;
    }
    for (size_t i = 0; i < n; i++) out[i] = pgcl_f32_to_f16(in[i]);
}
#else
void pgcl_f32_to_f16_array(const float *in, uint16_t *out, size_t n) {
    for (size_t i = 0; i < n; i++) out[i] = pgcl_f32_to_f16(in[i]);
}
#endif

bool pgcl_f16_all_finite(const uint16_t *h, size_t n) {
    for (size_t i = 0; i < n; i++)
        if ((h[i] & 0x7c00) == 0x7c00) return false; /* exponent all ones: infinity or NaN */
    return true;
}
