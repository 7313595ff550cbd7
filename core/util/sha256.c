/* SHA-256 over OpenSSL's EVP interface; see sha256.h. The algorithm object is fetched once
 * (EVP_MD_fetch) rather than looked up on every call. */
#include "sha256.h"

#include <openssl/evp.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

static pthread_once_t g_fetch_once = PTHREAD_ONCE_INIT;
static EVP_MD *g_md;

static void free_md(void) { EVP_MD_free(g_md); }

static void fetch_md(void) {
    g_md = EVP_MD_fetch(NULL, "SHA256", NULL);
    if (g_md) atexit(free_md);
}

/* The fetched SHA-256, or the built-in table entry if fetching failed (never NULL). */
static const EVP_MD *sha256_md(void) {
    pthread_once(&g_fetch_once, fetch_md);
    return g_md ? g_md : EVP_sha256();
}

/* EVP's SHA-256 fails only on allocation failure inside OpenSSL; a wrong digest would silently
 * corrupt the audit chain, so failure aborts. */
static void must(int ok, const char *what) {
    if (!ok) {
        pgcl_log_error("SHA-256: %s failed inside OpenSSL; stopping rather than writing a wrong digest", what);
        abort();
    }
}

void pgcl_sha256(const void *data, size_t len, unsigned char out[PGCL_SHA256_BYTES]) {
    unsigned n = 0;
    must(EVP_Digest(data, len, out, &n, sha256_md(), NULL) && n == PGCL_SHA256_BYTES, "digest");
}

void pgcl_sha256_to_hex(const unsigned char digest[PGCL_SHA256_BYTES], char out[2 * PGCL_SHA256_BYTES + 1]) {
    static const char hex[] = "0123456789abcdef";
    for (int i = 0; i < PGCL_SHA256_BYTES; i++) {
        out[2 * i] = hex[digest[i] >> 4];
        out[2 * i + 1] = hex[digest[i] & 15];
    }
    out[2 * PGCL_SHA256_BYTES] = 0;
}

void pgcl_sha256_prefixed(unsigned char prefix, const void *data, size_t len, unsigned char out[PGCL_SHA256_BYTES]) {
    unsigned char small[1024];
    if (len < sizeof small) { /* one copy and one call: cheaper than a context for short messages */
        small[0] = prefix;
        if (len) memcpy(small + 1, data, len);
        pgcl_sha256(small, len + 1, out);
        return;
    }
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    unsigned n = 0;
    must(ctx && EVP_DigestInit_ex(ctx, sha256_md(), NULL) && EVP_DigestUpdate(ctx, &prefix, 1) &&
             EVP_DigestUpdate(ctx, data, len) && EVP_DigestFinal_ex(ctx, out, &n) && n == PGCL_SHA256_BYTES,
         "prefixed digest");
    EVP_MD_CTX_free(ctx);
}
