/* The logger's lines (core/util/log.c) against nasty strings: every JSON line must parse (jansson,
 * which refuses invalid UTF-8 and raw control characters, is the oracle) and give back the text it
 * was given — valid UTF-8 exactly, each invalid byte as U+FFFD; every text line must stay one line
 * with its key=value fields readable; a line longer than the buffer is cut and stays well-formed. */
#include <jansson.h>
#include <string.h>

#include "log.h"
#include "test_util.h"

static const struct timespec WHEN = {.tv_sec = 1795651200, .tv_nsec = 123456789}; /* 2026-11-26T00:00:00.123Z */

/* Nasty strings, and what a JSON parser must read back from each. */
static const struct {
    const char *in, *want;
} NASTY[] = {
    {"plain", "plain"},
    {"", ""},
    {"quote \" backslash \\ slash /", "quote \" backslash \\ slash /"},
    {"line\nbreak\r\ttab\b\f", "line\nbreak\r\ttab\b\f"},
    {"\x01\x02\x1f\x7f", "\x01\x02\x1f\x7f"},
    {"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80", "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"},
    {"\xe2\x80\xa8 separators \xe2\x80\xa9", "\xe2\x80\xa8 separators \xe2\x80\xa9"},
    {"stray \x80 continuation", "stray \xef\xbf\xbd continuation"},
    {"overlong \xc0\xaf slash", "overlong \xef\xbf\xbd\xef\xbf\xbd slash"},
    {"surrogate \xed\xa0\x80", "surrogate \xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"},
    {"beyond \xf4\x90\x80\x80", "beyond \xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"},
    {"cut short \xe2\x82", "cut short \xef\xbf\xbd\xef\xbf\xbd"},
    {"\xff\xfe", "\xef\xbf\xbd\xef\xbf\xbd"},
    {"{\"json\": [1, 2]} inside", "{\"json\": [1, 2]} inside"},
    {"key=value \"quoted\"", "key=value \"quoted\""},
};
#define N_NASTY ((int)(sizeof NASTY / sizeof NASTY[0]))

static json_t *parse_line(const char *line) {
    size_t n = strlen(line);
    CHECK(n > 0 && line[n - 1] == '\n', "the line ends in a newline: %s", line);
    CHECK(memchr(line, '\n', n - 1) == NULL, "one line only: %s", line);
    json_error_t e;
    json_t *j = json_loadb(line, n, 0, &e);
    CHECK(j && json_is_object(j), "a JSON object: %s (%s)", line, e.text);
    return j;
}

static void test_json_nasty(void) {
    char buf[4096];
    for (int i = 0; i < N_NASTY; i++) {
        pgcl_log_field f[] = {PGCL_LOG_TEXT_FIELD("path", NASTY[i].in), PGCL_LOG_INT_FIELD("status", 404),
                              PGCL_LOG_MS_FIELD("latency_ms", 1.5), PGCL_LOG_TEXT_FIELD("absent", NULL)};
        pgcl_log_format_line(buf, sizeof buf, PGCL_LOG_JSON, &WHEN, PGCL_LOG_WARN, NASTY[i].in, f, 4);
        json_t *j = parse_line(buf);
        if (!j) continue;
        CHECK(strcmp(json_string_value(json_object_get(j, "msg")), NASTY[i].want) == 0, "msg %d: %s", i, buf);
        CHECK(strcmp(json_string_value(json_object_get(j, "path")), NASTY[i].want) == 0, "path %d: %s", i, buf);
        CHECK(strcmp(json_string_value(json_object_get(j, "ts")), "2026-11-26T00:00:00.123Z") == 0, "ts: %s", buf);
        CHECK(strcmp(json_string_value(json_object_get(j, "level")), "warn") == 0, "level: %s", buf);
        CHECK(json_integer_value(json_object_get(j, "status")) == 404, "status: %s", buf);
        CHECK(json_real_value(json_object_get(j, "latency_ms")) == 1.5, "latency_ms: %s", buf);
        CHECK(json_object_get(j, "absent") == NULL, "a NULL text is left out: %s", buf);
        json_decref(j);
    }
}

