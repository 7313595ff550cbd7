/* The trace context of a request: traceparent and X-Request-Id (trace_context.h). */
#include "trace_context.h"

#include <string.h>

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

bool pgcld_traceparent_trace_id(pgcld_field value, char out[PGCL_TRACE_ID_LEN + 1]) {
    /* version "-" trace-id "-" parent-id "-" flags: 2 + 1 + 32 + 1 + 16 + 1 + 2 = 55 characters */
    enum { VERSION_00_LEN = 55 };
    size_t len = value.len;
    const char *v = value.at;
    if (!v || len < VERSION_00_LEN) return false;
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

bool pgcld_request_id_acceptable(pgcld_field value) {
    if (!value.at || value.len == 0 || value.len > PGCL_REQUEST_ID_MAX) return false;
    for (size_t i = 0; i < value.len; i++) {
        unsigned char c = (unsigned char)value.at[i];
        if (c < 0x21 || c > 0x7e || c == '"' || c == '\'' || c == '\\') return false;
    }
    return true;
}

/* The value of header `name` when the request has it exactly once; else the absent field. */
static pgcld_field single_header(struct MHD_Connection *conn, const char *name) {
    pgcld_field value;
    return pgcld_header_field(conn, name, &value) == 1 ? value : (pgcld_field){NULL, 0};
}

void pgcld_trace_context_read(struct MHD_Connection *conn, char request_id[PGCL_REQUEST_ID_MAX + 1],
                              char trace_id[PGCL_TRACE_ID_LEN + 1]) {
    pgcld_field client_id = single_header(conn, "X-Request-Id");
    if (pgcld_request_id_acceptable(client_id)) pgcld_field_copy(client_id, request_id, PGCL_REQUEST_ID_MAX + 1);
    if (!pgcld_traceparent_trace_id(single_header(conn, "traceparent"), trace_id)) pgcl_trace_id_new(trace_id);
}
