/* Proofs in the transparency-log shape (issue 28 item 3; docs/audit.md, "Proofs"):
 *   GET /v1/decisions/{id}/proof                 a decision's leaf, inclusion and checkpoint
 *   GET /v1/contests/{id}/proof                  a contest's
 *   GET /v1/contests/{id}/resolution/proof       the resolution of a contest's
 *   GET /log/{writer_id}/consistency?first=&second=  RFC 9162 consistency of two sizes of one log
 * The event's leaf is found by the store (pgcl_audit_log_leaf_of), the proof read from the rows
 * through the neutral tile reader (log_proof.h): nothing here knows which store it reads. A proof
 * is against the latest stored checkpoint that covers the leaf; when none does yet and this
 * process writes that log with a checkpointer, it signs one now (so the answer carries a signed
 * checkpoint whenever the daemon has a signing key); else checkpoint is null and the proof is
 * against the log's current size.
 *
 * Decisions written before the log have no leaf: GET /v1/decisions/{id}/proof answers them in the
 * old shape (chain-v2, routes_chain.c), as it answers every decision asked with ?format=chain-v2. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audit_log.h"
#include "checkpointer.h"
#include "log.h"
#include "log_proof.h"
#include "record_json.h"
#include "server.h"

#define ERR_CAP 1024

/* Signs a checkpoint now when this process writes writer_id's log and none covers leaf_index. */
static void checkpoint_to_cover(pgcld_server *srv, const char *writer_id, uint64_t leaf_index) {
    if (!srv->checkpointer || strcmp(writer_id, pgcl_audit_writer_id(srv->audit)) != 0) return;
    char *note = NULL, err[ERR_CAP];
    uint64_t size = 0;
    pgcl_status st = pgcl_audit_log_checkpoint(srv->audit, writer_id, &note, &size, err, sizeof err);
    free(note);
    if (st == PGCL_OK && size > leaf_index) return;
    if (pgcl_checkpointer_now(srv->checkpointer, NULL, NULL, err, sizeof err) != PGCL_OK)
        pgcl_log_warn("proof: a checkpoint to cover leaf %llu: %s", (unsigned long long)leaf_index, err);
}

/* Answers the tlog-shape proof of event (kind, id); false (reply untouched) when the store has no
 * leaf for it, so the caller answers its 404 or the legacy shape. */
bool pgcld_reply_tlog_proof(pgcld_server *srv, const char *kind, const char *id, pgcld_reply *reply) {
    char writer_id[PGCL_LOG_WRITER_ID_MAX + 1], err[ERR_CAP];
    uint64_t leaf_index = 0;
    pgcl_status st = pgcl_audit_log_leaf_of(srv->audit, kind, id, writer_id, &leaf_index, err, sizeof err);
    if (st == PGCL_ERR_NOT_FOUND || st == PGCL_ERR_UNSUPPORTED) return false;
    if (st == PGCL_OK) {
        checkpoint_to_cover(srv, writer_id, leaf_index);
        pgcl_log_proof p;
        st = pgcl_log_proof_read(srv->audit, writer_id, leaf_index, &p, err, sizeof err);
        if (st == PGCL_OK && !(reply->body = pgcld_tlog_proof_json(kind, id, &p))) {
            pgcl_log_proof_release(&p);
            pgcld_reply_error(reply, 500, "internal_error", -1, NULL, "out of memory");
            return true;
        }
        pgcl_log_proof_release(&p);
    }
    if (st != PGCL_OK) {
        pgcl_log_error("%s proof of %.64s: %s", kind, id, err);
        pgcld_reply_error(reply, 503, "audit_unavailable", -1, NULL, "the transparency log could not be read: %s", err);
        reply->retry_after = "1";
        return true;
    }
    reply->status = 200;
    return true;
}

void pgcld_handle_contest_proof(pgcld_server *srv, const pgcld_request *req, pgcld_reply *reply) {
    if (!pgcld_reply_tlog_proof(srv, "contest", req->params[0], reply))
        pgcld_reply_error(reply, 404, "contest_not_found", -1, NULL, "no contest '%.64s' in the transparency log",
                          req->params[0]);
}

void pgcld_handle_resolution_proof(pgcld_server *srv, const pgcld_request *req, pgcld_reply *reply) {
    if (!pgcld_reply_tlog_proof(srv, "resolution", req->params[0], reply))
        pgcld_reply_error(reply, 404, "resolution_not_found", -1, NULL,
                          "no resolution of contest '%.64s' in the transparency log", req->params[0]);
}

/* A tree size of the query: a decimal integer from 1 up to 2^63 - 1. False with reply set (400). */
static bool size_param(const pgcld_request *req, const char *key, uint64_t *out, pgcld_reply *reply) {
    const char *v = pgcld_request_query(req, key);
    if (!v || pgcld_parse_decimal(v, strlen(v), INT64_MAX, out) != PGCLD_DECIMAL_OK || *out == 0) {
        pgcld_reply_error(reply, 400, "invalid_request", -1, key,
                          "'%s' must be a tree size: a decimal integer from 1 to 2^63 - 1", key);
        return false;
    }
    return true;
}

void pgcld_handle_log_consistency(pgcld_server *srv, const pgcld_request *req, pgcld_reply *reply) {
    const char *writer_id = req->params[0];
    uint64_t first = 0, second = 0;
    if (!size_param(req, "first", &first, reply) || !size_param(req, "second", &second, reply)) return;
    if (first > second) {
        pgcld_reply_error(reply, 400, "invalid_request", -1, "first", "'first' must not be larger than 'second'");
        return;
    }
    if (!pgcl_log_writer_id_valid(writer_id)) {
        pgcld_reply_error(reply, 404, "not_found", -1, NULL, "no log of writer '%.64s'", writer_id);
        return;
    }
    pgcl_merkle_hash r1, r2, proof[PGCL_MERKLE_MAX_PATH];
    int n = 0;
    char err[ERR_CAP];
    pgcl_status st =
        pgcl_log_consistency_read(srv->audit, writer_id, first, second, &r1, &r2, proof, &n, err, sizeof err);
    if (st == PGCL_ERR_NOT_FOUND) {
        pgcld_reply_error(reply, 404, "tree_size_beyond_log", -1, "second", "%s", err);
    } else if (st != PGCL_OK) {
        pgcl_log_error("log consistency: %s", err);
        pgcld_reply_error(reply, 503, "audit_unavailable", -1, NULL, "the transparency log could not be read: %s", err);
        reply->retry_after = "1";
    } else if (!(reply->body = pgcld_tlog_consistency_json(writer_id, first, second, &r1, &r2, proof, n))) {
        pgcld_reply_error(reply, 500, "internal_error", -1, NULL, "out of memory");
    } else {
        reply->status = 200;
    }
}
