/* The trace context of a request: traceparent and X-Request-Id (trace_context.h). */
#include "trace_context.h"

#include <string.h>
#include <strings.h>

static bool is_lower_hex(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); }

/* Whether s[0..n) are lowercase hex digits, not all '0'. */
static bool lower_hex_nonzero(const char *s, size_t n) {
    bool nonzero = false;
    for (size_t i = 0; i < n; i++) {
        if (!is_lower_hex(s[i])) return false;
        nonzero = nonzero || s[i] != '0';
    }
    return nonzero;
}

bool pgcld_traceparent_trace_id(const char *value, char out[PGCL_TRACE_ID_LEN + 1]) {
    /* version "-" trace-id "-" parent-id "-" flags: 2 + 1 + 32 + 1 + 16 + 1 + 2 = 55 characters */
    enum { VERSION_00_LEN = 55 };
    if (!value) return false;
    size_t len = strlen(value);
    if (len < VERSION_00_LEN) return false;
    const char *v = value;
    if (!is_lower_hex(v[0]) || !is_lower_hex(v[1]) || (v[0] == 'f' && v[1] == 'f')) return false;
    bool version_00 = v[0] == '0' && v[1] == '0';
    if (version_00 ? len != VERSION_00_LEN : (len > VERSION_00_LEN && v[VERSION_00_LEN] != '-')) return false;
    if (v[2] != '-' || v[35] != '-' || v[52] != '-') return false;
    if (!lower_hex_nonzero(v + 3, 32) || !lower_hex_nonzero(v + 36, 16)) return false;
    if (!is_lower_hex(v[53]) || !is_lower_hex(v[54])) return false;
    memcpy(out, v + 3, PGCL_TRACE_ID_LEN);
    out[PGCL_TRACE_ID_LEN] = 0;
    return true;
}

bool pgcld_request_id_acceptable(const char *value) {
    if (!value) return false;
    size_t n = 0;
    for (const char *p = value; *p; p++, n++) {
        unsigned char c = (unsigned char)*p;
        if (n >= PGCL_REQUEST_ID_MAX || c < 0x21 || c > 0x7e || c == '"' || c == '\'' || c == '\\') return false;
    }
    return n > 0;
}

typedef struct header_count {
    const char *name;
    const char *value; /* the first */
    int n;
} header_count;

static enum MHD_Result count_header(void *cls, enum MHD_ValueKind kind, const char *key, const char *value) {
    (void)kind;
    header_count *h = cls;
    if (key && strcasecmp(key, h->name) == 0 && h->n++ == 0) h->value = value;
    return MHD_YES;
}

/* The value of header `name` when the request has it exactly once; else NULL. */
static const char *single_header(struct MHD_Connection *conn, const char *name) {
    header_count h = {.name = name};
    MHD_get_connection_values(conn, MHD_HEADER_KIND, count_header, &h);
    return h.n == 1 ? h.value : NULL;
}

void pgcld_trace_context_read(struct MHD_Connection *conn, char request_id[PGCL_REQUEST_ID_MAX + 1],
                              char trace_id[PGCL_TRACE_ID_LEN + 1]) {
    const char *client_id = single_header(conn, "X-Request-Id");
    if (pgcld_request_id_acceptable(client_id)) memcpy(request_id, client_id, strlen(client_id) + 1);
    if (!pgcld_traceparent_trace_id(single_header(conn, "traceparent"), trace_id)) pgcl_trace_id_new(trace_id);
}
