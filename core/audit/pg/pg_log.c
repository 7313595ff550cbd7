/* The PostgreSQL store's side of each writer's transparency log: see pg_log.h. */
#include "pg_log.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "log.h" /* util/log.h: pgcl_log_info */
#include "pg_db.h"
#include "record_rows.h"

#define LEAVES_PER_STATEMENT 2048        /* leaves in one INSERT ... unnest */
#define LEAF_STATEMENT_BYTES (32u << 20) /* ... or about this many bytes of records */
#define INT_TEXT 24

/* ---- SQL ---- */

static const char LEAF_HASHES_SQL[] =
    "SELECT leaf_index, leaf_hash FROM log_leaves WHERE writer_id = $1 AND leaf_index >= $2::bigint"
    " AND leaf_index < $3::bigint ORDER BY leaf_index";
static const char RECORDS_SQL[] =
    "SELECT leaf_index, record FROM log_leaves WHERE writer_id = $1 AND leaf_index >= $2::bigint"
    " AND leaf_index < $3::bigint ORDER BY leaf_index";
static const char TILE_ROOTS_SQL[] =
    "SELECT tile_index, root FROM log_tile_roots WHERE writer_id = $1 AND level = $2::integer"
    " AND tile_index >= $3::bigint AND tile_index < $4::bigint ORDER BY tile_index";
static const char INSERT_LEAVES_SQL[] =
    "INSERT INTO log_leaves (writer_id, leaf_index, leaf_hash, record) SELECT $1, c1::bigint, c2, c3"
    " FROM unnest($2::text[], $3::bytea[], $4::bytea[]) AS u (c1, c2, c3)";
static const char INSERT_TILE_ROOTS_SQL[] =
    "INSERT INTO log_tile_roots (writer_id, level, tile_index, root) SELECT $1, c1::integer, c2::bigint, c3"
    " FROM unnest($2::text[], $3::text[], $4::bytea[]) AS u (c1, c2, c3)";
/* The state moves from (old size) to (size, root), or the statement fails (division by zero: no
 * row had the old size), and the transaction with it. */
static const char MOVE_STATE_SQL[] =
    "WITH moved AS (UPDATE log_writers SET size = $2::bigint, root = $3 WHERE writer_id = $1"
    " AND size = $4::bigint RETURNING 1) SELECT 1 / (SELECT count(*)::integer FROM moved)";
static const char STATE_SQL[] = "SELECT size, root FROM log_writers WHERE writer_id = $1";
static const char BEGIN_LOG_SQL[] =
    "INSERT INTO log_writers (writer_id, created_at, size, root) VALUES ($1, $2, 0, $3)";

/* ---- the batch: a commit's writes, gathered ---- */

typedef struct leaf_chunk {
    pgcl_pg_array index, hash, record;
    size_t bytes;
} leaf_chunk;

typedef struct tile_root {
    int level;
    uint64_t index;
    pgcl_merkle_hash root;
} tile_root;

struct pgcl_pg_log_batch {
    uint64_t first;           /* the first leaf put (when n > 0) */
    pgcl_merkle_hash *hashes; /* the leaves' hashes, in order: reads of them see the batch */
    size_t n, cap;
    leaf_chunk *chunks; /* [0, n_chunks) hold leaves */
    int n_chunks, cap_chunks;
    tile_root *roots;
    size_t n_roots, cap_roots;
    pgcl_pg_array root_level, root_index, root_hash;
    bool oom;
};

static void chunk_reset(leaf_chunk *c) {
    pgcl_pg_array_reset(&c->index, PGCL_PG_TEXT_OID);
    pgcl_pg_array_reset(&c->hash, PGCL_PG_BYTEA_OID);
    pgcl_pg_array_reset(&c->record, PGCL_PG_BYTEA_OID);
    c->bytes = 0;
}

static void batch_reset(pgcl_pg_log_batch *b) {
    b->first = 0;
    b->n = 0;
    b->n_chunks = 0;
    b->n_roots = 0;
    b->oom = false;
    pgcl_pg_array_reset(&b->root_level, PGCL_PG_TEXT_OID);
    pgcl_pg_array_reset(&b->root_index, PGCL_PG_TEXT_OID);
    pgcl_pg_array_reset(&b->root_hash, PGCL_PG_BYTEA_OID);
}

