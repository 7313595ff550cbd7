/* Header field values without their optional whitespace; see header_field.h. */
#include "header_field.h"

#include <microhttpd.h>
#include <string.h>
#include <strings.h>

static bool is_ows(char c) { return c == ' ' || c == '\t'; }

pgcld_field pgcld_field_trim(const char *value, size_t len) {
    if (!value) return (pgcld_field){NULL, 0};
    size_t start = 0;
    while (start < len && is_ows(value[start])) start++;
    while (len > start && is_ows(value[len - 1])) len--;
    return (pgcld_field){value + start, len - start};
}

/* What one pass over the request's header fields found of one name. */
typedef struct field_search {
    const char *name;
    size_t name_len;
    pgcld_field first;
    int n;
} field_search;

static enum MHD_Result match_field(void *cls, enum MHD_ValueKind kind, const char *key, size_t key_size,
                                   const char *value, size_t value_size) {
    (void)kind;
    field_search *s = cls;
    if (!key || key_size != s->name_len || strncasecmp(key, s->name, key_size) != 0) return MHD_YES;
    if (s->n++ == 0) s->first = pgcld_field_trim(value ? value : "", value ? value_size : 0);
    return MHD_YES;
}

int pgcld_header_field(struct MHD_Connection *conn, const char *name, pgcld_field *out) {
    field_search s = {.name = name, .name_len = strlen(name)};
    MHD_get_connection_values_n(conn, MHD_HEADER_KIND, match_field, &s);
    *out = s.first;
    return s.n;
}

bool pgcld_field_copy(pgcld_field f, char *out, size_t cap) {
    if (cap == 0) return false;
    out[0] = 0;
    if (!f.at || f.len >= cap) return false;
    memcpy(out, f.at, f.len);
    out[f.len] = 0;
    return true;
}

bool pgcld_field_is(pgcld_field f, const char *text) {
    return f.at && f.len == strlen(text) && strncasecmp(f.at, text, f.len) == 0;
}
