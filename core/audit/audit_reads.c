/* The SQLite store's read side (audit_reads.h): the reviewers' reads on the reader pool of the
 * store's database file (core/review/), the idempotency keys and API keys, and the operators'
 * reads (activations at start-up, the shadow report) each on a read-only connection of its own. */
#include "audit_store_impl.h"

#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>

#include "db.h"

const char *const pgcl_decision_kind_names[PGCL_DECISION_KINDS] = {"allow", "review", "block"};

typedef struct activations_walk {
    pgcl_activation_fn on_activation;
    void *ctx;
} activations_walk;

static int take_activation(sqlite3_stmt *s, void *ctx, char *err, int cap) {
    const activations_walk *w = ctx;
    const char *model = (const char *)sqlite3_column_text(s, 0);
    const char *version = (const char *)sqlite3_column_text(s, 1);
    if (model && version) w->on_activation(model, version, w->ctx);
    return SQLITE_OK;
}

pgcl_status pgcl_sqlite_read_activations(pgcl_audit *store, pgcl_activation_fn on_activation, void *ctx, char *err,
                                         int cap) {
    const char *path = pgcl_audit_sqlite_path(store);
    sqlite3 *db = pgcl_db_open_reader(path, err, cap);
    if (!db) return PGCL_ERR_DB;
    activations_walk walk = {on_activation, ctx};
    char sub[256];
    int rc = pgcl_db_each_row(db,
                              "SELECT json_extract(details, '$.model'), json_extract(details, '$.version')"
                              " FROM admin_events WHERE action = 'model.activate' ORDER BY seq",
                              NULL, take_activation, &walk, sub, sizeof sub);
    if (rc != SQLITE_OK) pgcl_errorf(err, cap, "%s: %s", path, sqlite3_errmsg(db));
    sqlite3_close(db);
    return rc == SQLITE_OK ? PGCL_OK : PGCL_ERR_DB;
}

static int decision_kind_index(const char *name) {
    for (int i = 0; name && i < PGCL_DECISION_KINDS; i++)
        if (strcmp(name, pgcl_decision_kind_names[i]) == 0) return i;
    return -1;
}

typedef struct shadow_report_query {
    const char *model, *shadow_version;
    pgcl_shadow_report *report;
} shadow_report_query;

static int bind_shadow_report(sqlite3_stmt *s, void *ctx) {
    const shadow_report_query *q = ctx;
    int rc = sqlite3_bind_text(s, 1, q->model, -1, SQLITE_STATIC);
    return rc == SQLITE_OK ? sqlite3_bind_text(s, 2, q->shadow_version, -1, SQLITE_STATIC) : rc;
}

/* One row per (primary decision, shadow decision) pair. */
static int take_shadow_group(sqlite3_stmt *s, void *ctx, char *err, int cap) {
    pgcl_shadow_report *r = ((shadow_report_query *)ctx)->report;
    const char *primary = (const char *)sqlite3_column_text(s, 0), *shadow = (const char *)sqlite3_column_text(s, 1);
    int64_t n = sqlite3_column_int64(s, 2);
    int p = decision_kind_index(primary), q = decision_kind_index(shadow);
    if (p >= 0 && q >= 0) r->decision_matrix[p][q] = n;
    r->items += n;
    if (primary && shadow && strcmp(primary, shadow) == 0) r->decision_agreements += n;
    r->label_agreements += sqlite3_column_int64(s, 3);
    r->sum_abs_score_difference += sqlite3_column_double(s, 4);
    if (sqlite3_column_double(s, 5) > r->max_abs_score_difference)
        r->max_abs_score_difference = sqlite3_column_double(s, 5);
    return SQLITE_OK;
}

pgcl_status pgcl_sqlite_read_shadow_report(pgcl_audit *store, const char *model, const char *shadow_version,
                                           pgcl_shadow_report *out, char *err, int cap) {
    const char *path = pgcl_audit_sqlite_path(store);
    memset(out, 0, sizeof *out);
    sqlite3 *db = pgcl_db_open_reader(path, err, cap);
    if (!db) return PGCL_ERR_DB;
    shadow_report_query q = {model, shadow_version, out};
    char sub[256];
    int rc = pgcl_db_each_row(db,
                              "SELECT primary_decision, shadow_decision, count(*), sum(primary_label = shadow_label),"
                              " sum(abs(primary_score - shadow_score)), max(abs(primary_score - shadow_score)),"
                              " group_concat(DISTINCT primary_version)"
                              " FROM shadow_decisions WHERE model_name = ?1 AND shadow_version = ?2"
                              " GROUP BY primary_decision, shadow_decision",
                              bind_shadow_report, take_shadow_group, &q, sub, sizeof sub);
    if (rc != SQLITE_OK) {
        pgcl_errorf(err, cap, "%s: %s", path, sqlite3_errmsg(db));
        memset(out, 0, sizeof *out);
    }
    sqlite3_close(db);
    return rc == SQLITE_OK ? PGCL_OK : PGCL_ERR_DB;
}