static void batch_free(pgcl_pg_log_batch *b) {
    for (int i = 0; i < b->cap_chunks; i++) {
        pgcl_pg_array_destroy(&b->chunks[i].index);
        pgcl_pg_array_destroy(&b->chunks[i].hash);
        pgcl_pg_array_destroy(&b->chunks[i].record);
    }
    free(b->chunks);
    free(b->hashes);
    free(b->roots);
    pgcl_pg_array_destroy(&b->root_level);
    pgcl_pg_array_destroy(&b->root_index);
    pgcl_pg_array_destroy(&b->root_hash);
}

/* The chunk the next leaf of len bytes goes into (a new one when the last is full); NULL: OOM. */
static leaf_chunk *chunk_for(pgcl_pg_log_batch *b, size_t len) {
    if (b->n_chunks > 0) {
        leaf_chunk *last = &b->chunks[b->n_chunks - 1];
        if (last->index.n < LEAVES_PER_STATEMENT && last->bytes + len <= LEAF_STATEMENT_BYTES) return last;
    }
    if (b->n_chunks == b->cap_chunks) {
        int cap = b->cap_chunks ? 2 * b->cap_chunks : 4;
        leaf_chunk *grown = realloc(b->chunks, (size_t)cap * sizeof *grown);
        if (!grown) return NULL;
        memset(grown + b->cap_chunks, 0, (size_t)(cap - b->cap_chunks) * sizeof *grown);
        b->chunks = grown;
        b->cap_chunks = cap;
    }
    leaf_chunk *c = &b->chunks[b->n_chunks++];
    chunk_reset(c);
    return c;
}

static bool grow(void **p, size_t *cap, size_t need, size_t elem) {
    if (need <= *cap) return true;
    size_t n = *cap ? *cap : 256;
    while (n < need)
        n *= 2;
    void *grown = realloc(*p, n * elem);
    if (!grown) return false;
    *p = grown;
    *cap = n;
    return true;
}

/* ---- pgcl_log_ops over a connection ---- */

static uint64_t be64(const char *p) {
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = v << 8 | (unsigned char)p[i];
    return v;
}

/* Runs one of the reads above with text parameters and binary results (int8, bytea). */
static PGresult *read_rows(const pgcl_pg_log_rows *r, const char *what, const char *sql, int n,
                           const char *const *values, pgcl_status *st, char *err, int cap) {
    PGCL_ASSERT(PQpipelineStatus(r->conn) == PQ_PIPELINE_OFF);
    PGresult *res = PQexecParams(r->conn, sql, n, NULL, values, NULL, NULL, 1);
    if (res && PQresultStatus(res) == PGRES_TUPLES_OK) return res;
    const char *msg = res ? PQresultErrorMessage(res) : PQerrorMessage(r->conn);
    pgcl_errorf(err, cap, "%s: %.*s", what, (int)strcspn(msg, "\n"), msg);
    PQclear(res);
    *st = PGCL_ERR_DB;
    return NULL;
}

/* Row i of a (index int8, 32-byte bytea) result, checked to be index `want`. */
static bool hash_row(const PGresult *res, int i, uint64_t want, pgcl_merkle_hash *out) {
    if (PQgetlength(res, i, 0) != 8 || be64(PQgetvalue(res, i, 0)) != want) return false;
    if (PQgetlength(res, i, 1) != PGCL_MERKLE_HASH_BYTES) return false;
    memcpy(out->b, PQgetvalue(res, i, 1), PGCL_MERKLE_HASH_BYTES);
    return true;
}

/* Leaves [first, first + n) stored before the batch (the batch holds the rest). */
static int stored_part(const pgcl_pg_log_rows *r, uint64_t first, int n) {
    const pgcl_pg_log_batch *b = r->batch;
    if (!b || b->n == 0 || first + (uint64_t)n <= b->first) return n;
    return first >= b->first ? 0 : (int)(b->first - first);
}

