/* The writer's side of log.h: a commit's leaves, the full tiles it completes, the new root.
 *
 * The appender holds the pending records (their bytes, one buffer) and leaf hashes until seal(),
 * which writes them through the store's ops, then the root of every full tile the commit completes
 * — level 0's tile N when leaf N·256+255 is in the commit, level L's tile N when the level L−1 tile
 * N·256+255 is — reading the 256 hashes of each back through the ops (the rows just written are
 * visible in the transaction), and finally the new root from the rows through the tile source and
 * tiles.h's reader. Before writing, it checks that the rows give the root the store's state
 * recorded, so a commit never extends a log whose rows disagree with its state.
 *
 * Policies: add_decision() logs a decision's policy record before its first decision. Policies
 * this appender logged in committed transactions are `logged`; those of the transaction in
 * progress are `unconfirmed`, each with its leaf index so a rewind past it forgets it, until
 * pgcl_log_committed() promotes them or begin() drops them. */
#include <stdlib.h>
#include <string.h>

#include "log/log.h"
#include "record.h"
#include "record_rows.h"

typedef struct pending_leaf {
    size_t offset, len; /* its record: bytes[offset .. offset+len) */
    pgcl_merkle_hash hash;
} pending_leaf;

typedef struct policy_ref {
    pgcl_merkle_hash ref;
    uint64_t leaf_index; /* unconfirmed: the policy's leaf */
} policy_ref;

struct pgcl_log_appender {
    /* the log's state at begin(), or after the last seal() */
    uint64_t size;
    pgcl_merkle_hash root;
    /* the pending leaves */
    unsigned char *bytes; /* (bytes_cap) their records, back to back */
    size_t bytes_len, bytes_cap;
    pending_leaf *leaves; /* (leaves_cap) */
    size_t n_leaves, leaves_cap;
    /* the policies */
    policy_ref *logged; /* (logged_cap) */
    size_t n_logged, logged_cap;
    policy_ref *unconfirmed; /* (unconfirmed_cap) */
    size_t n_unconfirmed, unconfirmed_cap;
    /* seal()'s reads */
    pgcl_log_source source;
    pgcl_tiles_reader *reader; /* over &source */
};

/* Makes room for need elements of elem bytes in array (*cap of them now): the array, moved or
 * not, with *cap updated; NULL when out of memory (the array and *cap unchanged). */
static void *grow(void *array, size_t *cap, size_t need, size_t elem) {
    if (need <= *cap) return array;
    size_t want = *cap ? *cap : 16;
    while (want < need)
        want *= 2;
    void *p = realloc(array, want * elem);
    if (p) *cap = want;
    return p;
}

static const pgcl_log_ops no_ops; /* the source's ops until a seal() names the store's */

pgcl_log_appender *pgcl_log_appender_create(void) {
    pgcl_log_appender *a = calloc(1, sizeof *a);
    if (!a) return NULL;
    pgcl_log_source_init(&a->source, &no_ops, NULL, 0);
    a->reader = pgcl_tiles_reader_create(pgcl_log_tile_read, &a->source);
    if (!a->reader || !(a->bytes = grow(NULL, &a->bytes_cap, 4096, 1))) {
        pgcl_tiles_reader_destroy(a->reader);
        free(a);
        return NULL;
    }
    pgcl_log_begin(a, 0, NULL);
    return a;
}

void pgcl_log_appender_destroy(pgcl_log_appender *a) {
    if (!a) return;
    pgcl_tiles_reader_destroy(a->reader);
    pgcl_log_source_free(&a->source);
    free(a->bytes);
    free(a->leaves);
    free(a->logged);
    free(a->unconfirmed);
    free(a);
}

void pgcl_log_begin(pgcl_log_appender *a, uint64_t size, const pgcl_merkle_hash *root) {
    PGCL_ASSERT(a && (root || size == 0));
    a->size = size;
    if (root)
        a->root = *root;
    else
        a->root = pgcl_merkle_root(NULL, 0);
    a->n_leaves = 0;
    a->bytes_len = 0;
    a->n_unconfirmed = 0;
}

size_t pgcl_log_pending(const pgcl_log_appender *a) {
    return a->n_leaves;
}

size_t pgcl_log_mark(const pgcl_log_appender *a) {
    return a->n_leaves;
}

void pgcl_log_rewind(pgcl_log_appender *a, size_t mark) {
    PGCL_ASSERT(mark <= a->n_leaves);
    if (mark == a->n_leaves) return;
    a->bytes_len = a->leaves[mark].offset;
    a->n_leaves = mark;
    const uint64_t first_gone = a->size + mark;
    size_t kept = 0;
    for (size_t i = 0; i < a->n_unconfirmed; i++)
        if (a->unconfirmed[i].leaf_index < first_gone) a->unconfirmed[kept++] = a->unconfirmed[i];
    a->n_unconfirmed = kept;
}

