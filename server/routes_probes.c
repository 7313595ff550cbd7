/* Liveness, readiness and the model listing. */
#include "server.h"

void pgcld_handle_healthz(pgcld_server *srv, const pgcld_request *req, pgcld_reply *reply) {
    reply->status = 200;
    reply->body = json_pack("{s:s}", "status", "ok");
}

/* Ready when at least one model serves and the audit log's last write succeeded: a daemon that
 * cannot record decisions must not receive traffic. */
void pgcld_handle_readyz(pgcld_server *srv, const pgcld_request *req, pgcld_reply *reply) {
    bool models = pgcl_registry_ready_count(srv->registry) > 0;
    bool audit = pgcl_audit_healthy(srv->audit);
    reply->status = models && audit ? 200 : 503;
    if (reply->status == 503) reply->retry_after = "1";
    reply->body = json_pack("{s:s, s:{s:b, s:b}}", "status", models && audit ? "ready" : "not_ready", "checks",
                            "models", models, "audit_db", audit);
}

void pgcld_handle_models(pgcld_server *srv, const pgcld_request *req, pgcld_reply *reply) {
    reply->status = 200;
    reply->body = pgcl_registry_describe(srv->registry);
}