/* ---- what the writer holds in memory: its batch, and the right edge of its tree ----
 * The edge of a tree of `size` leaves is what a commit reads to extend it: the leaf hashes of its
 * partial level-0 tile, and per level L the roots of the full level-L tiles of the partial level-L+1
 * tile. The writer (the only one that appends to its log: it holds its id's lock) loads it once,
 * at pgcl_pg_log_load, and grows it after each COMMIT, so that a commit reads nothing from the
 * server; a reader, or a writer whose edge could not be grown, reads the rows (the naive path). */
#define EDGE_LEVELS 8 /* a tree of < 2^64 leaves has full tiles at levels 0..7 */

typedef struct edge_level {
    uint64_t first; /* a multiple of 256: hashes first .. first + n - 1 */
    int n;          /* 0..255 */
    pgcl_merkle_hash h[PGCL_TILE_WIDTH];
} edge_level;

struct pgcl_pg_log_edge {
    edge_level leaves;             /* leaf hashes */
    edge_level roots[EDGE_LEVELS]; /* roots[L]: full level-L tiles' roots */
};

static const pgcl_merkle_hash *edge_at(const edge_level *e, uint64_t i) {
    return i >= e->first && i - e->first < (uint64_t)e->n ? &e->h[i - e->first] : NULL;
}

/* Appends hash `index` of a level; false when it is not the next one (the edge no longer holds). */
static bool edge_push(edge_level *e, uint64_t index, const pgcl_merkle_hash *h) {
    if (index != e->first + (uint64_t)e->n) return false;
    e->h[e->n++] = *h;
    if (e->n == PGCL_TILE_WIDTH) {
        e->first += PGCL_TILE_WIDTH;
        e->n = 0;
    }
    return true;
}

static const pgcl_merkle_hash *leaf_in_memory(const pgcl_pg_log_rows *r, uint64_t i) {
    const pgcl_pg_log_batch *b = r->batch;
    if (b && b->n > 0 && i >= b->first && i - b->first < b->n) return &b->hashes[i - b->first];
    return r->edge ? edge_at(&r->edge->leaves, i) : NULL;
}

/* A tile root of the batch, or NULL. */
static const tile_root *batch_root(const pgcl_pg_log_batch *b, int level, uint64_t index) {
    for (size_t i = 0; b && i < b->n_roots; i++)
        if (b->roots[i].level == level && b->roots[i].index == index) return &b->roots[i];
    return NULL;
}

static const pgcl_merkle_hash *root_in_memory(const pgcl_pg_log_rows *r, int level, uint64_t i) {
    const tile_root *t = batch_root(r->batch, level, i);
    if (t) return &t->root;
    return r->edge && level >= 0 && level < EDGE_LEVELS ? edge_at(&r->edge->roots[level], i) : NULL;
}

/* out[0..n) for indexes first..: what memory holds (level < 0: leaf hashes, else tile roots of that
 * level), the rest read from the rows in one query over the range they span. */
static pgcl_status hashes_of(const pgcl_pg_log_rows *r, int level, uint64_t first, int n, pgcl_merkle_hash *out,
                             char *err, int cap) {
    uint64_t lo = UINT64_MAX, hi = 0;
    int missing = 0;
    for (int i = 0; i < n; i++) {
        uint64_t at = first + (uint64_t)i;
        const pgcl_merkle_hash *m = level < 0 ? leaf_in_memory(r, at) : root_in_memory(r, level, at);
        if (m) {
            out[i] = *m;
            continue;
        }
        missing++;
        if (at < lo) lo = at;
        hi = at + 1;
    }
    if (missing == 0) return PGCL_OK;
    char lv[INT_TEXT], a[INT_TEXT], z[INT_TEXT];
    snprintf(lv, sizeof lv, "%d", level);
    snprintf(a, sizeof a, "%" PRIu64, lo);
    snprintf(z, sizeof z, "%" PRIu64, hi);
    const char *leaves_v[] = {r->writer_id, a, z}, *roots_v[] = {r->writer_id, lv, a, z};
    pgcl_status st = PGCL_OK;
    PGresult *res = level < 0 ? read_rows(r, "log leaves", LEAF_HASHES_SQL, 3, leaves_v, &st, err, cap)
                              : read_rows(r, "log tile roots", TILE_ROOTS_SQL, 4, roots_v, &st, err, cap);
    if (!res) return st;
    int filled = 0;
    for (int row = 0; row < PQntuples(res); row++) {
        if (PQgetlength(res, row, 0) != 8) continue;
        uint64_t at = be64(PQgetvalue(res, row, 0));
        if (at < first || at - first >= (uint64_t)n) continue;
        bool in_memory = level < 0 ? leaf_in_memory(r, at) != NULL : root_in_memory(r, level, at) != NULL;
        if (!in_memory && hash_row(res, row, at, &out[at - first])) filled++;
    }
    PQclear(res);
    if (filled != missing) {
        pgcl_errorf(err, cap, "log of writer %s: %s %" PRIu64 "..%" PRIu64 ": %d of %d there and well-formed",
                    r->writer_id, level < 0 ? "leaves" : "tile roots", lo, hi - 1, filled, missing);
        return PGCL_ERR_NOT_FOUND;
    }
    return PGCL_OK;
}

