/* JSON text writer; see jsonw.h. */
#include "jsonw.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void pgcld_jsonw_init(pgcld_jsonw *w, size_t hint) {
    w->len = 0;
    w->cap = hint < 64 ? 64 : hint;
    w->buf = malloc(w->cap);
    w->failed = !w->buf;
    if (w->buf) w->buf[0] = 0;
}

char *pgcld_jsonw_take(pgcld_jsonw *w, size_t *len) {
    char *text = w->failed ? NULL : w->buf;
    if (len) *len = text ? w->len : 0;
    if (!text) free(w->buf);
    w->buf = NULL;
    w->len = w->cap = 0;
    return text;
}

void pgcld_jsonw_free(pgcld_jsonw *w) {
    free(w->buf);
    w->buf = NULL;
    w->len = w->cap = 0;
}

/* Makes room for n more bytes and the NUL; false after a failure. */
static bool reserve(pgcld_jsonw *w, size_t n) {
    if (w->failed) return false;
    if (w->len + n + 1 <= w->cap) return true;
    size_t cap = w->cap * 2;
    while (cap < w->len + n + 1) cap *= 2;
    char *grown = realloc(w->buf, cap);
    if (!grown) {
        w->failed = true;
        return false;
    }
    w->buf = grown;
    w->cap = cap;
    return true;
}

void pgcld_jsonw_raw(pgcld_jsonw *w, const char *text, size_t len) {
    if (!reserve(w, len)) return;
    memcpy(w->buf + w->len, text, len);
    w->len += len;
    w->buf[w->len] = 0;
}

void pgcld_jsonw_lit(pgcld_jsonw *w, const char *text) { pgcld_jsonw_raw(w, text, strlen(text)); }

void pgcld_jsonw_str(pgcld_jsonw *w, const char *text) { pgcld_jsonw_strn(w, text, strlen(text)); }

void pgcld_jsonw_strn(pgcld_jsonw *w, const char *text, size_t n) {
    if (!reserve(w, 6 * n + 2)) return; /* worst case: every byte as \u00XX */
    char *o = w->buf + w->len;
    *o++ = '"';
    for (const unsigned char *p = (const unsigned char *)text, *end = p + n; p < end; p++) {
        unsigned char c = *p;
        if (c >= 0x20 && c != '"' && c != '\\') {
            *o++ = (char)c;
            continue;
        }
        *o++ = '\\';
        switch (c) {
        case '"': *o++ = '"'; break;
        case '\\': *o++ = '\\'; break;
        case '\b': *o++ = 'b'; break;
        case '\f': *o++ = 'f'; break;
        case '\n': *o++ = 'n'; break;
        case '\r': *o++ = 'r'; break;
        case '\t': *o++ = 't'; break;
        default: {
            static const char hex[] = "0123456789ABCDEF"; /* jansson's case */
            *o++ = 'u';
            *o++ = '0';
            *o++ = '0';
            *o++ = hex[c >> 4];
            *o++ = hex[c & 15];
        }
        }
    }
    *o++ = '"';
    w->len = (size_t)(o - w->buf);
    w->buf[w->len] = 0;
}

void pgcld_jsonw_int(pgcld_jsonw *w, int64_t v) {
    char tmp[24];
    int n = snprintf(tmp, sizeof tmp, "%lld", (long long)v);
    pgcld_jsonw_raw(w, tmp, (size_t)n);
}

void pgcld_jsonw_f32(pgcld_jsonw *w, float v) {
    if (!reserve(w, 32)) return;
    w->len += (size_t)pgcld_format_f32(v, w->buf + w->len);
}

/* ---- numbers ---- */

/* jansson's touch-ups of printf's "%.9g" (strconv.c, jsonp_dtostr): ".0" after an integer, and
 * the exponent without '+' or leading zeros. Edits out[0..n) in place; returns the new length. */
static int jansson_touch_up(char *out, int n) {
    if (!memchr(out, '.', (size_t)n) && !memchr(out, 'e', (size_t)n)) {
        out[n++] = '.';
        out[n++] = '0';
        out[n] = 0;
    }
    char *e = memchr(out, 'e', (size_t)n);
    if (e) {
        char *start = e + 1, *end = start + 1;
        if (*start == '-') start++;
        while (*end == '0') end++;
        if (end != start) {
            memmove(start, end, (size_t)(out + n - end) + 1);
            n -= (int)(end - start);
        }
    }
    return n;
}

