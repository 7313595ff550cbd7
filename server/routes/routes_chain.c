/* Audit chain verification and signed checkpoints over HTTP:
 *   GET  /v1/audit/verify       (reviewer, admin) verifies the chain of the daemon's database
 *   POST /v1/audit/checkpoints  (admin) signs the current head and writes a checkpoint file
 *   GET  /v1/audit/consistency  (reviewer) proves that one log tree size extends another
 * Each runs on the request's thread through the audit store (its own connections; a verification
 * reads one snapshot while the writer goes on). With the PostgreSQL store there is one chain per
 * writer: verify reports each writer's head, checkpoints are fleet checkpoints over every head, and
 * consistency proofs are within one writer's log (writer=). */
#include <limits.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audit_reads.h"
#include "chain.h"
#include "chain_proof.h"
#include "log.h"
#include "review_json.h"
#include "server.h"
#include "signing.h"
#include "store_registry.h"

#define ERR_CAP 1024

void pgcld_handle_audit_verify(pgcld_server *srv, const pgcld_request *req, pgcld_reply *reply) {
    pgcl_chain_report rep;
    char err[ERR_CAP];
    if (pgcl_audit_verify_chain(srv->audit, &rep, err, sizeof err) != PGCL_OK) {
        pgcl_chain_report_release(&rep);
        pgcl_log_error("audit verify: %s", err);
        pgcld_reply_error(reply, 503, "audit_unavailable", -1, NULL, "the audit chain could not be read: %s", err);
        reply->retry_after = "1";
        return;
    }
    if (!rep.intact)
        pgcl_log_warn("audit verify: NOT INTACT (first bad entry %lld): %s", (long long)rep.first_bad_seq, rep.reason);
    reply->status = 200;
    reply->body = json_pack("{s:b, s:I, s:o, s:o, s:I, s:o, s:o, s:I}", "intact", rep.intact, "events",
                            (json_int_t)rep.events, "first_bad_seq",
                            rep.intact ? json_null() : json_integer(rep.first_bad_seq), "reason",
                            rep.intact ? json_null() : json_string(rep.reason), "head_seq", (json_int_t)rep.head_seq,
                            "head_hash", rep.head_hash[0] ? json_string(rep.head_hash) : json_null(),
                            "archive_cut_seq", rep.archive_cut_seq ? json_integer(rep.archive_cut_seq) : json_null(),
                            "archived_rows", (json_int_t)rep.archived_rows);
    if (reply->body && rep.has_writers) { /* the PostgreSQL store: one chain per writer */
        json_t *writers = pgcld_chain_writers_json(&rep);
        json_object_set_new(reply->body, "writers", writers ? writers : json_null());
        json_object_set_new(reply->body, "first_bad_writer",
                            rep.intact ? json_null() : json_string(rep.bad_writer_id));
    }
    pgcl_chain_report_release(&rep);
}

pgcl_status pgcld_checkpoint_now(pgcld_server *srv, pgcl_store_checkpoint *out, char *err, int cap) {
    /* --signing-key and --checkpoint-dir (or PGCLD_SIGNING_KEY / PGCLD_CHECKPOINT_DIR, config layer);
     * the default directory: the SQLite file's, or the working directory for a PostgreSQL URI */
    char dir[PATH_MAX];
    if (srv->cfg->checkpoint_dir && *srv->cfg->checkpoint_dir)
        snprintf(dir, sizeof dir, "%s", srv->cfg->checkpoint_dir);
    else
        pgcl_store_default_checkpoint_dir(srv->cfg->db_path, dir, sizeof dir);
    return pgcl_audit_create_checkpoint(srv->audit, srv->cfg->signing_key, NULL, dir, out, err, cap);
}

json_t *pgcld_checkpoint_json(const pgcl_store_checkpoint *cp) {
    if (cp->is_fleet) {
        json_t *out = pgcl_fleet_checkpoint_to_json(&cp->fleet);
        if (out) json_object_set_new(out, "file", json_string(cp->fleet.file));
        return out;
    }
    const pgcl_checkpoint *c = &cp->chain;
    return json_pack("{s:I, s:s, s:s, s:s, s:s, s:s, s:s}", "head_seq", (json_int_t)c->head_seq, "head_hash",
                     c->head_hash, "log_root", c->log_root, "created_at", c->created_at, "public_key", c->public_key,
                     "signature", c->signature, "file", c->file);
}

