/* Fast score-request parser and correctly rounded float32 number parsing; see fastjson.h. */
#include "fastjson.h"

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base64.h"

#define MAX_ID_BYTES 256
#define MAX_MODEL_BYTES 128

/* ---- numbers ---- */

/* 10^0 .. 10^27 are exact in the 64-bit mantissa of x87 long double (5^27 < 2^64). */
#if defined(__x86_64__) && LDBL_MANT_DIG == 64
#define HAVE_X87 1
static const long double g_pow10[28] = {1e0L,  1e1L,  1e2L,  1e3L,  1e4L,  1e5L,  1e6L,  1e7L,  1e8L,  1e9L,
                                        1e10L, 1e11L, 1e12L, 1e13L, 1e14L, 1e15L, 1e16L, 1e17L, 1e18L, 1e19L,
                                        1e20L, 1e21L, 1e22L, 1e23L, 1e24L, 1e25L, 1e26L, 1e27L};
#else
#define HAVE_X87 0
#endif

static inline bool is_digit(char c) { return c >= '0' && c <= '9'; }

/* 10^0 .. 10^22 are exact doubles. */
static const double g_pow10d[23] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8,  1e9,  1e10, 1e11,
                                    1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

/* True when the 8 bytes at p are all ASCII digits (SWAR: no byte outside '0'..'9'). */
static inline bool eight_digits(const char *p) {
    uint64_t v;
    memcpy(&v, p, 8);
    return (((v & 0xF0F0F0F0F0F0F0F0ull) | (((v + 0x0606060606060606ull) & 0xF0F0F0F0F0F0F0F0ull) >> 4)) ==
            0x3333333333333333ull);
}

/* The value of 8 ASCII digits (most significant first), combining pairs, then quads, then halves. */
static inline uint32_t eight_digits_value(const char *p) {
    uint64_t v;
    memcpy(&v, p, 8);
    v -= 0x3030303030303030ull;                          /* bytes d0..d7, d0 in the lowest byte */
    v = (v * 10) + (v >> 8);                             /* pairs: 10*d0+d1 in bytes 0, 2, 4, 6 */
    v = (((v & 0x000000FF000000FFull) * (100 + (1000000ull << 32))) +
         (((v >> 16) & 0x000000FF000000FFull) * (1 + (10000ull << 32)))) >> 32;
    return (uint32_t)v;
}