int pgcld_format_f32_slow(float v, char out[32]) {
    int n = snprintf(out, 32, "%.9g", (double)v);
    return jansson_touch_up(out, n);
}

__extension__ typedef unsigned __int128 u128; /* GCC and Clang on 64-bit targets */

/* 10^k for k = 0..19 (10^20 does not fit in 64 bits: pow10 multiplies by 10 once more) */
static const uint64_t g_pow10[20] = {1ull, 10ull, 100ull, 1000ull, 10000ull, 100000ull, 1000000ull, 10000000ull,
                                     100000000ull, 1000000000ull, 10000000000ull, 100000000000ull,
                                     1000000000000ull, 10000000000000ull, 100000000000000ull,
                                     1000000000000000ull, 10000000000000000ull, 100000000000000000ull,
                                     1000000000000000000ull, 10000000000000000000ull};

static u128 pow10_u128(int k) { return k < 20 ? (u128)g_pow10[k] : (u128)g_pow10[19] * 10u; }

/* "%.9g" of a float32 by exact integer arithmetic, for 1e-12 <= |v| < 1e9: |v| = m * 2^q exactly,
 * so D = round-half-even(m * 2^q * 10^(8-E)) with 10^8 <= D < 10^9 is the 9 significant digits
 * printf prints, computed in 128 bits (m < 2^24, 10^(8-E) <= 10^20, shifts <= 64). */
int pgcld_format_f32(float v, char out[32]) {
    double a = fabs((double)v);
    if (!(a >= 1e-12 && a < 1e9)) return pgcld_format_f32_slow(v, out); /* zero, huge, tiny */
    uint32_t bits;
    memcpy(&bits, &v, sizeof bits);
    uint32_t exp_field = (bits >> 23) & 0xff;
    uint64_t m = bits & 0x7fffff;
    int q;
    if (exp_field) {
        m |= 0x800000;
        q = (int)exp_field - 150;
    } else {
        q = -149;
    }
    int E = (int)floor(log10(a)); /* may be off by one near a power of ten: corrected below */
    u128 floor_d = 0, rem = 0, half = 0;
    for (int tries = 0; tries < 4; tries++) {
        int p = 8 - E;
        if (p < 0 || p > 20) return pgcld_format_f32_slow(v, out);
        u128 x = (u128)m * pow10_u128(p);
        if (q >= 0) {
            floor_d = x << q;
            rem = half = 0;
        } else {
            int s = -q;
            if (s > 100) return pgcld_format_f32_slow(v, out);
            floor_d = x >> s;
            rem = x & (((u128)1 << s) - 1);
            half = (u128)1 << (s - 1);
        }
        if (floor_d >= g_pow10[9]) E++;
        else if (floor_d < g_pow10[8]) E--;
        else break;
        if (tries == 3) return pgcld_format_f32_slow(v, out);
    }
    uint64_t d = (uint64_t)floor_d;
    if (q < 0 && (rem > half || (rem == half && (d & 1)))) d++;
    if (d == 1000000000u) { /* rounding carried into a tenth digit */
        d = 100000000u;
        E++;
    }
    char digits[9];
    for (int i = 8; i >= 0; i--, d /= 10) digits[i] = (char)('0' + d % 10);
    int nd = 9; /* significant digits without trailing zeros */
    while (nd > 1 && digits[nd - 1] == '0') nd--;
    int n = 0;
    if (v < 0) out[n++] = '-';
    if (E < -4 || E >= 9) { /* d.ddde-X, then jansson's exponent */
        out[n++] = digits[0];
        if (nd > 1) {
            out[n++] = '.';
            memcpy(out + n, digits + 1, (size_t)nd - 1);
            n += nd - 1;
        }
        n += snprintf(out + n, 32 - (size_t)n, "e%s%d", E < 0 ? "-" : "", E < 0 ? -E : E);
        return n;
    }
    if (E >= 0) { /* E+1 integer digits, then what is left of the 9 */
        memcpy(out + n, digits, (size_t)E + 1);
        n += E + 1;
        if (nd > E + 1) {
            out[n++] = '.';
            memcpy(out + n, digits + E + 1, (size_t)(nd - E - 1));
            n += nd - E - 1;
        } else {
            out[n++] = '.'; /* jansson's ".0" for integers */
            out[n++] = '0';
        }
    } else { /* 0.000ddd */
        out[n++] = '0';
        out[n++] = '.';
        for (int z = 0; z < -E - 1; z++) out[n++] = '0';
        memcpy(out + n, digits, (size_t)nd);
        n += nd;
    }
    out[n] = 0;
    return n;
}
