/* Liveness, readiness and the model listing. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server.h"

void pgcld_handle_healthz(pgcld_server *srv, const pgcld_request *req, pgcld_reply *reply) {
    reply->status = 200;
    reply->body = json_pack("{s:s}", "status", "ok");
}

/* Ready when at least one model serves, the audit log's last write succeeded (a daemon that
 * cannot record decisions must not receive traffic) and the daemon is not shutting down. */
void pgcld_handle_readyz(pgcld_server *srv, const pgcld_request *req, pgcld_reply *reply) {
    bool models = pgcl_registry_ready_count(srv->registry) > 0;
    bool audit = pgcl_audit_healthy(srv->audit);
    bool draining = atomic_load(&srv->draining);
    bool ready = models && audit && !draining;
    reply->status = ready ? 200 : 503;
    if (!ready) reply->retry_after = "1";
    reply->body = json_pack("{s:s, s:{s:b, s:b, s:b}}", "status", ready ? "ready" : "not_ready", "checks", "models",
                            models, "audit_db", audit, "draining", draining);
}

static void append_active_info(const pgcl_model *m, void *ctx) {
    json_t *lines = ctx;
    char line[320];
    snprintf(line, sizeof line, "pgcld_model_active_info{model=\"%s\",version=\"%s\",sha256=\"%s\"} 1\n", m->name,
             m->version, m->sha256);
    json_array_append_new(lines, json_string(line));
}

void pgcld_handle_metrics(pgcld_server *srv, const pgcld_request *req, pgcld_reply *reply) {
    if (strcmp(srv->cfg->metrics, "on") != 0) {
        pgcld_reply_error(reply, 404, "not_found", -1, NULL, "metrics are turned off (--metrics off)");
        return;
    }
    json_t *lines = json_array();
    pgcl_registry_foreach_active(srv->registry, append_active_info, lines);
    size_t total = 1, i;
    json_t *line;
    json_array_foreach(lines, i, line) total += json_string_length(line);
    char *extra = malloc(total);
    if (extra) {
        extra[0] = 0;
        size_t off = 0;
        json_array_foreach(lines, i, line) {
            memcpy(extra + off, json_string_value(line), json_string_length(line) + 1);
            off += json_string_length(line);
        }
    }
    json_decref(lines);
    pgcld_metrics_gauges g = {.audit_pending_rows = pgcl_audit_pending_rows(srv->audit),
                              .in_flight = atomic_load(&srv->in_flight),
                              .models_ready = pgcl_registry_ready_count(srv->registry),
                              .draining = atomic_load(&srv->draining)};
    reply->text = pgcld_metrics_render(srv->metrics, &g, extra);
    free(extra);
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
