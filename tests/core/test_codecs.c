/* The hot-path codecs against their oracles: SHA-256 (OpenSSL) against libsodium's, the strict
 * base64 decoder against libsodium's constant-time one, and the F16C float16 conversion against
 * the scalar round-to-nearest-even code. */
#include <math.h>
#include <sodium.h>
#include <stdint.h>

#include "base64.h"
#include "f16.h"
#include "sha256.h"
#include "test_util.h"

static uint64_t g_rng = 0x9e3779b97f4a7c15ull;

static uint32_t next_u32(void) { /* xorshift64* */
    g_rng ^= g_rng >> 12;
    g_rng ^= g_rng << 25;
    g_rng ^= g_rng >> 27;
    return (uint32_t)((g_rng * 0x2545f4914f6cdd1dull) >> 32);
}

static void test_sha256(void) {
    static unsigned char buf[70000];
    for (size_t i = 0; i < sizeof buf; i++) buf[i] = (unsigned char)next_u32();
    const size_t lengths[] = {0, 1, 55, 56, 63, 64, 65, 1000, 4096, 8192 + 17, sizeof buf};
    for (size_t i = 0; i < sizeof lengths / sizeof lengths[0]; i++) {
        unsigned char want[32], got[32];
        crypto_hash_sha256(want, buf, lengths[i]);
        pgcl_sha256(buf, lengths[i], got);
        CHECK(memcmp(want, got, 32) == 0, "SHA-256 of %zu bytes differs from libsodium's", lengths[i]);
    }
    char hex[65], want_hex[65];
    unsigned char d[32];
    pgcl_sha256("abc", 3, d);
    pgcl_sha256_to_hex(d, hex);
    sodium_bin2hex(want_hex, sizeof want_hex, d, sizeof d);
    CHECK(strcmp(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad") == 0, "FIPS 180 'abc': %s", hex);
    CHECK(strcmp(hex, want_hex) == 0, "hex %s vs libsodium %s", hex, want_hex);
}

/* libsodium's verdict and bytes for text, as the oracle: accepts only when the whole text is the
 * padded encoding of exactly want bytes. */
static bool oracle_decode(const char *text, size_t len, unsigned char *out, size_t want) {
    size_t got = 0;
    const char *end = NULL;
    return sodium_base642bin(out, want, text, len, NULL, &got, &end, sodium_base64_VARIANT_ORIGINAL) == 0 &&
           end == text + len && got == want;
}

static void test_base64(void) {
    static unsigned char raw[5000], a[5000], b[5000];
    static char text[7000];
    int agreements = 0, accepted = 0;
    for (int trial = 0; trial < 6000; trial++) {
        size_t want = trial < 64 ? (size_t)trial : next_u32() % 4200;
        for (size_t i = 0; i < want; i++) raw[i] = (unsigned char)next_u32();
        sodium_bin2base64(text, sizeof text, raw, want, sodium_base64_VARIANT_ORIGINAL);
        size_t len = strlen(text);
        int mutation = trial % 7;
        if (mutation == 1 && len) text[next_u32() % len] = "=A/+ \n-_\x80"[next_u32() % 9];
        if (mutation == 2 && len) len--;                        /* truncated */
        if (mutation == 3 && len > 2 && text[len - 1] == '=')   /* non-zero unused bits */
            text[len - (text[len - 2] == '=' ? 3 : 2)] ^= 1;
        if (mutation == 4) text[len++] = '=';                   /* too long */
        bool ours = pgcl_base64_decode_exact(text, len, a, want);
        bool theirs = oracle_decode(text, len, b, want);
        /* Ours may be stricter than libsodium (the fast path then falls back to it), never laxer. */
        CHECK(!ours || theirs, "trial %d: accepted what libsodium rejects (len %zu, want %zu)", trial, len, want);
        if (ours && theirs) {
            CHECK(memcmp(a, b, want) == 0, "trial %d: bytes differ", trial);
            accepted++;
        }
        if (mutation == 0) CHECK(ours, "trial %d: rejected a canonical encoding of %zu bytes", trial, want);
        agreements += ours == theirs;
    }
    CHECK(accepted > 800, "only %d canonical encodings accepted", accepted);
    printf("base64: %d of 6000 verdicts equal to libsodium's, %d accepted\n", agreements, accepted);
}

static void test_f16(void) {
    enum { N = 4099 }; /* not a multiple of 8: the scalar tail runs too */
    static float in[N];
    static uint16_t fast[N];
    int mismatches = 0;
    /* Every 251st bit pattern of the float32 space (NaNs skipped), in blocks, plus the edges. */
    uint32_t bits = 0;
    for (int block = 0; block < 4200; block++) {
        int k = 0;
        while (k < N) {
            bits += 251;
            float f;
            memcpy(&f, &bits, 4);
            if (!isnan(f)) in[k++] = f;
        }
        if (block == 0) {
            const float edges[] = {0.0f, -0.0f, 65504.0f, 65520.0f, -65520.0f, 6.1035156e-05f, 5.9604645e-08f,
                                   2.9802322e-08f, 2.9802326e-08f, 1e-10f, INFINITY, -INFINITY, 1.0009766f, 0.33333334f};
            memcpy(in, edges, sizeof edges);
        }
        pgcl_f32_to_f16_array(in, fast, N);
        for (int i = 0; i < N; i++) mismatches += fast[i] != pgcl_f32_to_f16(in[i]);
    }
    CHECK(mismatches == 0, "%d float16 conversions differ from the scalar code", mismatches);
    float nan_in[9] = {NAN, -NAN, 1, 2, 3, 4, 5, 6, NAN};
    uint16_t nan_out[9];
    pgcl_f32_to_f16_array(nan_in, nan_out, 9);
    CHECK((nan_out[0] & 0x7c00) == 0x7c00 && (nan_out[0] & 0x3ff) && !(nan_out[0] & 0x8000), "NaN -> %04x", nan_out[0]);
    CHECK((nan_out[1] & 0x8000) && (nan_out[1] & 0x3ff), "-NaN -> %04x", nan_out[1]);
}

int main(void) {
    if (sodium_init() < 0) return 1;
    test_sha256();
    test_base64();
    test_f16();
    return test_finish("test_codecs");
}
