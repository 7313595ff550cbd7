/* UUIDv7, timestamps and digests; see ids.h. */
#include "ids.h"

#include <pthread.h>
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

void pgcl_timestamp_after(int64_t offset_s, char out[PGCL_TIMESTAMP_LEN + 1]) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    time_t secs = ts.tv_sec + (time_t)offset_s;
    struct tm tm;
    gmtime_r(&secs, &tm);
    char buf[96];
    snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%06ldZ", tm.tm_year + 1900, tm.tm_mon + 1,
             tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000L);
    memcpy(out, buf, PGCL_TIMESTAMP_LEN);
    out[PGCL_TIMESTAMP_LEN] = 0;
}

void pgcl_timestamp_now(char out[PGCL_TIMESTAMP_LEN + 1]) { pgcl_timestamp_after(0, out); }

int64_t pgcl_monotonic_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

void pgcl_cond_init_monotonic(pthread_cond_t *cond) {
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(cond, &attr);
    pthread_condattr_destroy(&attr);
}

struct timespec pgcl_monotonic_timespec(int64_t t_us) {
    return (struct timespec){.tv_sec = (time_t)(t_us / 1000000), .tv_nsec = (long)(t_us % 1000000) * 1000};
}

void pgcl_sha256_hex(const void *data, size_t len, char out[65]) {
    unsigned char h[PGCL_SHA256_BYTES];
    pgcl_sha256(data, len, h);
    pgcl_sha256_to_hex(h, out);
}