size_t pgcld_parse_f32(const char *s, const char *end, float *out) {
    const char *p = s;
    bool neg = false;
    if (p < end && *p == '-') {
        neg = true;
        p++;
    }
    if (p >= end || !is_digit(*p)) return 0;
    uint64_t m = 0;
    int digits = 0;       /* significant digits kept in m */
    bool inexact = false; /* a nonzero digit did not fit in m */
    int e10 = 0;
    if (*p == '0') {
        p++;
        if (p < end && is_digit(*p)) return 0; /* no leading zeros in JSON */
    } else {
        for (; p < end && is_digit(*p); p++) {
            if (digits < 19) {
                m = m * 10 + (uint64_t)(*p - '0');
                digits++;
            } else {
                e10++;
                inexact |= *p != '0';
            }
        }
    }
    if (p < end && *p == '.') {
        p++;
        if (p >= end || !is_digit(*p)) return 0;
        if (m == 0)
            while (p < end && *p == '0') { /* leading zeros of a fraction are not significant */
                e10--;
                p++;
            }
        while (digits + 8 <= 19 && end - p >= 8 && eight_digits(p)) {
            m = m * 100000000u + eight_digits_value(p);
            digits += 8;
            e10 -= 8;
            p += 8;
        }
        for (; p < end && is_digit(*p); p++) {
            if (m == 0 && *p == '0') { /* leading zeros of a fraction are not significant */
                e10--;
                continue;
            }
            if (digits < 19) {
                m = m * 10 + (uint64_t)(*p - '0');
                digits++;
                e10--;
            } else {
                inexact |= *p != '0';
            }
        }
    }
    if (p < end && (*p == 'e' || *p == 'E')) {
        p++;
        bool eneg = false;
        if (p < end && (*p == '+' || *p == '-')) eneg = *p++ == '-';
        if (p >= end || !is_digit(*p)) return 0;
        int ev = 0;
        for (; p < end && is_digit(*p); p++)
            if (ev < 100000) ev = ev * 10 + (*p - '0');
        e10 += eneg ? -ev : ev;
    }
    size_t len = (size_t)(p - s);
    if (m == 0) {
        *out = neg ? -0.0f : 0.0f;
        return len;
    }
    /* Clinger's fast path: m and 10^|e10| are exact doubles, so one correctly rounded operation gives
     * the double nearest the value; rounding that to float32 is right unless the double sits exactly
     * on a float32 midpoint (low 29 bits 1000…0), which the exact paths below then settle. */
    if (!inexact && m <= (1ull << 53) && e10 >= -22 && e10 <= 22) {
        double d = e10 >= 0 ? (double)m * g_pow10d[e10] : (double)m / g_pow10d[-e10];
        uint64_t bits;
        memcpy(&bits, &d, sizeof bits);
        if (d >= (double)FLT_MIN && (bits & 0x1FFFFFFFull) != 0x10000000ull) {
            float f = (float)d;
            *out = neg ? -f : f;
            return len;
        }
    }
#if HAVE_X87
    /* One rounding to the 64-bit mantissa (the operands are exact), then to 24 bits. The second
     * rounding can only differ from a direct one when the first landed exactly on a float32
     * midpoint (midpoints need 25 bits, so none lies strictly between the value and its 64-bit
     * rounding); that case, and anything out of this range, goes to strtof. */
    if (!inexact && e10 >= -27 && e10 <= 27) {
        long double v = (long double)m;
        v = e10 >= 0 ? v * g_pow10[e10] : v / g_pow10[-e10];
        uint64_t mant;
        memcpy(&mant, &v, sizeof mant); /* x87 extended: the 64-bit significand comes first */
        bool normal_float = v >= (long double)FLT_MIN;
        if (normal_float && (mant & ((1ull << 40) - 1)) != (1ull << 39)) {
            float f = (float)v;
            *out = neg ? -f : f;
            return len;
        }
    }
#endif
    char buf[512];
    if (len >= sizeof buf) { /* an absurdly long number: strtof on a heap copy */
        char *copy = malloc(len + 1);
        if (!copy) return 0;
        memcpy(copy, s, len);
        copy[len] = 0;
        *out = strtof(copy, NULL);
        free(copy);
        return len;
    }
    memcpy(buf, s, len);
    buf[len] = 0;
    *out = strtof(buf, NULL);
    return len;
}

/* ---- the parser ---- */

typedef struct parser {
    const char *p, *end;
} parser;

static inline void ws(parser *ps) {
    while (ps->p < ps->end && (*ps->p == ' ' || *ps->p == '\n' || *ps->p == '\r' || *ps->p == '\t')) ps->p++;
}

static inline bool eat(parser *ps, char c) {
    ws(ps);
    if (ps->p < ps->end && *ps->p == c) {
        ps->p++;
        return true;
    }
    return false;
}

static int hex4(const char *s) {
    int v = 0;
    for (int i = 0; i < 4; i++) {
        char c = s[i];
        v <<= 4;
        if (c >= '0' && c <= '9') v |= c - '0';
        else if (c >= 'a' && c <= 'f') v |= c - 'a' + 10;
        else if (c >= 'A' && c <= 'F') v |= c - 'A' + 10;
        else return -1;
    }
    return v;
}

static size_t put_utf8(char *out, uint32_t cp) {
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xc0 | cp >> 6);
        out[1] = (char)(0x80 | (cp & 0x3f));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xe0 | cp >> 12);
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
        out[2] = (char)(0x80 | (cp & 0x3f));
        return 3;
    }
    out[0] = (char)(0xf0 | cp >> 18);
    out[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
    out[3] = (char)(0x80 | (cp & 0x3f));
    return 4;
}

