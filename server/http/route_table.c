/* The route table (see route_table.h) and its lookups: path matching with "{…}" segments and the
 * check of each route's query parameters. Adding an endpoint is one row here, one name in
 * pgcld_route_names (the metrics label), its handler in a routes_*.c and its entry in openapi.yaml
 * (tests/integration/test_openapi_spec.py reads g_routes from this file). */
#include <stdio.h>
#include <string.h>

#include "route_table.h"
#include "status.h"

#define ANYONE PGCLD_ROUTE_ANYONE /* no key needed */
#define ANY_ROLE (PGCL_ROLE_SCORER | PGCL_ROLE_REVIEWER | PGCL_ROLE_ADMIN)

typedef pgcld_route route;

/* Query parameters of each route. Every route but the console's and the probes' refuses a
 * parameter it does not read, one given twice and one without a value ("?label", which would read
 * as absent), with 400 naming it (pgcld_route_check_query): a filter that is silently dropped answers another
 * question than the one asked. Handlers refuse empty values ("?label=") themselves. */
static const char *const NO_PARAMS[] = {NULL};
static const char *const ANY_PARAMS[] = {NULL}; /* compared by address: not checked */
static const char *const SCORE_PARAMS[] = {"model", "return_vector", NULL}; /* octet-stream bodies only */
static const char *const UPLOAD_PARAMS[] = {"create_model", NULL};
static const char *const SHADOW_REPORT_PARAMS[] = {"version", NULL};
static const char *const DECISIONS_PARAMS[] = {"model", "version", "label",    "decision", "item_id", "request_id",
                                               "since", "until",   "trace_id", "contest",  "limit",   "cursor",
                                               NULL};
static const char *const EXPORT_PARAMS[] = {"since", "until", "format", NULL};
static const char *const STATS_PARAMS[] = {"since", "until", NULL};
static const char *const CONTESTS_PARAMS[] = {"status", "limit", "cursor", NULL};
static const char *const CONSISTENCY_PARAMS[] = {"first", "second", "writer", NULL};
static const char *const PROOF_PARAMS[] = {"format", NULL};
static const char *const LOG_CONSISTENCY_PARAMS[] = {"first", "second", NULL};

/* The transparency log (routes_log.c, the /log/ rows): checkpoints and hash tiles are read by reviewers and admins,
 * or by anyone with --log-access public (pgcld_route_is_public_log); entry bundles hold the records
 * and need a reviewer key. "{tile...}" is the rest of the path, slashes included. */
