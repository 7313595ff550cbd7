/* A request's trace context (issue 19, item 3; docs/operations.md, "Trace context"): the W3C
 * Trace Context `traceparent` header (https://www.w3.org/TR/trace-context/) and the client's
 * `X-Request-Id`. Both are optional and never refuse a request: a value that does not follow its
 * rules is ignored, as the W3C recommendation asks of a traceparent, and pgcld then makes its own
 * (a random trace id, a UUIDv7 request id). Pure functions beside one that reads the headers. */
#ifndef PGCLD_TRACE_CONTEXT_H
#define PGCLD_TRACE_CONTEXT_H

#include <microhttpd.h>
#include <stdbool.h>
#include <stddef.h>

#include "header_field.h"
#include "ids.h"

/* The trace id of a traceparent value of version 00: "00-<32 hex trace-id>-<16 hex parent-id>-
 * <2 hex flags>", lowercase hex, neither id all zeros. A higher version (not "ff") is read by its
 * first 55 characters when a '-' or the end follows them, as the recommendation asks of a parser
 * that knows version 00 only. value is the header's value as pgcld_header_field gives it (without
 * the whitespace around it). True with out filled (32 hex + NUL); false when value is absent or
 * not valid (out untouched). */
bool pgcld_traceparent_trace_id(pgcld_field value, char out[PGCL_TRACE_ID_LEN + 1]);

/* Whether an X-Request-Id value (without the whitespace around it) is one pgcld takes as the
 * request's id: 1..PGCL_REQUEST_ID_MAX bytes of visible ASCII (0x21..0x7e) other than '"', '\''
 * and '\\' (it is echoed in a header, written in JSON and logs, and stored). False when absent. */
bool pgcld_request_id_acceptable(pgcld_field value);

/* Reads the request's trace context from conn's headers: the client's X-Request-Id, when
 * acceptable, replaces request_id (which holds the UUIDv7 pgcld made at the request's arrival), and
 * the trace id is the traceparent's when valid, else a new random one. A header given more than
 * once is ignored, as an invalid one. */
void pgcld_trace_context_read(struct MHD_Connection *conn, char request_id[PGCL_REQUEST_ID_MAX + 1],
                              char trace_id[PGCL_TRACE_ID_LEN + 1]);

#endif