static void test_json_component(void) {
    char buf[1024];
    pgcl_log_format_line(buf, sizeof buf, PGCL_LOG_JSON, &WHEN, PGCL_LOG_INFO, "audit checkpoint: head 3 signed", NULL,
                         0);
    json_t *j = parse_line(buf);
    CHECK(j && strcmp(json_string_value(json_object_get(j, "component")), "audit checkpoint") == 0, "%s", buf);
    CHECK(j && strcmp(json_string_value(json_object_get(j, "msg")), "audit checkpoint: head 3 signed") == 0, "%s", buf);
    json_decref(j);
    pgcl_log_format_line(buf, sizeof buf, PGCL_LOG_JSON, &WHEN, PGCL_LOG_INFO, "ready in 3.0 ms", NULL, 0);
    j = parse_line(buf);
    CHECK(j && json_object_get(j, "component") == NULL, "no component without 'word: ': %s", buf);
    json_decref(j);
}

/* Lines cut at every length from the shortest buffer up: each still one JSON object. */
static void test_json_cut(void) {
    char big[3000];
    for (size_t i = 0; i + 1 < sizeof big; i++)
        big[i] = "a\"\\\n\xc3\xa9\x01"[i % 7];
    big[sizeof big - 1] = 0;
    char buf[1200];
    for (size_t cap = 128; cap <= sizeof buf; cap += 7) {
        pgcl_log_field f[] = {PGCL_LOG_TEXT_FIELD("path", big), PGCL_LOG_INT_FIELD("status", 200),
                              PGCL_LOG_TEXT_FIELD("key_id", "k1")};
        size_t n = pgcl_log_format_line(buf, cap, PGCL_LOG_JSON, &WHEN, PGCL_LOG_INFO, cap % 2 ? big : "short", f, 3);
        CHECK(n < cap && strlen(buf) == n, "cap %zu: length %zu", cap, n);
        json_decref(parse_line(buf));
    }
}

static void test_text(void) {
    char buf[2048];
    pgcl_log_field f[] = {PGCL_LOG_TEXT_FIELD("request_id", "0190-ab"),
                          PGCL_LOG_TEXT_FIELD("path", "/v1/a b\n\"c\""),
                          PGCL_LOG_INT_FIELD("status", 200),
                          PGCL_LOG_MS_FIELD("latency_ms", 2.25),
                          PGCL_LOG_TEXT_FIELD("empty", ""),
                          PGCL_LOG_TEXT_FIELD("bad", "x\xff=y")};
    pgcl_log_format_line(buf, sizeof buf, PGCL_LOG_TEXT, &WHEN, PGCL_LOG_INFO, "access\nforged line", f, 6);
    const char *want = "2026-11-26T00:00:00.123Z info  access\\nforged line request_id=0190-ab "
                       "path=\"/v1/a b\\n\\\"c\\\"\" status=200 latency_ms=2.250 empty=\"\" bad=\"x\\xff=y\"\n";
    CHECK(strcmp(buf, want) == 0, "text line:\n got %s want %s", buf, want);
    pgcl_log_format_line(buf, sizeof buf, PGCL_LOG_TEXT, &WHEN, PGCL_LOG_ERROR, "models: plain", NULL, 0);
    CHECK(strcmp(buf, "2026-11-26T00:00:00.123Z error models: plain\n") == 0, "unchanged plain line: %s", buf);
}

static void test_parse(void) {
    pgcl_log_format f;
    CHECK(pgcl_log_parse_format("json", &f) == 0 && f == PGCL_LOG_JSON, "json");
    CHECK(pgcl_log_parse_format("text", &f) == 0 && f == PGCL_LOG_TEXT, "text");
    CHECK(pgcl_log_parse_format("JSON", &f) == -1, "names are exact");
}

int main(void) {
    test_json_nasty();
    test_json_component();
    test_json_cut();
    test_text();
    test_parse();
    return test_finish("test_log");
}