/* Length of the valid UTF-8 sequence at s (1..4), or 0 if invalid (overlong, surrogate, > U+10FFFF). */
static int utf8_len(const unsigned char *s, const unsigned char *end) {
    unsigned c = s[0];
    int n;
    uint32_t cp;
    if (c < 0x80) return 1;
    if (c >= 0xc2 && c <= 0xdf) n = 2, cp = c & 0x1f;
    else if (c >= 0xe0 && c <= 0xef) n = 3, cp = c & 0x0f;
    else if (c >= 0xf0 && c <= 0xf4) n = 4, cp = c & 0x07;
    else return 0;
    if (end - s < n) return 0;
    for (int i = 1; i < n; i++) {
        if ((s[i] & 0xc0) != 0x80) return 0;
        cp = cp << 6 | (s[i] & 0x3f);
    }
    if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10ffff)) || (cp >= 0xd800 && cp <= 0xdfff))
        return 0;
    return n;
}

/* Parses a JSON string at ps->p (which must be '"'), validating escapes and UTF-8. With out, the
 * decoded bytes are written there (at most the encoded length) and *out_len set; *had_nul tells
 * whether it decoded a U+0000. Returns false on anything invalid. */
static bool string(parser *ps, char *out, size_t *out_len, bool *had_nul) {
    ws(ps);
    if (ps->p >= ps->end || *ps->p != '"') return false;
    ps->p++;
    size_t o = 0;
    if (had_nul) *had_nul = false;
    while (ps->p < ps->end) {
        unsigned char c = (unsigned char)*ps->p;
        if (c == '"') {
            ps->p++;
            if (out_len) *out_len = o;
            return true;
        }
        if (c < 0x20) return false;
        if (c == '\\') {
            if (ps->end - ps->p < 2) return false;
            char e = ps->p[1];
            ps->p += 2;
            char simple = e == '"' ? '"' : e == '\\' ? '\\' : e == '/' ? '/' : e == 'b' ? '\b' : e == 'f' ? '\f'
                          : e == 'n' ? '\n' : e == 'r' ? '\r' : e == 't' ? '\t' : 0;
            if (simple) {
                if (out) out[o] = simple;
                o++;
                continue;
            }
            if (e != 'u' || ps->end - ps->p < 4) return false;
            int cp = hex4(ps->p);
            if (cp < 0) return false;
            ps->p += 4;
            uint32_t code = (uint32_t)cp;
            if (cp >= 0xd800 && cp <= 0xdbff) { /* a surrogate pair */
                if (ps->end - ps->p < 6 || ps->p[0] != '\\' || ps->p[1] != 'u') return false;
                int lo = hex4(ps->p + 2);
                if (lo < 0xdc00 || lo > 0xdfff) return false;
                ps->p += 6;
                code = 0x10000 + (((uint32_t)cp - 0xd800) << 10) + ((uint32_t)lo - 0xdc00);
            } else if (cp >= 0xdc00 && cp <= 0xdfff) {
                return false;
            }
            if (code == 0 && had_nul) *had_nul = true;
            char tmp[4];
            size_t k = put_utf8(tmp, code);
            if (out) memcpy(out + o, tmp, k);
            o += k;
            continue;
        }
        int n = utf8_len((const unsigned char *)ps->p, (const unsigned char *)ps->end);
        if (!n) return false;
        if (out) memcpy(out + o, ps->p, (size_t)n);
        o += (size_t)n;
        ps->p += n;
    }
    return false;
}

/* The closing quote of the string whose contents start at p (a backslash escapes the byte after
 * it), or end. memchr rather than a byte loop: the strings skipped here are mostly the items'
 * embedding_b64 values, kilobytes each, without a backslash. */
static const char *string_close(const char *p, const char *end) {
    while (p < end) {
        const char *q = memchr(p, '"', (size_t)(end - p));
        if (!q) return end;
        const char *bs = memchr(p, '\\', (size_t)(q - p));
        if (!bs) return q;
        p = bs + 2; /* the escaped byte, even a quote, does not close the string */
    }
    return end;
}

/* Finds a later top-level "model" string value without validating (the main pass validates):
 * scans from ps->p (inside the top-level object) honouring strings and nesting. */
