/* Error answers and the body checks every handler shares: the {"error": …} object (with the
 * configured file system paths redacted and the text made valid UTF-8), media type matching and
 * the parsing of a JSON body. Sending an answer on the connection is http.c's. */
#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "server.h"

/* Replaces every byte of s that does not begin a valid UTF-8 sequence with '?', in place: error
 * texts quote what the client sent (paths, header values, query and field names, cut to a length
 * that may split a character), and jansson refuses strings that are not UTF-8, which would leave
 * the answer without its error body. */
static void make_utf8(char *s) {
    for (unsigned char *p = (unsigned char *)s; *p;) {
        unsigned c = p[0], n = c < 0x80 ? 1 : c >= 0xc2 && c <= 0xdf ? 2 : c >= 0xe0 && c <= 0xef ? 3
                                                                      : c >= 0xf0 && c <= 0xf4 ? 4 : 0;
        bool ok = n > 0;
        for (unsigned i = 1; ok && i < n; i++) ok = (p[i] & 0xc0) == 0x80;
        if (ok && n == 3) ok = !(c == 0xe0 && p[1] < 0xa0) && !(c == 0xed && p[1] >= 0xa0); /* overlong, surrogate */
        if (ok && n == 4) ok = !(c == 0xf0 && p[1] < 0x90) && !(c == 0xf4 && p[1] >= 0x90); /* overlong, > U+10FFFF */
        if (ok) {
            p += n;
        } else {
            *p++ = '?';
        }
    }
}

/* Texts that never leave in an error message (the file system paths of the configuration),
 * each with what is said instead. Set before the server starts; read-only afterwards. */
#define MAX_REDACTIONS 12
static struct {
    char text[1024];
    const char *instead;
} g_redactions[MAX_REDACTIONS];
static int g_n_redactions;

void pgcld_reply_redact(const char *text, const char *instead) {
    /* A bare word ("models") could be a word of a message: only paths with a '/' or a '.' */
    if (!text || strlen(text) < 2 || strlen(text) >= sizeof g_redactions[0].text || g_n_redactions == MAX_REDACTIONS ||
        !strpbrk(text, "/."))
        return;
    snprintf(g_redactions[g_n_redactions].text, sizeof g_redactions[0].text, "%s", text);
    g_redactions[g_n_redactions++].instead = instead;
}

/* Replaces each registered text in msg (cap bytes) where it stands as a word of its own: at the
 * start or after a space, a quote, '(' or '=', and not followed by a letter, digit or '_'. The
 * longest registered text that matches at a place wins. */
static void redact(char *msg, size_t cap) {
    if (g_n_redactions == 0) return;
    char out[1024];
    size_t o = 0;
    for (size_t i = 0; msg[i] && o + 1 < sizeof out;) {
        bool boundary = i == 0 || strchr(" '\"(=", msg[i - 1]);
        int best = -1;
        size_t best_len = 0;
        for (int r = 0; boundary && r < g_n_redactions; r++) {
            size_t n = strlen(g_redactions[r].text);
            char after = msg[i + (n <= strlen(msg + i) ? n : 0)];
            bool ends = after == 0 || !(isalnum((unsigned char)after) || after == '_');
            if (n > best_len && strncmp(msg + i, g_redactions[r].text, n) == 0 && ends) {
                best = r;
                best_len = n;
            }
        }
        if (best < 0) {
            out[o++] = msg[i++];
            continue;
        }
        o += (size_t)snprintf(out + o, sizeof out - o, "%s", g_redactions[best].instead);
        if (o >= sizeof out) o = sizeof out - 1;
        i += best_len;
    }
    out[o] = 0;
    snprintf(msg, cap, "%s", out);
}

