/* A helper of tests/integration/test_pg_log.py (not a test by itself): the PostgreSQL store's logs
 * through the store interface (core/audit/audit_log.h, core/audit/pg/audit_pg_log.c) on a database
 * URI, without a daemon — so the test compares what the store serves with what it computes itself
 * from the rows.
 *
 *   pg_log_reads URI logs                   every writer's log: [{"writer_id", "size", "root"}]
 *   pg_log_reads URI tiles WRITER           {"size", "root", "tiles": {PATH: hex}}: every tile of
 *                                           the writer's tree (level tiles and entry bundles),
 *                                           built by the tile source over the store's rows
 *   pg_log_reads URI leaf KIND ID           {"writer_id", "leaf_index"} of an event
 *   pg_log_reads URI checkpoint WRITER SIZE as writer WRITER (its lock taken: no daemon of that id
 *                                           may run): stores a note for SIZE twice (idempotent),
 *                                           refuses another note of that size, appends a
 *                                           cosignature line (once: again, or a line of the note,
 *                                           changes nothing); prints {"note", "size"} read back
 *
 * Exit 0, or 3 (PGCL_ERR_NOT_FOUND), 4 (PGCL_ERR_INVALID), 6 (PGCL_ERR_MISMATCH), 1 (any other
 * error), 2 (usage), with the message on stderr. */
#include <inttypes.h>
#include <jansson.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audit.h"
#include "audit_log.h"
#include "log/log.h"
#include "tiles.h"

