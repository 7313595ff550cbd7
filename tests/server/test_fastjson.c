/* The fast input path: pgcld_parse_f32 against glibc's correctly rounded strtof (the oracle) on
 * millions of numbers, float32 midpoints and the JSON number grammar; the score-request parser on
 * valid bodies (including field order, escapes and base64) and on everything it must hand to the
 * DOM path. Prints the parse rate (MB/s) of a 64-item body; no timing is asserted. */
#include <math.h>
#include <sodium.h>
#include <stdint.h>
#include <time.h>

#include "fastjson.h"
#include "test_util.h"

static uint64_t g_rng = 0x9e3779b97f4a7c15ull;
static uint64_t next_u64(void) {
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return g_rng;
}

static int check_one(const char *text) {
    float fast, ref = strtof(text, NULL);
    size_t used = pgcld_parse_f32(text, text + strlen(text), &fast);
    if (used != strlen(text) || memcmp(&fast, &ref, sizeof fast) != 0) {
        fprintf(stderr, "  '%s': fast %.9g (%zu bytes), strtof %.9g\n", text, (double)fast, used, (double)ref);
        return 1;
    }
    return 0;
}

static void test_numbers(void) {
    int bad = 0, n = 0;
    char buf[128];
    for (int i = 0; i < 1000000; i++, n++) { /* float32 values written as Python writes them: %.17g of the double */
        uint32_t bits = (uint32_t)next_u64();
        float f;
        memcpy(&f, &bits, 4);
        if (!isfinite(f)) continue;
        snprintf(buf, sizeof buf, i % 3 == 0 ? "%.17g" : i % 3 == 1 ? "%.9g" : "%.6e", (double)f);
        bad += check_one(buf);
        if (bad > 20) break;
    }
    for (int i = 0; i < 1000000 && bad <= 20; i++, n++) { /* random decimals: 1..22 digits, exponents -40..40 */
        int digits = 1 + (int)(next_u64() % 22), e = (int)(next_u64() % 81) - 40, o = 0;
        if (next_u64() & 1) buf[o++] = '-';
        buf[o++] = (char)('1' + next_u64() % 9);
        if (digits > 1) buf[o++] = '.';
        for (int k = 1; k < digits; k++) buf[o++] = (char)('0' + next_u64() % 10);
        snprintf(buf + o, sizeof buf - (size_t)o, "e%d", e);
        bad += check_one(buf);
    }
    for (int i = 0; i < 200000 && bad <= 20; i++, n++) { /* exact midpoints between neighbouring floats */
        uint32_t bits = (uint32_t)(next_u64() % 0x7f000000u);
        float lo;
        memcpy(&lo, &bits, 4);
        double mid = ((double)lo + (double)nextafterf(lo, INFINITY)) / 2; /* exact in double */
        snprintf(buf, sizeof buf, "%.40g", mid);
        bad += check_one(buf);
        snprintf(buf, sizeof buf, "%.17g", mid);
        bad += check_one(buf);
    }
    static const char *const edge[] = {"0", "-0", "0.5", "16777217", "16777219", "33554435", "1e-45", "1.4e-45",
                                       "3.4028235e38", "3.5e38", "1e39", "-1e39", "1.17549435e-38", "2.5e-39",
                                       "0.0000000000000000000000000000001234567", "123456789012345678901234567890",
                                       "9.999999999999999999999e-5", "1E5", "1e+5", "1.0E-5"};
    for (size_t i = 0; i < sizeof edge / sizeof edge[0]; i++, n++) bad += check_one(edge[i]);
    CHECK(bad == 0, "%d of %d numbers differ from strtof", bad, n);

    static const char *const not_json[] = {"01", "1.", ".5", "+1", "1e", "1e+", "-", "NaN", "Infinity", "", "-.5", "0x1"};
    for (size_t i = 0; i < sizeof not_json / sizeof not_json[0]; i++) {
        float f;
        size_t used = pgcld_parse_f32(not_json[i], not_json[i] + strlen(not_json[i]), &f);
        CHECK(used < strlen(not_json[i]) || strlen(not_json[i]) == 0, "'%s' accepted as a whole number", not_json[i]);
    }
}

static int resolve_d4(void *ctx, const char *name) {
    const char **seen = ctx;
    *seen = name;
    return name && strcmp(name, "unknown") == 0 ? 0 : 4;
}