static const route g_routes[] = {
    {"POST", "/v1/score", pgcld_handle_score, PGCL_ROLE_SCORER, false, SCORE_PARAMS},
    {"GET", "/v1/models", pgcld_handle_models, ANY_ROLE, false, NO_PARAMS},
    {"POST", "/v1/admin/models/{name}/activate", pgcld_handle_activate, PGCL_ROLE_ADMIN, false, NO_PARAMS},
    {"PUT", "/v1/admin/models/{name}/versions/{version}", pgcld_handle_upload, PGCL_ROLE_ADMIN, true, UPLOAD_PARAMS},
    {"POST", "/v1/admin/models/{name}/shadow", pgcld_handle_shadow_attach, PGCL_ROLE_ADMIN, false, NO_PARAMS},
    {"DELETE", "/v1/admin/models/{name}/shadow", pgcld_handle_shadow_detach, PGCL_ROLE_ADMIN, false, NO_PARAMS},
    {"GET", "/v1/admin/models/{name}/shadow", pgcld_handle_shadow_report, PGCL_ROLE_ADMIN, false, SHADOW_REPORT_PARAMS},
    {"POST", "/v1/admin/keys", pgcld_handle_keys_create, PGCL_ROLE_ADMIN, false, NO_PARAMS},
    {"GET", "/v1/admin/keys", pgcld_handle_keys_list, PGCL_ROLE_ADMIN, false, NO_PARAMS},
    {"DELETE", "/v1/admin/keys/{key_id}", pgcld_handle_keys_revoke, PGCL_ROLE_ADMIN, false, NO_PARAMS},
    {"GET", "/v1/decisions", pgcld_handle_decisions_list, PGCL_ROLE_REVIEWER, false, DECISIONS_PARAMS},
    {"GET", "/v1/decisions/{id}", pgcld_handle_decision_get, PGCL_ROLE_REVIEWER, false, NO_PARAMS},
    {"GET", "/v1/decisions/{id}/statement", pgcld_handle_decision_statement, PGCL_ROLE_REVIEWER, false, NO_PARAMS},
    {"GET", "/v1/decisions/{id}/proof", pgcld_handle_decision_proof, PGCL_ROLE_REVIEWER, false, PROOF_PARAMS},
    {"POST", "/v1/decisions/{id}/contests", pgcld_handle_contest_file, PGCL_ROLE_REVIEWER, false, NO_PARAMS},
    {"POST", "/v1/decisions/{id}/rescore", pgcld_handle_rescore, PGCL_ROLE_REVIEWER, false, NO_PARAMS},
    {"GET", "/v1/contests", pgcld_handle_contests_list, PGCL_ROLE_REVIEWER, false, CONTESTS_PARAMS},
    {"POST", "/v1/contests/{id}/resolution", pgcld_handle_resolution, PGCL_ROLE_REVIEWER, false, NO_PARAMS},
    {"GET", "/v1/contests/{id}/proof", pgcld_handle_contest_proof, PGCL_ROLE_REVIEWER, false, NO_PARAMS},
    {"GET", "/v1/contests/{id}/resolution/proof", pgcld_handle_resolution_proof, PGCL_ROLE_REVIEWER, false, NO_PARAMS},
    {"GET", "/v1/audit/export", pgcld_handle_audit_export, PGCL_ROLE_REVIEWER | PGCL_ROLE_ADMIN, false, EXPORT_PARAMS},
    {"GET", "/v1/audit/stats", pgcld_handle_audit_stats, PGCL_ROLE_REVIEWER | PGCL_ROLE_ADMIN, false, STATS_PARAMS},
    {"GET", "/v1/audit/verify", pgcld_handle_audit_verify, PGCL_ROLE_REVIEWER | PGCL_ROLE_ADMIN, false, NO_PARAMS},
    {"POST", "/v1/audit/checkpoints", pgcld_handle_audit_checkpoint, PGCL_ROLE_ADMIN, false, NO_PARAMS},
    {"GET", "/v1/audit/consistency", pgcld_handle_audit_consistency, PGCL_ROLE_REVIEWER, false, CONSISTENCY_PARAMS},
    {"GET", "/log/", pgcld_handle_log_list, PGCL_ROLE_REVIEWER | PGCL_ROLE_ADMIN, false, NO_PARAMS},
    {"POST", "/log/checkpoint", pgcld_handle_log_checkpoint_now, PGCL_ROLE_ADMIN, false, NO_PARAMS},
    {"GET", "/log/{writer_id}/checkpoint", pgcld_handle_log_checkpoint, PGCL_ROLE_REVIEWER | PGCL_ROLE_ADMIN, false, NO_PARAMS},
    {"GET", "/log/{writer_id}/consistency", pgcld_handle_log_consistency, PGCL_ROLE_REVIEWER | PGCL_ROLE_ADMIN, false, LOG_CONSISTENCY_PARAMS},
    {"GET", "/log/{writer_id}/tile/entries/{tile...}", pgcld_handle_log_entries, PGCL_ROLE_REVIEWER, false, NO_PARAMS},
    {"GET", "/log/{writer_id}/tile/{tile...}", pgcld_handle_log_tile, PGCL_ROLE_REVIEWER | PGCL_ROLE_ADMIN, false, NO_PARAMS},
    {"GET", "/v2", pgcld_handle_v2_server, ANYONE, false, ANY_PARAMS},
    {"GET", "/v2/health/live", pgcld_handle_v2_live, ANYONE, false, ANY_PARAMS},
    {"GET", "/v2/health/ready", pgcld_handle_v2_ready, ANYONE, false, ANY_PARAMS},
    {"POST", "/v2/repository/index", pgcld_handle_v2_repository_index, ANY_ROLE, false, NO_PARAMS},
    {"GET", "/v2/models/{name}", pgcld_handle_v2_model, ANY_ROLE, false, NO_PARAMS},
    {"GET", "/v2/models/{name}/ready", pgcld_handle_v2_model_ready, ANY_ROLE, false, NO_PARAMS},
    {"POST", "/v2/models/{name}/infer", pgcld_handle_v2_infer, PGCL_ROLE_SCORER, false, NO_PARAMS},
    {"GET", "/v2/models/{name}/versions/{version}", pgcld_handle_v2_model, ANY_ROLE, false, NO_PARAMS},
    {"GET", "/v2/models/{name}/versions/{version}/ready", pgcld_handle_v2_model_ready, ANY_ROLE, false, NO_PARAMS},
    {"POST", "/v2/models/{name}/versions/{version}/infer", pgcld_handle_v2_infer, PGCL_ROLE_SCORER, false, NO_PARAMS},
    {"GET", "/v2/models/{name}/stats", pgcld_handle_v2_model_stats, ANY_ROLE, false, NO_PARAMS},
    {"GET", "/v2/models/{name}/versions/{version}/stats", pgcld_handle_v2_model_stats, ANY_ROLE, false, NO_PARAMS},
    {"GET", "/healthz", pgcld_handle_healthz, ANYONE, false, ANY_PARAMS},
    {"GET", "/readyz", pgcld_handle_readyz, ANYONE, false, ANY_PARAMS},
    {"GET", "/metrics", pgcld_handle_metrics, ANYONE, false, ANY_PARAMS},
    {"GET", "/console", pgcld_handle_console_index, ANYONE, false, ANY_PARAMS},
    {"GET", "/console/", pgcld_handle_console_index, ANYONE, false, ANY_PARAMS},
    {"GET", "/console/{file}", pgcld_handle_console_file, ANYONE, false, ANY_PARAMS},
};
#define N_ROUTES ((int)(sizeof g_routes / sizeof g_routes[0]))

