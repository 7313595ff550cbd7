/* The daemon's witnesses; see witnesses.h. */
#include "witnesses.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audit_log.h"
#include "checkpointer.h"
#include "log.h"
#include "tiles.h"

int pgcld_witnesses_parse(const char *list, pgcl_witness out[PGCL_WITNESS_MAX], int *n, char *err, int cap) {
    *n = 0;
    char *copy = strdup(list ? list : "");
    if (!copy) {
        snprintf(err, (size_t)cap, "out of memory");
        return -1;
    }
    const char *specs[PGCL_WITNESS_MAX + 1];
    int count = 0;
    char *save = NULL;
    for (char *tok = strtok_r(copy, " ", &save); tok; tok = strtok_r(NULL, " ", &save)) {
        if (count == PGCL_WITNESS_MAX) {
            snprintf(err, (size_t)cap, "more than %d witnesses", PGCL_WITNESS_MAX);
            free(copy);
            return -1;
        }
        specs[count++] = tok;
    }
    int rc = 0;
    if (count > 0 && pgcl_witness_parse_all(specs, count, out, err, cap) != PGCL_OK) rc = -1;
    else *n = count;
    free(copy);
    return rc;
}

/* ---- the proof callback: runs on the manager's thread, reads the store's readers ---- */

typedef struct proof_read {
    uint64_t old_size, new_size;
    pgcl_merkle_hash *proof;
    int *n_proof;
} proof_read;

static pgcl_status read_consistency(void *ctx, const pgcl_log_ops *ops, void *ops_ctx, const pgcl_audit_log_info *log,
                                    char *err, int cap) {
    proof_read *p = ctx;
    if (p->new_size > log->size) {
        snprintf(err, (size_t)cap, "the log of writer '%s' has %" PRIu64 " leaves, fewer than the checkpoint's %" PRIu64,
                 log->writer_id, log->size, p->new_size);
        return PGCL_ERR_MISMATCH;
    }
    /* the rows only grow: a source of the checkpoint's size answers that tree's tiles */
    pgcl_log_source source;
    pgcl_log_source_init(&source, ops, ops_ctx, p->new_size);
    pgcl_tiles_reader *reader = pgcl_tiles_reader_create(pgcl_log_tile_read, &source);
    pgcl_status st = PGCL_ERR_NOMEM;
    if (!reader) snprintf(err, (size_t)cap, "out of memory");
    else st = pgcl_tiles_consistency(reader, p->old_size, p->new_size, p->proof, p->n_proof, err, cap);
    pgcl_tiles_reader_destroy(reader);
    pgcl_log_source_free(&source);
    return st;
}

static pgcl_status witness_proof(void *ctx, uint64_t old_size, uint64_t new_size,
                                 pgcl_merkle_hash proof[PGCL_MERKLE_MAX_PATH], int *n_proof, char *err, int cap) {
    pgcld_server *srv = ctx;
    proof_read p = {.old_size = old_size, .new_size = new_size, .proof = proof, .n_proof = n_proof};
    *n_proof = 0;
    return pgcl_audit_log_read(srv->audit, pgcl_audit_writer_id(srv->audit), read_consistency, &p, err, cap);
}

/* ---- the manager's outputs: cosignatures to the store; the checkpointer's input to the manager ---- */

static void store_cosignature(void *ctx, int index, const pgcl_witness *w, uint64_t size, const char *line) {
    (void)index;
    pgcld_server *srv = ctx;
    char err[512];
    if (pgcl_audit_log_add_cosignatures(srv->audit, size, line, err, sizeof err) != PGCL_OK)
        pgcl_log_error("witness: %s cosigned the checkpoint of size %" PRIu64 " but its line could not be stored: %s",
                       w->name, size, err);
}

