/* The PostgreSQL store's chain reads. See audit_pg.h. (A stub until it is written: every call answers PGCL_ERR_UNSUPPORTED.) */
#include "audit_pg.h"

pgcl_status pgcl_pg_read_proof(pgcl_audit *store, const char *decision_id, pgcl_chain_proof *out, char *err, int cap) {
    pgcl_errorf(err, cap, "the PostgreSQL store is not written yet");
    return PGCL_ERR_UNSUPPORTED;
}

pgcl_status pgcl_pg_read_consistency(pgcl_audit *store, int64_t first, int64_t second, pgcl_log_consistency *out, char *err, int cap) {
    pgcl_errorf(err, cap, "the PostgreSQL store is not written yet");
    return PGCL_ERR_UNSUPPORTED;
}

pgcl_status pgcl_pg_verify_chain(pgcl_audit *store, pgcl_chain_report *report, char *err, int cap) {
    pgcl_errorf(err, cap, "the PostgreSQL store is not written yet");
    return PGCL_ERR_UNSUPPORTED;
}