const char *const pgcld_route_names[] = {
    "POST /v1/score", "GET /v1/models", "POST /v1/admin/models/{name}/activate",
    "PUT /v1/admin/models/{name}/versions/{version}", "POST /v1/admin/models/{name}/shadow",
    "DELETE /v1/admin/models/{name}/shadow", "GET /v1/admin/models/{name}/shadow", "POST /v1/admin/keys",
    "GET /v1/admin/keys", "DELETE /v1/admin/keys/{key_id}", "GET /v1/decisions", "GET /v1/decisions/{id}",
    "GET /v1/decisions/{id}/statement", "GET /v1/decisions/{id}/proof", "POST /v1/decisions/{id}/contests", "POST /v1/decisions/{id}/rescore",
    "GET /v1/contests", "POST /v1/contests/{id}/resolution", "GET /v1/contests/{id}/proof",
    "GET /v1/contests/{id}/resolution/proof", "GET /v1/audit/export", "GET /v1/audit/stats",
    "GET /v1/audit/verify", "POST /v1/audit/checkpoints", "GET /v1/audit/consistency",
    "GET /log/", "POST /log/checkpoint", "GET /log/{writer_id}/checkpoint", "GET /log/{writer_id}/consistency",
    "GET /log/{writer_id}/tile/entries/{tile...}",
    "GET /log/{writer_id}/tile/{tile...}", "GET /v2", "GET /v2/health/live", "GET /v2/health/ready",
    "POST /v2/repository/index",
    "GET /v2/models/{name}", "GET /v2/models/{name}/ready", "POST /v2/models/{name}/infer",
    "GET /v2/models/{name}/versions/{version}", "GET /v2/models/{name}/versions/{version}/ready",
    "POST /v2/models/{name}/versions/{version}/infer", "GET /v2/models/{name}/stats",
    "GET /v2/models/{name}/versions/{version}/stats", "GET /healthz",
    "GET /readyz", "GET /metrics", "GET /console", "GET /console/", "GET /console/{file}",
};
const int pgcld_route_count = N_ROUTES;
_Static_assert(sizeof pgcld_route_names / sizeof pgcld_route_names[0] == N_ROUTES, "a name for every route");


