/* The JSON writer against jansson, its oracle: numbers formatted exactly as json_dumps() with
 * JSON_REAL_PRECISION(9) formats json_real((double)f), strings escaped exactly as jansson escapes
 * them, over edge cases and millions of random float32 bit patterns. */
#include <jansson.h>
#include <math.h>
#include <stdint.h>

#include "jsonw.h"
#include "test_util.h"

static uint64_t g_rng = 0x243f6a8885a308d3ull;

static uint32_t next_u32(void) { /* xorshift64* */
    g_rng ^= g_rng >> 12;
    g_rng ^= g_rng << 25;
    g_rng ^= g_rng >> 27;
    return (uint32_t)((g_rng * 0x2545f4914f6cdd1dull) >> 32);
}

/* jansson's text for f inside an array, without the brackets. */
static void jansson_number(float f, char out[64]) {
    json_t *a = json_array();
    json_array_append_new(a, json_real((double)f));
    char *text = json_dumps(a, JSON_COMPACT | JSON_REAL_PRECISION(9));
    size_t n = strlen(text);
    memcpy(out, text + 1, n - 2);
    out[n - 2] = 0;
    free(text);
    json_decref(a);
}

static int g_number_mismatches, g_numbers;

static void check_number(float f) {
    char want[64], fast[32], slow[32];
    g_numbers++;
    jansson_number(f, want);
    pgcld_format_f32(f, fast);
    pgcld_format_f32_slow(f, slow);
    if (strcmp(fast, want) != 0 || strcmp(slow, want) != 0) {
        if (g_number_mismatches++ < 10)
            CHECK(false, "%a: jansson '%s', fast '%s', slow '%s'", (double)f, want, fast, slow);
    }
}

static void test_numbers(void) {
    const float edges[] = {0.0f, -0.0f, 1.0f, -1.0f, 0.5f, 0.1f, 0.2f, 0.3f, 1e-4f, 9.9999997e-05f, 1e-5f,
                           0.00010000001f, 1e8f, 99999999.0f, 999999999.0f, 1e9f, 1e10f, 123456789.0f,
                           1.23456789e-12f, 1e-12f, 9.99999e-13f, 1e-13f, 3.4028235e38f, 1.17549435e-38f,
                           1.4e-45f, 0.999999999f, 0.99999994f, 0.70710677f, 0.0625f, 100.0f, 1024.0f,
                           16777216.0f, 16777217.0f, 0.013f, 0.08765433f, 0.91234567f};
    for (size_t i = 0; i < sizeof edges / sizeof edges[0]; i++) {
        check_number(edges[i]);
        check_number(-edges[i]);
    }
    /* Every power of ten and its float neighbours: where the first guess of the exponent is off. */
    for (int k = -45; k <= 38; k++) {
        float f = (float)pow(10.0, k);
        check_number(f);
        check_number(nextafterf(f, 0.0f));
        check_number(nextafterf(f, INFINITY));
    }
    /* Random bit patterns over the whole range, and values in [-1, 1] (vectors, probabilities). */
    for (int i = 0; i < 400000; i++) {
        uint32_t bits = next_u32();
        float f;
        memcpy(&f, &bits, sizeof f);
        if (isfinite(f)) check_number(f);
        float g = (float)((double)next_u32() / 4294967296.0 * 2.0 - 1.0);
        check_number(g);
        check_number(g * 1e-6f);
    }
    CHECK(g_number_mismatches == 0, "%d numbers formatted differently from jansson", g_number_mismatches);
    printf("numbers: %d compared with jansson, %d different\n", g_numbers, g_number_mismatches);
}

static void test_strings(void) {
    const char *cases[] = {"", "plain", "quote\" back\\slash /slash", "\b\f\n\r\t", "\x01\x1f\x7f",
                           "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80", "<img src=x onerror=alert(1)>"};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        json_t *s = json_string(cases[i]);
        char *want = json_dumps(s, JSON_COMPACT | JSON_ENCODE_ANY);
        pgcld_jsonw w;
        pgcld_jsonw_init(&w, 8);
        pgcld_jsonw_str(&w, cases[i]);
        size_t len;
        char *got = pgcld_jsonw_take(&w, &len);
        CHECK(got && strcmp(got, want) == 0 && len == strlen(want), "case %zu: jansson %s, ours %s", i, want,
              got ? got : "(null)");
        free(got);
        free(want);
        json_decref(s);
    }
    json_t *with_nul = json_stringn("a\0b\x1f", 4);
    char *want_nul = json_dumps(with_nul, JSON_COMPACT | JSON_ENCODE_ANY);
    pgcld_jsonw wn;
    pgcld_jsonw_init(&wn, 1);
    pgcld_jsonw_strn(&wn, "a\0b\x1f", 4);
    char *got_nul = pgcld_jsonw_take(&wn, NULL);
    CHECK(got_nul && strcmp(got_nul, want_nul) == 0, "NUL: jansson %s, ours %s", want_nul, got_nul ? got_nul : "(null)");
    free(got_nul);
    free(want_nul);
    json_decref(with_nul);
    pgcld_jsonw w;
    pgcld_jsonw_init(&w, 1);
    pgcld_jsonw_lit(&w, "{\"n\":");
    pgcld_jsonw_int(&w, -42);
    pgcld_jsonw_lit(&w, ",\"x\":");
    pgcld_jsonw_f32(&w, 0.25f);
    pgcld_jsonw_lit(&w, "}");
    char *got = pgcld_jsonw_take(&w, NULL);
    CHECK(got && strcmp(got, "{\"n\":-42,\"x\":0.25}") == 0, "composed: %s", got ? got : "(null)");
    free(got);
}

int main(void) {
    test_numbers();
    test_strings();
    return test_finish("test_jsonw");
}
