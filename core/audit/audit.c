/* The audit store interface: every public call on a store handle, dispatched to the store's
 * operations (audit_store_impl.h). See audit.h for the contract. */
#include "audit_store_impl.h"

#include <stddef.h>

pgcl_status pgcl_audit_open(const pgcl_audit_options *opts, pgcl_audit **out, char *err, int cap) {
    pgcl_status st = pgcl_audit_sqlite_open(opts, out, err, cap);
    /* Always on: a store that reports success must hand back a usable handle. */
    PGCL_ASSERT(st != PGCL_OK || (*out && (*out)->ops));
    return st;
}

void pgcl_audit_close(pgcl_audit *a) {
    if (a) a->ops->close(a);
}

pgcl_status pgcl_audit_append(pgcl_audit *a, const pgcl_decision_row *rows, int n, char *err, int cap) {
    return pgcl_audit_append_with(a, rows, n, NULL, NULL, err, cap);
}

pgcl_status pgcl_audit_append_with(pgcl_audit *a, const pgcl_decision_row *rows, int n, pgcl_audit_fn also,
                                   void *also_ctx, char *err, int cap) {
    if (n <= 0) return PGCL_OK;
    return a->ops->append(a, rows, n, also, also_ctx, err, cap);
}

pgcl_status pgcl_audit_append_shadow(pgcl_audit *a, const pgcl_shadow_row *rows, int n, char *err, int cap) {
    if (n <= 0) return PGCL_OK;
    return a->ops->append_shadow(a, rows, n, err, cap);
}

pgcl_status pgcl_audit_record_event(pgcl_audit *a, const pgcl_admin_event *ev, char *err, int cap) {
    return a->ops->record_event(a, ev, err, cap);
}

pgcl_status pgcl_audit_run(pgcl_audit *a, pgcl_audit_fn fn, void *ctx, char *err, int cap) {
    return a->ops->run(a, fn, ctx, err, cap);
}

void pgcl_audit_set_max_pending_rows(pgcl_audit *a, int max_pending_rows) {
    a->ops->set_max_pending_rows(a, max_pending_rows);
}

int pgcl_audit_pending_rows(pgcl_audit *a) { return a->ops->pending_rows(a); }

bool pgcl_audit_healthy(pgcl_audit *a) { return a->ops->healthy(a); }

int pgcl_audit_schema_version(pgcl_audit *a) { return a->ops->schema_version(a); }

const char *pgcl_audit_store_name(pgcl_audit *a) { return a->ops->name; }