static bool prescan_model(const char *p, const char *end, char *model, bool *found) {
    int depth = 0;
    *found = false;
    /* Most bodies name no model (the default one): then the text "model" in quotes occurs nowhere
     * after the items, and one memmem over the body replaces the byte-by-byte walk through every
     * embedding. A key spelled with escapes is not found either way; the main pass bails on it. */
    if (!memmem(p, (size_t)(end - p), "\"model\"", 7)) return true;
    while (p < end) {
        char c = *p;
        if (c == '"') {
            const char *start = ++p;
            p = string_close(p, end);
            if (p >= end) return false;
            size_t klen = (size_t)(p - start);
            p++;
            if (depth == 0 && klen == 5 && memcmp(start, "model", 5) == 0) {
                parser ps = {p, end};
                if (!eat(&ps, ':')) return false;
                size_t len;
                parser probe = ps;
                if (!string(&probe, NULL, &len, NULL) || len > MAX_MODEL_BYTES) return false;
                bool nul;
                if (!string(&ps, model, &len, &nul) || nul) return false;
                model[len] = 0;
                *found = true;
                return true;
            }
        } else if (c == '[' || c == '{') {
            depth++;
            p++;
        } else if (c == ']' || c == '}') {
            if (depth == 0) return true; /* end of the top-level object */
            depth--;
            p++;
        } else {
            p++;
        }
    }
    return false;
}

/* Reads an object key at ps->p into key (size 16) when it is written plainly: '"', 1 to 15 bytes of
 * [a-z0-9_], '"'. Every key the fast path accepts has that form; a key with an escape ("mod\u0065l",
 * "embedding\u0000") or any other byte returns false, so the body goes to the DOM path, which
 * decodes it fully and words the answer. This also keeps prescan_model's raw comparison right. */
static bool plain_key(parser *ps, char key[16]) {
    ws(ps);
    if (ps->p >= ps->end || *ps->p != '"') return false;
    const char *s = ps->p + 1;
    size_t n = 0;
    while (s + n < ps->end && n < 15 && ((s[n] >= 'a' && s[n] <= 'z') || is_digit(s[n]) || s[n] == '_')) n++;
    if (n == 0 || s + n >= ps->end || s[n] != '"') return false;
    memcpy(key, s, n);
    key[n] = 0;
    ps->p = s + n + 1;
    return true;
}

static bool literal(parser *ps, const char *word) {
    ws(ps);
    size_t n = strlen(word);
    if ((size_t)(ps->end - ps->p) < n || memcmp(ps->p, word, n) != 0) return false;
    ps->p += n;
    return true;
}

/* One item {"id", "embedding" | "embedding_b64"} into z (D) and the id arena. */
static bool item(parser *ps, int D, float *z, char *id_out, size_t *id_len) {
    if (!eat(ps, '{')) return false;
    bool have_id = false, have_emb = false;
    if (eat(ps, '}')) return false;
    do {
        char key[16];
        if (!plain_key(ps, key) || !eat(ps, ':')) return false;
        if (strcmp(key, "id") == 0) {
            if (have_id) return false;
            bool nul;
            parser probe2 = *ps;
            size_t len;
            if (!string(&probe2, NULL, &len, NULL) || len == 0 || len > MAX_ID_BYTES) return false;
            if (!string(ps, id_out, id_len, &nul) || nul) return false;
            id_out[*id_len] = 0;
            have_id = true;
        } else if (strcmp(key, "embedding") == 0) {
            if (have_emb || !eat(ps, '[')) return false;
            int k = 0;
            if (eat(ps, ']')) return false;
            do {
                ws(ps);
                if (k >= D) return false;
                size_t used = pgcld_parse_f32(ps->p, ps->end, &z[k]);
                if (!used || !isfinite(z[k])) return false;
                ps->p += used;
                k++;
            } while (eat(ps, ','));
            if (!eat(ps, ']') || k != D) return false;
            have_emb = true;
        } else if (strcmp(key, "embedding_b64") == 0) {
            if (have_emb) return false;
            ws(ps);
            if (ps->p >= ps->end || *ps->p != '"') return false;
            /* The closing quote by memchr; an escape before it (a backslash is not in the base64
             * alphabet) makes the strict decoder refuse, and the DOM path then decides. */
            const char *start = ps->p + 1, *q = memchr(start, '"', (size_t)(ps->end - start));
            if (!q) return false;
            if (!pgcl_base64_decode_exact(start, (size_t)(q - start), z, (size_t)D * 4)) return false;
            for (int k = 0; k < D; k++)
                if (!isfinite(z[k])) return false;
            ps->p = q + 1;
            have_emb = true;
        } else {
            return false;
        }
    } while (eat(ps, ','));
    return eat(ps, '}') && have_id && have_emb;
}