static pgcld_fast_status parse(const char *body, pgcld_fast_request *r) {
    const char *seen = NULL;
    return pgcld_fast_parse_score(body, strlen(body), 100, resolve_d4, &seen, r);
}

static void test_requests(void) {
    pgcld_fast_request r;
    CHECK(parse("{\"model\":\"m\",\"items\":[{\"id\":\"a\",\"embedding\":[1,2.5,-3e-1,0]},"
                "{\"embedding\":[0.1, 0.2 ,0.3,0.4], \"id\":\"b\\u00e9\\ud83d\\ude00\"}],\"return_vector\":false}",
                &r) == PGCLD_FAST_OK,
          "valid body");
    CHECK(r.n == 2 && strcmp(r.model, "m") == 0 && !r.return_vector, "fields");
    CHECK(r.n == 2 && strcmp(r.ids[1], "b\xc3\xa9\xf0\x9f\x98\x80") == 0, "escaped id decoded: '%s'", r.n == 2 ? r.ids[1] : "");
    CHECK(r.z && r.z[1] == 2.5f && r.z[2] == strtof("-3e-1", NULL) && r.z[4] == 0.1f, "values");
    pgcld_fast_request_free(&r);

    /* "model" after "items" is found by the look-ahead */
    const char *resolved = NULL;
    const char *late = "{\"items\":[{\"id\":\"a\",\"embedding\":[1,2,3,4]}],\"model\":\"late\"}";
    CHECK(pgcld_fast_parse_score(late, strlen(late), 100, resolve_d4, &resolved, &r) == PGCLD_FAST_OK &&
              strcmp(r.model, "late") == 0 && resolved && strcmp(resolved, "late") == 0,
          "model after items: the look-ahead resolves it");
    pgcld_fast_request_free(&r);
    CHECK(parse("{\"items\":[{\"id\":\"a\",\"embedding\":[1,2,3,4]}]}", &r) == PGCLD_FAST_OK && !r.has_model,
          "no model: the default");
    pgcld_fast_request_free(&r);
    /* the look-ahead's memmem shortcut: the text "model" in quotes inside an id is not a key ... */
    CHECK(parse("{\"items\":[{\"id\":\"x\\\"model\\\"\",\"embedding\":[1,2,3,4]}]}", &r) == PGCLD_FAST_OK &&
              !r.has_model && strcmp(r.ids[0], "x\"model\"") == 0,
          "an id holding \"model\" names no model");
    pgcld_fast_request_free(&r);
    /* ... and a real key after such an id is still found, after strings with escapes */
    resolved = NULL;
    const char *tricky = "{\"items\":[{\"id\":\"x\\\"model\\\\\",\"embedding\":[1,2,3,4]}],\"model\":\"late\"}";
    CHECK(pgcld_fast_parse_score(tricky, strlen(tricky), 100, resolve_d4, &resolved, &r) == PGCLD_FAST_OK &&
              strcmp(r.model, "late") == 0 && strcmp(r.ids[0], "x\"model\\") == 0,
          "model after an id with escaped quotes and backslashes");
    pgcld_fast_request_free(&r);

    /* base64 of 4 float32 */
    float v[4] = {1.5f, -2.0f, 0.25f, 8.0f};
    char b64[64];
    sodium_bin2base64(b64, sizeof b64, (const unsigned char *)v, sizeof v, sodium_base64_VARIANT_ORIGINAL);
    char body[256];
    snprintf(body, sizeof body, "{\"items\":[{\"id\":\"x\",\"embedding_b64\":\"%s\"}]}", b64);
    CHECK(parse(body, &r) == PGCLD_FAST_OK && r.z && memcmp(r.z, v, sizeof v) == 0, "base64 item");
    pgcld_fast_request_free(&r);

    /* everything the DOM path must word */
    static const char *const bail[] = {
        "", "[]", "{}", "{\"items\":[]}", "{\"items\":[{\"id\":\"a\",\"embedding\":[1,2,3]}]}",
        "{\"items\":[{\"id\":\"a\",\"embedding\":[1,2,3,4,5]}]}", "{\"items\":[{\"embedding\":[1,2,3,4]}]}",
        "{\"items\":[{\"id\":\"\",\"embedding\":[1,2,3,4]}]}", "{\"items\":[{\"id\":\"a\",\"embedding\":[1,2,3,\"4\"]}]}",
        "{\"items\":[{\"id\":\"a\",\"embedding\":[1,2,3,1e39]}]}", "{\"items\":[{\"id\":\"a\",\"embedding\":[1,2,3,01]}]}",
        "{\"items\":[{\"id\":\"a\",\"id\":\"b\",\"embedding\":[1,2,3,4]}]}",
        "{\"items\":[{\"id\":\"a\",\"embedding\":[1,2,3,4],\"extra\":1}]}",
        "{\"items\":[{\"id\":\"a\",\"embedding\":[1,2,3,4]}],\"extra\":true}",
        "{\"items\":[{\"id\":\"a\",\"embedding\":[1,2,3,4]}],\"items\":[]}",
        "{\"items\":[{\"id\":\"a\\u0000b\",\"embedding\":[1,2,3,4]}]}",
        "{\"items\":[{\"id\":\"\xff\",\"embedding\":[1,2,3,4]}]}",
        "{\"items\":[{\"id\":\"\\ud83d\",\"embedding\":[1,2,3,4]}]}",
        "{\"items\":[{\"id\":\"a\",\"embedding\":[1,2,3,4]}]} x", "{\"items\":[{\"id\":\"a\",\"embedding\":[1,2,3,4]},]}",
        "{\"model\":\"unknown\",\"items\":[{\"id\":\"a\",\"embedding\":[1,2,3,4]}]}",
        "{\"items\":[{\"id\":\"a\",\"embedding\":[1,2,3,4],\"embedding_b64\":\"AAAA\"}]}",
        "{\"items\":[{\"id\":\"a\",\"embedding_b64\":\"AAAA\"}]}", "{\"return_vector\":1,\"items\":[]}",
        /* keys with escapes go to the DOM path (fuzz findings): jansson refuses a NUL in a key, and an
         * escaped "model" after "items" is not seen by the look-ahead */
        "{\"items\":[{\"id\":\"a\",\"embedding\\u0000\":[1,2,3,4]}]}",
        "{\"items\\u0000\":[{\"id\":\"a\",\"embedding\":[1,2,3,4]}]}",
        "{\"items\":[{\"id\":\"a\",\"embedding\":[1,2,3,4]}],\"mod\\u0065l\":\"late\"}",
        "{\"mod\\u0065l\":\"m\",\"items\":[{\"id\":\"a\",\"embedding\":[1,2,3,4]}]}",
        "{\"items\":[{\"\\u0069d\":\"a\",\"embedding\":[1,2,3,4]}]}",
    };
    for (size_t i = 0; i < sizeof bail / sizeof bail[0]; i++) {
        CHECK(parse(bail[i], &r) == PGCLD_FAST_BAIL, "accepted: %s", bail[i]);
        CHECK(!r.z && !r.ids && !r.id_arena, "bail left memory held: %s", bail[i]);
    }
}