/* ---- the reviewers' reads, the keys ---- */

/* The store's reader pool (process-wide per database file, reader_pool.h); NULL only when out of
 * memory, with err set. */
static pgcl_qpool *readers_of(pgcl_audit *store, char *err, int cap) {
    return pgcl_queries_pool(pgcl_audit_sqlite_path(store), err, cap);
}

pgcl_status pgcl_sqlite_read_decision(pgcl_audit *store, const char *decision_id, pgcl_row_arena *arena,
                                      pgcl_decision_record *out, char *err, int cap) {
    pgcl_qpool *p = readers_of(store, err, cap);
    return p ? pgcl_decision_record_read(p, decision_id, arena, out, err, cap) : PGCL_ERR_NOMEM;
}

pgcl_status pgcl_sqlite_read_decisions(pgcl_audit *store, const pgcl_decision_filter *f, int64_t before_seq,
                                       int limit, pgcl_row_arena *arena, pgcl_decision_page *out, char *err, int cap) {
    pgcl_qpool *p = readers_of(store, err, cap);
    return p ? pgcl_decisions_list(p, f, before_seq, limit, arena, out, err, cap) : PGCL_ERR_NOMEM;
}

pgcl_status pgcl_sqlite_read_contests(pgcl_audit *store, bool open, int64_t after_seq, int limit, int window_days,
                                      int64_t now_us, pgcl_row_arena *arena, pgcl_contest_page *out, char *err,
                                      int cap) {
    pgcl_qpool *p = readers_of(store, err, cap);
    return p ? pgcl_contests_list(p, open, after_seq, limit, window_days, now_us, arena, out, err, cap)
             : PGCL_ERR_NOMEM;
}

pgcl_status pgcl_sqlite_read_stats(pgcl_audit *store, const char *since, const char *until, pgcl_row_arena *arena,
                                   pgcl_audit_stats *out, char *err, int cap) {
    pgcl_qpool *p = readers_of(store, err, cap);
    return p ? pgcl_audit_stats_read(p, since, until, arena, out, err, cap) : PGCL_ERR_NOMEM;
}

pgcl_status pgcl_sqlite_open_export(pgcl_audit *store, const char *since, const char *until, pgcl_export_format fmt,
                                    pgcl_export **out, char *err, int cap) {
    *out = NULL;
    pgcl_qpool *p = readers_of(store, err, cap);
    return p ? pgcl_export_create(p, since, until, fmt, out, err, cap) : PGCL_ERR_NOMEM;
}

pgcl_status pgcl_sqlite_read_idempotency_key(pgcl_audit *store, const char *scope, const char *key, const char *now,
                                             bool *found, pgcl_idem_record *out, char *err, int cap) {
    *found = false;
    pgcl_qpool *p = readers_of(store, err, cap);
    sqlite3 *db = NULL;
    pgcl_status st = p ? pgcl_qpool_acquire(p, &db, err, cap) : PGCL_ERR_DB;
    if (st != PGCL_OK) return st;
    st = pgcl_idem_lookup(db, scope, key, now, found, out, err, cap);
    pgcl_qpool_release(p, db);
    return st;
}

pgcl_status pgcl_sqlite_read_proof(pgcl_audit *store, const char *decision_id, pgcl_chain_proof *out, char *err,
                                   int cap) {
    pgcl_qpool *p = readers_of(store, err, cap);
    sqlite3 *db = NULL;
    if (!p) return PGCL_ERR_NOMEM;
    pgcl_status st = pgcl_qpool_acquire(p, &db, err, cap);
    if (st != PGCL_OK) return st;
    st = pgcl_chain_prove_decision(db, decision_id, out, err, cap);
    pgcl_qpool_release(p, db);
    return st;
}

