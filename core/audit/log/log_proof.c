/* log_proof.h: an event's proof and consistency proofs, read from one writer's rows in one
 * snapshot through the tile source (log.h) and tiles.h's reader. */
#include "log_proof.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log/log.h"
#include "note.h"
#include "tiles.h"

void pgcl_log_proof_release(pgcl_log_proof *p) {
    if (!p) return;
    free(p->leaf_data);
    free(p->checkpoint);
    p->leaf_data = NULL;
    p->checkpoint = NULL;
}

/* The root a signed note's checkpoint text names, and its size. PGCL_ERR_FORMAT when the note's
 * text (up to its blank line) is not a checkpoint. */
static pgcl_status note_checkpoint_root(const char *note, uint64_t *size, pgcl_merkle_hash *root, char *err, int cap) {
    const char *blank = strstr(note, "\n\n");
    if (!blank) {
        pgcl_errorf(err, cap, "the stored checkpoint is not a signed note");
        return PGCL_ERR_FORMAT;
    }
    pgcl_tlog_checkpoint cp;
    pgcl_status st = pgcl_tlog_checkpoint_parse(note, (size_t)(blank - note) + 1, &cp, err, cap);
    if (st != PGCL_OK) return st;
    *size = cp.size;
    *root = cp.root;
    return PGCL_OK;
}

typedef struct proof_read {
    pgcl_log_proof *out;
    uint64_t checkpoint_size; /* 0: no checkpoint */
    pgcl_merkle_hash checkpoint_root;
} proof_read;

/* Which tree the proof is against (log_proof.h): the checkpoint's when it covers the leaf. */
static uint64_t proof_tree_size(proof_read *c, uint64_t log_size) {
    uint64_t leaf = c->out->leaf_index;
    if (c->checkpoint_size > leaf && c->checkpoint_size <= log_size) return c->checkpoint_size;
    free(c->out->checkpoint); /* it does not cover the leaf: the current tree, unsigned yet */
    c->out->checkpoint = NULL;
    return log_size;
}

/* The entry, path and root of the leaf, from a reader over the rows. */
static pgcl_status read_leaf_proof(pgcl_tiles_reader *r, pgcl_log_proof *p, char *err, int cap) {
    const unsigned char *data = NULL;
    size_t len = 0;
    pgcl_status st = pgcl_tiles_entry(r, p->tree_size, p->leaf_index, &data, &len, err, cap);
    if (st != PGCL_OK) return st;
    p->leaf_data = malloc(len ? len : 1);
    if (!p->leaf_data) return PGCL_ERR_NOMEM;
    memcpy(p->leaf_data, data, len);
    p->leaf_len = len;
    st = pgcl_tiles_inclusion(r, p->tree_size, p->leaf_index, p->path, &p->path_len, err, cap);
    if (st == PGCL_OK) st = pgcl_tiles_root(r, p->tree_size, &p->root, err, cap);
    return st;
}

static pgcl_status proof_in_log(void *ctx, const pgcl_log_ops *ops, void *ops_ctx, const pgcl_audit_log_info *log,
                                char *err, int cap) {
    proof_read *c = ctx;
    pgcl_log_proof *p = c->out;
    if (p->leaf_index >= log->size) {
        pgcl_errorf(err, cap, "the log of '%.128s' has no leaf %llu", log->writer_id,
                    (unsigned long long)p->leaf_index);
        return PGCL_ERR_NOT_FOUND;
    }
    p->tree_size = proof_tree_size(c, log->size);
    pgcl_log_source src;
    pgcl_log_source_init(&src, ops, ops_ctx, log->size);
    pgcl_tiles_reader *r = pgcl_tiles_reader_create(pgcl_log_tile_read, &src);
    pgcl_status st = r ? read_leaf_proof(r, p, err, cap) : PGCL_ERR_NOMEM;
    pgcl_tiles_reader_destroy(r);
    pgcl_log_source_free(&src);
    if (st == PGCL_ERR_NOMEM) pgcl_errorf(err, cap, "out of memory");
    return st;
}