void pgcld_handle_audit_checkpoint(pgcld_server *srv, const pgcld_request *req, pgcld_reply *reply) {
    if (req->body_len > 0) {
        json_t *body = pgcld_parse_json_body(req, reply); /* no options yet: {} or nothing */
        if (!body) return;
        size_t n = json_object_size(body);
        json_decref(body);
        if (n > 0) {
            pgcld_reply_error(reply, 400, "invalid_request", -1, NULL, "this request takes no fields");
            return;
        }
    }
    if (!srv->cfg->signing_key || !*srv->cfg->signing_key) {
        pgcld_reply_error(reply, 409, "no_signing_key", -1, NULL,
                          "no signing key is configured: make one with 'pgcld audit keygen --out FILE' and start "
                          "pgcld with --signing-key FILE");
        return;
    }
    pgcl_store_checkpoint *cp = malloc(sizeof *cp);
    char err[ERR_CAP];
    if (!cp) {
        pgcld_reply_error(reply, 500, "internal_error", -1, NULL, "out of memory");
        return;
    }
    pgcl_status st = pgcld_checkpoint_now(srv, cp, err, sizeof err);
    if (st == PGCL_ERR_NOT_FOUND) {
        pgcld_reply_error(reply, 409, "empty_chain", -1, NULL, "%s", err);
    } else if (st != PGCL_OK) {
        pgcl_log_error("audit checkpoint: %s", err);
        pgcld_reply_error(reply, 500, "checkpoint_failed", -1, NULL, "%s", err);
    } else if (!(reply->body = pgcld_checkpoint_json(cp))) {
        pgcld_reply_error(reply, 500, "internal_error", -1, NULL, "out of memory");
    } else {
        if (cp->is_fleet)
            pgcl_log_info("audit checkpoint: the heads of %d writers signed by %s, written to %s (by %s)",
                          cp->fleet.n_heads, cp->fleet.public_key, cp->fleet.file, req->actor ? req->actor : "anonymous");
        else
            pgcl_log_info("audit checkpoint: head %lld %s signed by %s, written to %s (by %s)",
                          (long long)cp->chain.head_seq, cp->chain.head_hash, cp->chain.public_key, cp->chain.file,
                          req->actor ? req->actor : "anonymous");
        reply->status = 201;
    }
    pgcl_store_checkpoint_release(cp);
    free(cp);
}

/* ---- 404 decision_not_found, and where an archived decision went ---- */

void pgcld_reply_decision_not_found(pgcld_server *srv, const char *decision_id, pgcld_reply *reply) {
    pgcl_archive_where where;
    char err[ERR_CAP];
    if (pgcl_audit_read_archive_where(srv->audit, decision_id, &where, err, sizeof err) != PGCL_OK) {
        pgcl_log_warn("archive lookup of %.64s: %s", decision_id, err);
        where.archived = false;
    }
    if (where.archived)
        pgcld_reply_error(reply, 404, "decision_not_found", -1, NULL,
                          "no decision with id '%.64s' in the live log: decisions made before %s were archived at the "
                          "cut at chain entry %lld on %s (archive %.200s); one made then is in that archive",
                          decision_id, where.before, (long long)where.entry_seq, where.created_at, where.archive_name);
    else
        pgcld_reply_error(reply, 404, "decision_not_found", -1, NULL, "no decision with id '%.64s'", decision_id);
}

/* ---- GET /v1/decisions/{id}/proof[?format=tlog|chain-v2] ---- */

/* Without format: the transparency log's shape (routes_proof.c) when the decision has a leaf, else
 * the old chain's shape (written before the log), which says "format":"chain-v2". format=tlog asks
 * for the log's shape only (409 for a decision without a leaf); format=chain-v2 for the old chain's
 * shape only (its auditors, and decisions written before the log). */
void pgcld_handle_decision_proof(pgcld_server *srv, const pgcld_request *req, pgcld_reply *reply) {
    const char *format = pgcld_request_query(req, "format");
    if (format && strcmp(format, "tlog") != 0 && strcmp(format, "chain-v2") != 0) {
        pgcld_reply_error(reply, 400, "invalid_request", -1, "format", "'format' must be 'tlog' or 'chain-v2'");
        return;
    }
    bool chain_only = format && strcmp(format, "chain-v2") == 0;
    if (!chain_only && pgcld_reply_tlog_proof(srv, "decision", req->params[0], reply)) return;
    if (format && strcmp(format, "tlog") == 0) { /* no leaf: written before the log, or no such decision */
        pgcl_chain_proof legacy;
        char why[ERR_CAP];
        if (pgcl_audit_read_proof(srv->audit, req->params[0], &legacy, why, sizeof why) == PGCL_OK) {
            pgcl_chain_proof_release(&legacy);
            pgcld_reply_error(reply, 409, "proof_unavailable", -1, NULL,
                              "decision '%.64s' was written before the transparency log: its proof is the "
                              "chain's (ask with format=chain-v2)", req->params[0]);
        } else {
            pgcld_reply_decision_not_found(srv, req->params[0], reply);
        }
        return;
    }
    pgcl_chain_proof proof;
    char err[ERR_CAP];
    pgcl_status st = pgcl_audit_read_proof(srv->audit, req->params[0], &proof, err, sizeof err);
    if (st == PGCL_ERR_NOT_FOUND) {
        pgcld_reply_decision_not_found(srv, req->params[0], reply);
        return;
    }
    if (st == PGCL_ERR_UNSUPPORTED) {
        pgcld_reply_error(reply, 409, "proof_unavailable", -1, NULL, "%s", err);
        return;
    }
    if (st != PGCL_OK) {
        pgcl_log_error("decision proof: %s", err);
        pgcld_reply_error(reply, 503, "audit_unavailable", -1, NULL, "the audit chain could not be read: %s", err);
        reply->retry_after = "1";
        return;
    }
    reply->body = pgcld_inclusion_proof_json(req->params[0], &proof);
    pgcl_chain_proof_release(&proof);
    if (!reply->body) {
        pgcld_reply_error(reply, 500, "internal_error", -1, NULL, "out of memory");
        return;
    }
    reply->status = 200;
}

