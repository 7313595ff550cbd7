/* The pure rules of how pgcld reads a request's values (issue 27), each boundary both ways: a header
 * value without the optional whitespace around it (server/http/header_field.c: SP and HTAB only,
 * RFC 9110 §5.5), a media type read from such a value (server/http/reply.c), and a decimal integer
 * parameter told malformed or out of range (server/http/request.c). The daemon's use of them is
 * tests/integration/test_hardening.py, test_trace_context.py and test_consistency.py. */
#include <stdint.h>
#include <string.h>

#include "header_field.h"
#include "server.h"
#include "test_util.h"

/* pgcld_field_trim of a C string, as "[kept]" for the messages. */
static void expect_trim(const char *value, const char *want) {
    pgcld_field f = pgcld_field_trim(value, strlen(value));
    CHECK(f.len == strlen(want) && memcmp(f.at, want, f.len) == 0, "'%s' trims to '%s', got '%.*s'", value, want,
          (int)f.len, f.at);
}

static void test_trim(void) {
    expect_trim("abc", "abc");
    expect_trim("abc  ", "abc");
    expect_trim("abc\t", "abc");
    expect_trim(" \t abc \t ", "abc");
    expect_trim("a b\tc", "a b\tc"); /* inside the value: kept */
    expect_trim("   ", "");
    expect_trim("", "");
    /* only SP and HTAB are optional whitespace */
    expect_trim("abc\xc2\xa0", "abc\xc2\xa0");
    expect_trim("abc\xa0", "abc\xa0");
    expect_trim("abc\v", "abc\v");
    expect_trim("abc\f", "abc\f");
    expect_trim("abc\r", "abc\r");
    expect_trim("\nabc", "\nabc");
    pgcld_field absent = pgcld_field_trim(NULL, 0);
    CHECK(!absent.at && absent.len == 0, "NULL is the absent field");
    pgcld_field empty = pgcld_field_trim("  ", 2);
    CHECK(empty.at && empty.len == 0, "an empty value is present");
    /* the length bounds it: a value is not NUL-terminated where whitespace was cut off */
    pgcld_field part = pgcld_field_trim("ab  cd", 4);
    CHECK(part.len == 2 && memcmp(part.at, "ab", 2) == 0, "only len bytes are read");
}

static void test_copy_and_compare(void) {
    char buf[4];
    CHECK(pgcld_field_copy(pgcld_field_trim("abc  ", 5), buf, sizeof buf) && strcmp(buf, "abc") == 0, "copy fits");
    CHECK(!pgcld_field_copy(pgcld_field_trim("abcd", 4), buf, sizeof buf) && buf[0] == 0, "too long: refused");
    CHECK(!pgcld_field_copy((pgcld_field){NULL, 0}, buf, sizeof buf) && buf[0] == 0, "absent: refused");
    CHECK(pgcld_field_is(pgcld_field_trim(" Chunked\t", 9), "chunked"), "case-insensitive, trimmed");
    CHECK(!pgcld_field_is(pgcld_field_trim("chunked, gzip", 13), "chunked"), "a list is not the token");
    CHECK(!pgcld_field_is(pgcld_field_trim("chunke", 6), "chunked"), "a prefix is not the token");
    CHECK(!pgcld_field_is((pgcld_field){NULL, 0}, "chunked"), "absent");
}

/* pgcld_is_json_type of a C string, trimmed as a header value is. */
static bool is_json(const char *value) { return pgcld_is_json_type(pgcld_field_trim(value, strlen(value))); }