void pgcld_reply_error(pgcld_reply *reply, int status, const char *code, int item, const char *field,
                       const char *fmt, ...) {
    char msg[1024], field_text[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    redact(msg, sizeof msg);
    make_utf8(msg);
    json_t *err = json_pack("{s:s, s:s}", "code", code, "message", msg);
    if (item >= 0) json_object_set_new(err, "item", json_integer(item));
    if (field) {
        snprintf(field_text, sizeof field_text, "%s", field);
        make_utf8(field_text);
        json_object_set_new(err, "field", json_string(field_text));
    }
    json_decref(reply->body);
    reply->status = status;
    reply->body = json_pack("{s:o}", "error", err);
}

void pgcld_reply_oip_error(json_t *body) {
    json_t *err = json_object_get(body, "error");
    json_t *code = json_object_get(err, "code"), *message = json_object_get(err, "message");
    if (!json_is_object(err) || !json_is_string(code) || !json_is_string(message)) return;
    json_incref(err);
    json_object_set(body, "error", message);
    json_object_set(body, "code", code);
    if (json_object_get(err, "item")) json_object_set(body, "item", json_object_get(err, "item"));
    if (json_object_get(err, "field")) json_object_set(body, "field", json_object_get(err, "field"));
    json_decref(err);
}

/* A read position in a header value (a pgcld_field: not NUL-terminated). */
typedef struct value_cursor {
    const char *p, *end;
} value_cursor;

/* Skips optional whitespace (SP, HTAB). */
static void skip_ows(value_cursor *c) {
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\t')) c->p++;
}

/* Whether the cursor is at `ch`. */
static bool at_char(const value_cursor *c, char ch) { return c->p < c->end && *c->p == ch; }

/* Reads one media type parameter at c (after its ';'): name=value, the value a token or a quoted
 * string. Copies the name and the (unquoted) value, cut to their buffers, and leaves c after it and
 * the whitespace that follows; false when it is malformed. */
static bool media_parameter(value_cursor *c, char *name, size_t name_cap, char *value, size_t value_cap) {
    size_t n = 0, v = 0;
    skip_ows(c);
    while (c->p < c->end && !strchr("=; \t\"", *c->p)) {
        if (n + 1 < name_cap) name[n++] = *c->p;
        c->p++;
    }
    name[n] = 0;
    if (n == 0 || !at_char(c, '=')) return false;
    c->p++;
    if (at_char(c, '"')) {
        for (c->p++; c->p < c->end && *c->p != '"'; c->p++) {
            if (*c->p == '\\' && c->p + 1 < c->end) c->p++;
            if (v + 1 < value_cap) value[v++] = *c->p;
        }
        if (!at_char(c, '"')) return false;
        c->p++;
    } else {
        while (c->p < c->end && !strchr("; \t\"", *c->p)) {
            if (v + 1 < value_cap) value[v++] = *c->p;
            c->p++;
        }
        if (v == 0) return false;
    }
    value[v] = 0;
    skip_ows(c);
    return true;
}

bool pgcld_is_media_type(pgcld_field ct, const char *want, bool utf8_only) {
    if (!ct.at) return false;
    value_cursor c = {ct.at, ct.at + ct.len};
    skip_ows(&c);
    size_t n = strlen(want);
    if ((size_t)(c.end - c.p) < n || strncasecmp(c.p, want, n) != 0) return false;
    c.p += n;
    skip_ows(&c);
    while (at_char(&c, ';')) {
        char name[32], value[32];
        c.p++;
        if (!media_parameter(&c, name, sizeof name, value, sizeof value)) return false;
        if (utf8_only && strcasecmp(name, "charset") == 0 && strcasecmp(value, "utf-8") != 0) return false;
    }
    return c.p == c.end;
}

bool pgcld_is_json_type(pgcld_field ct) {
    return pgcld_is_media_type(ct, "application/json", true);
}

json_t *pgcld_parse_json_body(const pgcld_request *req, pgcld_reply *reply) {
    if (!pgcld_is_json_type(req->content_type)) {
        pgcld_reply_error(reply, 415, "unsupported_media_type", -1, NULL,
                          "Content-Type must be application/json (UTF-8), got '%.*s'",
                          PGCLD_FIELD_SHOWN(req->content_type));
        return NULL;
    }
    json_error_t jerr;
    json_t *root = json_loadb(req->body, req->body_len, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &jerr);
    if (!root) {
        pgcld_reply_error(reply, 400, "invalid_json", -1, NULL, "malformed JSON at line %d column %d: %s", jerr.line,
                          jerr.column, jerr.text);
        return NULL;
    }
    if (!json_is_object(root)) {
        json_decref(root);
        pgcld_reply_error(reply, 400, "invalid_request", -1, NULL, "the body must be a JSON object");
        return NULL;
    }
    return root;
}
