/* The pure rules of a request's trace context (server/http/trace_context.c) and of a score item's
 * facts for a statement of reasons (server/wire/item_facts.c), each boundary both ways: a
 * traceparent's version, lengths, separators, case and all-zero ids; a request id's length and
 * characters; calendar dates (leap years, month ends, the lower bound and tomorrow), the EEA list
 * as the DSA Transparency Database spells it, ISO 639-1 codes in uppercase. The daemon's use of
 * them is tests/integration/test_trace_context.py. */
#include <string.h>

#include "ids.h"
#include "item_facts.h"
#include "test_util.h"
#include "trace_context.h"

#define TRACE "4bf92f3577b34da6a3ce929d0e0e4736"
#define PARENT "00f067aa0ba902b7"

/* A C string as the header field value pgcld_header_field gives (NULL: absent). */
static pgcld_field field(const char *value) { return (pgcld_field){value, value ? strlen(value) : 0}; }

static void expect_trace(const char *value, const char *want) {
    char out[PGCL_TRACE_ID_LEN + 1] = "untouched";
    bool ok = pgcld_traceparent_trace_id(field(value), out);
    if (want) {
        CHECK(ok && strcmp(out, want) == 0, "traceparent '%s' gives %s, got %s", value ? value : "(null)", want,
              ok ? out : "invalid");
    } else {
        CHECK(!ok && strcmp(out, "untouched") == 0, "traceparent '%s' is invalid", value ? value : "(null)");
    }
}

static void test_traceparent(void) {
    expect_trace("00-" TRACE "-" PARENT "-01", TRACE);
    expect_trace("00-" TRACE "-" PARENT "-00", TRACE);
    expect_trace("01-" TRACE "-" PARENT "-01", TRACE);           /* a later version: its version-00 fields */
    expect_trace("01-" TRACE "-" PARENT "-01-more", TRACE);      /* ... and what it adds after a '-' */
    expect_trace("fe-" TRACE "-" PARENT "-01", TRACE);
    expect_trace("ff-" TRACE "-" PARENT "-01", NULL);            /* version ff is invalid */
    expect_trace("00-" TRACE "-" PARENT "-01-more", NULL);       /* version 00 is exactly 55 characters */
    expect_trace("01-" TRACE "-" PARENT "-01more", NULL);        /* a later version: '-' after 55 */
    expect_trace("00-4BF92F3577B34DA6A3CE929D0E0E4736-" PARENT "-01", NULL); /* uppercase */
    expect_trace("0A-" TRACE "-" PARENT "-01", NULL);
    expect_trace("00-" TRACE "-" PARENT "-0G", NULL);
    expect_trace("00-00000000000000000000000000000000-" PARENT "-01", NULL);
    expect_trace("00-" TRACE "-0000000000000000-01", NULL);
    expect_trace("00-00000000000000000000000000000001-0000000000000001-01", "00000000000000000000000000000001");
    expect_trace("00-" TRACE "-" PARENT "-1", NULL);
    expect_trace("00_" TRACE "_" PARENT "_01", NULL);
    expect_trace("00-" TRACE "a-" PARENT "-1", NULL);
    expect_trace("", NULL);
    expect_trace(NULL, NULL);
}

static void test_request_id(void) {
    char id[PGCL_REQUEST_ID_MAX + 2];
    memset(id, 'a', sizeof id);
    id[PGCL_REQUEST_ID_MAX] = 0;
    CHECK(pgcld_request_id_acceptable(field(id)), "128 bytes");
    id[PGCL_REQUEST_ID_MAX] = 'a';
    id[PGCL_REQUEST_ID_MAX + 1] = 0;
    CHECK(!pgcld_request_id_acceptable(field(id)), "129 bytes");
    CHECK(pgcld_request_id_acceptable(field("a")), "1 byte");
    CHECK(pgcld_request_id_acceptable(field("!#$%&()*+,-./:;<=>?@[]^_`{|}~")), "visible punctuation");
    const char *const bad[] = {"", "a b", "a\"b", "a'b", "a\\b", "a\tb", "caf\xc3\xa9", "a\x7f", NULL};
    for (int i = 0; bad[i]; i++) CHECK(!pgcld_request_id_acceptable(field(bad[i])), "refused: case %d", i);
    CHECK(!pgcld_request_id_acceptable(field(NULL)), "NULL");
}

static void test_content_date(void) {
    const long today = 20261126;
    const char *const good[] = {"2000-01-01", "2024-02-29", "2000-02-29", "2026-11-26", "2026-11-27", "2025-12-31",
                                NULL};
    for (int i = 0; good[i]; i++) CHECK(pgcld_content_date_valid(good[i], today), "valid: %s", good[i]);
    const char *const bad[] = {"1999-12-31", "2023-02-29", "1900-02-29", "2026-11-28", "2024-04-31", "2024-13-01",
                               "2024-00-10", "2024-01-00", "2024-1-01",  "2024/01/01", "20240101",   "2024-01-01T00",
                               "",           "abcd-ef-gh", NULL};
    for (int i = 0; bad[i]; i++) CHECK(!pgcld_content_date_valid(bad[i], today), "invalid: %s", bad[i]);
    /* tomorrow across a month's and a year's end */
    CHECK(pgcld_content_date_valid("2027-01-01", 20261231), "new year's day is tomorrow on 31 December");
    CHECK(!pgcld_content_date_valid("2027-01-02", 20261231), "two days ahead");
    CHECK(pgcld_content_date_valid("2024-02-29", 20240228), "29 February is tomorrow in a leap year");
    CHECK(pgcld_content_date_valid("2023-03-01", 20230228), "1 March is tomorrow otherwise");
}

static void test_codes(void) {
    const char *const eea[] = {"AT", "BE", "BG", "CY", "CZ", "DE", "DK", "EE", "ES", "FI", "FR", "GR", "HR", "HU", "IE",
                               "IS", "IT", "LI", "LT", "LU", "LV", "MT", "NL", "NO", "PL", "PT", "RO", "SE", "SI", "SK"};
    for (size_t i = 0; i < sizeof eea / sizeof eea[0]; i++) CHECK(pgcld_eea_country(eea[i]), "EEA: %s", eea[i]);
    const char *const not_eea[] = {"EL", "GB", "UK", "CH", "EU", "de", "D", "DEU", "", NULL};
    for (int i = 0; not_eea[i]; i++) CHECK(!pgcld_eea_country(not_eea[i]), "not EEA: '%s'", not_eea[i]);
    const char *const languages[] = {"EN", "DE", "EL", "GA", "MT", "NB", "ZU", "AA", NULL};
    for (int i = 0; languages[i]; i++) CHECK(pgcld_iso639_1_upper(languages[i]), "ISO 639-1: %s", languages[i]);
    const char *const not_languages[] = {"en", "XX", "ENG", "E", "", "QQ", NULL};
    for (int i = 0; not_languages[i]; i++)
        CHECK(!pgcld_iso639_1_upper(not_languages[i]), "not ISO 639-1: '%s'", not_languages[i]);
}

int main(void) {
    test_traceparent();
    test_request_id();
    test_content_date();
    test_codes();
    return test_finish("test_trace_fields");
}
