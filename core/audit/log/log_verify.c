/* The transparency logs' verifier (log_verify.h): every writer's log of a store, in one read
 * snapshot each, incrementally from the state file or in full. Store-neutral: it reads the rows
 * through pgcl_log_ops and the checkpoints through audit_log.h only. */
#include "log_verify.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audit_reads.h"
#include "log/log.h"
#include "record.h"
#include "tiles.h"

#define BATCH PGCL_TILE_WIDTH /* leaves read at once: one level 0 tile */

/* One writer's verification: what the snapshot callback reads and what it finds. */
typedef struct writer_check {
    pgcl_log_verify_report *rep;
    pgcl_log_verify_writer *w;
    const pgcl_log_verify_state_entry *state; /* NULL: no earlier run remembered (or --full) */
    const pgcl_note_verifier *key;            /* NULL: the checkpoint's signature is not checked */
    char origin[PGCL_TLOG_ORIGIN_MAX + 1];
    const char *note; /* the latest checkpoint, or NULL */
    uint64_t note_size;
    const pgcl_log_ops *ops;
    void *ops_ctx;
    pgcl_tiles_reader *reader;
    pgcl_record *rec;                               /* decode scratch */
    uint64_t next_leaf;                             /* the record expected next */
    pgcl_merkle_hash batch_hashes[PGCL_TILE_WIDTH]; /* the stored leaf hashes of the batch read */
    uint64_t batch_first;
    bool oracle; /* push every leaf hash: the naive root (a full run) */
    pgcl_merkle_stack stack;
    bool has_legacy;
    pgcl_record_legacy_head legacy;
} writer_check;

/* Records a finding (the first one only) about c's writer at leaf (-1: none). Returns
 * PGCL_ERR_MISMATCH, the status that stops the walk. */
__attribute__((format(printf, 3, 4))) static pgcl_status found(writer_check *c, int64_t leaf, const char *fmt, ...);

