/* Wall-clock timestamps and the monotonic clock; see clock.h. */
#include "clock.h"

#include <stdio.h>
#include <string.h>

void pgcl_timestamp_after_us(int64_t offset_us, char out[PGCL_TIMESTAMP_LEN + 1]) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    int64_t t_us = (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000 + offset_us;
    int64_t whole = t_us / 1000000, micros = t_us % 1000000;
    if (micros < 0) { /* before 1970: the second below, and the microseconds after it */
        whole--;
        micros += 1000000;
    }
    time_t secs = (time_t)whole;
    struct tm tm;
    gmtime_r(&secs, &tm);
    char buf[96];
    snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%06lldZ", tm.tm_year + 1900, tm.tm_mon + 1,
             tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, (long long)micros);
    memcpy(out, buf, PGCL_TIMESTAMP_LEN);
    out[PGCL_TIMESTAMP_LEN] = 0;
}

void pgcl_timestamp_after(int64_t offset_s, char out[PGCL_TIMESTAMP_LEN + 1]) {
    pgcl_timestamp_after_us(offset_s * 1000000, out);
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
