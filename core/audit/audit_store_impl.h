/* The audit store interface, implementer's side (in the manner of backend_impl.h).
 *
 * A store is a struct whose first member is `pgcl_audit base`, with base.ops pointing at its
 * operations table. audit.c dispatches every public pgcl_audit_* call on a handle through that
 * table and does the checks common to every store (an empty append is a no-op, never a
 * transaction). Each operation keeps the contract of its public counterpart in audit.h.
 *
 * Stores: audit_sqlite.c (the embedded default, one file, one writer with group commit). */
#ifndef PGCL_AUDIT_STORE_IMPL_H
#define PGCL_AUDIT_STORE_IMPL_H

#include "audit.h"

typedef struct pgcl_audit_store_ops {
    const char *name; /* "sqlite" */
    void (*close)(pgcl_audit *store);
    /* n >= 1; `also` may be NULL. */
    pgcl_status (*append)(pgcl_audit *store, const pgcl_decision_row *rows, int n, pgcl_audit_fn also,
                          void *also_ctx, char *err, int cap);
    /* n >= 1. */
    pgcl_status (*append_shadow)(pgcl_audit *store, const pgcl_shadow_row *rows, int n, char *err, int cap);
    pgcl_status (*record_event)(pgcl_audit *store, const pgcl_admin_event *ev, char *err, int cap);
    pgcl_status (*run)(pgcl_audit *store, pgcl_audit_fn fn, void *ctx, char *err, int cap);
    void (*set_max_pending_rows)(pgcl_audit *store, int max_pending_rows);
    int (*pending_rows)(pgcl_audit *store);
    bool (*healthy)(pgcl_audit *store);
    int (*schema_version)(pgcl_audit *store);
} pgcl_audit_store_ops;

/* What every store begins with. */
struct pgcl_audit {
    const pgcl_audit_store_ops *ops;
};

/* The SQLite store. */
extern const pgcl_audit_store_ops pgcl_audit_sqlite_ops;
pgcl_status pgcl_audit_sqlite_open(const pgcl_audit_options *opts, pgcl_audit **out, char *err, int cap);

#endif