/* Room for len more bytes of records. */
static bool reserve_bytes(pgcl_log_appender *a, size_t len) {
    unsigned char *bytes = grow(a->bytes, &a->bytes_cap, a->bytes_len + len, 1);
    if (!bytes) return false;
    a->bytes = bytes;
    return true;
}

/* Takes the len bytes just placed at bytes[bytes_len ..) as the next leaf. */
static pgcl_status push_leaf(pgcl_log_appender *a, size_t len, uint64_t *leaf_index) {
    pending_leaf *leaves = grow(a->leaves, &a->leaves_cap, a->n_leaves + 1, sizeof *a->leaves);
    if (!leaves) return PGCL_ERR_NOMEM;
    a->leaves = leaves;
    PGCL_ASSERT(a->bytes_len + len <= a->bytes_cap);
    pending_leaf *leaf = &a->leaves[a->n_leaves];
    leaf->offset = a->bytes_len;
    leaf->len = len;
    leaf->hash = pgcl_merkle_leaf_hash(a->bytes + a->bytes_len, len);
    a->bytes_len += len;
    if (leaf_index) *leaf_index = a->size + a->n_leaves;
    a->n_leaves++;
    return PGCL_OK;
}

pgcl_status pgcl_log_add(pgcl_log_appender *a, const unsigned char *record, size_t len, uint64_t *leaf_index) {
    if (len == 0 || len > PGCL_TILE_ENTRY_MAX) return PGCL_ERR_INVALID;
    if (!reserve_bytes(a, len)) return PGCL_ERR_NOMEM;
    memcpy(a->bytes + a->bytes_len, record, len);
    return push_leaf(a, len, leaf_index);
}

/* Encodes r straight into the pending bytes and takes it as the next leaf. */
static pgcl_status add_encoded(pgcl_log_appender *a, const pgcl_record *r, uint64_t *leaf_index, char *why, int cap) {
    size_t len = 0;
    pgcl_status st = pgcl_record_encode(r, a->bytes + a->bytes_len, a->bytes_cap - a->bytes_len, &len, why, cap);
    if (st == PGCL_ERR_BUSY) {
        if (!reserve_bytes(a, len)) return PGCL_ERR_NOMEM;
        st = pgcl_record_encode(r, a->bytes + a->bytes_len, a->bytes_cap - a->bytes_len, &len, why, cap);
    }
    if (st != PGCL_OK) return st;
    if (len > PGCL_TILE_ENTRY_MAX) {
        pgcl_errorf(why, cap, "the %s record is %zu bytes, over a log entry's %d", pgcl_record_kind_name(r->kind), len,
                    PGCL_TILE_ENTRY_MAX);
        return PGCL_ERR_INVALID;
    }
    return push_leaf(a, len, leaf_index);
}

pgcl_status pgcl_log_add_record(pgcl_log_appender *a, const pgcl_record *r, uint64_t *leaf_index, char *why, int cap) {
    return add_encoded(a, r, leaf_index, why, cap);
}

static bool ref_in(const policy_ref *refs, size_t n, const uint8_t ref[PGCL_RECORD_SHA256_BYTES]) {
    for (size_t i = 0; i < n; i++)
        if (memcmp(refs[i].ref.b, ref, PGCL_RECORD_SHA256_BYTES) == 0) return true;
    return false;
}

pgcl_status pgcl_log_add_decision(pgcl_log_appender *a, const pgcl_decision_record_buf *d, uint64_t *leaf_index,
                                  char *why, int cap) {
    if (d->decision.kind != PGCL_RECORD_DECISION || d->policy.kind != PGCL_RECORD_POLICY) {
        pgcl_errorf(why, cap, "kind: a decision and its policy, not %s and %s", pgcl_record_kind_name(d->decision.kind),
                    pgcl_record_kind_name(d->policy.kind));
        return PGCL_ERR_INVALID;
    }
    const uint8_t *ref = d->decision.decision.policy_ref;
    const size_t mark = pgcl_log_mark(a);
    if (!ref_in(a->logged, a->n_logged, ref) && !ref_in(a->unconfirmed, a->n_unconfirmed, ref)) {
        policy_ref *u = grow(a->unconfirmed, &a->unconfirmed_cap, a->n_unconfirmed + 1, sizeof *a->unconfirmed);
        if (!u) return PGCL_ERR_NOMEM;
        a->unconfirmed = u;
        uint64_t policy_index;
        pgcl_status st = add_encoded(a, &d->policy, &policy_index, why, cap);
        if (st != PGCL_OK) return st;
        const pending_leaf *leaf = &a->leaves[a->n_leaves - 1];
        if (memcmp(leaf->hash.b, ref, PGCL_RECORD_SHA256_BYTES) != 0) {
            pgcl_log_rewind(a, mark);
            pgcl_errorf(why, cap, "policy_ref: not the leaf hash of the decision's policy record");
            return PGCL_ERR_INVALID;
        }
        u = &a->unconfirmed[a->n_unconfirmed++];
        u->ref = leaf->hash;
        u->leaf_index = policy_index;
    }
    pgcl_status st = add_encoded(a, &d->decision, leaf_index, why, cap);
    if (st != PGCL_OK) pgcl_log_rewind(a, mark);
    return st;
}