static pgcl_status rows_leaf_hashes(void *ctx, uint64_t first, int n, pgcl_merkle_hash *out, char *err, int cap) {
    return hashes_of(ctx, -1, first, n, out, err, cap);
}

static pgcl_status rows_records(void *ctx, uint64_t first, int n, pgcl_log_record_fn fn, void *fctx, char *err,
                                int cap) {
    const pgcl_pg_log_rows *r = ctx;
    if (stored_part(r, first, n) != n) {
        pgcl_errorf(err, cap, "log of writer %s: records of uncommitted leaves are not read back", r->writer_id);
        return PGCL_ERR_NOT_FOUND;
    }
    char a[INT_TEXT], z[INT_TEXT];
    snprintf(a, sizeof a, "%" PRIu64, first);
    snprintf(z, sizeof z, "%" PRIu64, first + (uint64_t)n);
    const char *v[] = {r->writer_id, a, z};
    pgcl_status st = PGCL_OK;
    PGresult *res = read_rows(r, "log records", RECORDS_SQL, 3, v, &st, err, cap);
    if (!res) return st;
    if (PQntuples(res) != n) {
        pgcl_errorf(err, cap, "log of writer %s: records %" PRIu64 "..%" PRIu64 ": %d of %d there", r->writer_id, first,
                    first + (uint64_t)n - 1, PQntuples(res), n);
        PQclear(res);
        return PGCL_ERR_NOT_FOUND;
    }
    for (int i = 0; i < n && st == PGCL_OK; i++) {
        if (PQgetlength(res, i, 0) != 8 || be64(PQgetvalue(res, i, 0)) != first + (uint64_t)i) {
            pgcl_errorf(err, cap, "log of writer %s: record %" PRIu64 " missing", r->writer_id, first + i);
            st = PGCL_ERR_NOT_FOUND;
            break;
        }
        st = fn(fctx, first + (uint64_t)i, (const unsigned char *)PQgetvalue(res, i, 1), (size_t)PQgetlength(res, i, 1),
                err, cap);
    }
    PQclear(res);
    return st;
}

static pgcl_status rows_tile_roots(void *ctx, int level, uint64_t first, int n, pgcl_merkle_hash *out, char *err,
                                   int cap) {
    if (level < 0) {
        pgcl_errorf(err, cap, "log: no tile roots at level %d", level);
        return PGCL_ERR_INVALID;
    }
    return hashes_of(ctx, level, first, n, out, err, cap);
}

static pgcl_status rows_put_leaf(void *ctx, uint64_t leaf_index, const pgcl_merkle_hash *leaf_hash,
                                 const unsigned char *record, size_t len, char *err, int cap) {
    const pgcl_pg_log_rows *r = ctx;
    pgcl_pg_log_batch *b = r->batch;
    if (!b) {
        pgcl_errorf(err, cap, "log of writer %s: read-only here", r->writer_id);
        return PGCL_ERR_UNSUPPORTED;
    }
    if (b->n == 0) b->first = leaf_index;
    PGCL_ASSERT(leaf_index == b->first + b->n); /* the appender puts a commit's leaves in order */
    leaf_chunk *c = chunk_for(b, len);
    if (!c || !grow((void **)&b->hashes, &b->cap, b->n + 1, sizeof *b->hashes)) {
        b->oom = true;
        pgcl_errorf(err, cap, "log: out of memory");
        return PGCL_ERR_NOMEM;
    }
    b->hashes[b->n++] = *leaf_hash;
    char idx[INT_TEXT];
    snprintf(idx, sizeof idx, "%" PRIu64, leaf_index);
    pgcl_pg_array_add_text(&c->index, idx);
    pgcl_pg_array_add(&c->hash, leaf_hash->b, PGCL_MERKLE_HASH_BYTES);
    pgcl_pg_array_add(&c->record, record, len);
    c->bytes += len;
    return PGCL_OK;
}

