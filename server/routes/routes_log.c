/* The transparency log over HTTP (issue 28), laid out as C2SP tlog-tiles serves a log:
 *   GET  /log/                                    the store's logs (JSON): writer_id, origin, key, prefix, size
 *   GET  /log/{writer_id}/checkpoint              the latest signed checkpoint note (text/plain)
 *   GET  /log/{writer_id}/tile/<L>/<N>[.p/<W>]     a hash tile (application/octet-stream, immutable)
 *   GET  /log/{writer_id}/tile/entries/<N>[.p/<W>] an entry bundle: the records (reviewers only)
 *   POST /log/checkpoint                          (admin) sign and store a checkpoint of this writer's log now
 * The first three are open to anyone with --log-access public (http.c's authorise). Tiles are built
 * from the store's rows at the log's size in one read snapshot (audit_log.h, log.h): a tile is
 * served when the log's current tree has it (pgcl_tile_in_tree), whether or not a checkpoint covers
 * that size yet — its bytes never change, so "beyond the tree" means beyond the current size.
 * Writer ids and origins follow checkpointer.h's rule; a path naming any other writer is 404.
 * Nothing here knows which store it reads. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audit_log.h"
#include "checkpointer.h"
#include "log.h"
#include "note.h"
#include "server.h"
#include "tiles.h"

#define ERR_CAP 1024
#define LOGS_MAX 4096 /* writers listed at most (a fleet has a few) */

static const char *const IMMUTABLE_HEADERS[] = {"Cache-Control", "public, max-age=31536000, immutable", NULL};

/* The store could not be read: 503, logged. */
static void reply_unavailable(pgcld_reply *reply, const char *what, const char *err) {
    pgcl_log_error("log: %s: %s", what, err);
    pgcld_reply_error(reply, 503, "audit_unavailable", -1, NULL, "the transparency log could not be read: %s", err);
    reply->retry_after = "1";
}

/* The verifier key of writer_id's log into vkey (the fleet's --signing-key named by the log's
 * origin); false when there is no key or the name is not servable. */
static bool writer_verifier_key(pgcld_server *srv, const char *origin, char vkey[PGCL_NOTE_VKEY_MAX]) {
    if (!srv->has_log_key || !*origin) return false;
    pgcl_note_verifier v;
    char err[256];
    if (pgcl_note_verifier_make(origin, PGCL_NOTE_ALG_ED25519, srv->log_public_key, &v, err, sizeof err) != PGCL_OK)
        return false;
    return pgcl_note_verifier_format(&v, vkey, PGCL_NOTE_VKEY_MAX) > 0;
}

static json_t *log_json(pgcld_server *srv, const pgcl_audit_log_info *log) {
    char origin[PGCL_TLOG_ORIGIN_MAX + 1], err[256], vkey[PGCL_NOTE_VKEY_MAX], prefix[PGCL_LOG_WRITER_ID_MAX + 8];
    if (pgcl_log_origin(srv->cfg->log_origin, log->writer_id, origin, err, sizeof err) != PGCL_OK) origin[0] = 0;
    snprintf(prefix, sizeof prefix, "/log/%s/", log->writer_id);
    bool has_key = writer_verifier_key(srv, origin, vkey);
    return json_pack("{s:s, s:o, s:o, s:s, s:I}", "writer_id", log->writer_id, "origin",
                     *origin ? json_string(origin) : json_null(), "key", has_key ? json_string(vkey) : json_null(),
                     "prefix", prefix, "size", (json_int_t)log->size);
}

void pgcld_handle_log_list(pgcld_server *srv, const pgcld_request *req, pgcld_reply *reply) {
    (void)req;
    char err[ERR_CAP];
    int cap = 16, n = 0;
    pgcl_audit_log_info *logs = NULL;
    for (;;) {
        pgcl_audit_log_info *grown = realloc(logs, (size_t)cap * sizeof *logs);
        if (!grown) {
            free(logs);
            pgcld_reply_error(reply, 500, "internal_error", -1, NULL, "out of memory");
            return;
        }
        logs = grown;
        if (pgcl_audit_logs(srv->audit, logs, cap, &n, err, sizeof err) != PGCL_OK) {
            free(logs);
            reply_unavailable(reply, "GET /log/", err);
            return;
        }
        if (n <= cap || cap >= LOGS_MAX) break;
        cap = n < LOGS_MAX ? n : LOGS_MAX;
    }
    json_t *list = json_array();
    for (int i = 0; list && i < n && i < cap; i++) {
        if (!pgcl_log_writer_id_valid(logs[i].writer_id)) continue; /* not servable: never listed */
        json_array_append_new(list, log_json(srv, &logs[i]));
    }
    free(logs);
    reply->body = json_pack("{s:o}", "logs", list ? list : json_array());
}

void pgcld_handle_log_checkpoint(pgcld_server *srv, const pgcld_request *req, pgcld_reply *reply) {
    const char *writer = req->params[0];
    char err[ERR_CAP], *note = NULL;
    uint64_t size = 0;
    if (!pgcl_log_writer_id_valid(writer)) {
        pgcld_reply_error(reply, 404, "not_found", -1, NULL, "no log of writer '%s'", writer);
        return;
    }
    pgcl_status st = pgcl_audit_log_checkpoint(srv->audit, writer, &note, &size, err, sizeof err);
    if (st == PGCL_ERR_NOT_FOUND) {
        pgcld_reply_error(reply, 404, "not_found", -1, NULL, "no checkpoint of the log of writer '%s' yet%s", writer,
                          srv->has_log_key ? "" : " (this daemon has no --signing-key: it signs none)");
        return;
    }
    if (st != PGCL_OK) {
        reply_unavailable(reply, "GET checkpoint", err);
        return;
    }
    reply->text = note;
    reply->content_type = "text/plain; charset=utf-8";
}

