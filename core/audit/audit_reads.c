/* The audit store's reads that the operators' side needs (activations at start-up, the shadow
 * report), each on its own read-only connection. See audit.h. */
#include "audit.h"

#include <sqlite3.h>
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

pgcl_status pgcl_audit_read_activations(const char *path, pgcl_activation_fn on_activation, void *ctx, char *err,
                                        int cap) {
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

pgcl_status pgcl_audit_read_shadow_report(const char *path, const char *model, const char *shadow_version,
                                          pgcl_shadow_report *out, char *err, int cap) {
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
