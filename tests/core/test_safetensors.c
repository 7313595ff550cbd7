/* safetensors parser: well-formed files parse, and each structural fault is refused with a message
 * that names the problem (truncation, header bounds, overlap, holes, dtype, size, non-finite data). */
#include <math.h>
#include <stdint.h>

#include "f16.h"
#include "safetensors.h"
#include "test_util.h"

/* Builds an image: 8-byte length, header text, then `data_len` bytes of data. Caller frees. */
static uint8_t *image(const char *header, const void *data, size_t data_len, size_t *size) {
    size_t hlen = strlen(header);
    *size = 8 + hlen + data_len;
    uint8_t *b = calloc(1, *size + 1);
    for (int i = 0; i < 8; i++) b[i] = (uint8_t)((uint64_t)hlen >> (8 * i));
    memcpy(b + 8, header, hlen);
    if (data_len) memcpy(b + 8 + hlen, data, data_len);
    return b;
}

/* Parses and expects failure with `needle` in the message. */
static void expect_refused(const char *what, const uint8_t *b, size_t size, const char *needle) {
    pgcl_safetensors *st = NULL;
    char err[512] = "";
    pgcl_status rc = pgcl_safetensors_parse(b, size, "t.safetensors", &st, err, sizeof err);
    CHECK(rc != PGCL_OK && st == NULL, "%s: accepted", what);
    CHECK(strstr(err, needle) != NULL, "%s: message '%s' lacks '%s'", what, err, needle);
    CHECK(strstr(err, "t.safetensors") != NULL, "%s: message '%s' does not name the file", what, err);
}

