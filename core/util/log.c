/* stderr logger with UTC timestamps, in text or JSON lines (log.h). Each line is built whole in a
 * buffer of its own and written with one call, which keeps lines whole across threads.
 *
 * Escaping is written here rather than borrowed from jansson, because a log line must never fail:
 * a message may hold any bytes (a request path, a file name, a database's error), and each becomes
 * either itself (printable ASCII, valid UTF-8), an escape, or U+FFFD for a byte that is not UTF-8. */
#include "log.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

static _Atomic int g_level = PGCL_LOG_INFO;
static _Atomic int g_format = PGCL_LOG_TEXT;
static const char *const g_names[] = {"debug", "info", "warn", "error"};
static const char *const g_formats[] = {"text", "json"};

void pgcl_log_set_level(pgcl_log_level level) {
    atomic_store(&g_level, (int)level);
}
void pgcl_log_set_format(pgcl_log_format format) {
    atomic_store(&g_format, (int)format);
}
int pgcl_log_enabled(pgcl_log_level level) {
    return (int)level >= atomic_load(&g_level);
}

int pgcl_log_parse_level(const char *name, pgcl_log_level *out) {
    for (int i = 0; i < 4; i++) {
        if (strcmp(name, g_names[i]) == 0) {
            *out = (pgcl_log_level)i;
            return 0;
        }
    }
    return -1;
}

int pgcl_log_parse_format(const char *name, pgcl_log_format *out) {
    for (int i = 0; i < 2; i++) {
        if (strcmp(name, g_formats[i]) == 0) {
            *out = (pgcl_log_format)i;
            return 0;
        }
    }
    return -1;
}

/* ------------------------------------------------------------------------------------------------
 * A line under construction: appends stop at `limit` (cap less the room kept for the line's end),
 * so that a cut line still closes its string and object. */

#define LINE_END_ROOM 8 /* '"', '}', '\n', NUL and spare */

typedef struct line {
    char *buf;
    size_t len, limit;
    bool cut; /* something did not fit: later values are dropped */
} line;

static bool put(line *l, const char *s, size_t n) {
    if (l->cut || l->len + n > l->limit) {
        l->cut = true;
        return false;
    }
    memcpy(l->buf + l->len, s, n);
    l->len += n;
    return true;
}

static bool puts_(line *l, const char *s) {
    return put(l, s, strlen(s));
}

/* The length of the valid UTF-8 sequence at s (1 to 4), or 0 when the bytes there are not one
 * (a stray continuation byte, an overlong form, a surrogate, beyond U+10FFFF, cut short). */
