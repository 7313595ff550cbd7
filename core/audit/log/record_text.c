/* The text forms the stores hold today (record.h, "today's text forms"), to and from the binary
 * fields of a record: every parse accepts exactly what its format writes, so a value read from a
 * row, put in a record and written back out is the row's text again. */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "record.h"
#include "record_internal.h"

static int hex_value(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1; /* uppercase is not the canonical form */
}

bool pgcl_record_hex_parse(const char *text, uint8_t *out, size_t n) {
    if (!text || strnlen(text, 2 * n + 1) != 2 * n) return false;
    for (size_t i = 0; i < n; i++) {
        int hi = hex_value(text[2 * i]), lo = hex_value(text[2 * i + 1]);
        if (hi < 0 || lo < 0) return false;
        out[i] = (uint8_t)(hi << 4 | lo);
    }
    return true;
}

void pgcl_record_hex_format(const uint8_t *bytes, size_t n, char *out) {
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = digits[bytes[i] >> 4];
        out[2 * i + 1] = digits[bytes[i] & 15];
    }
    out[2 * n] = 0;
}

/* The UUID text's groups: 8-4-4-4-12 hex digits, hyphens at 8, 13, 18 and 23. */
static bool uuid_hyphen(int i) { return i == 8 || i == 13 || i == 18 || i == 23; }

bool pgcl_record_uuid_parse(const char *text, uint8_t out[PGCL_RECORD_UUID_BYTES]) {
    if (!text || strnlen(text, 37) != 36) return false;
    int n = 0;
    for (int i = 0; i < 36; i += 2) {
        if (uuid_hyphen(i)) {
            if (text[i] != '-') return false;
            i--; /* the pair starts after the hyphen */
            continue;
        }
        int hi = hex_value(text[i]), lo = hex_value(text[i + 1]);
        if (hi < 0 || lo < 0) return false;
        out[n++] = (uint8_t)(hi << 4 | lo);
    }
    return n == PGCL_RECORD_UUID_BYTES;
}

void pgcl_record_uuid_format(const uint8_t id[PGCL_RECORD_UUID_BYTES], char out[37]) {
    static const char digits[] = "0123456789abcdef";
    int at = 0;
    for (int i = 0; i < PGCL_RECORD_UUID_BYTES; i++) {
        if (uuid_hyphen(at)) out[at++] = '-';
        out[at++] = digits[id[i] >> 4];
        out[at++] = digits[id[i] & 15];
    }
    out[at] = 0;
}

/* The value of the n decimal digits at s, or -1 when one is not a digit. */
static int digits_at(const char *s, int n) {
    int v = 0;
    for (int i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9') return -1;
        v = v * 10 + (s[i] - '0');
    }
    return v;
}

bool pgcl_record_time_parse(const char *text, int64_t *us) {
    /* 2026-11-21T10:33:00.123456Z: 27 characters */
    if (!text || strnlen(text, 28) != 27 || text[4] != '-' || text[7] != '-' || text[10] != 'T' || text[13] != ':' ||
        text[16] != ':' || text[19] != '.' || text[26] != 'Z')
        return false;
    int y = digits_at(text, 4), mo = digits_at(text + 5, 2), d = digits_at(text + 8, 2), h = digits_at(text + 11, 2),
        mi = digits_at(text + 14, 2), s = digits_at(text + 17, 2), frac = digits_at(text + 20, 6);
    if (y < 1970 || mo < 1 || mo > 12 || d < 1 || d > pgcl_record_days_in_month(y, mo) || h < 0 || h > 23 || mi < 0 ||
        mi > 59 || s < 0 || s > 59 || frac < 0)
        return false;
    struct tm tm = {.tm_year = y - 1900, .tm_mon = mo - 1, .tm_mday = d, .tm_hour = h, .tm_min = mi, .tm_sec = s};
    time_t secs = timegm(&tm);
    *us = (int64_t)secs * 1000000 + frac;
    return true;
}

void pgcl_record_time_format(int64_t us, char out[28]) {
    PGCL_ASSERT(us >= 0 && us < PGCL_RECORD_TIME_END_US);
    time_t secs = (time_t)(us / 1000000);
    struct tm tm;
    struct tm *ok = gmtime_r(&secs, &tm);
    PGCL_ASSERT(ok);
    char buf[64];
    snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%06dZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
             tm.tm_hour, tm.tm_min, tm.tm_sec, (int)(us % 1000000));
    memcpy(out, buf, 27);
    out[27] = 0;
}

bool pgcl_record_territories_parse(const char *json, pgcl_record_decision *d) {
    /* ["DE","FR"]: '[', then per code '"XX"' with ',' between, then ']' */
    size_t n = json ? strnlen(json, PGCL_RECORD_TERRITORIES_MAX * 5 + 2) : 0;
    if (n < 6 || json[0] != '[' || json[n - 1] != ']' || (n - 1) % 5 != 0) return false;
    size_t count = (n - 1) / 5;
    if (count > PGCL_RECORD_TERRITORIES_MAX) return false;
    for (size_t i = 0; i < count; i++) {
        const char *c = json + 1 + 5 * i;
        if (c[0] != '"' || c[3] != '"' || c[4] != (i + 1 < count ? ',' : ']')) return false;
        if (c[1] < 'A' || c[1] > 'Z' || c[2] < 'A' || c[2] > 'Z') return false;
        for (size_t j = 0; j < i; j++)
            if (memcmp(d->territories[j], c + 1, 2) == 0) return false; /* unique, as pgcld writes it */
        d->territories[i][0] = c[1];
        d->territories[i][1] = c[2];
        d->territories[i][2] = 0;
    }
    d->n_territories = (uint8_t)count;
    return true;
}

void pgcl_record_territories_format(const pgcl_record_decision *d, char out[PGCL_RECORD_TERRITORIES_MAX * 5 + 3]) {
    PGCL_ASSERT(d->n_territories >= 1 && d->n_territories <= PGCL_RECORD_TERRITORIES_MAX);
    size_t at = 0;
    out[at++] = '[';
    for (int i = 0; i < d->n_territories; i++) {
        out[at++] = '"';
        out[at++] = d->territories[i][0];
        out[at++] = d->territories[i][1];
        out[at++] = '"';
        out[at++] = i + 1 < d->n_territories ? ',' : ']';
    }
    out[at] = 0;
}