pgcl_status pgcl_sqlite_read_archive_where(pgcl_audit *store, const char *decision_id, pgcl_archive_where *out,
                                           char *err, int cap) {
    pgcl_qpool *p = readers_of(store, err, cap);
    sqlite3 *db = NULL;
    if (!p) return PGCL_ERR_NOMEM;
    pgcl_status st = pgcl_qpool_acquire(p, &db, err, cap);
    if (st != PGCL_OK) return st;
    st = pgcl_archive_where_is(db, decision_id, out, err, cap);
    pgcl_qpool_release(p, db);
    return st;
}

pgcl_status pgcl_sqlite_read_consistency(pgcl_audit *store, const char *writer_id, int64_t first, int64_t second,
                                         pgcl_log_consistency *out, char *err, int cap) {
    if (writer_id) {
        memset(out, 0, sizeof *out);
        pgcl_errorf(err, cap, "this audit store (SQLite) has one log: it takes no writer");
        return PGCL_ERR_INVALID;
    }
    pgcl_qpool *p = readers_of(store, err, cap);
    sqlite3 *db = NULL;
    if (!p) return PGCL_ERR_NOMEM;
    pgcl_status st = pgcl_qpool_acquire(p, &db, err, cap);
    if (st != PGCL_OK) return st;
    st = pgcl_chain_prove_consistency(db, first, second, out, err, cap);
    pgcl_qpool_release(p, db);
    return st;
}

pgcl_status pgcl_sqlite_verify_chain(pgcl_audit *store, pgcl_chain_report *report, char *err, int cap) {
    return pgcl_chain_verify(pgcl_audit_sqlite_path(store), NULL, 0, report, err, cap);
}

pgcl_status pgcl_sqlite_create_checkpoint(pgcl_audit *store, const char *key_path, const char *out_file,
                                          const char *out_dir, pgcl_store_checkpoint *out, char *err, int cap) {
    out->is_fleet = false;
    return pgcl_checkpoint_create(pgcl_audit_sqlite_path(store), key_path, out_file, out_dir, &out->chain, err, cap);
}

pgcl_status pgcl_sqlite_create_key(pgcl_audit *store, pgcl_role role, const char *name, const char *actor,
                                   char key_out[128], char key_id_out[32], char *err, int cap) {
    return pgcl_keys_create(pgcl_audit_sqlite_path(store), role, name, actor, key_out, key_id_out, err, cap);
}

pgcl_status pgcl_sqlite_revoke_key(pgcl_audit *store, const char *key_id, const char *actor, char *err, int cap) {
    return pgcl_keys_revoke(pgcl_audit_sqlite_path(store), key_id, actor, err, cap);
}

pgcl_status pgcl_sqlite_import_key(pgcl_audit *store, pgcl_role role, const char *name, const char *actor,
                                   const char *key, char key_id_out[32], bool *created, char *err, int cap) {
    return pgcl_keys_import(pgcl_audit_sqlite_path(store), role, name, actor, key, key_id_out, created, err, cap);
}

pgcl_status pgcl_sqlite_open_keyring(pgcl_audit *store, pgcl_keyring **out, char *err, int cap) {
    return pgcl_keyring_open(pgcl_audit_sqlite_path(store), out, err, cap);
}

pgcl_status pgcl_sqlite_read_keys(pgcl_audit *store, pgcl_key_fn on_key, void *ctx, char *err, int cap) {
    return pgcl_keys_list(pgcl_audit_sqlite_path(store), on_key, ctx, err, cap);
}

/* ---- a decision as recorded, with its stored input (re-score) ---- */

/* The columns of STORED_DECISION_SQL, in this order. */
enum { COL_MODEL_NAME, COL_MODEL_VERSION, COL_MODEL_SHA256, COL_LABEL, COL_DECISION, COL_PROBABILITIES,
       COL_TOXICITY, COL_INPUT, COL_INPUT_DTYPE };

/* The input is inline (before migration 0008) or in decision_inputs (since), or gone (retention). */

static const char STORED_DECISION_SQL[] =
    "SELECT d.model_name, d.model_version, d.model_sha256, d.label, d.decision, d.probabilities, d.toxicity,"
    " coalesce(d.input, (SELECT i.input FROM decision_inputs AS i WHERE i.decision_seq = d.seq)), d.input_dtype"
    " FROM decisions AS d WHERE d.decision_id = ?";

