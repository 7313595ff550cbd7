/* RFC 3339 timestamps and the opaque cursors of the reviewers' listings; see time_cursor.h. */
#include "time_cursor.h"

#include <sodium.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

/* ---- timestamps ---- */

/* Days since 1970-01-01 of a proleptic Gregorian date (valid for any year). */
static int64_t days_from_civil(int64_t y, int m, int d) {
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    int64_t yoe = y - era * 400;                                   /* [0, 399] */
    int64_t doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1; /* [0, 365] */
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;           /* [0, 146096] */
    return era * 146097 + doe - 719468;
}

static void civil_from_days(int64_t z, int *y, int *m, int *d) {
    z += 719468;
    int64_t era = (z >= 0 ? z : z - 146096) / 146097;
    int64_t doe = z - era * 146097;
    int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    int64_t mp = (5 * doy + 2) / 153;
    *d = (int)(doy - (153 * mp + 2) / 5 + 1);
    *m = (int)(mp < 10 ? mp + 3 : mp - 9);
    *y = (int)(yoe + era * 400 + (*m <= 2));
}

static bool read_digits(const char *s, int n, int *out) {
    int v = 0;
    for (int i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9') return false;
        v = v * 10 + (s[i] - '0');
    }
    *out = v;
    return true;
}

static int days_in_month(int y, int m) {
    static const int dim[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    return m == 2 && leap ? 29 : dim[m - 1];
}

bool pgcl_time_parse(const char *text, int64_t *us) {
    int y, mo, d, h, mi, s;
    const char *p = text;
    if (!text || strlen(text) > 64) return false;
    if (!read_digits(p, 4, &y) || p[4] != '-' || !read_digits(p + 5, 2, &mo) || p[7] != '-' ||
        !read_digits(p + 8, 2, &d) || (p[10] != 'T' && p[10] != 't') || !read_digits(p + 11, 2, &h) || p[13] != ':' ||
        !read_digits(p + 14, 2, &mi) || p[16] != ':' || !read_digits(p + 17, 2, &s))
        return false;
    if (mo < 1 || mo > 12 || d < 1 || d > days_in_month(y, mo) || h > 23 || mi > 59 || s > 60) return false;
    p += 19;
    int64_t frac = 0;
    bool round_up = false;
    if (*p == '.') {
        p++;
        int n = 0;
        for (; *p >= '0' && *p <= '9'; p++, n++) {
            if (n < 6)
                frac = frac * 10 + (*p - '0');
            else if (*p != '0')
                round_up = true;
        }
        if (n == 0) return false;
        for (; n < 6; n++)
            frac *= 10;
    }
    int64_t offset_s = 0;
    if (*p == 'Z' || *p == 'z') {
        p++;
    } else if (*p == '+' || *p == '-' || *p == ' ') {
        int oh, om;
        int sign = *p == '-' ? -1 : 1;
        if (!read_digits(p + 1, 2, &oh) || p[3] != ':' || !read_digits(p + 4, 2, &om) || oh > 23 || om > 59)
            return false;
        offset_s = sign * (oh * 3600 + om * 60);
        p += 6;
    } else {
        return false;
    }
    if (*p) return false;
    int64_t t =
        (days_from_civil(y, mo, d) * 86400 + h * 3600 + mi * 60 + s - offset_s) * 1000000 + frac + (round_up ? 1 : 0);
    if (t < days_from_civil(0, 1, 1) * PGCL_US_PER_DAY || t >= days_from_civil(10000, 1, 1) * PGCL_US_PER_DAY)
        return false;
    *us = t;
    return true;
}

void pgcl_time_format(int64_t us, char out[PGCL_QTIME_LEN + 1]) {
    int64_t days = us / PGCL_US_PER_DAY, rem = us % PGCL_US_PER_DAY;
    if (rem < 0) {
        rem += PGCL_US_PER_DAY;
        days--;
    }
    int y, m, d;
    civil_from_days(days, &y, &m, &d);
    int64_t sec = rem / 1000000;
    char buf[64];
    snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%06dZ", y, m, d, (int)(sec / 3600), (int)(sec / 60 % 60),
             (int)(sec % 60), (int)(rem % 1000000));
    memcpy(out, buf, PGCL_QTIME_LEN);
    out[PGCL_QTIME_LEN] = 0;
}

int64_t pgcl_time_now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* ---- cursors ----
 * 24 bytes: version (1, = 2), kind, seq (8, big-endian), binding (8), then the first 6 bytes of a
 * BLAKE2b of those 18 bytes under a fixed key. The binding ties a cursor to the filters of the
 * listing that made it (pgcl_decision_filter_binding; zeros for the contest queues, whose kind
 * says which queue): a cursor sent with other filters would page through another listing from a
 * position that means nothing there, so it is refused. The check is not a secret (a cursor only
 * bounds a query its holder may run anyway): it rejects garbage, truncation and hand-edited
 * cursors, and it survives restarts. Version 1 cursors (16 bytes, no binding) are refused: they
 * were made before the binding existed, and a listing started again loses nothing. */