int main(void) {
    float data[6] = {1, 2, 3, 4, 5, 6};
    size_t size;
    uint8_t *b;

    /* a valid file, with metadata and tensors listed out of offset order */
    b = image("{\"__metadata__\":{\"format\":\"pt\"},\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[16,24]},"
              "\"a\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[0,16]}}  ",
              data, sizeof data, &size);
    pgcl_safetensors *st = NULL;
    char err[512] = "";
    CHECK(pgcl_safetensors_parse(b, size, "t.safetensors", &st, err, sizeof err) == PGCL_OK, "valid: %s", err);
    if (st) {
        CHECK(pgcl_safetensors_count(st) == 2, "count %d", pgcl_safetensors_count(st));
        const pgcl_st_tensor *t = pgcl_safetensors_find(st, "b");
        CHECK(t && t->ndim == 1 && t->shape[0] == 2 && t->numel == 2, "tensor b");
        float out[2];
        CHECK(t && pgcl_st_read_f32(t, out, err, sizeof err) == PGCL_OK && out[0] == 5 && out[1] == 6, "values of b");
        CHECK(pgcl_safetensors_find(st, "missing") == NULL, "find missing");
        pgcl_safetensors_destroy(st);
    }
    free(b);

    /* truncated below the length prefix */
    uint8_t tiny[5] = {1, 0, 0, 0, 0};
    expect_refused("truncated", tiny, sizeof tiny, "truncated");

    /* header length past the end of the file */
    b = image("{}", NULL, 0, &size);
    b[0] = 200;
    expect_refused("header past EOF", b, size, "past the end");
    free(b);

    /* a file cut inside the data buffer */
    b = image("{\"a\":{\"dtype\":\"F32\",\"shape\":[6],\"data_offsets\":[0,24]}}", data, sizeof data, &size);
    expect_refused("cut data", b, size - 4, "out of range");
    free(b);

    /* header is not JSON / not an object */
    b = image("{\"a\": [", NULL, 0, &size);
    expect_refused("bad json", b, size, "not valid JSON");
    free(b);
    b = image("[1,2]", NULL, 0, &size);
    expect_refused("array header", b, size, "not a JSON object");
    free(b);

    /* overlapping tensors */
    b = image("{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]},"
              "\"b\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[8,24]}}",
              data, sizeof data, &size);
    expect_refused("overlap", b, size, "overlaps");
    free(b);

    /* offsets beyond the buffer */
    b = image("{\"a\":{\"dtype\":\"F32\",\"shape\":[8],\"data_offsets\":[0,32]}}", data, sizeof data, &size);
    expect_refused("out of range", b, size, "out of range");
    free(b);
    b = image("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[-4,0]}}", data, sizeof data, &size);
    expect_refused("negative offset", b, size, "out of range");
    free(b);

    /* a hole before a tensor, and trailing bytes */
    b = image("{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[8,24]}}", data, sizeof data, &size);
    expect_refused("hole", b, size, "unused bytes");
    free(b);
    b = image("{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]}}", data, sizeof data, &size);
    expect_refused("trailing", b, size, "trailing bytes");
    free(b);

    /* unknown dtype, byte size disagreeing with the shape, bad shape, duplicate key */
    b = image("{\"a\":{\"dtype\":\"F33\",\"shape\":[6],\"data_offsets\":[0,24]}}", data, sizeof data, &size);
    expect_refused("unknown dtype", b, size, "unknown dtype 'F33'");
    free(b);
    b = image("{\"a\":{\"dtype\":\"F32\",\"shape\":[5],\"data_offsets\":[0,24]}}", data, sizeof data, &size);
    expect_refused("size mismatch", b, size, "need 20");
    free(b);
    b = image("{\"a\":{\"dtype\":\"F32\",\"shape\":[\"6\"],\"data_offsets\":[0,24]}}", data, sizeof data, &size);
    expect_refused("string dim", b, size, "shape[0]");
    free(b);
    b = image("{\"a\":{\"dtype\":\"F32\",\"shape\":[6],\"data_offsets\":[0,24]},"
              "\"a\":{\"dtype\":\"F32\",\"shape\":[6],\"data_offsets\":[0,24]}}",
              data, sizeof data, &size);
    expect_refused("duplicate name", b, size, "duplicate");
    free(b);

    /* NaN and infinity are refused when read, naming tensor and index */
    float bad[3] = {1, NAN, 2};
    b = image("{\"w\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,12]}}", bad, sizeof bad, &size);
    CHECK(pgcl_safetensors_parse(b, size, "t.safetensors", &st, err, sizeof err) == PGCL_OK, "nan file parses: %s", err);
    if (st) {
        float out[3];
        CHECK(pgcl_st_read_f32(pgcl_safetensors_find(st, "w"), out, err, sizeof err) == PGCL_ERR_INVALID, "NaN read");
        CHECK(strstr(err, "'w'") && strstr(err, "element 1 is NaN"), "NaN message: %s", err);
        pgcl_safetensors_destroy(st);
    }
    free(b);

    /* F16 and BF16 widen exactly: 1.0, -2.5, 65504 (max half), a subnormal half */
    uint16_t h[4] = {0x3c00, 0xc100, 0x7bff, 0x0001};
    uint16_t bf[2] = {0x3f80, 0xc020}; /* 1.0, -2.5 */
    uint8_t raw[12];
    memcpy(raw, h, 8);
    memcpy(raw + 8, bf, 4);
    b = image("{\"h\":{\"dtype\":\"F16\",\"shape\":[4],\"data_offsets\":[0,8]},"
              "\"bf\":{\"dtype\":\"BF16\",\"shape\":[2],\"data_offsets\":[8,12]}}",
              raw, sizeof raw, &size);
    CHECK(pgcl_safetensors_parse(b, size, "t.safetensors", &st, err, sizeof err) == PGCL_OK, "half file: %s", err);
    if (st) {
        float out[4];
        CHECK(pgcl_st_read_f32(pgcl_safetensors_find(st, "h"), out, err, sizeof err) == PGCL_OK, "F16 read");
        CHECK(out[0] == 1.0f && out[1] == -2.5f && out[2] == 65504.0f && out[3] == ldexpf(1, -24), "F16 values %g %g %g %g",
              out[0], out[1], out[2], out[3]);
        CHECK(pgcl_st_read_f32(pgcl_safetensors_find(st, "bf"), out, err, sizeof err) == PGCL_OK, "BF16 read");
        CHECK(out[0] == 1.0f && out[1] == -2.5f, "BF16 values %g %g", out[0], out[1]);
        pgcl_safetensors_destroy(st);
    }
    free(b);

    /* binary16: every value round-trips through binary32; rounding is to nearest, ties to even */
    int mismatches = 0;
    for (uint32_t bits = 0; bits < 65536; bits++) {
        float f = pgcl_f16_to_f32((uint16_t)bits);
        if (isnan(f)) continue;
        if (pgcl_f32_to_f16(f) != bits) mismatches++;
    }
    CHECK(mismatches == 0, "%d binary16 values do not round-trip", mismatches);
    CHECK(pgcl_f32_to_f16(1.0f + ldexpf(1, -11)) == 0x3c00, "tie to even (down)");
    CHECK(pgcl_f32_to_f16(1.0f + 3 * ldexpf(1, -11)) == 0x3c02, "tie to even (up)");
    CHECK(pgcl_f32_to_f16(65520.0f) == 0x7c00 && pgcl_f32_to_f16(1e-9f) == 0, "overflow and underflow");
    CHECK(isnan(pgcl_f16_to_f32(pgcl_f32_to_f16(NAN))), "NaN stays NaN");

    /* from disk: a missing file names the path */
    CHECK(pgcl_safetensors_open("/nonexistent/x.safetensors", &st, err, sizeof err) == PGCL_ERR_IO &&
              strstr(err, "/nonexistent/x.safetensors"),
          "missing file: %s", err);
    return test_finish("test_safetensors");
}
