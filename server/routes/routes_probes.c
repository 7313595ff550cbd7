/* Liveness, readiness and the model listing. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bodybudget.h"
#include "server.h"
#include "witnesses.h"

void pgcld_handle_healthz(pgcld_server *srv, const pgcld_request *req, pgcld_reply *reply) {
    reply->status = 200;
    reply->body = json_pack("{s:s}", "status", "ok");
}

/* Ready when at least one model serves, the audit log's last write succeeded (a daemon that
 * cannot record decisions must not receive traffic) and the daemon is not shutting down. */
bool pgcld_server_readiness(pgcld_server *srv, bool *models, bool *audit, bool *draining) {
    *models = pgcl_registry_ready_count(srv->registry) > 0;
    *audit = pgcl_audit_healthy(srv->audit);
    *draining = atomic_load(&srv->draining);
    return *models && *audit && !*draining;
}

void pgcld_handle_readyz(pgcld_server *srv, const pgcld_request *req, pgcld_reply *reply) {
    bool models, audit, draining;
    bool ready = pgcld_server_readiness(srv, &models, &audit, &draining);
    reply->status = ready ? 200 : 503;
    if (!ready) reply->retry_after = "1";
    reply->body = json_pack("{s:s, s:{s:b, s:b, s:b}}", "status", ready ? "ready" : "not_ready", "checks", "models",
                            models, "audit_db", audit, "draining", draining);
}

/* The info lines of the active versions, appended to one growing buffer. */
typedef struct info_lines {
    char *text;
    size_t len, cap;
} info_lines;

static void append_active_info(const pgcl_model *m, void *ctx) {
    info_lines *l = ctx;
    char line[320];
    int n = snprintf(line, sizeof line, "pgcld_model_active_info{model=\"%s\",version=\"%s\",sha256=\"%s\"} 1\n",
                     m->name, m->version, m->sha256);
    if (n <= 0 || (size_t)n >= sizeof line) return;
    if (l->len + (size_t)n + 1 > l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 1024;
        while (cap < l->len + (size_t)n + 1) cap *= 2;
        char *grown = realloc(l->text, cap);
        if (!grown) return;
        l->text = grown;
        l->cap = cap;
    }
    memcpy(l->text + l->len, line, (size_t)n + 1);
    l->len += (size_t)n;
}

void pgcld_handle_metrics(pgcld_server *srv, const pgcld_request *req, pgcld_reply *reply) {
    if (strcmp(srv->cfg->metrics, "on") != 0) {
        pgcld_reply_error(reply, 404, "not_found", -1, NULL, "metrics are turned off (--metrics off)");
        return;
    }
    info_lines extra = {0};
    pgcl_registry_foreach_active(srv->registry, append_active_info, &extra);
    pgcld_metrics_gauges g = {.audit_pending_rows = pgcl_audit_pending_rows(srv->audit),
                              .in_flight = atomic_load(&srv->in_flight),
                              .open_connections = atomic_load(&srv->open_connections),
                              .models_ready = pgcl_registry_ready_count(srv->registry),
                              .draining = atomic_load(&srv->draining)};
    int64_t db_bytes = -1;
    g.audit_db_bytes = pgcl_audit_size_bytes(srv->audit, &db_bytes) ? db_bytes : -1;
    g.audit_last_commit_unix_us = pgcl_audit_last_commit_unix_us(srv->audit);
    if (srv->body_budget) pgcld_body_budget_stats(srv->body_budget, &g.body_bytes_reserved, &g.body_waiting);
    pgcl_witness_state witnesses[PGCL_WITNESS_MAX];
    g.n_witnesses = pgcld_witnesses_states(srv, witnesses, PGCL_WITNESS_MAX);
    if (g.n_witnesses > PGCL_WITNESS_MAX) g.n_witnesses = PGCL_WITNESS_MAX;
    g.witnesses = witnesses;
    reply->text = pgcld_metrics_render(srv->metrics, &g, extra.text);
    free(extra.text);
    if (!reply->text) {
        pgcld_reply_error(reply, 500, "internal_error", -1, NULL, "out of memory");
        return;
    }
    reply->content_type = "text/plain; version=0.0.4; charset=utf-8";
    reply->status = 200;
}

void pgcld_handle_models(pgcld_server *srv, const pgcld_request *req, pgcld_reply *reply) {
    reply->status = 200;
    reply->body = pgcl_registry_describe(srv->registry);
}