static pgcl_status rows_put_tile_root(void *ctx, int level, uint64_t tile_index, const pgcl_merkle_hash *root,
                                      char *err, int cap) {
    const pgcl_pg_log_rows *r = ctx;
    pgcl_pg_log_batch *b = r->batch;
    if (!b) {
        pgcl_errorf(err, cap, "log of writer %s: read-only here", r->writer_id);
        return PGCL_ERR_UNSUPPORTED;
    }
    if (!grow((void **)&b->roots, &b->cap_roots, b->n_roots + 1, sizeof *b->roots)) {
        b->oom = true;
        pgcl_errorf(err, cap, "log: out of memory");
        return PGCL_ERR_NOMEM;
    }
    b->roots[b->n_roots++] = (tile_root){.level = level, .index = tile_index, .root = *root};
    char lv[INT_TEXT], idx[INT_TEXT];
    snprintf(lv, sizeof lv, "%d", level);
    snprintf(idx, sizeof idx, "%" PRIu64, tile_index);
    pgcl_pg_array_add_text(&b->root_level, lv);
    pgcl_pg_array_add_text(&b->root_index, idx);
    pgcl_pg_array_add(&b->root_hash, root->b, PGCL_MERKLE_HASH_BYTES);
    return PGCL_OK;
}

const pgcl_log_ops pgcl_pg_log_ops = {
    .leaf_hashes = rows_leaf_hashes,
    .records = rows_records,
    .tile_roots = rows_tile_roots,
    .put_leaf = rows_put_leaf,
    .put_tile_root = rows_put_tile_root,
};

/* ---- one writer's log ---- */

struct pgcl_pg_log {
    char writer_id[PGCL_RECORD_WRITER_ID_MAX + 1];
    uint64_t size; /* committed */
    pgcl_merkle_hash root;
    bool sealed; /* the batch holds a commit's leaves; sealed_* its new state */
    uint64_t sealed_size;
    pgcl_merkle_hash sealed_root;
    pgcl_log_appender *appender;
    pgcl_pg_log_batch batch;
    pgcl_decision_record_buf *decision;              /* large: one per writer */
    char old_size_t[INT_TEXT], new_size_t[INT_TEXT]; /* the state statement's texts */
    struct pgcl_pg_log_edge *edge;                   /* the tree's right edge, in memory (used when edge_valid) */
    bool edge_valid;
};

pgcl_pg_log *pgcl_pg_log_create(const char *writer_id) {
    PGCL_ASSERT(writer_id && strlen(writer_id) <= PGCL_RECORD_WRITER_ID_MAX);
    pgcl_pg_log *l = calloc(1, sizeof *l);
    if (!l) return NULL;
    snprintf(l->writer_id, sizeof l->writer_id, "%s", writer_id);
    l->appender = pgcl_log_appender_create();
    l->decision = pgcl_decision_record_buf_create();
    l->edge = calloc(1, sizeof *l->edge);
    if (!l->appender || !l->decision || !l->edge) {
        pgcl_pg_log_destroy(l);
        return NULL;
    }
    batch_reset(&l->batch);
    return l;
}

void pgcl_pg_log_destroy(pgcl_pg_log *l) {
    if (!l) return;
    pgcl_log_appender_destroy(l->appender);
    batch_free(&l->batch);
    pgcl_decision_record_buf_destroy(l->decision);
    free(l->edge);
    free(l);
}

uint64_t pgcl_pg_log_size(const pgcl_pg_log *l) {
    return l->size;
}

void pgcl_pg_log_begin(pgcl_pg_log *l) {
    batch_reset(&l->batch);
    l->sealed = false;
    pgcl_log_begin(l->appender, l->size, &l->root);
}