static size_t utf8_sequence(const unsigned char *s, size_t left) {
    unsigned char c = s[0];
    size_t n;
    uint32_t cp;
    if (c < 0x80) return 1;
    if (c >= 0xc2 && c <= 0xdf)
        n = 2, cp = c & 0x1f;
    else if (c >= 0xe0 && c <= 0xef)
        n = 3, cp = c & 0x0f;
    else if (c >= 0xf0 && c <= 0xf4)
        n = 4, cp = c & 0x07;
    else
        return 0;
    if (left < n) return 0;
    for (size_t i = 1; i < n; i++) {
        if ((s[i] & 0xc0) != 0x80) return 0;
        cp = (cp << 6) | (s[i] & 0x3f);
    }
    if ((n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
    return n;
}

/* Appends s escaped for the inside of a JSON string: '"', '\\' and control characters escaped,
 * DEL as \u007f, every byte that is not valid UTF-8 as U+FFFD. Stops (l->cut) when full, between
 * two characters. */
static void put_json_chars(line *l, const char *s) {
    const unsigned char *p = (const unsigned char *)s;
    size_t left = strlen(s);
    while (left > 0 && !l->cut) {
        unsigned char c = *p;
        char esc[8];
        size_t n = utf8_sequence(p, left);
        if (n == 0) {
            put(l, "\xef\xbf\xbd", 3); /* U+FFFD for the one byte; resynchronise at the next */
            n = 1;
        } else if (c == '"' || c == '\\') {
            esc[0] = '\\', esc[1] = (char)c;
            put(l, esc, 2);
        } else if (c < 0x20 || c == 0x7f) {
            const char *named = c == '\n'   ? "\\n"
                                : c == '\r' ? "\\r"
                                : c == '\t' ? "\\t"
                                : c == '\b' ? "\\b"
                                : c == '\f' ? "\\f"
                                            : NULL;
            if (named)
                puts_(l, named);
            else
                put(l, esc, (size_t)snprintf(esc, sizeof esc, "\\u%04x", c));
        } else {
            put(l, (const char *)p, n);
        }
        p += n;
        left -= n;
    }
}

/* Appends s as a JSON string; a value cut short is still closed (LINE_END_ROOM keeps the room), and
 * l->cut stays set so that nothing follows it. */
static void put_json_string(line *l, const char *s) {
    if (!put(l, "\"", 1)) return;
    put_json_chars(l, s);
    l->buf[l->len++] = '"';
}

/* Appends s for a text line: printable bytes and valid UTF-8 as they are; '\\', and '"' when
 * quoted, escaped; control bytes, DEL and invalid UTF-8 as \n, \t, \r or \xNN. */
static void put_text_chars(line *l, const char *s, bool quoted) {
    const unsigned char *p = (const unsigned char *)s;
    size_t left = strlen(s);
    while (left > 0 && !l->cut) {
        unsigned char c = *p;
        char esc[8];
        size_t n = utf8_sequence(p, left);
        if (n == 0 || c < 0x20 || c == 0x7f) {
            const char *named = c == '\n' ? "\\n" : c == '\r' ? "\\r" : c == '\t' ? "\\t" : NULL;
            if (named)
                puts_(l, named);
            else
                put(l, esc, (size_t)snprintf(esc, sizeof esc, "\\x%02x", c));
            n = 1;
        } else if (quoted && (c == '"' || c == '\\')) {
            esc[0] = '\\', esc[1] = (char)c;
            put(l, esc, 2);
        } else {
            put(l, (const char *)p, n);
        }
        p += n;
        left -= n;
    }
}

/* A text value goes bare when it is non-empty and holds no blank, '"', '=', '\\', control byte or
 * invalid UTF-8; else it is quoted. */
static bool text_needs_quotes(const char *s) {
    if (!*s) return true;
    const unsigned char *p = (const unsigned char *)s;
    size_t left = strlen(s);
    while (left > 0) {
        size_t n = utf8_sequence(p, left);
        if (n == 0 || *p <= 0x20 || *p == 0x7f || *p == '"' || *p == '=' || *p == '\\') return true;
        p += n;
        left -= n;
    }
    return false;
}

/* The message's leading component, "audit" of "audit: ...": up to 32 letters, digits, blanks, '_'
 * or '-' before ": ". Its length, or 0 when the message has none. */
static size_t component_len(const char *msg) {
    size_t i = 0;
    while (i < 32 && msg[i] &&
           ((msg[i] >= 'a' && msg[i] <= 'z') || (msg[i] >= 'A' && msg[i] <= 'Z') || (msg[i] >= '0' && msg[i] <= '9') ||
            msg[i] == ' ' || msg[i] == '_' || msg[i] == '-'))
        i++;
    return i > 0 && msg[0] != ' ' && msg[i] == ':' && msg[i + 1] == ' ' ? i : 0;
}

static void put_number(line *l, const pgcl_log_field *f) {
    char num[48];
    int n = f->type == PGCL_LOG_FIELD_INT ? snprintf(num, sizeof num, "%lld", f->integer)
                                          : snprintf(num, sizeof num, "%.3f", f->number);
    put(l, num, (size_t)n);
}

static void json_line(line *l, const char *ts, pgcl_log_level level, const char *msg, const pgcl_log_field *fields,
                      int n) {
    puts_(l, "{\"ts\":\"");
    puts_(l, ts);
    puts_(l, "\",\"level\":\"");
    puts_(l, g_names[level]);
    puts_(l, "\"");
    size_t comp = component_len(msg);
    if (comp) {
        char name[40];
        memcpy(name, msg, comp);
        name[comp] = 0;
        puts_(l, ",\"component\":");
        put_json_string(l, name);
    }
    puts_(l, ",\"msg\":");
    put_json_string(l, msg);
    for (int i = 0; i < n && !l->cut; i++) {
        const pgcl_log_field *f = &fields[i];
        if (f->type == PGCL_LOG_FIELD_TEXT && !f->text) continue;
        size_t mark = l->len; /* a key or a number that does not fit whole is left out */
        puts_(l, ",\"");
        puts_(l, f->key);
        puts_(l, "\":\"");
        if (l->cut) {
            l->len = mark;
        } else if (f->type != PGCL_LOG_FIELD_TEXT) {
            l->len--; /* a number: no quote */
            put_number(l, f);
            if (l->cut) l->len = mark;
        } else {
            put_json_chars(l, f->text); /* cut short at worst, but closed */
            l->buf[l->len++] = '"';
        }
    }
    l->buf[l->len++] = '}';
}

static void text_line(line *l, const char *ts, pgcl_log_level level, const char *msg, const pgcl_log_field *fields,
                      int n) {
    char head[64];
    put(l, head, (size_t)snprintf(head, sizeof head, "%s %-5s ", ts, g_names[level]));
    put_text_chars(l, msg, false);
    for (int i = 0; i < n && !l->cut; i++) {
        const pgcl_log_field *f = &fields[i];
        if (f->type == PGCL_LOG_FIELD_TEXT && !f->text) continue;
        size_t mark = l->len; /* a key or a number that does not fit whole is left out */
        put(l, " ", 1);
        puts_(l, f->key);
        put(l, "=", 1);
        if (l->cut) {
            l->len = mark;
        } else if (f->type != PGCL_LOG_FIELD_TEXT) {
            put_number(l, f);
            if (l->cut) l->len = mark;
        } else if (text_needs_quotes(f->text)) {
            put(l, "\"", 1);
            put_text_chars(l, f->text, true);
            l->buf[l->len++] = '"'; /* closed even when cut short (LINE_END_ROOM) */
        } else {
            put_text_chars(l, f->text, false);
        }
    }
}

size_t pgcl_log_format_line(char *buf, size_t cap, pgcl_log_format format, const struct timespec *when,
                            pgcl_log_level level, const char *msg, const pgcl_log_field *fields, int n) {
    if (cap < 128) {
        if (cap) buf[0] = 0;
        return 0;
    }
    struct tm tm;
    gmtime_r(&when->tv_sec, &tm);
    char ts[96];
    snprintf(ts, sizeof ts, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
             tm.tm_hour, tm.tm_min, tm.tm_sec, when->tv_nsec / 1000000L);
    line l = {.buf = buf, .limit = cap - LINE_END_ROOM};
    if (format == PGCL_LOG_JSON)
        json_line(&l, ts, level, msg, fields, n);
    else
        text_line(&l, ts, level, msg, fields, n);
    buf[l.len++] = '\n';
    buf[l.len] = 0;
    return l.len;
}

void pgcl_log_fields(pgcl_log_level level, const char *msg, const pgcl_log_field *fields, int n) {
    if (!pgcl_log_enabled(level)) return;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    char out[8192];
    size_t len =
        pgcl_log_format_line(out, sizeof out, (pgcl_log_format)atomic_load(&g_format), &ts, level, msg, fields, n);
    fwrite(out, 1, len, stderr); /* stderr is unbuffered: one write per line */
}

void pgcl_log(pgcl_log_level level, const char *fmt, ...) {
    if (!pgcl_log_enabled(level)) return;
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    pgcl_log_fields(level, msg, NULL, 0);
}