/* What the proof serves must verify (always on: a wrong proof is a wrong answer). */
static pgcl_status check_served(const proof_read *c, char *err, int cap) {
    const pgcl_log_proof *p = c->out;
    pgcl_merkle_hash leaf = pgcl_merkle_leaf_hash(p->leaf_data, p->leaf_len);
    if (!pgcl_merkle_verify_inclusion(&leaf, p->leaf_index, p->tree_size, p->path, p->path_len, &p->root)) {
        pgcl_errorf(err, cap, "leaf %llu of '%.128s' does not prove to the log's root",
                    (unsigned long long)p->leaf_index, p->writer_id);
        return PGCL_ERR_MISMATCH;
    }
    if (p->checkpoint && memcmp(&c->checkpoint_root, &p->root, sizeof p->root) != 0) {
        pgcl_errorf(err, cap, "the log of '%.128s' at size %llu does not have the root its checkpoint signs",
                    p->writer_id, (unsigned long long)p->tree_size);
        return PGCL_ERR_MISMATCH;
    }
    return PGCL_OK;
}

pgcl_status pgcl_log_proof_read(pgcl_audit *a, const char *writer_id, uint64_t leaf_index, pgcl_log_proof *out,
                                char *err, int cap) {
    memset(out, 0, sizeof *out);
    snprintf(out->writer_id, sizeof out->writer_id, "%s", writer_id);
    out->leaf_index = leaf_index;
    proof_read c = {.out = out};
    uint64_t size = 0;
    pgcl_status st = pgcl_audit_log_checkpoint(a, writer_id, &out->checkpoint, &size, err, cap);
    if (st == PGCL_OK) {
        uint64_t signed_size = 0;
        st = note_checkpoint_root(out->checkpoint, &signed_size, &c.checkpoint_root, err, cap);
        if (st != PGCL_OK) return st;
        if (signed_size != size) {
            pgcl_errorf(err, cap, "the stored checkpoint signs size %llu, stored as %llu",
                        (unsigned long long)signed_size, (unsigned long long)size);
            return PGCL_ERR_MISMATCH;
        }
        c.checkpoint_size = size;
    } else if (st != PGCL_ERR_NOT_FOUND) {
        return st;
    }
    st = pgcl_audit_log_read(a, writer_id, proof_in_log, &c, err, cap);
    return st == PGCL_OK ? check_served(&c, err, cap) : st;
}

typedef struct consistency_read {
    uint64_t first, second;
    pgcl_merkle_hash *first_root, *second_root, *proof;
    int *proof_len;
} consistency_read;

static pgcl_status consistency_in_log(void *ctx, const pgcl_log_ops *ops, void *ops_ctx, const pgcl_audit_log_info *log,
                                      char *err, int cap) {
    consistency_read *c = ctx;
    if (c->second > log->size) {
        pgcl_errorf(err, cap, "the log of '%.128s' has %llu leaves, fewer than %llu", log->writer_id,
                    (unsigned long long)log->size, (unsigned long long)c->second);
        return PGCL_ERR_NOT_FOUND;
    }
    pgcl_log_source src;
    pgcl_log_source_init(&src, ops, ops_ctx, log->size);
    pgcl_tiles_reader *r = pgcl_tiles_reader_create(pgcl_log_tile_read, &src);
    pgcl_status st = r ? PGCL_OK : PGCL_ERR_NOMEM;
    if (st == PGCL_OK) st = pgcl_tiles_consistency(r, c->first, c->second, c->proof, c->proof_len, err, cap);
    if (st == PGCL_OK) st = pgcl_tiles_root(r, c->first, c->first_root, err, cap);
    if (st == PGCL_OK) st = pgcl_tiles_root(r, c->second, c->second_root, err, cap);
    pgcl_tiles_reader_destroy(r);
    pgcl_log_source_free(&src);
    if (st == PGCL_ERR_NOMEM) pgcl_errorf(err, cap, "out of memory");
    return st;
}

pgcl_status pgcl_log_consistency_read(pgcl_audit *a, const char *writer_id, uint64_t first, uint64_t second,
                                      pgcl_merkle_hash *first_root, pgcl_merkle_hash *second_root,
                                      pgcl_merkle_hash proof[PGCL_MERKLE_MAX_PATH], int *proof_len, char *err,
                                      int cap) {
    *proof_len = 0;
    if (first == 0 || first > second) {
        pgcl_errorf(err, cap, "a consistency proof needs 0 < first <= second");
        return PGCL_ERR_INVALID;
    }
    consistency_read c = {first, second, first_root, second_root, proof, proof_len};
    pgcl_status st = pgcl_audit_log_read(a, writer_id, consistency_in_log, &c, err, cap);
    if (st == PGCL_OK && !pgcl_merkle_verify_consistency(first, second, first_root, second_root, proof, *proof_len)) {
        pgcl_errorf(err, cap, "the log of '%.128s' gives a consistency proof that does not verify", writer_id);
        return PGCL_ERR_MISMATCH; /* the rows disagree with each other: never served */
    }
    return st;
}
