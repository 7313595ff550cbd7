/* Time and position in the reviewers' listings: RFC 3339 date-times to and from the audit
 * columns' format, and the opaque keyset cursors (with the digest that ties a decision listing's
 * cursor to its filters).
 *
 * Pagination: lists are ordered by a table's seq (INTEGER PRIMARY KEY, insertion order) and resume
 * with `seq < last` (newest first) or `seq > last` (oldest first). Audit rows are append-only and
 * new rows get higher seqs, so a walk that starts while rows are being inserted sees every row that
 * existed when it started exactly once. Cursors are opaque strings (pgcl_cursor_*). */
#ifndef PGCL_TIME_CURSOR_H
#define PGCL_TIME_CURSOR_H

#include <stdbool.h>
#include <stdint.h>

#include "reader_pool.h" /* PGCL_QTIME_LEN */

#define PGCL_US_PER_DAY INT64_C(86400000000)

/* ---- timestamps ---- */

/* Parses an RFC 3339 date-time (YYYY-MM-DDTHH:MM:SS[.frac](Z|±HH:MM); 't'/'z' accepted; a space
 * in place of '+' before the offset too, since query strings decode '+' as a space) into Unix
 * microseconds, rounding a finer fraction up to the next microsecond (so `x >= t` and `x < t`
 * mean the same for the stored microsecond values). Returns false for anything else, including
 * impossible dates and years outside 0000..9999 after conversion to UTC. */
bool pgcl_time_parse(const char *text, int64_t *us);

/* Formats Unix microseconds in the columns' format (UTC, 6 fraction digits, 'Z'). */
void pgcl_time_format(int64_t us, char out[PGCL_QTIME_LEN + 1]);

/* Current time in Unix microseconds. */
int64_t pgcl_time_now_us(void);

/* ---- the filters of a decision listing ---- */

typedef enum pgcl_contest_filter {
    PGCL_CONTEST_ANY = 0,   /* no filter */
    PGCL_CONTEST_OPEN,      /* has an open (unresolved) contest */
    PGCL_CONTEST_RESOLVED,  /* has contests, none open */
    PGCL_CONTEST_CONTESTED, /* has any contest */
    PGCL_CONTEST_NONE,      /* was never contested */
} pgcl_contest_filter;

/* Every member is optional (NULL / ANY). since and until are in the columns' format (see
 * pgcl_time_format); since is inclusive, until exclusive. version requires model. */
typedef struct pgcl_decision_filter {
    const char *model, *version, *label, *decision, *item_id, *request_id;
    const char *trace_id; /* 32 lowercase hex (migration 0011) */
    const char *since, *until;
    pgcl_contest_filter contest;
} pgcl_decision_filter;

/* ---- cursors ---- */

#define PGCL_CURSOR_LEN 32    /* base64url (no padding) of 24 bytes */
#define PGCL_CURSOR_BINDING 8 /* bytes of the digest that ties a cursor to its listing's filters */

/* Kinds keep a cursor of one listing from being used for another. */
#define PGCL_CURSOR_DECISIONS 'd'
#define PGCL_CURSOR_CONTESTS_OPEN 'o'
#define PGCL_CURSOR_CONTESTS_RESOLVED 'r'

/* The 8-byte digest of f's canonical encoding (each member absent, or present with its length and
 * bytes, in declaration order; since and until as given here, in the columns' format; the contest
 * filter as a byte) that ties a decision listing's cursors to its filters. `limit` and the cursor
 * itself are no filters: a listing may change its page size. */
void pgcl_decision_filter_binding(const pgcl_decision_filter *f, unsigned char out[PGCL_CURSOR_BINDING]);

/* Encodes (version, kind, seq, binding) with a 6-byte keyed BLAKE2b check, as base64url. binding:
 * pgcl_decision_filter_binding of the listing's filters, or zeros for listings without filters. */
void pgcl_cursor_encode(char kind, int64_t seq, const unsigned char binding[PGCL_CURSOR_BINDING],
                        char out[PGCL_CURSOR_LEN + 1]);

typedef enum pgcl_cursor_check {
    PGCL_CURSOR_OK,
    PGCL_CURSOR_INVALID,       /* not a cursor this code produced for that kind (length, alphabet,
                                * version, kind, check, or seq < 1) */
    PGCL_CURSOR_OTHER_FILTERS, /* made by a listing with other filters */
} pgcl_cursor_check;

/* Decodes a cursor of the given kind made with the given binding. */
pgcl_cursor_check pgcl_cursor_decode(const char *text, char kind, const unsigned char binding[PGCL_CURSOR_BINDING],
                                     int64_t *seq);

#endif