pgcl_status pgcl_pg_log_add_decision(pgcl_pg_log *l, const pgcl_decision_row *r, const char *created_at,
                                     const unsigned char *input_digest, uint64_t *leaf_index, char *err, int cap) {
    int64_t us = 0;
    if (!pgcl_record_time_parse(created_at, &us)) {
        pgcl_errorf(err, cap, "log: decision %s: created_at '%.40s' is not a time", r->decision_id, created_at);
        return PGCL_ERR_INVALID;
    }
    char why[256];
    pgcl_status st = pgcl_record_of_decision_row(r, us, input_digest, l->decision, why, sizeof why);
    if (st == PGCL_OK) st = pgcl_log_add_decision(l->appender, l->decision, leaf_index, why, sizeof why);
    if (st != PGCL_OK) pgcl_errorf(err, cap, "log: decision %s: %s", r->decision_id, why);
    return st;
}

pgcl_status pgcl_pg_log_add_record(pgcl_pg_log *l, const pgcl_record *r, uint64_t *leaf_index, char *err, int cap) {
    char why[256];
    pgcl_status st = pgcl_log_add_record(l->appender, r, leaf_index, why, sizeof why);
    if (st != PGCL_OK) pgcl_errorf(err, cap, "log: %s record: %s", pgcl_record_kind_name((int)r->kind), why);
    return st;
}

size_t pgcl_pg_log_mark(const pgcl_pg_log *l) {
    return pgcl_log_mark(l->appender);
}

void pgcl_pg_log_rewind(pgcl_pg_log *l, size_t mark) {
    pgcl_log_rewind(l->appender, mark);
}

pgcl_status pgcl_pg_log_seal(pgcl_pg_log *l, PGconn *conn, char *err, int cap) {
    batch_reset(&l->batch);
    l->sealed = false;
    if (pgcl_log_pending(l->appender) == 0) return PGCL_OK;
    pgcl_pg_log_rows rows = {
        .conn = conn, .writer_id = l->writer_id, .batch = &l->batch, .edge = l->edge_valid ? l->edge : NULL};
    pgcl_status st = pgcl_log_seal(l->appender, &pgcl_pg_log_ops, &rows, &l->sealed_size, &l->sealed_root, err, cap);
    if (st != PGCL_OK) return st;
    PGCL_ASSERT(l->sealed_size == l->size + l->batch.n && l->batch.first == l->size);
    l->sealed = true;
    snprintf(l->old_size_t, sizeof l->old_size_t, "%" PRIu64, l->size);
    snprintf(l->new_size_t, sizeof l->new_size_t, "%" PRIu64, l->sealed_size);
    return PGCL_OK;
}

/* The parameters of a statement whose $1 is the writer id and $2..$4 three arrays (its text is set
 * by the caller). */
static void array_statement(pgcl_pg_log *l, const char *what, pgcl_pg_array *cols[3], pgcl_pg_log_stmt *out) {
    *out = (pgcl_pg_log_stmt){.what = what, .n = 4, .values = {l->writer_id}, .binary_len = {-1}};
    for (int c = 0; c < 3; c++) {
        pgcl_pg_array_finish(cols[c]);
        out->values[c + 1] = (const char *)cols[c]->buf;
        out->binary_len[c + 1] = (int)cols[c]->len;
    }
}

bool pgcl_pg_log_statement(pgcl_pg_log *l, int i, pgcl_pg_log_stmt *out, bool *oom) {
    pgcl_pg_log_batch *b = &l->batch;
    *oom = b->oom || b->root_level.oom || b->root_index.oom || b->root_hash.oom;
    for (int c = 0; c < b->n_chunks; c++)
        *oom = *oom || b->chunks[c].index.oom || b->chunks[c].hash.oom || b->chunks[c].record.oom;
    if (!l->sealed || *oom) return false;
    if (i < b->n_chunks) {
        leaf_chunk *c = &b->chunks[i];
        pgcl_pg_array *cols[3] = {&c->index, &c->hash, &c->record};
        array_statement(l, "log leaves", cols, out);
        out->sql = INSERT_LEAVES_SQL;
        return true;
    }
    i -= b->n_chunks;
    if (b->n_roots > 0 && i-- == 0) {
        pgcl_pg_array *cols[3] = {&b->root_level, &b->root_index, &b->root_hash};
        array_statement(l, "log tile roots", cols, out);
        out->sql = INSERT_TILE_ROOTS_SQL;
        return true;
    }
    if (i != 0) return false;
    *out = (pgcl_pg_log_stmt){.what = "log state (another process wrote this writer's log?)",
                              .sql = MOVE_STATE_SQL,
                              .n = 4,
                              .values = {l->writer_id, l->new_size_t, (const char *)l->sealed_root.b, l->old_size_t},
                              .binary_len = {-1, -1, PGCL_MERKLE_HASH_BYTES, -1}};
    return true;
}