void pgcl_log_committed(pgcl_log_appender *a) {
    for (size_t i = 0; i < a->n_unconfirmed; i++) {
        if (ref_in(a->logged, a->n_logged, a->unconfirmed[i].ref.b)) continue;
        /* out of memory: the policy is logged once more by a later transaction (harmless) */
        policy_ref *logged = grow(a->logged, &a->logged_cap, a->n_logged + 1, sizeof *a->logged);
        if (!logged) break;
        a->logged = logged;
        a->logged[a->n_logged++] = a->unconfirmed[i];
    }
    a->n_unconfirmed = 0;
}

/* The roots of the full tiles a commit from old_size to new_size leaves completes, written through
 * ops: level 0's tile N from leaf hashes N·256 .. N·256+255, level L's from the roots of level L−1
 * tiles N·256 .. N·256+255, all read back through ops. */
static pgcl_status put_completed_tiles(const pgcl_log_ops *ops, void *ctx, uint64_t old_size, uint64_t new_size,
                                       char *err, int cap) {
    pgcl_merkle_hash hashes[PGCL_TILE_WIDTH];
    /* a level L tile covers 256^(L+1) leaves: levels 0..6 within 64-bit sizes */
    for (int level = 0; (level + 1) * PGCL_TILE_HEIGHT < 64; level++) {
        const int shift = (level + 1) * PGCL_TILE_HEIGHT;
        const uint64_t first = old_size >> shift, end = new_size >> shift; /* full tiles before, after */
        if (first == end) break; /* none completed here, so none above */
        for (uint64_t n = first; n < end; n++) {
            const uint64_t below = n << PGCL_TILE_HEIGHT;
            pgcl_status st = level == 0 ? ops->leaf_hashes(ctx, below, PGCL_TILE_WIDTH, hashes, err, cap)
                                        : ops->tile_roots(ctx, level - 1, below, PGCL_TILE_WIDTH, hashes, err, cap);
            if (st != PGCL_OK) return st;
            pgcl_merkle_hash root = pgcl_merkle_root(hashes, PGCL_TILE_WIDTH);
            st = ops->put_tile_root(ctx, level, n, &root, err, cap);
            if (st != PGCL_OK) return st;
        }
    }
    return PGCL_OK;
}

/* The root of the first size leaves, from the rows through the tile source. The reader keeps the
 * tiles it read since seal() began: rows are insert-only, so a tile read at a smaller size is the
 * prefix of the same tile at a larger one and stays valid within the transaction. */
static pgcl_status root_from_rows(pgcl_log_appender *a, uint64_t size, pgcl_merkle_hash *root, char *err, int cap) {
    a->source.size = size;
    return pgcl_tiles_root(a->reader, size, root, err, cap);
}

pgcl_status pgcl_log_seal(pgcl_log_appender *a, const pgcl_log_ops *ops, void *ctx, uint64_t *size,
                          pgcl_merkle_hash *root, char *err, int cap) {
    PGCL_ASSERT(a && ops && size && root);
    if (a->n_leaves == 0) {
        *size = a->size;
        *root = a->root;
        return PGCL_OK;
    }
    const uint64_t old_size = a->size;
    if (UINT64_MAX - old_size < a->n_leaves) {
        pgcl_errorf(err, cap, "the log is full");
        return PGCL_ERR_INVALID;
    }
    const uint64_t new_size = old_size + a->n_leaves;
    a->source.ops = ops;
    a->source.ctx = ctx;
    pgcl_tiles_reader_reset(a->reader); /* another transaction: what the reader kept may be gone */
    pgcl_merkle_hash got;
    pgcl_status st;
    if (old_size > 0) {
        st = root_from_rows(a, old_size, &got, err, cap);
        if (st != PGCL_OK) return st;
        if (memcmp(got.b, a->root.b, PGCL_MERKLE_HASH_BYTES) != 0) {
            pgcl_errorf(err, cap, "the log's rows do not give the root its state records at size %llu",
                        (unsigned long long)old_size);
            return PGCL_ERR_MISMATCH;
        }
    }
    for (size_t i = 0; i < a->n_leaves; i++) {
        const pending_leaf *leaf = &a->leaves[i];
        st = ops->put_leaf(ctx, old_size + i, &leaf->hash, a->bytes + leaf->offset, leaf->len, err, cap);
        if (st != PGCL_OK) return st;
    }
    st = put_completed_tiles(ops, ctx, old_size, new_size, err, cap);
    if (st != PGCL_OK) return st;
    st = root_from_rows(a, new_size, &got, err, cap);
    if (st != PGCL_OK) return st;
    /* sealed: the next leaves follow these; their policies stay unconfirmed until committed() */
    a->size = new_size;
    a->root = got;
    a->n_leaves = 0;
    a->bytes_len = 0;
    *size = new_size;
    *root = got;
    return PGCL_OK;
}
