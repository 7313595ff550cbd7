/* The route table: the handler that serves each method and path pattern, the roles allowed on it,
 * its body limit and the query parameters it reads (server/http/route_table.c); and the two lookups the
 * HTTP glue (http.c) makes with it before a handler runs: which route a request names, and whether
 * its query parameters are ones that route reads. */
#ifndef PGCLD_ROUTE_TABLE_H
#define PGCLD_ROUTE_TABLE_H

#include <microhttpd.h>
#include <stdbool.h>
#include <stddef.h>

#include "server.h"

typedef void (*pgcld_route_fn)(pgcld_server *, const pgcld_request *, pgcld_reply *);

/* The roles of a public route: no key needed. */
#define PGCLD_ROUTE_ANYONE 0

typedef struct pgcld_route {
    const char *method;
    const char *pattern;       /* "{name}" matches one non-empty path segment; a last "{name...}" the
                                * non-empty rest of the path */
    pgcld_route_fn fn;
    int roles;                 /* pgcl_role bits allowed; PGCLD_ROUTE_ANYONE for public routes */
    bool upload;               /* body limit is --max-upload-bytes instead of --max-body-bytes */
    const char *const *params; /* the query parameters it reads (NULL-terminated), or not checked */
} pgcld_route;

/* The "{…}" segments of a path, captured in the order of the pattern. */
#define PGCLD_PATH_PARAM_LEN 129 /* the longest parameter, a writer id (PGCL_LOG_WRITER_ID_MAX = 128), and its NUL */
typedef struct pgcld_path_params {
    char values[PGCLD_MAX_PARAMS][PGCLD_PATH_PARAM_LEN];
    int n;
} pgcld_path_params;

/* Finds the route serving method + path (the decoded path). Returns its index (for
 * pgcld_route_at and the metrics, which count by pgcld_route_names' order) with the path's
 * segments in *params, or -1. *path_known tells whether some method serves the path; allow
 * (cap bytes) receives those methods, ", "-separated, for a 405's Allow header. Thread-safe. */
int pgcld_route_find(const char *method, const char *path, pgcld_path_params *params, bool *path_known, char *allow,
                     size_t cap);

/* The route at index (0 <= index < pgcld_route_count); static storage. */
const pgcld_route *pgcld_route_at(int index);

/* True for the scoring routes: rate-limited per key, bounded by --max-score-in-flight and holding
 * their bodies against --max-body-memory. */
bool pgcld_route_is_scoring(const pgcld_route *route);

/* True for the transparency log's routes that --log-access public opens to anyone: the list of
 * logs, checkpoints and hash tiles (never entry bundles, nor POST /log/checkpoint). */
bool pgcld_route_is_public_log(const pgcld_route *route);

/* True for the staff routes: those only reviewer or admin keys may call. Their handlers may wait
 * (for the audit writer, the reader pool, a compute slot), so http.c runs each call on a thread
 * of its own. Public routes and those scorer keys may call (scoring, model metadata) never wait. */
bool pgcld_route_is_staff(const pgcld_route *route);

/* Checks the query parameters of the request on conn against the route: each one the route reads,
 * given once, with a value (an empty value is the handler's to refuse). Routes whose parameters
 * are not checked (console, probes) pass. Returns 0, or -1 with a 400 invalid_request naming the
 * parameter in reply. */
int pgcld_route_check_query(const pgcld_route *route, struct MHD_Connection *conn, pgcld_reply *reply);

#endif