/* ---- GET /v1/audit/consistency?first=N&second=M[&writer=ID] ---- */

/* A tree size of the query string. */
typedef struct tree_size {
    int64_t n;        /* the size; INT64_MAX when beyond */
    bool beyond;      /* an integer larger than any log can be (above 2^63 - 1, however many digits) */
    const char *text; /* as given */
} tree_size;

/* A required tree size: a decimal integer from 1 (pgcld_parse_decimal: leading zeros allowed).
 * However large it is, a well-formed size is a size: one beyond what a log can hold is read with
 * `beyond` set, and the log answers it as any size beyond its end (404 tree_size_beyond_log).
 * False with reply set (400) when it is missing, malformed or 0. */
static bool tree_size_param(const pgcld_request *req, const char *key, tree_size *out, pgcld_reply *reply) {
    const char *v = pgcld_request_query(req, key);
    if (!v) {
        pgcld_reply_error(reply, 400, "invalid_request", -1, key,
                          "'%s' (a tree size: a checkpoint's head_seq) is required", key);
        return false;
    }
    uint64_t n = 0;
    pgcld_decimal d = pgcld_parse_decimal(v, strlen(v), INT64_MAX, &n);
    if (d == PGCLD_DECIMAL_MALFORMED || n == 0) {
        pgcld_reply_error(reply, 400, "invalid_request", -1, key,
                          "'%s' must be a tree size: a decimal integer from 1 (a checkpoint's head_seq), got '%.40s'",
                          key, v);
        return false;
    }
    *out = (tree_size){.n = (int64_t)n, .beyond = d == PGCLD_DECIMAL_TOO_LARGE, .text = v};
    return true;
}

/* Whether tree size a is larger than b, also when both are beyond any log (compared as decimal
 * digits: without leading zeros, the longer is the larger). */
static bool tree_size_larger(const tree_size *a, const tree_size *b) {
    if (!a->beyond || !b->beyond) return a->beyond || (!b->beyond && a->n > b->n);
    const char *x = a->text + strspn(a->text, "0"), *y = b->text + strspn(b->text, "0");
    size_t nx = strlen(x), ny = strlen(y);
    return nx != ny ? nx > ny : strcmp(x, y) > 0;
}

void pgcld_handle_audit_consistency(pgcld_server *srv, const pgcld_request *req, pgcld_reply *reply) {
    tree_size first, second;
    if (!tree_size_param(req, "first", &first, reply) || !tree_size_param(req, "second", &second, reply)) return;
    if (tree_size_larger(&first, &second)) {
        pgcld_reply_error(reply, 400, "invalid_request", -1, "first",
                          "'first' (%.40s) must not be larger than 'second' (%.40s)", first.text, second.text);
        return;
    }
    pgcl_log_consistency *c = malloc(sizeof *c);
    char err[ERR_CAP];
    if (!c) {
        pgcld_reply_error(reply, 500, "internal_error", -1, NULL, "out of memory");
        return;
    }
    const char *writer = pgcld_request_query(req, "writer");
    if (writer && !pgcl_fleet_writer_id_ok(writer)) {
        free(c);
        pgcld_reply_error(reply, 400, "invalid_request", -1, "writer",
                          "'writer' must be a writer id (1 to 128 bytes, no control character)");
        return;
    }
    /* a size beyond any log is asked as the largest one: the store still checks the writer first */
    pgcl_status st = pgcl_audit_read_consistency(srv->audit, writer, first.n, second.n, c, err, sizeof err);
    if (st == PGCL_ERR_INVALID) {
        pgcld_reply_error(reply, 400, "invalid_request", -1, "writer", "%s", err);
    } else if (st == PGCL_ERR_NOT_FOUND && second.beyond) {
        const char *digits = second.text + strspn(second.text, "0");
        pgcld_reply_error(reply, 404, "tree_size_beyond_log", -1, "second",
                          "no tree of size %.40s%s: that is more entries than any log can hold", digits,
                          strlen(digits) > 40 ? "..." : "");
    } else if (st == PGCL_ERR_NOT_FOUND) {
        pgcld_reply_error(reply, 404, "tree_size_beyond_log", -1, "second", "%s", err);
    } else if (st != PGCL_OK) {
        pgcl_log_error("audit consistency: %s", err);
        pgcld_reply_error(reply, 503, "audit_unavailable", -1, NULL, "the audit chain could not be read: %s", err);
        reply->retry_after = "1";
    } else if (!(reply->body = pgcld_consistency_proof_json(c))) {
        pgcld_reply_error(reply, 500, "internal_error", -1, NULL, "out of memory");
    } else {
        reply->status = 200;
    }
    free(c);
}
