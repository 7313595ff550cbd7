/* The Idempotency-Key of the scoring routes: a key being answered is claimed (a second request
 * with it gets 409 until the first is answered), a key already answered replays its stored answer
 * byte for byte (or 422 when it came with another request), and a new one is stored with the
 * request's rows by the scoring call (core/score/score.c, through core/audit/idempotency.c). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "audit_reads.h"
#include "score_job.h"
#include "server.h"

/* ---- Idempotency-Key ----
 * Keys being answered right now, per scope (the API key): a second request with the same key
 * while the first runs gets 409 instead of scoring twice. At most one entry per connection. */
struct pgcld_idem_claim {
    char scope[sizeof ((pgcl_identity *)0)->key_id];
    char key[PGCL_IDEM_KEY_MAX + 1];
    struct pgcld_idem_claim *next;
};

static pthread_mutex_t g_idem_lock = PTHREAD_MUTEX_INITIALIZER;
static pgcld_idem_claim *g_idem_in_flight;

/* Claims (scope, key); NULL when it is already claimed (or out of memory: *oom set). */
static pgcld_idem_claim *idem_claim(const char *scope, const char *key, bool *oom) {
    *oom = false;
    pthread_mutex_lock(&g_idem_lock);
    for (pgcld_idem_claim *s = g_idem_in_flight; s; s = s->next) {
        if (strcmp(s->scope, scope) == 0 && strcmp(s->key, key) == 0) {
            pthread_mutex_unlock(&g_idem_lock);
            return NULL;
        }
    }
    pgcld_idem_claim *slot = calloc(1, sizeof *slot);
    if (slot) {
        snprintf(slot->scope, sizeof slot->scope, "%s", scope);
        snprintf(slot->key, sizeof slot->key, "%s", key);
        slot->next = g_idem_in_flight;
        g_idem_in_flight = slot;
    }
    pthread_mutex_unlock(&g_idem_lock);
    *oom = !slot;
    return slot;
}

void pgcld_score_idempotency_end(pgcld_idem_claim *slot) {
    if (!slot) return;
    pthread_mutex_lock(&g_idem_lock);
    for (pgcld_idem_claim **p = &g_idem_in_flight; *p; p = &(*p)->next) {
        if (*p == slot) {
            *p = slot->next;
            break;
        }
    }
    pthread_mutex_unlock(&g_idem_lock);
    free(slot);
}

static const char *const g_replayed_headers[] = {"Idempotent-Replayed", "true", NULL};

/* The reply for a key found stored: its answer (the same request) or 422 (another request). */
static void reply_stored(const score_job *job, pgcl_idem_record *rec, pgcld_reply *reply) {
    if (pgcl_idem_same_request(rec, job->request_sha256, job->body_sha256)) {
        reply->status = 200;
        reply->text = rec->answer; /* the original answer, byte for byte */
        reply->headers = g_replayed_headers;
        return;
    }
    free(rec->answer);
    pgcld_reply_error(reply, 422, "idempotency_key_reused", -1, "Idempotency-Key",
                      "this Idempotency-Key was used for a different request (request %s): another body, "
                      "route, model, query or item ids",
                      rec->request_id);
}

/* Looks (scope, key) up in the store: true when the reply is made (its stored answer, 422, or 503
 * when the keys cannot be read), false when no live entry holds it. */
static bool reply_if_stored(pgcld_server *srv, const score_job *job, const char *scope, const char *key,
                            pgcld_reply *reply) {
    char err[512], now[PGCL_TIMESTAMP_LEN + 1];
    pgcl_timestamp_now(now);
    bool found = false;
    pgcl_idem_record rec = {0};
    pgcl_status st = pgcl_audit_read_idempotency_key(srv->audit, scope, key, now, &found, &rec, err, sizeof err);
    if (st != PGCL_OK) {
        reply->retry_after = "1";
        pgcld_reply_error(reply, 503, "audit_unavailable", -1, NULL, "idempotency keys cannot be read; retry shortly");
        pgcl_log_error("score: idempotency lookup failed: %s", err);
        return true;
    }
    if (found) reply_stored(job, &rec, reply);
    return found;
}

void pgcld_score_idempotency_replay(pgcld_server *srv, const score_job *job, pgcld_reply *reply) {
    if (reply_if_stored(srv, job, job->idem.scope, job->idem.key, reply)) return;
    reply->retry_after = "1";
    pgcld_reply_error(reply, 409, "idempotency_in_flight", -1, "Idempotency-Key",
                      "another request with this Idempotency-Key was answered meanwhile; retry");
}

int pgcld_score_idempotency_begin(pgcld_server *srv, const pgcld_request *req, score_job *job,
                                  pgcld_idem_claim **slot, pgcld_reply *reply) {
    *slot = NULL;
    pgcld_field given = pgcld_request_header(req, "Idempotency-Key");
    char key[PGCL_IDEM_KEY_MAX + 1];
    if (!given.at) return 0;
    if (!pgcld_field_copy(given, key, sizeof key) || !pgcl_idem_key_valid(key)) {
        pgcld_reply_error(reply, 400, "invalid_request", -1, "Idempotency-Key",
                          "the Idempotency-Key header must be 1 to %d visible ASCII characters", PGCL_IDEM_KEY_MAX);
        return 1;
    }
    const char *scope = req->identity ? req->identity->key_id : "anonymous";
    bool oom;
    if (!(*slot = idem_claim(scope, key, &oom))) {
        if (oom) {
            pgcld_reply_error(reply, 500, "internal_error", -1, NULL, "out of memory");
        } else {
            reply->retry_after = "1";
            pgcld_reply_error(reply, 409, "idempotency_in_flight", -1, "Idempotency-Key",
                              "a request with this Idempotency-Key is still being answered; retry after it");
        }
        return 1;
    }
    pgcl_sha256_hex(req->body, req->body_len, job->body_sha256);
    if (!pgcld_request_fingerprint(req, job->body_sha256, job->request_sha256)) {
        pgcld_reply_error(reply, 500, "internal_error", -1, NULL, "out of memory");
        return 1;
    }
    if (reply_if_stored(srv, job, scope, key, reply)) return 1;
    job->idem = (pgcl_idem_entry){.scope = (*slot)->scope, .key = (*slot)->key, .body_sha256 = job->body_sha256,
                                  .request_sha256 = job->request_sha256, .ttl_s = srv->cfg->idempotency_ttl_s};
    return 0;
}
