/* The rules a request's head (request line and header fields) must follow before it is routed,
 * where libmicrohttpd 0.9.75 is lenient or answers by itself (docs/RELIABILITY.md, "Framing and
 * header fields"). Each rule refuses a whole class of input at one place:
 *   - a header field name that is not an RFC 9110 token (e.g. "Content-Length : 5": libmicrohttpd
 *     keeps the space in the name, so the length would be ignored and the body read as the next
 *     request);
 *   - a header field value holding a control character, and a byte hidden behind a NUL in the
 *     request line or a header line ("Authorization: Bearer KEY\0junk": libmicrohttpd hands out
 *     values as C strings, so the rest of the line would be silently dropped), or a header line
 *     folded onto the next (obs-fold, RFC 9112 §5.2);
 *   - a header pgcld reads given more than once (which one wins is a guess a proxy may not share);
 *   - an HTTP/1.1 request without Host (RFC 9112 §3.2);
 *   - a Transfer-Encoding other than "chunked" (RFC 9112 §6.1: 501; libmicrohttpd would read the
 *     body until the connection closes), or any Transfer-Encoding in an HTTP/1.0 request;
 *   - "chunked" followed by whitespace: pgcld reads a header's value without the whitespace around
 *     it (header_field.h, RFC 9110 §5.5), but libmicrohttpd 0.9.75 frames the body by the value
 *     as it came and reads "chunked " until the connection closes, so it is refused (400) rather
 *     than read as pgcld understands it;
 *   - Content-Length beside Transfer-Encoding (request smuggling);
 *   - a request target that decodes to a NUL ("%00": the decoded path and query are C strings);
 *   - a Content-Encoding other than identity (the body would be read as if it were not encoded);
 *   - a Content-Length that is not a plain decimal number, which libmicrohttpd answers itself
 *     before pgcld sees the request (library_answered: see http.c, answer_in_place_of_library). */
#ifndef PGCLD_REQUEST_HEAD_H
#define PGCLD_REQUEST_HEAD_H

#include <microhttpd.h>
#include <stdbool.h>

/* What the request line says about its target, noted before libmicrohttpd decodes it. */
typedef struct pgcld_raw_target {
    bool nul_in_path;  /* the path holds "%00" */
    bool nul_in_query; /* the query string holds "%00" */
    const char *at;    /* where the target starts in libmicrohttpd's buffer (only compared, never read) */
    size_t len;        /* its length as a C string */
} pgcld_raw_target;

/* Notes what the still-encoded request target (as libmicrohttpd's URI log callback sees it) says.
 * target may be NULL. */
void pgcld_raw_target_note(const char *target, pgcld_raw_target *out);

/* A refusal of the request's head; status 0 when the head is acceptable. */
typedef struct pgcld_head_problem {
    int status;
    const char *code;      /* the stable error code */
    char field[64];        /* the header or part named in the error, "" for none */
    char message[320];
    bool library_answered; /* libmicrohttpd has already queued its own answer to this request */
} pgcld_head_problem;

/* Checks the head of the request on conn (headers received, body not yet read). method and
 * version are the strings libmicrohttpd passed to the access handler; target what
 * pgcld_raw_target_note found. Fills *p (status 0 when nothing is wrong). Every refusal must close
 * the connection: the framing of what follows is in doubt. */
void pgcld_check_request_head(struct MHD_Connection *conn, const char *method, const char *version,
                              const pgcld_raw_target *target, pgcld_head_problem *p);

#endif
