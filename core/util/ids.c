/* UUIDv7 and digests; see ids.h. */
#include "ids.h"

#include <pthread.h>
#include <stdbool.h>
#include <sodium.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "sha256.h"

static pthread_mutex_t g_uuid_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t g_last_ms;
static uint32_t g_counter;

void pgcl_uuid7(char out[PGCL_UUID_LEN + 1]) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t ms = (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
    pthread_mutex_lock(&g_uuid_lock);
    if (ms <= g_last_ms) { /* same millisecond (or the clock stepped back): count on */
        ms = g_last_ms;
        if (++g_counter > 0xfff) {
            ms++;
            g_counter = 0;
        }
    } else {
        g_counter = 0;
    }
    g_last_ms = ms;
    uint32_t counter = g_counter;
    pthread_mutex_unlock(&g_uuid_lock);

    unsigned char b[16];
    randombytes_buf(b + 8, 8);
    for (int i = 0; i < 6; i++) b[i] = (unsigned char)(ms >> (40 - 8 * i));
    b[6] = (unsigned char)(0x70 | (counter >> 8));
    b[7] = (unsigned char)(counter & 0xff);
    b[8] = (unsigned char)(0x80 | (b[8] & 0x3f));
    static const char hex[] = "0123456789abcdef";
    int o = 0;
    for (int i = 0; i < 16; i++) {
        if (i == 4 || i == 6 || i == 8 || i == 10) out[o++] = '-';
        out[o++] = hex[b[i] >> 4];
        out[o++] = hex[b[i] & 15];
    }
    out[o] = 0;
}

void pgcl_trace_id_new(char out[PGCL_TRACE_ID_LEN + 1]) {
    unsigned char b[PGCL_TRACE_ID_LEN / 2];
    do randombytes_buf(b, sizeof b);
    while (sodium_is_zero(b, sizeof b)); /* an all-zero trace id is invalid (W3C Trace Context) */
    sodium_bin2hex(out, PGCL_TRACE_ID_LEN + 1, b, sizeof b);
}

void pgcl_sha256_hex(const void *data, size_t len, char out[65]) {
    unsigned char h[PGCL_SHA256_BYTES];
    pgcl_sha256(data, len, h);
    pgcl_sha256_to_hex(h, out);
}