#define CURSOR_VERSION 2
#define CURSOR_BYTES 24
#define CURSOR_MAC 6
static const unsigned char CURSOR_KEY[32] = "pgcld audit cursor, version 1 .";

static void cursor_mac(const unsigned char *msg, unsigned char mac[CURSOR_MAC]) {
    unsigned char h[crypto_generichash_BYTES_MIN];
    crypto_generichash(h, sizeof h, msg, CURSOR_BYTES - CURSOR_MAC, CURSOR_KEY, sizeof CURSOR_KEY);
    memcpy(mac, h, CURSOR_MAC);
}

/* Appends one optional text member of the filters' canonical encoding: 0 when absent, else 1,
 * its length (4 bytes, big-endian) and its bytes. */
static void binding_text(crypto_generichash_state *h, const char *v) {
    unsigned char tag = v ? 1 : 0;
    crypto_generichash_update(h, &tag, 1);
    if (!v) return;
    size_t n = strlen(v);
    unsigned char len[4] = {(unsigned char)(n >> 24), (unsigned char)(n >> 16), (unsigned char)(n >> 8),
                            (unsigned char)n};
    crypto_generichash_update(h, len, sizeof len);
    crypto_generichash_update(h, (const unsigned char *)v, n);
}

void pgcl_decision_filter_binding(const pgcl_decision_filter *f, unsigned char out[PGCL_CURSOR_BINDING]) {
    static const char domain[] = "pgcld decision filters 1";
    crypto_generichash_state h;
    crypto_generichash_init(&h, NULL, 0, PGCL_CURSOR_BINDING);
    crypto_generichash_update(&h, (const unsigned char *)domain, sizeof domain - 1);
    const char *members[] = {f->model,   f->version,    f->label, f->decision,
                             f->item_id, f->request_id, f->since, f->until};
    for (size_t i = 0; i < sizeof members / sizeof members[0]; i++)
        binding_text(&h, members[i]);
    if (f->trace_id) { /* bound only when given: the cursors of the other listings keep their binding */
        binding_text(&h, "trace_id");
        binding_text(&h, f->trace_id);
    }
    unsigned char contest = (unsigned char)f->contest;
    crypto_generichash_update(&h, &contest, 1);
    crypto_generichash_final(&h, out, PGCL_CURSOR_BINDING);
}

void pgcl_cursor_encode(char kind, int64_t seq, const unsigned char binding[PGCL_CURSOR_BINDING],
                        char out[PGCL_CURSOR_LEN + 1]) {
    unsigned char b[CURSOR_BYTES];
    b[0] = CURSOR_VERSION;
    b[1] = (unsigned char)kind;
    for (int i = 0; i < 8; i++)
        b[2 + i] = (unsigned char)((uint64_t)seq >> (56 - 8 * i));
    memcpy(b + 10, binding, PGCL_CURSOR_BINDING);
    cursor_mac(b, b + CURSOR_BYTES - CURSOR_MAC);
    sodium_bin2base64(out, PGCL_CURSOR_LEN + 1, b, sizeof b, sodium_base64_VARIANT_URLSAFE_NO_PADDING);
}

pgcl_cursor_check pgcl_cursor_decode(const char *text, char kind, const unsigned char binding[PGCL_CURSOR_BINDING],
                                     int64_t *seq) {
    unsigned char b[CURSOR_BYTES], mac[CURSOR_MAC];
    size_t n = 0;
    const char *end = NULL;
    if (!text || strlen(text) != PGCL_CURSOR_LEN ||
        sodium_base642bin(b, sizeof b, text, PGCL_CURSOR_LEN, NULL, &n, &end,
                          sodium_base64_VARIANT_URLSAFE_NO_PADDING) != 0 ||
        n != sizeof b || end != text + PGCL_CURSOR_LEN || b[0] != CURSOR_VERSION || b[1] != (unsigned char)kind)
        return PGCL_CURSOR_INVALID;
    cursor_mac(b, mac);
    if (sodium_memcmp(mac, b + CURSOR_BYTES - CURSOR_MAC, CURSOR_MAC) != 0) return PGCL_CURSOR_INVALID;
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = v << 8 | b[2 + i];
    if (v < 1 || v > (uint64_t)INT64_MAX) return PGCL_CURSOR_INVALID;
    if (sodium_memcmp(b + 10, binding, PGCL_CURSOR_BINDING) != 0) return PGCL_CURSOR_OTHER_FILTERS;
    *seq = (int64_t)v;
    return PGCL_CURSOR_OK;
}