/* The committed batch onto the edge; false when it does not continue it (then it is not used). */
static bool edge_grow(pgcl_pg_log *l) {
    const pgcl_pg_log_batch *b = &l->batch;
    bool ok = true;
    for (size_t i = 0; i < b->n && ok; i++)
        ok = edge_push(&l->edge->leaves, b->first + i, &b->hashes[i]);
    for (size_t i = 0; i < b->n_roots && ok; i++)
        if (b->roots[i].level < EDGE_LEVELS)
            ok = edge_push(&l->edge->roots[b->roots[i].level], b->roots[i].index, &b->roots[i].root);
    return ok;
}

void pgcl_pg_log_committed(pgcl_pg_log *l) {
    if (l->sealed) {
        l->size = l->sealed_size;
        l->root = l->sealed_root;
        if (l->edge_valid && !edge_grow(l)) {
            l->edge_valid = false;
            pgcl_log_warn("audit: writer %s: its log's edge no longer follows its commits; reading the rows",
                          l->writer_id);
        }
    }
    l->sealed = false;
    pgcl_log_committed(l->appender);
}

/* ---- the log's beginning, and its edge ---- */

/* The edge of the committed tree (l->size), read from the rows. */
static pgcl_status edge_load(pgcl_pg_log *l, PGconn *conn, char *err, int cap) {
    l->edge_valid = false;
    pgcl_pg_log_rows rows = {.conn = conn, .writer_id = l->writer_id};
    edge_level *e = &l->edge->leaves;
    e->n = (int)(l->size % PGCL_TILE_WIDTH);
    e->first = l->size - (uint64_t)e->n;
    pgcl_status st = hashes_of(&rows, -1, e->first, e->n, e->h, err, cap);
    uint64_t full = l->size / PGCL_TILE_WIDTH; /* full tiles of the level */
    for (int level = 0; level < EDGE_LEVELS && st == PGCL_OK; level++) {
        e = &l->edge->roots[level];
        e->n = (int)(full % PGCL_TILE_WIDTH);
        e->first = full - (uint64_t)e->n;
        st = hashes_of(&rows, level, e->first, e->n, e->h, err, cap);
        full /= PGCL_TILE_WIDTH;
    }
    l->edge_valid = st == PGCL_OK;
    return st;
}

/* One statement on conn (text parameters, or binary bytea at binary_len[i] >= 0). */
static pgcl_status exec_binary(PGconn *conn, const char *what, const char *sql, int n, const char *const *values,
                               const int *binary_len, char *err, int cap) {
    int lengths[PGCL_PG_LOG_STMT_PARAMS] = {0}, formats[PGCL_PG_LOG_STMT_PARAMS] = {0};
    PGCL_ASSERT(n <= PGCL_PG_LOG_STMT_PARAMS);
    for (int i = 0; i < n; i++) {
        if (binary_len[i] >= 0) {
            lengths[i] = binary_len[i];
            formats[i] = 1;
        }
    }
    PGresult *res = PQexecParams(conn, sql, n, NULL, values, lengths, formats, 0);
    ExecStatusType rs = res ? PQresultStatus(res) : PGRES_FATAL_ERROR;
    pgcl_status st = PGCL_OK;
    if (rs != PGRES_COMMAND_OK && rs != PGRES_TUPLES_OK) {
        const char *msg = res ? PQresultErrorMessage(res) : PQerrorMessage(conn);
        pgcl_errorf(err, cap, "%s: %.*s", what, (int)strcspn(msg, "\n"), msg);
        st = PGCL_ERR_DB;
    }
    PQclear(res);
    return st;
}