typedef struct stored_read {
    const char *decision_id;
    pgcl_stored_decision *out;
    bool found, out_of_memory;
} stored_read;

static int bind_stored_decision_id(sqlite3_stmt *stmt, void *ctx) {
    return sqlite3_bind_text(stmt, 1, ((stored_read *)ctx)->decision_id, -1, SQLITE_STATIC);
}

/* Copies the row (the input blob first, for its alignment, then the texts) into one allocation. */
static int take_stored_decision(sqlite3_stmt *stmt, void *arg, char *err, int cap) {
    stored_read *c = arg;
    pgcl_stored_decision *out = c->out;
    c->found = true;
    const unsigned char *blob = sqlite3_column_blob(stmt, COL_INPUT);
    int blob_bytes = sqlite3_column_bytes(stmt, COL_INPUT);
    const char *dtype = (const char *)sqlite3_column_text(stmt, COL_INPUT_DTYPE);
    bool input_stored = blob && dtype;
    out->input_dropped = !blob && dtype; /* stored once, dropped by retention */
    static const int text_cols[] = {COL_MODEL_NAME, COL_MODEL_VERSION, COL_MODEL_SHA256, COL_LABEL, COL_DECISION,
                                    COL_PROBABILITIES};
    enum { N_TEXTS = sizeof text_cols / sizeof text_cols[0] };
    size_t total = input_stored ? (size_t)blob_bytes : 0;
    for (int t = 0; t < N_TEXTS; t++) total += (size_t)sqlite3_column_bytes(stmt, text_cols[t]) + 1;
    if (!(out->owned = malloc(total))) {
        c->out_of_memory = true;
        return SQLITE_NOMEM;
    }
    unsigned char *p = out->owned;
    if (input_stored) {
        memcpy(p, blob, (size_t)blob_bytes);
        out->input = p;
        out->input_bytes = blob_bytes;
        out->input_half = strcmp(dtype, "f16") == 0;
        p += blob_bytes;
    }
    const char **texts[N_TEXTS] = {&out->original.model_name, &out->original.model_version,
                                   &out->original.model_sha256, &out->original.label, &out->original.decision,
                                   &out->original.probabilities_json};
    for (int t = 0; t < N_TEXTS; t++) {
        const unsigned char *text = sqlite3_column_text(stmt, text_cols[t]);
        size_t len = (size_t)sqlite3_column_bytes(stmt, text_cols[t]);
        *texts[t] = text ? memcpy(p, text, len + 1) : NULL;
        p += len + 1;
    }
    out->original.has_toxicity = sqlite3_column_type(stmt, COL_TOXICITY) != SQLITE_NULL;
    out->original.toxicity = sqlite3_column_double(stmt, COL_TOXICITY);
    (void)err;
    (void)cap;
    return SQLITE_DONE; /* one row: stop */
}

pgcl_status pgcl_sqlite_read_stored_decision(pgcl_audit *store, const char *decision_id, pgcl_stored_decision *out,
                                             char *err, int cap) {
    sqlite3 *db = pgcl_db_open_reader(pgcl_audit_sqlite_path(store), err, cap);
    if (!db) return PGCL_ERR_DB;
    stored_read c = {.decision_id = decision_id, .out = out};
    char why[512] = "";
    int rc = pgcl_db_each_row(db, STORED_DECISION_SQL, bind_stored_decision_id, take_stored_decision, &c, why,
                              sizeof why);
    sqlite3_close(db);
    if (c.out_of_memory) {
        pgcl_errorf(err, cap, "out of memory");
        return PGCL_ERR_NOMEM;
    }
    if (rc != SQLITE_OK && rc != SQLITE_DONE) {
        /* pgcl_db_each_row says "<step>: <SQLite's message>"; the messages re-score has always given */
        const char *message = strchr(why, ':') ? strchr(why, ':') + 2 : why;
        if (strncmp(why, "prepare: ", 9) == 0) pgcl_errorf(err, cap, "%s", message);
        else pgcl_errorf(err, cap, "reading the decision: %s", message);
        return PGCL_ERR_DB;
    }
    if (!c.found) {
        pgcl_errorf(err, cap, "no decision with id %.64s", decision_id);
        return PGCL_ERR_NOT_FOUND;
    }
    return PGCL_OK;
}