/* Matches path against pattern, capturing "{…}" segments into params; a "{name...}" at the end of
 * a pattern captures the rest of the path, slashes included. */
static bool match_pattern(const char *pattern, const char *path, pgcld_path_params *params) {
    int n = 0;
    while (*pattern && *path) {
        if (*pattern == '{') {
            const char *pend = strchr(pattern, '}');
            bool rest = pend && pend - pattern > 4 && strncmp(pend - 3, "...", 3) == 0;
            size_t len = rest ? strlen(path) : strcspn(path, "/");
            if (!pend || len == 0 || len >= sizeof params->values[0] || n == PGCLD_MAX_PARAMS) return false;
            memcpy(params->values[n], path, len);
            params->values[n++][len] = 0;
            pattern = pend + 1;
            path += len;
        } else if (*pattern++ != *path++) {
            return false;
        }
    }
    if (*pattern || *path) return false;
    params->n = n;
    return true;
}

int pgcld_route_find(const char *method, const char *path, pgcld_path_params *params, bool *path_known, char *allow,
                     size_t cap) {
    *path_known = false;
    allow[0] = 0;
    int hit = -1;
    for (int i = 0; i < N_ROUTES; i++) {
        pgcld_path_params probe;
        if (!match_pattern(g_routes[i].pattern, path, &probe)) continue;
        *path_known = true;
        size_t used = strlen(allow);
        snprintf(allow + used, cap - used, "%s%s", used ? ", " : "", g_routes[i].method);
        if (hit < 0 && strcmp(g_routes[i].method, method) == 0) {
            hit = i;
            *params = probe;
        }
    }
    return hit;
}

const pgcld_route *pgcld_route_at(int index) {
    PGCL_ASSERT(index >= 0 && index < N_ROUTES);
    return &g_routes[index];
}

bool pgcld_route_is_scoring(const pgcld_route *r) {
    return r->fn == pgcld_handle_score || r->fn == pgcld_handle_v2_infer;
}

bool pgcld_route_is_public_log(const pgcld_route *r) {
    return r->fn == pgcld_handle_log_list || r->fn == pgcld_handle_log_checkpoint || r->fn == pgcld_handle_log_tile ||
           r->fn == pgcld_handle_log_consistency;
}

bool pgcld_route_is_staff(const pgcld_route *r) {
    return r->roles != ANYONE && !(r->roles & PGCL_ROLE_SCORER);
}

typedef struct param_check {
    const char *const *allowed; /* NULL-terminated */
    unsigned seen;              /* bit i: allowed[i] was given */
    const char *problem;        /* NULL, or what is wrong with `key` */
    char key[64];
} param_check;

static enum MHD_Result check_one(void *cls, enum MHD_ValueKind kind, const char *key, const char *value) {
    param_check *c = cls;
    int known = -1;
    for (int i = 0; c->allowed[i] && known < 0; i++)
        if (strcmp(c->allowed[i], key) == 0) known = i;
    if (known < 0) c->problem = "is unknown";
    else if (c->seen & (1u << known)) c->problem = "is given more than once";
    else if (!value) c->problem = "has no value: write name=value"; /* "?label": no '=' */
    if (c->problem) {
        snprintf(c->key, sizeof c->key, "%s", key);
        return MHD_NO;
    }
    c->seen |= 1u << known;
    return MHD_YES;
}

int pgcld_route_check_query(const pgcld_route *r, struct MHD_Connection *conn, pgcld_reply *reply) {
    if (r->params == ANY_PARAMS) return 0;
    param_check c = {.allowed = r->params};
    MHD_get_connection_values(conn, MHD_GET_ARGUMENT_KIND, check_one, &c);
    if (!c.problem) return 0;
    if (strcmp(c.problem, "is unknown") == 0)
        pgcld_reply_error(reply, 400, "invalid_request", -1, c.key, "unknown query parameter '%s'", c.key);
    else
        pgcld_reply_error(reply, 400, "invalid_request", -1, c.key, "query parameter '%s' %s", c.key, c.problem);
    return -1;
}