/* A tile's bytes as read in the log's snapshot: pgcl_audit_log_read's callback. */
typedef struct tile_read {
    pgcl_tile_id id;
    bool beyond; /* the log's tree has no such tile */
    unsigned char *data; /* malloc'd copy */
    size_t len;
} tile_read;

static pgcl_status read_tile(void *ctx, const pgcl_log_ops *ops, void *ops_ctx, const pgcl_audit_log_info *log,
                             char *err, int cap) {
    tile_read *t = ctx;
    if (!pgcl_tile_in_tree(&t->id, log->size)) {
        t->beyond = true;
        return PGCL_ERR_NOT_FOUND;
    }
    pgcl_log_source source;
    pgcl_log_source_init(&source, ops, ops_ctx, log->size);
    const unsigned char *data = NULL;
    size_t len = 0;
    pgcl_status st = pgcl_log_tile_read(&source, &t->id, &data, &len, err, cap);
    if (st == PGCL_OK) {
        t->data = malloc(len ? len : 1);
        if (!t->data) {
            snprintf(err, (size_t)cap, "out of memory");
            st = PGCL_ERR_NOMEM;
        } else {
            memcpy(t->data, data, len);
            t->len = len;
        }
    }
    pgcl_log_source_free(&source);
    return st;
}

/* Serves tile "tile/<prefix><rest>" of writer req->params[0]: entries says which route. */
static void serve_tile(pgcld_server *srv, const pgcld_request *req, pgcld_reply *reply, bool entries) {
    const char *writer = req->params[0];
    char path[PGCL_TILE_PATH_MAX + 16];
    int n = snprintf(path, sizeof path, "tile/%s%s", entries ? "entries/" : "", req->params[1]);
    tile_read t = {0};
    if (n < 0 || (size_t)n >= sizeof path || pgcl_tile_parse_path(path, (size_t)n, &t.id) != PGCL_OK ||
        (t.id.level == PGCL_TILE_ENTRIES) != entries) {
        pgcld_reply_error(reply, 400, "invalid_request", -1, NULL,
                          "'%.80s' is not a tile path of C2SP tlog-tiles (tile/<L>/<N>[.p/<W>] or "
                          "tile/entries/<N>[.p/<W>], <N> in 3-digit groups)",
                          path);
        return;
    }
    if (!pgcl_log_writer_id_valid(writer)) {
        pgcld_reply_error(reply, 404, "not_found", -1, NULL, "no log of writer '%s'", writer);
        return;
    }
    char err[ERR_CAP];
    pgcl_status st = pgcl_audit_log_read(srv->audit, writer, read_tile, &t, err, sizeof err);
    if (st == PGCL_ERR_NOT_FOUND) {
        if (t.beyond) pgcld_reply_error(reply, 404, "not_found", -1, NULL, "the log of writer '%s' has no %s", writer, path);
        else pgcld_reply_error(reply, 404, "not_found", -1, NULL, "no log of writer '%s'", writer);
        free(t.data);
        return;
    }
    if (st != PGCL_OK) {
        free(t.data);
        reply_unavailable(reply, path, err);
        return;
    }
    reply->data = t.data;
    reply->data_len = t.len;
    reply->data_owned = true;
    reply->content_type = "application/octet-stream";
    reply->headers = IMMUTABLE_HEADERS;
}

void pgcld_handle_log_tile(pgcld_server *srv, const pgcld_request *req, pgcld_reply *reply) {
    serve_tile(srv, req, reply, false);
}

void pgcld_handle_log_entries(pgcld_server *srv, const pgcld_request *req, pgcld_reply *reply) {
    serve_tile(srv, req, reply, true);
}

void pgcld_handle_log_checkpoint_now(pgcld_server *srv, const pgcld_request *req, pgcld_reply *reply) {
    (void)req;
    if (!srv->checkpointer) {
        pgcld_reply_error(reply, 409, "no_signing_key", -1, NULL,
                          "this daemon signs no checkpoints: start it with --signing-key (on a store open for writing)");
        return;
    }
    char err[ERR_CAP], *note = NULL;
    uint64_t size = 0, stored = 0;
    bool made = false;
    const char *writer = pgcl_audit_writer_id(srv->audit);
    pgcl_status st = pgcl_checkpointer_now(srv->checkpointer, &size, &made, err, sizeof err);
    if (st == PGCL_OK) st = pgcl_audit_log_checkpoint(srv->audit, writer, &note, &stored, err, sizeof err);
    if (st != PGCL_OK) {
        free(note);
        reply_unavailable(reply, "POST /log/checkpoint", err);
        return;
    }
    reply->body = json_pack("{s:s, s:I, s:b, s:s}", "writer_id", writer, "size", (json_int_t)stored, "signed_now",
                            made, "checkpoint", note);
    free(note);
}