static int resolve_d1024(void *ctx, const char *name) { return 1024; }

static void bench_rate(void) {
    size_t cap = 64 * 1024 * 24 + 1024, o = 0;
    char *body = malloc(cap);
    o += (size_t)snprintf(body + o, cap - o, "{\"model\":\"toxicity\",\"items\":[");
    for (int i = 0; i < 64; i++) {
        o += (size_t)snprintf(body + o, cap - o, "%s{\"id\":\"item-%d\",\"embedding\":[", i ? "," : "", i);
        for (int k = 0; k < 1024; k++) {
            float f = (float)((double)(next_u64() % 2000000) / 1e6 - 1.0) * 0.05f;
            o += (size_t)snprintf(body + o, cap - o, "%s%.17g", k ? "," : "", (double)f);
        }
        o += (size_t)snprintf(body + o, cap - o, "]}");
    }
    o += (size_t)snprintf(body + o, cap - o, "]}");
    struct timespec t0, t1;
    int reps = 30;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int r = 0; r < reps; r++) {
        pgcld_fast_request req;
        if (pgcld_fast_parse_score(body, o, 1024, resolve_d1024, NULL, &req) != PGCLD_FAST_OK) {
            CHECK(0, "benchmark body did not parse");
            break;
        }
        pgcld_fast_request_free(&req);
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
    printf("fast parser: %.0f MB/s, %.0f embeddings/s on one core (64 items x 1024 numbers, %%.17g, %zu-byte body)\n",
           (double)o * reps / s / 1e6, 64.0 * reps / s, o);
    free(body);
}

int main(void) {
    if (sodium_init() < 0) return 1;
    test_numbers();
    test_requests();
    bench_rate();
    return test_finish("test_fastjson");
}