void pgcld_fast_request_free(pgcld_fast_request *r) {
    free(r->z);
    free(r->ids);
    free(r->id_arena);
    r->z = NULL;
    r->ids = NULL;
    r->id_arena = NULL;
}

pgcld_fast_status pgcld_fast_parse_score(const char *body, size_t len, int max_items, pgcld_fast_resolve_fn resolve,
                                         void *ctx, pgcld_fast_request *out) {
    memset(out, 0, sizeof *out);
    out->return_vector = true;
    parser ps = {body, body + len};
    bool seen_model = false, seen_items = false, seen_rv = false;
    if (!eat(&ps, '{') || eat(&ps, '}')) goto bail;
    do {
        char key[16];
        if (!plain_key(&ps, key) || !eat(&ps, ':')) goto bail;
        if (strcmp(key, "model") == 0) {
            if (seen_model) goto bail;
            size_t mlen;
            bool nul;
            parser probe = ps;
            if (!string(&probe, NULL, &mlen, NULL) || mlen > MAX_MODEL_BYTES) goto bail;
            char model[MAX_MODEL_BYTES + 1];
            if (!string(&ps, model, &mlen, &nul) || nul) goto bail;
            model[mlen] = 0;
            /* After "items" the model was already resolved from the look-ahead: it must be this one. */
            if (seen_items && (!out->has_model || strcmp(model, out->model) != 0)) goto bail;
            memcpy(out->model, model, mlen + 1);
            out->has_model = seen_model = true;
        } else if (strcmp(key, "return_vector") == 0) {
            if (seen_rv) goto bail;
            seen_rv = true;
            if (literal(&ps, "true")) out->return_vector = true;
            else if (literal(&ps, "false")) out->return_vector = false;
            else goto bail;
        } else if (strcmp(key, "items") == 0) {
            if (seen_items) goto bail;
            seen_items = true;
            if (!seen_model) { /* "model" may still follow: look ahead for it */
                bool found;
                if (!prescan_model(ps.p, ps.end, out->model, &found)) goto bail;
                out->has_model = found;
            }
            out->D = resolve(ctx, out->has_model ? out->model : NULL);
            if (out->D <= 0) goto bail;
            /* Every number takes at least 2 bytes ("0,"), so the body bounds the item count. */
            size_t cap = len / (2 * (size_t)out->D) + 1;
            if (cap > (size_t)max_items) cap = (size_t)max_items;
            out->z = malloc(cap * (size_t)out->D * sizeof(float));
            out->ids = malloc(cap * sizeof *out->ids);
            out->id_arena = malloc(len + cap + 1);
            if (!out->z || !out->ids || !out->id_arena) goto bail;
            if (!eat(&ps, '[') || eat(&ps, ']')) goto bail;
            size_t arena = 0;
            do {
                if ((size_t)out->n >= cap) goto bail;
                size_t id_len;
                char *id = out->id_arena + arena;
                if (!item(&ps, out->D, out->z + (size_t)out->n * out->D, id, &id_len)) goto bail;
                out->ids[out->n++] = id;
                arena += id_len + 1;
            } while (eat(&ps, ','));
            if (!eat(&ps, ']')) goto bail;
        } else {
            goto bail;
        }
    } while (eat(&ps, ','));
    if (!eat(&ps, '}') || !seen_items) goto bail;
    ws(&ps);
    if (ps.p != ps.end) goto bail;
    return PGCLD_FAST_OK;
bail:
    pgcld_fast_request_free(out);
    return PGCLD_FAST_BAIL;
}