static void submit_signed(void *ctx, const char *note, size_t len, uint64_t size) {
    pgcld_server *srv = ctx;
    pgcl_status st = pgcl_witness_manager_submit(srv->witness_manager, note, len, size);
    if (st != PGCL_OK && st != PGCL_ERR_CLOSED)
        pgcl_log_warn("witness: the checkpoint of size %" PRIu64 " could not be handed to the witnesses (%s)", size,
                      pgcl_status_str(st));
}

/* The latest stored checkpoint (NULL when none) and, for each witness, the size it is known to have
 * cosigned: that checkpoint's when its valid line is there, else 0. */
static char *stored_checkpoint(pgcld_server *srv, uint64_t *size, uint64_t *known) {
    char *note = NULL, err[512];
    *size = 0;
    pgcl_status st = pgcl_audit_log_checkpoint(srv->audit, pgcl_audit_writer_id(srv->audit), &note, size, err,
                                               sizeof err);
    if (st != PGCL_OK) {
        if (st != PGCL_ERR_NOT_FOUND) pgcl_log_warn("witness: the stored checkpoint cannot be read: %s", err);
        return NULL;
    }
    for (int i = 0; i < srv->n_witnesses; i++) {
        int count = pgcl_witness_count_cosignatures(note, strlen(note), &srv->witnesses[i], 1, err, sizeof err);
        if (count < 0)
            pgcl_log_warn("witness: %s: the stored checkpoint of size %" PRIu64 " has a line that does not verify: %s",
                          srv->witnesses[i].name, *size, err);
        known[i] = count > 0 ? *size : 0;
    }
    return note;
}

int pgcld_witnesses_start(pgcld_server *srv, char *err, int cap) {
    pgcl_witness parsed[PGCL_WITNESS_MAX];
    int n = 0;
    if (pgcld_witnesses_parse(srv->cfg->witness, parsed, &n, err, cap) != 0) return -1;
    if (n == 0) return 0;
    if (!srv->checkpointer) {
        snprintf(err, (size_t)cap, "--witness needs signed checkpoints to send: give --signing-key (and a store "
                                   "this process writes)");
        return -1;
    }
    srv->witnesses = malloc((size_t)n * sizeof *srv->witnesses);
    if (!srv->witnesses) {
        snprintf(err, (size_t)cap, "out of memory");
        return -1;
    }
    memcpy(srv->witnesses, parsed, (size_t)n * sizeof *parsed);
    srv->n_witnesses = n;
    uint64_t known[PGCL_WITNESS_MAX] = {0}, size = 0;
    char *note = stored_checkpoint(srv, &size, known);
    pgcl_witness_manager_config mc = {.witnesses = srv->witnesses,
                                      .n = n,
                                      .known_sizes = known,
                                      .proof_fn = witness_proof,
                                      .proof_ctx = srv,
                                      .on_cosigned = store_cosignature,
                                      .cosigned_ctx = srv};
    pgcl_status st;
    srv->witness_manager = pgcl_witness_manager_create(&mc, &st, err, cap);
    if (!srv->witness_manager) {
        free(note);
        return -1;
    }
    if (note && size > 0) submit_signed(srv, note, strlen(note), size);
    free(note);
    pgcl_checkpointer_on_signed(srv->checkpointer, submit_signed, srv);
    for (int i = 0; i < n; i++)
        pgcl_log_info("witness: %s at %s (key %s), cosigned size %" PRIu64 " known", srv->witnesses[i].name,
                      srv->witnesses[i].url, srv->witnesses[i].key.name, known[i]);
    return 0;
}

int pgcld_witnesses_states(pgcld_server *srv, pgcl_witness_state *out, int cap) {
    return srv->witness_manager ? pgcl_witness_manager_states(srv->witness_manager, out, cap) : 0;
}

void pgcld_witnesses_stop(pgcld_server *srv) {
    if (srv->checkpointer) pgcl_checkpointer_on_signed(srv->checkpointer, NULL, NULL);
    pgcl_witness_manager_destroy(srv->witness_manager);
    srv->witness_manager = NULL;
    free(srv->witnesses);
    srv->witnesses = NULL;
    srv->n_witnesses = 0;
}
