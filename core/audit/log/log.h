/* One writer's transparency log over a store (issue 28): the store-neutral part. Every event a
 * writer commits is one leaf of that writer's RFC 6962/9162 tree, in commit order, leaf hash =
 * SHA-256(0x00 ‖ record) (record.h). A store keeps the tree as rows of two kinds, inside the same
 * transaction as the events they log:
 *
 *   leaf      (writer, leaf_index) → leaf_hash (32 bytes), record (its bytes)
 *   tile root (writer, level, tile_index) → root (32 bytes): MTH of the *full* level tile
 *             (level, tile_index), written once when the commit completes that tile
 *
 * and the log's state (writer, size, root). Every C2SP tlog-tiles tile is a function of those
 * rows, built on read (tiles.h's paths and shapes): level 0's tile N is the leaf hashes
 * N·256 .. N·256+W−1; level L's tile N (L >= 1) is the roots of the full level L−1 tiles
 * N·256 .. N·256+W−1; entry bundle N is the records of leaves N·256 .. N·256+W−1. Nothing is
 * rewritten when a partial tile grows, and a record is stored once.
 *
 * A store implements pgcl_log_ops over one writer's rows (ctx names the writer and the
 * connection); this module does everything that makes them a tree: the appender (a commit's
 * leaves, the tiles it completes, the new root) and the tile source (pgcl_tile_read_fn over
 * pgcl_log_ops, for tiles.h's reader, the HTTP routes and the proofs). */
#ifndef PGCL_WRITER_LOG_H
#define PGCL_WRITER_LOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "merkle.h"
#include "status.h"
#include "tiles.h"

/* ---- the store's side: one writer's rows, inside a transaction (or a read snapshot) ---- */

/* Called once per record read, in leaf order; data is valid only during the call. */
typedef pgcl_status (*pgcl_log_record_fn)(void *fctx, uint64_t leaf_index, const unsigned char *data, size_t len,
                                          char *err, int cap);

typedef struct pgcl_log_ops {
    /* Leaf hashes first .. first+n−1 into out[0..n). PGCL_ERR_NOT_FOUND when any is missing. */
    pgcl_status (*leaf_hashes)(void *ctx, uint64_t first, int n, pgcl_merkle_hash *out, char *err, int cap);
    /* Records first .. first+n−1, each through fn in order. PGCL_ERR_NOT_FOUND when any is missing. */
    pgcl_status (*records)(void *ctx, uint64_t first, int n, pgcl_log_record_fn fn, void *fctx, char *err, int cap);
    /* Roots of the full tiles (level, first .. first+n−1) into out[0..n). PGCL_ERR_NOT_FOUND when any is
     * missing. */
    pgcl_status (*tile_roots)(void *ctx, int level, uint64_t first, int n, pgcl_merkle_hash *out, char *err, int cap);
    /* Writes (inside the commit transaction): a leaf, a full tile's root. Insert-only. */
    pgcl_status (*put_leaf)(void *ctx, uint64_t leaf_index, const pgcl_merkle_hash *leaf_hash,
                            const unsigned char *record, size_t len, char *err, int cap);
    pgcl_status (*put_tile_root)(void *ctx, int level, uint64_t tile_index, const pgcl_merkle_hash *root, char *err,
                                 int cap);
} pgcl_log_ops;

/* ---- the writer's side: a commit's leaves ----
 *
 * One appender per writer (not thread-safe), used like pgcl_chain: begin() with the log's state as
 * read inside the transaction, add() each record in commit order, seal() before COMMIT, which
 * writes the leaves and the tile roots the commit completes through ops and gives the new state,
 * which the store writes in the same transaction. mark()/rewind() for savepoints. A transaction
 * that rolls back takes everything with it: the next begin() starts from the state read again. */
typedef struct pgcl_log_appender pgcl_log_appender;

pgcl_log_appender *pgcl_log_appender_create(void); /* NULL: out of memory */
void pgcl_log_appender_destroy(pgcl_log_appender *a); /* accepts NULL */

void pgcl_log_begin(pgcl_log_appender *a, uint64_t size, const pgcl_merkle_hash *root);
/* Copies record[0..len) as the next leaf; *leaf_index (may be NULL) its index in the log.
 * PGCL_ERR_INVALID when len is 0 or over PGCL_TILE_ENTRY_MAX; PGCL_ERR_NOMEM. */
pgcl_status pgcl_log_add(pgcl_log_appender *a, const unsigned char *record, size_t len, uint64_t *leaf_index);
size_t pgcl_log_mark(const pgcl_log_appender *a);
void pgcl_log_rewind(pgcl_log_appender *a, size_t mark);
/* A decision and, first, its policy record when this log has not recorded that policy since the
 * appender was created (a restart logs each policy once more: harmless, its leaf hash is the same).
 * d is from pgcl_record_of_decision_row (record_rows.h); it is encoded here. *leaf_index: the
 * decision's. PGCL_ERR_INVALID (why names the field) when the record breaks a rule. */
struct pgcl_decision_record_buf;
pgcl_status pgcl_log_add_decision(pgcl_log_appender *a, const struct pgcl_decision_record_buf *d, uint64_t *leaf_index,
                                  char *why, int cap);
/* Any other event: encodes r and adds it. */
struct pgcl_record;
pgcl_status pgcl_log_add_record(pgcl_log_appender *a, const struct pgcl_record *r, uint64_t *leaf_index, char *why,
                                int cap);
/* After the store's COMMIT succeeded: the policies this transaction logged count as logged (a
 * begin() without it forgets them, so a rolled-back policy leaf is logged again). */
void pgcl_log_committed(pgcl_log_appender *a);
/* Leaves added since begin() (and not rewound). */
size_t pgcl_log_pending(const pgcl_log_appender *a);
/* Writes the pending leaves and completed tile roots through ops/ctx and sets *size, *root to the
 * log's new state (the old one when nothing is pending; nothing written then). */
pgcl_status pgcl_log_seal(pgcl_log_appender *a, const pgcl_log_ops *ops, void *ctx, uint64_t *size,
                          pgcl_merkle_hash *root, char *err, int cap);

/* ---- the readers' side: tiles from the rows ---- */

/* A tile source: tiles.h's pgcl_tile_read_fn over a store's rows (pass the source as its ctx). It
 * answers any tile the tree of `size` leaves has (pgcl_tile_in_tree), built from the rows; its
 * bytes live in the source until its next read. */
typedef struct pgcl_log_source {
    const pgcl_log_ops *ops;
    void *ctx;
    uint64_t size;          /* the tree the source answers for */
    unsigned char *buf;     /* the last tile built (owned) */
    size_t buf_cap;
} pgcl_log_source;

void pgcl_log_source_init(pgcl_log_source *s, const pgcl_log_ops *ops, void *ctx, uint64_t size);
void pgcl_log_source_free(pgcl_log_source *s);
pgcl_status pgcl_log_tile_read(void *source, const pgcl_tile_id *id, const unsigned char **data, size_t *len,
                               char *err, int cap);

#endif