/* The log's first transaction: its row, and its legacy head leaf when head is set. */
static pgcl_status begin_log(pgcl_pg_log *l, PGconn *conn, const pgcl_pg_chain_head *head, char *err, int cap) {
    char now[PGCL_TIMESTAMP_LEN + 1];
    pgcl_timestamp_now(now);
    pgcl_merkle_hash empty = pgcl_merkle_root(NULL, 0);
    l->size = 0;
    l->root = empty;
    pgcl_status st = pgcl_pg_exec(conn, "log begin", "BEGIN", 0, NULL, err, cap);
    if (st != PGCL_OK) return st;
    const char *v[] = {l->writer_id, now, (const char *)empty.b};
    const int bin[] = {-1, -1, PGCL_MERKLE_HASH_BYTES};
    st = exec_binary(conn, "log_writers row", BEGIN_LOG_SQL, 3, v, bin, err, cap);
    pgcl_pg_log_begin(l);
    if (st == PGCL_OK && head) {
        pgcl_record r = {.kind = PGCL_RECORD_LEGACY_HEAD};
        pgcl_record_legacy_head *h = &r.legacy;
        PGCL_ASSERT(pgcl_record_time_parse(now, &h->created_at_us));
        h->head_seq = head->seq;
        memcpy(h->head_hash, head->hash.b, sizeof h->head_hash);
        h->has_log_root = true;
        memcpy(h->log_root, head->log_root.b, sizeof h->log_root);
        snprintf(h->writer_id, sizeof h->writer_id, "%s", l->writer_id);
        uint64_t leaf = 0;
        st = pgcl_pg_log_add_record(l, &r, &leaf, err, cap);
        PGCL_ASSERT(st != PGCL_OK || leaf == 0);
        if (st == PGCL_OK) st = pgcl_pg_log_seal(l, conn, err, cap);
        pgcl_pg_log_stmt stmt;
        bool oom = false;
        for (int i = 0; st == PGCL_OK && pgcl_pg_log_statement(l, i, &stmt, &oom); i++)
            st = exec_binary(conn, stmt.what, stmt.sql, stmt.n, stmt.values, stmt.binary_len, err, cap);
        if (st == PGCL_OK && oom) {
            pgcl_errorf(err, cap, "log: out of memory");
            st = PGCL_ERR_NOMEM;
        }
    }
    if (st == PGCL_OK) st = pgcl_pg_exec(conn, "log begin", "COMMIT", 0, NULL, err, cap);
    if (st != PGCL_OK) {
        PQclear(PQexec(conn, "ROLLBACK"));
        l->sealed = false;
        return st;
    }
    pgcl_pg_log_committed(l);
    if (head)
        pgcl_log_info("audit: writer %s: began its log; leaf 0 binds its audit chain's head (entry %" PRId64 ")",
                      l->writer_id, head->seq);
    else
        pgcl_log_info("audit: writer %s: began its log", l->writer_id);
    return PGCL_OK;
}

pgcl_status pgcl_pg_log_load(pgcl_pg_log *l, PGconn *conn, const pgcl_pg_chain_head *head, char *err, int cap) {
    const char *v[] = {l->writer_id};
    pgcl_status st = PGCL_OK;
    pgcl_pg_log_rows rows = {.conn = conn, .writer_id = l->writer_id};
    PGresult *res = read_rows(&rows, "log state", STATE_SQL, 1, v, &st, err, cap);
    if (!res) return st;
    if (PQntuples(res) == 0) {
        PQclear(res);
        pgcl_status begun = begin_log(l, conn, head, err, cap);
        return begun == PGCL_OK ? edge_load(l, conn, err, cap) : begun;
    }
    bool ok = PQgetlength(res, 0, 0) == 8 && PQgetlength(res, 0, 1) == PGCL_MERKLE_HASH_BYTES;
    if (ok) {
        l->size = be64(PQgetvalue(res, 0, 0));
        memcpy(l->root.b, PQgetvalue(res, 0, 1), PGCL_MERKLE_HASH_BYTES);
    }
    PQclear(res);
    if (!ok) {
        pgcl_errorf(err, cap, "log of writer %s: its log_writers row is malformed", l->writer_id);
        return PGCL_ERR_FORMAT;
    }
    l->sealed = false;
    return edge_load(l, conn, err, cap);
}