static int finish(pgcl_status st, json_t *doc, const char *err) {
    if (st != PGCL_OK) {
        json_decref(doc);
        fprintf(stderr, "pg_log_reads: %s\n", err);
        return st == PGCL_ERR_NOT_FOUND ? 3 : st == PGCL_ERR_INVALID ? 4 : st == PGCL_ERR_MISMATCH ? 6 : 1;
    }
    char *text = doc ? json_dumps(doc, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    json_decref(doc);
    if (!text) return 1;
    printf("%s\n", text);
    free(text);
    return 0;
}

static json_t *hex_json(const unsigned char *b, size_t n) {
    char *hex = malloc(2 * n + 1);
    if (!hex) return NULL;
    sodium_bin2hex(hex, 2 * n + 1, b, n);
    json_t *s = json_string(hex);
    free(hex);
    return s;
}

/* Every tile of the tree of log->size leaves, read through the tile source over the rows. */
static pgcl_status all_tiles(void *ctx, const pgcl_log_ops *ops, void *ops_ctx, const pgcl_audit_log_info *log,
                             char *err, int cap) {
    json_t *doc = ctx, *tiles = json_object();
    json_object_set_new(doc, "size", json_integer((json_int_t)log->size));
    json_object_set_new(doc, "root", hex_json(log->root.b, sizeof log->root.b));
    json_object_set_new(doc, "tiles", tiles);
    pgcl_log_source source;
    pgcl_log_source_init(&source, ops, ops_ctx, log->size);
    pgcl_status st = PGCL_OK;
    for (int level = PGCL_TILE_ENTRIES; level <= PGCL_TILE_MAX_LEVEL && st == PGCL_OK; level++) {
        int probe = level == PGCL_TILE_ENTRIES ? 0 : level;
        if (pgcl_tile_width_in_tree(probe, 0, log->size) < 1) break;
        for (uint64_t n = 0; st == PGCL_OK; n++) {
            int width = pgcl_tile_width_in_tree(probe, n, log->size);
            if (width < 1) break;
            pgcl_tile_id id = {.level = level, .index = n, .width = width};
            const unsigned char *data = NULL;
            size_t len = 0;
            st = pgcl_log_tile_read(&source, &id, &data, &len, err, cap);
            char path[PGCL_TILE_PATH_MAX];
            pgcl_tile_path(&id, path);
            if (st == PGCL_OK) json_object_set_new(tiles, path, hex_json(data, len));
        }
    }
    pgcl_log_source_free(&source);
    return st;
}

static pgcl_status open_store(const char *uri, const char *writer_id, pgcl_audit **out, char *err, int cap) {
    pgcl_audit_options o = {.path = uri, .writer_id = writer_id, .read_only = writer_id == NULL,
                            .max_pending_rows = 1024};
    return pgcl_audit_open(&o, out, err, cap);
}

static pgcl_status checkpoint(pgcl_audit *a, uint64_t size, json_t *doc, char *err, int cap) {
    char note[128], other[128];
    snprintf(note, sizeof note, "test note of size %" PRIu64 "\n\n— test sig\n", size);
    snprintf(other, sizeof other, "another note of size %" PRIu64 "\n\n— test sig\n", size);
    pgcl_status st = pgcl_audit_log_put_checkpoint(a, size, note, err, cap);
    if (st == PGCL_OK) st = pgcl_audit_log_put_checkpoint(a, size, note, err, cap);
    if (st != PGCL_OK) return st;
    if (pgcl_audit_log_put_checkpoint(a, size, other, err, cap) != PGCL_ERR_MISMATCH) {
        snprintf(err, (size_t)cap, "another note of a stored size was not refused");
        return PGCL_ERR_INVALID;
    }
    /* each line once: again, and a line of the note itself, change nothing; a line without its
     * newline is refused */
    if ((st = pgcl_audit_log_add_cosignatures(a, size, "— witness cosig\n", err, cap)) != PGCL_OK) return st;
    if ((st = pgcl_audit_log_add_cosignatures(a, size, "— witness cosig\n— test sig\n", err, cap)) != PGCL_OK)
        return st;
    if (pgcl_audit_log_add_cosignatures(a, size, "— no newline", err, cap) != PGCL_ERR_INVALID) {
        snprintf(err, (size_t)cap, "a cosignature line without its newline was not refused");
        return PGCL_ERR_INVALID;
    }
    char *back = NULL;
    uint64_t back_size = 0;
    if ((st = pgcl_audit_log_checkpoint(a, pgcl_audit_writer_id(a), &back, &back_size, err, cap)) != PGCL_OK)
        return st;
    json_object_set_new(doc, "note", json_string(back));
    json_object_set_new(doc, "size", json_integer((json_int_t)back_size));
    free(back);
    return PGCL_OK;
}

int main(int argc, char **argv) {
    if (argc < 3 || sodium_init() < 0) {
        fprintf(stderr, "usage: pg_log_reads URI logs | tiles WRITER | leaf KIND ID | checkpoint WRITER SIZE\n");
        return 2;
    }
    const char *cmd = argv[2];
    bool as_writer = strcmp(cmd, "checkpoint") == 0 && argc == 5;
    char err[1024] = "";
    pgcl_audit *a = NULL;
    pgcl_status st = open_store(argv[1], as_writer ? argv[3] : NULL, &a, err, sizeof err);
    if (st != PGCL_OK) return finish(st, NULL, err);
    json_t *doc = json_object();
    int rc = 2;
    if (strcmp(cmd, "logs") == 0 && argc == 3) {
        pgcl_audit_log_info logs[16];
        int n = 0;
        st = pgcl_audit_logs(a, logs, 16, &n, err, sizeof err);
        json_t *list = json_array();
        for (int i = 0; st == PGCL_OK && i < n && i < 16; i++) {
            json_t *e = json_object();
            json_object_set_new(e, "writer_id", json_string(logs[i].writer_id));
            json_object_set_new(e, "size", json_integer((json_int_t)logs[i].size));
            json_object_set_new(e, "root", hex_json(logs[i].root.b, sizeof logs[i].root.b));
            json_array_append_new(list, e);
        }
        json_object_set_new(doc, "logs", list);
        rc = finish(st, doc, err);
    } else if (strcmp(cmd, "tiles") == 0 && argc == 4) {
        rc = finish(pgcl_audit_log_read(a, argv[3], all_tiles, doc, err, sizeof err), doc, err);
    } else if (strcmp(cmd, "leaf") == 0 && argc == 5) {
        char writer[PGCL_LOG_WRITER_ID_MAX + 1];
        uint64_t leaf = 0;
        st = pgcl_audit_log_leaf_of(a, argv[3], argv[4], writer, &leaf, err, sizeof err);
        json_object_set_new(doc, "writer_id", json_string(writer));
        json_object_set_new(doc, "leaf_index", json_integer((json_int_t)leaf));
        rc = finish(st, doc, err);
    } else if (as_writer) {
        rc = finish(checkpoint(a, strtoull(argv[4], NULL, 10), doc, err, sizeof err), doc, err);
    } else {
        json_decref(doc);
        fprintf(stderr, "pg_log_reads: unknown command\n");
    }
    pgcl_audit_close(a);
    return rc;
}