static pgcl_status found(writer_check *c, int64_t leaf, const char *fmt, ...) {
    pgcl_log_verify_report *r = c->rep;
    if (!r->intact) return PGCL_ERR_MISMATCH;
    r->intact = false;
    r->bad_leaf = leaf;
    snprintf(r->bad_writer_id, sizeof r->bad_writer_id, "%s", c->w->writer_id);
    char what[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    snprintf(r->reason, sizeof r->reason, "log of writer %s: %s", c->w->writer_id, what);
    return PGCL_ERR_MISMATCH;
}

static void hex_of(const pgcl_merkle_hash *h, char out[2 * PGCL_MERKLE_HASH_BYTES + 1]) {
    pgcl_merkle_to_hex(h, out);
}

/* A read whose status is NOT_FOUND, FORMAT or MISMATCH is a finding about the rows (named by what);
 * any other failure is the store's and ends the run. */
static pgcl_status rows_status(writer_check *c, pgcl_status st, int64_t leaf, const char *what, const char *sub) {
    if (st == PGCL_OK || st == PGCL_ERR_MISMATCH) return st;
    if (st == PGCL_ERR_NOT_FOUND || st == PGCL_ERR_FORMAT) return found(c, leaf, "%s: %s", what, sub);
    return st;
}

/* ---- leaves: each record decodes and hashes to its stored leaf hash ---- */

static pgcl_status check_record(void *fctx, uint64_t leaf_index, const unsigned char *data, size_t len, char *err,
                                int cap) {
    (void)err, (void)cap;
    writer_check *c = fctx;
    if (leaf_index != c->next_leaf)
        return found(c, (int64_t)c->next_leaf, "leaf %" PRIu64 " is missing (no record: a deleted leaf)", c->next_leaf);
    char why[256];
    if (pgcl_record_decode(data, len, c->rec, why, sizeof why) != PGCL_OK)
        return found(c, (int64_t)leaf_index, "leaf %" PRIu64 ": its record does not decode: %s (a changed record)",
                     leaf_index, why);
    pgcl_merkle_hash h = pgcl_merkle_leaf_hash(data, len);
    if (memcmp(h.b, c->batch_hashes[leaf_index - c->batch_first].b, PGCL_MERKLE_HASH_BYTES) != 0)
        return found(c, (int64_t)leaf_index,
                     "leaf %" PRIu64 ": its stored leaf hash is not SHA-256(0x00 || record) (a changed record or leaf "
                     "hash)",
                     leaf_index);
    if (c->rec->kind == PGCL_RECORD_LEGACY_HEAD) {
        if (leaf_index != 0)
            return found(c, (int64_t)leaf_index, "leaf %" PRIu64 ": a legacy_head record, which only leaf 0 may be",
                         leaf_index);
        c->has_legacy = true;
        c->legacy = c->rec->legacy;
    }
    c->next_leaf++;
    return PGCL_OK;
}

/* The first leaf of first..first+n-1 without a leaf hash row (its index in *missing). */
static pgcl_status first_missing_hash(writer_check *c, uint64_t first, int n, uint64_t *missing, char *err, int cap) {
    for (int i = 0; i < n; i++) {
        pgcl_merkle_hash h;
        pgcl_status st = c->ops->leaf_hashes(c->ops_ctx, first + (uint64_t)i, 1, &h, err, cap);
        if (st == PGCL_ERR_NOT_FOUND) {
            *missing = first + (uint64_t)i;
            return PGCL_OK;
        }
        if (st != PGCL_OK) return st;
    }
    *missing = first;
    return PGCL_OK;
}

/* Leaves from..size-1, one level 0 tile at a time. */
static pgcl_status check_leaves(writer_check *c, uint64_t from, uint64_t size, char *err, int cap) {
    pgcl_merkle_hash *hashes = c->batch_hashes;
    for (uint64_t first = from; first < size;) {
        uint64_t end = (first / BATCH + 1) * BATCH;
        if (end > size) end = size;
        int n = (int)(end - first);
        pgcl_status st = c->ops->leaf_hashes(c->ops_ctx, first, n, hashes, err, cap);
        if (st == PGCL_ERR_NOT_FOUND) {
            uint64_t missing = first;
            if ((st = first_missing_hash(c, first, n, &missing, err, cap)) != PGCL_OK) return st;
            return found(c, (int64_t)missing, "leaf %" PRIu64 " is missing (no leaf hash: a deleted leaf)", missing);
        }
        if (st != PGCL_OK) return st;
        c->batch_first = first;
        c->next_leaf = first;
        st = c->ops->records(c->ops_ctx, first, n, check_record, c, err, cap);
        if (st == PGCL_OK && c->next_leaf != end) st = PGCL_ERR_NOT_FOUND;
        if (st == PGCL_ERR_NOT_FOUND)
            return found(c, (int64_t)c->next_leaf, "leaf %" PRIu64 " is missing (no record: a deleted leaf)",
                         c->next_leaf);
        if (st != PGCL_OK) return st;
        c->rep->leaves_checked += (uint64_t)n;
        for (int i = 0; c->oracle && i < n; i++) {
            int level;
            pgcl_merkle_stack_push(&c->stack, &hashes[i]);
            while (pgcl_merkle_stack_merge(&c->stack, &level)) {}
        }
        first = end;
    }
    return PGCL_OK;
}

/* ---- tiles: every full tile completed from `from` on has its children's root ---- */

static pgcl_status check_tile(writer_check *c, int level, uint64_t index, uint64_t span, char *err, int cap) {
    pgcl_merkle_hash children[PGCL_TILE_WIDTH], stored;
    uint64_t first_leaf = index * span, last_leaf = first_leaf + span - 1;
    pgcl_status st = level == 0 ? c->ops->leaf_hashes(c->ops_ctx, first_leaf, PGCL_TILE_WIDTH, children, err, cap)
                                : c->ops->tile_roots(c->ops_ctx, level - 1, index * PGCL_TILE_WIDTH, PGCL_TILE_WIDTH,
                                                     children, err, cap);
    if (st == PGCL_ERR_NOT_FOUND)
        return found(c, (int64_t)first_leaf,
                     "tile (level %d, index %" PRIu64 ", leaves %" PRIu64 "..%" PRIu64 "): %s of its children missing",
                     level, index, first_leaf, last_leaf, level == 0 ? "a leaf hash" : "a tile root");
    if (st != PGCL_OK) return st;
    st = c->ops->tile_roots(c->ops_ctx, level, index, 1, &stored, err, cap);
    if (st == PGCL_ERR_NOT_FOUND)
        return found(c, (int64_t)first_leaf,
                     "tile (level %d, index %" PRIu64 ", leaves %" PRIu64 "..%" PRIu64 "): its root row is missing",
                     level, index, first_leaf, last_leaf);
    if (st != PGCL_OK) return st;
    pgcl_merkle_hash root = pgcl_merkle_root(children, PGCL_TILE_WIDTH);
    if (memcmp(root.b, stored.b, PGCL_MERKLE_HASH_BYTES) != 0)
        return found(c, (int64_t)first_leaf,
                     "tile (level %d, index %" PRIu64 ", leaves %" PRIu64 "..%" PRIu64
                     "): its stored root is not the root of its children (a changed tile root)",
                     level, index, first_leaf, last_leaf);
    return PGCL_OK;
}

static pgcl_status check_tiles(writer_check *c, uint64_t from, uint64_t size, char *err, int cap) {
    uint64_t span = PGCL_TILE_WIDTH; /* leaves under one tile of the level */
    for (int level = 0; span <= size; level++) {
        for (uint64_t index = from / span; index < size / span; index++) {
            pgcl_status st = check_tile(c, level, index, span, err, cap);
            if (st != PGCL_OK) return st;
        }
        if (span > UINT64_MAX / PGCL_TILE_WIDTH) break;
        span *= PGCL_TILE_WIDTH;
    }
    return PGCL_OK;
}

/* ---- the tree against the state file, the state row and the checkpoint ---- */

/* The tree's first s0 leaves still have the root the state remembers, and the tiles prove the
 * whole tree consistent with it. */
static pgcl_status check_history(writer_check *c, uint64_t size, const pgcl_merkle_hash *root, char *err, int cap) {
    const pgcl_log_verify_state_entry *s = c->state;
    char was[65], now[65];
    hex_of(&s->root, was);
    if (size < s->size)
        return found(c, -1,
                     "history rewritten: the verify state remembers a tree of %" PRIu64 " leaves (root %s); the log "
                     "now has %" PRIu64,
                     s->size, was, size);
    if (s->size == 0) return PGCL_OK;
    pgcl_merkle_hash old_root;
    char sub[512];
    pgcl_status st = pgcl_tiles_root(c->reader, s->size, &old_root, sub, sizeof sub);
    if ((st = rows_status(c, st, -1, "the tree at the remembered size", sub)) != PGCL_OK) return st;
    if (memcmp(old_root.b, s->root.b, PGCL_MERKLE_HASH_BYTES) != 0) {
        hex_of(&old_root, now);
        return found(c, -1,
                     "history rewritten: its first %" PRIu64 " leaves now have root %s; the verify state remembers %s",
                     s->size, now, was);
    }
    pgcl_merkle_hash proof[PGCL_MERKLE_MAX_PATH];
    int proof_len = 0;
    st = pgcl_tiles_consistency(c->reader, s->size, size, proof, &proof_len, sub, sizeof sub);
    if ((st = rows_status(c, st, -1, "the consistency proof", sub)) != PGCL_OK) return st;
    if (!pgcl_merkle_verify_consistency(s->size, size, &s->root, root, proof, proof_len))
        return found(c, -1,
                     "history rewritten: the tree of %" PRIu64
                     " leaves is not consistent with the remembered tree of %" PRIu64 " leaves (root %s)",
                     size, s->size, was);
    (void)err, (void)cap;
    return PGCL_OK;
}

/* The latest checkpoint: signed by the key (when one is known), of this log's origin, and its root
 * is the tree's at its size. */
static pgcl_status check_checkpoint(writer_check *c, uint64_t size) {
    pgcl_tlog_checkpoint cp;
    char sub[512];
    pgcl_status st = PGCL_OK;
    size_t len = strlen(c->note);
    if (c->key) {
        pgcl_note *n =
            pgcl_tlog_checkpoint_open(c->note, len, c->key, c->origin, NULL, 0, 0, &cp, &st, sub, sizeof sub);
        if (!n)
            return st == PGCL_ERR_NOMEM
                       ? st
                       : found(c, -1, "checkpoint of size %" PRIu64 ": its signature does not verify: %s", c->note_size,
                               sub);
        pgcl_note_destroy(n);
        c->w->checkpoint_signed = true;
    } else {
        const char *blank = strstr(c->note, "\n\n");
        if (!blank ||
            pgcl_tlog_checkpoint_parse(c->note, (size_t)(blank - c->note) + 1, &cp, sub, sizeof sub) != PGCL_OK)
            return found(c, -1, "checkpoint of size %" PRIu64 ": not a signed checkpoint", c->note_size);
        if (strcmp(cp.origin, c->origin) != 0)
            return found(c, -1, "checkpoint of size %" PRIu64 ": its origin is '%s', not '%s'", c->note_size, cp.origin,
                         c->origin);
    }
    if (cp.size != c->note_size)
        return found(c, -1, "checkpoint stored for size %" PRIu64 " signs size %" PRIu64, c->note_size, cp.size);
    if (cp.size > size)
        return found(c, -1,
                     "checkpoint of size %" PRIu64 " is beyond the tree of %" PRIu64 " leaves (history rewritten)",
                     cp.size, size);
    c->w->has_checkpoint = true;
    c->w->checkpoint_size = cp.size;
    if (cp.size == 0) return PGCL_OK;
    pgcl_merkle_hash root;
    st = pgcl_tiles_root(c->reader, cp.size, &root, sub, sizeof sub);
    if ((st = rows_status(c, st, -1, "the tree at the checkpoint's size", sub)) != PGCL_OK) return st;
    if (memcmp(root.b, cp.root.b, PGCL_MERKLE_HASH_BYTES) != 0) {
        char want[65], got[65];
        hex_of(&cp.root, want);
        hex_of(&root, got);
        return found(c, -1,
                     "checkpoint of size %" PRIu64 " signs root %s; the tree's first %" PRIu64
                     " leaves have root %s (history rewritten)",
                     cp.size, want, cp.size, got);
    }
    return PGCL_OK;
}

/* The snapshot callback: every check of one writer's log that reads its rows. */
static pgcl_status check_log(void *ctx, const pgcl_log_ops *ops, void *ops_ctx, const pgcl_audit_log_info *log,
                             char *err, int cap) {
    writer_check *c = ctx;
    c->ops = ops;
    c->ops_ctx = ops_ctx;
    c->w->size = log->size;
    c->w->root = log->root;
    pgcl_log_source source;
    pgcl_log_source_init(&source, ops, ops_ctx, log->size);
    c->reader = pgcl_tiles_reader_create(pgcl_log_tile_read, &source);
    if (!c->reader) {
        pgcl_log_source_free(&source);
        pgcl_errorf(err, cap, "out of memory");
        return PGCL_ERR_NOMEM;
    }
    uint64_t from = c->state ? c->state->size : 0;
    c->oracle = from == 0;
    c->w->verified_from = from;
    pgcl_status st = c->state ? check_history(c, log->size, &log->root, err, cap) : PGCL_OK;
    if (st == PGCL_OK) st = check_leaves(c, from, log->size, err, cap);
    if (st == PGCL_OK) st = check_tiles(c, from, log->size, err, cap);
    char sub[512], got[65], want[65];
    pgcl_merkle_hash root = pgcl_merkle_root(NULL, 0);
    if (st == PGCL_OK && log->size > 0) {
        st = pgcl_tiles_root(c->reader, log->size, &root, sub, sizeof sub);
        st = rows_status(c, st, -1, "the tree's root", sub);
    }
    if (st == PGCL_OK && c->oracle && log->size > 0) {
        pgcl_merkle_hash naive = pgcl_merkle_stack_root(&c->stack);
        PGCL_ASSERT(memcmp(naive.b, root.b, PGCL_MERKLE_HASH_BYTES) ==
                    0); /* tiles checked above give the leaves' root */
    }
    if (st == PGCL_OK && memcmp(root.b, log->root.b, PGCL_MERKLE_HASH_BYTES) != 0) {
        hex_of(&root, got);
        hex_of(&log->root, want);
        st = found(c, -1, "the root of its %" PRIu64 " leaves is %s; its state row says %s (a changed state root)",
                   log->size, got, want);
    }
    if (st == PGCL_OK && c->note) st = check_checkpoint(c, log->size);
    pgcl_tiles_reader_destroy(c->reader);
    c->reader = NULL;
    pgcl_log_source_free(&source);
    return st == PGCL_ERR_MISMATCH ? PGCL_OK : st;
}

/* Leaf 0 binds the old chain: its log tree root over entries 1..head_seq is the chain's, which the
 * chain verifier checked (the store's consistency read gives it). */
static pgcl_status check_legacy(pgcl_audit *a, writer_check *c, char *err, int cap) {
    const pgcl_record_legacy_head *h = &c->legacy;
    pgcl_log_consistency lc;
    char sub[512];
    pgcl_status st = pgcl_audit_read_consistency(a, h->writer_id[0] ? h->writer_id : NULL, h->head_seq, h->head_seq,
                                                 &lc, sub, sizeof sub);
    if (st == PGCL_ERR_NOT_FOUND || st == PGCL_ERR_INVALID)
        return found(c, 0, "leaf 0 (legacy_head): the old chain has no entry %" PRId64 " (%s)", h->head_seq, sub);
    if (st != PGCL_OK) {
        pgcl_errorf(err, cap, "the old chain's log tree: %s", sub);
        return st;
    }
    c->w->legacy_head = true;
    if (h->has_log_root && memcmp(lc.first_root.b, h->log_root, PGCL_MERKLE_HASH_BYTES) != 0) {
        char got[65];
        hex_of(&lc.first_root, got);
        return found(c, 0,
                     "leaf 0 (legacy_head): the old chain's log tree over entries 1..%" PRId64
                     " has root %s, not the one the leaf binds",
                     h->head_seq, got);
    }
    return PGCL_OK;
}

/* The key that signs writer w's checkpoints: a --log-key named with its origin, else the public key. */
static const pgcl_note_verifier *key_for(const pgcl_log_verify_options *o, const char *origin,
                                         pgcl_note_verifier *made) {
    for (int i = 0; i < o->n_keys; i++)
        if (strcmp(o->keys[i].name, origin) == 0) return &o->keys[i];
    if (!o->public_key) return NULL;
    char sub[256];
    if (pgcl_note_verifier_make(origin, PGCL_NOTE_ALG_ED25519, o->public_key, made, sub, sizeof sub) != PGCL_OK)
        return NULL;
    return made;
}

/* One writer: its checkpoint, then its rows in one snapshot, then its legacy leaf. */
static pgcl_status verify_writer(pgcl_audit *a, const pgcl_log_verify_options *o, writer_check *c, char *err, int cap) {
    const char *prefix = o->origin_prefix ? o->origin_prefix : "pgcld";
    snprintf(c->origin, sizeof c->origin, "%s/%s", prefix, c->w->writer_id);
    pgcl_note_verifier made;
    c->key = key_for(o, c->origin, &made);
    char *note = NULL, sub[512];
    pgcl_status st = pgcl_audit_log_checkpoint(a, c->w->writer_id, &note, &c->note_size, sub, sizeof sub);
    if (st != PGCL_OK && st != PGCL_ERR_NOT_FOUND) {
        pgcl_errorf(err, cap, "writer %s: its checkpoint: %s", c->w->writer_id, sub);
        return st;
    }
    c->note = note;
    st = pgcl_audit_log_read(a, c->w->writer_id, check_log, c, err, cap);
    if (st == PGCL_OK && c->rep->intact && c->has_legacy) st = check_legacy(a, c, err, cap);
    free(note);
    c->note = NULL;
    return st == PGCL_ERR_MISMATCH ? PGCL_OK : st;
}

static const pgcl_log_verify_state_entry *state_of(const pgcl_log_verify_state_entry *s, int n, const char *writer) {
    for (int i = 0; i < n; i++)
        if (strcmp(s[i].writer_id, writer) == 0) return &s[i];
    return NULL;
}

/* Every log of the store, each against its remembered state, into report. */
static pgcl_status verify_logs(pgcl_audit *a, const pgcl_log_verify_options *o, pgcl_audit_log_info *logs, int n,
                               const pgcl_log_verify_state_entry *states, int n_states, pgcl_log_verify_report *r,
                               char *err, int cap) {
    pgcl_record *rec = malloc(sizeof *rec);
    if (!rec) {
        pgcl_errorf(err, cap, "out of memory");
        return PGCL_ERR_NOMEM;
    }
    pgcl_status st = PGCL_OK;
    for (int i = 0; st == PGCL_OK && r->intact && i < n; i++) {
        pgcl_log_verify_writer *w = &r->writers[i];
        memcpy(w->writer_id, logs[i].writer_id, sizeof w->writer_id);
        r->n_writers = i + 1;
        writer_check *c = calloc(1, sizeof *c);
        if (!c) {
            pgcl_errorf(err, cap, "out of memory");
            st = PGCL_ERR_NOMEM;
            break;
        }
        *c = (writer_check){.rep = r, .w = w, .rec = rec};
        c->state = o->full ? NULL : state_of(states, n_states, w->writer_id);
        st = verify_writer(a, o, c, err, cap);
        free(c);
    }
    free(rec);
    return st;
}

pgcl_status pgcl_log_verify(pgcl_audit *a, const pgcl_log_verify_options *o, pgcl_log_verify_report *r, char *err,
                            int cap) {
    memset(r, 0, sizeof *r);
    r->intact = true;
    r->bad_leaf = -1;
    pgcl_audit_log_info *logs = calloc(PGCL_LOG_VERIFY_MAX_WRITERS, sizeof *logs);
    pgcl_log_verify_state_entry *states = calloc(PGCL_LOG_VERIFY_MAX_WRITERS, sizeof *states);
    r->writers = calloc(PGCL_LOG_VERIFY_MAX_WRITERS, sizeof *r->writers);
    int n = 0, n_states = 0;
    pgcl_status st = PGCL_ERR_NOMEM;
    if (!logs || !states || !r->writers) {
        pgcl_errorf(err, cap, "out of memory");
        goto done;
    }
    if ((st = pgcl_audit_logs(a, logs, PGCL_LOG_VERIFY_MAX_WRITERS, &n, err, cap)) != PGCL_OK) goto done;
    if (n > PGCL_LOG_VERIFY_MAX_WRITERS) {
        pgcl_errorf(err, cap, "the store has %d logs; at most %d are verified", n, PGCL_LOG_VERIFY_MAX_WRITERS);
        st = PGCL_ERR_INVALID;
        goto done;
    }
    if (o->state_path && (st = pgcl_log_verify_state_load(o->state_path, states, PGCL_LOG_VERIFY_MAX_WRITERS, &n_states,
                                                          err, cap)) != PGCL_OK)
        goto done;
    /* A log the state remembers but the store no longer has was deleted: history rewritten. */
    for (int i = 0; !o->full && i < n_states; i++) {
        bool present = false;
        for (int j = 0; j < n; j++)
            present = present || strcmp(logs[j].writer_id, states[i].writer_id) == 0;
        if (!present && states[i].size > 0) {
            r->intact = false;
            snprintf(r->bad_writer_id, sizeof r->bad_writer_id, "%s", states[i].writer_id);
            snprintf(r->reason, sizeof r->reason,
                     "log of writer %s: history rewritten: the verify state remembers %" PRIu64
                     " leaves; the store has no such log",
                     states[i].writer_id, states[i].size);
        }
    }
    if ((st = verify_logs(a, o, logs, n, states, n_states, r, err, cap)) != PGCL_OK) goto done;
    if (r->intact && o->state_path) {
        for (int i = 0; i < r->n_writers; i++) {
            memcpy(states[i].writer_id, r->writers[i].writer_id, sizeof states[i].writer_id);
            states[i].size = r->writers[i].size;
            states[i].root = r->writers[i].root;
        }
        if ((st = pgcl_log_verify_state_save(o->state_path, states, r->n_writers, err, cap)) != PGCL_OK) goto done;
        r->state_saved = true;
    }
done:
    free(logs);
    free(states);
    return st;
}

void pgcl_log_verify_report_release(pgcl_log_verify_report *r) {
    if (!r) return;
    free(r->writers);
    r->writers = NULL;
    r->n_writers = 0;
}