static void test_media_type(void) {
    const char *const good[] = {"application/json", "Application/JSON", "application/json ",
                                "application/json;charset=utf-8", "application/json; charset=UTF-8 \t",
                                "application/json ; charset=\"utf-8\"", "application/json;foo=bar;charset=utf-8",
                                NULL};
    for (int i = 0; good[i]; i++) CHECK(is_json(good[i]), "JSON: '%s'", good[i]);
    const char *const bad[] = {"application/jsonx", "application/jso", "text/json", "application/json;",
                               "application/json; charset=latin1", "application/json; charset=\"utf-8",
                               "application/json; =x", "application/json x", "application/json\xa0", "", NULL};
    for (int i = 0; bad[i]; i++) CHECK(!is_json(bad[i]), "not JSON: '%s'", bad[i]);
    CHECK(!pgcld_is_json_type((pgcld_field){NULL, 0}), "absent");
    /* a value cut at its length: what follows is not read */
    CHECK(pgcld_is_json_type((pgcld_field){"application/jsonXYZ", 16}), "bounded by len");
    CHECK(!pgcld_is_json_type((pgcld_field){"application/json; charset=\"utf-8\"", 32}), "closing quote cut off");
}

static void expect_decimal(const char *text, uint64_t max, pgcld_decimal want, uint64_t want_value) {
    uint64_t v = 12345;
    pgcld_decimal got = pgcld_parse_decimal(text, text ? strlen(text) : 0, max, &v);
    CHECK(got == want, "'%s' (max %llu): status %d, want %d", text ? text : "(null)", (unsigned long long)max,
          (int)got, (int)want);
    if (got == want && want != PGCLD_DECIMAL_MALFORMED)
        CHECK(v == want_value, "'%s' reads %llu, want %llu", text, (unsigned long long)v,
              (unsigned long long)want_value);
    if (got == want && want == PGCLD_DECIMAL_MALFORMED) CHECK(v == 12345, "'%s': out untouched", text);
}

static void test_decimal(void) {
    expect_decimal("0", 10, PGCLD_DECIMAL_OK, 0);
    expect_decimal("10", 10, PGCLD_DECIMAL_OK, 10);
    expect_decimal("11", 10, PGCLD_DECIMAL_TOO_LARGE, 10);
    expect_decimal("0000000000000000000000000000010", 10, PGCLD_DECIMAL_OK, 10); /* leading zeros */
    expect_decimal("9", 0, PGCLD_DECIMAL_TOO_LARGE, 0);
    expect_decimal("0", 0, PGCLD_DECIMAL_OK, 0);
    expect_decimal("9223372036854775807", INT64_MAX, PGCLD_DECIMAL_OK, INT64_MAX);
    expect_decimal("9223372036854775808", INT64_MAX, PGCLD_DECIMAL_TOO_LARGE, INT64_MAX);
    expect_decimal("18446744073709551615", UINT64_MAX, PGCLD_DECIMAL_OK, UINT64_MAX);
    expect_decimal("18446744073709551616", UINT64_MAX, PGCLD_DECIMAL_TOO_LARGE, UINT64_MAX);
    expect_decimal("99999999999999999999999999999999999999999", UINT64_MAX, PGCLD_DECIMAL_TOO_LARGE, UINT64_MAX);
    expect_decimal("4294967296", 1000, PGCLD_DECIMAL_TOO_LARGE, 1000);
    expect_decimal("9007199254740992", INT64_MAX, PGCLD_DECIMAL_OK, 9007199254740992ULL);
    /* malformed whatever its size: the digits before a bad byte do not make it "too large" */
    const char *const bad[] = {"", "-1", "+1", " 1", "1 ", "1.0", "1e3", "0x10", "1_000", "١", "9999999999999999999999x",
                               "x9999999999999999999999", NULL};
    for (int i = 0; bad[i]; i++) expect_decimal(bad[i], UINT64_MAX, PGCLD_DECIMAL_MALFORMED, 0);
    expect_decimal(NULL, 10, PGCLD_DECIMAL_MALFORMED, 0);
    uint64_t v = 0;
    CHECK(pgcld_parse_decimal("123", 2, 1000, &v) == PGCLD_DECIMAL_OK && v == 12, "bounded by len");
}

int main(void) {
    test_trim();
    test_copy_and_compare();
    test_media_type();
    test_decimal();
    return test_finish("test_header_field");
}
