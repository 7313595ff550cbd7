/* The PostgreSQL store's reviewers' writes, keys and retention. See audit_pg.h. (A stub until it is written: every call answers PGCL_ERR_UNSUPPORTED.) */
#include "audit_pg.h"

pgcl_status pgcl_pg_file_contest(pgcl_audit *store, pgcl_contest_request *r, char *err, int cap) {
    pgcl_errorf(err, cap, "the PostgreSQL store is not written yet");
    return PGCL_ERR_UNSUPPORTED;
}

pgcl_status pgcl_pg_resolve_contest(pgcl_audit *store, pgcl_resolution_request *r, char *err, int cap) {
    pgcl_errorf(err, cap, "the PostgreSQL store is not written yet");
    return PGCL_ERR_UNSUPPORTED;
}

pgcl_status pgcl_pg_create_key(pgcl_audit *store, pgcl_role role, const char *name, const char *actor, char key_out[128], char key_id_out[32], char *err, int cap) {
    pgcl_errorf(err, cap, "the PostgreSQL store is not written yet");
    return PGCL_ERR_UNSUPPORTED;
}

pgcl_status pgcl_pg_revoke_key(pgcl_audit *store, const char *key_id, const char *actor, char *err, int cap) {
    pgcl_errorf(err, cap, "the PostgreSQL store is not written yet");
    return PGCL_ERR_UNSUPPORTED;
}

pgcl_status pgcl_pg_open_keyring(pgcl_audit *store, pgcl_keyring **out, char *err, int cap) {
    pgcl_errorf(err, cap, "the PostgreSQL store is not written yet");
    return PGCL_ERR_UNSUPPORTED;
}

pgcl_status pgcl_pg_read_keys(pgcl_audit *store, pgcl_key_fn on_key, void *ctx, char *err, int cap) {
    pgcl_errorf(err, cap, "the PostgreSQL store is not written yet");
    return PGCL_ERR_UNSUPPORTED;
}

pgcl_status pgcl_pg_drop_inputs(pgcl_audit *store, const char *older_than, int max_rows, int64_t *dropped, bool *more, char *err, int cap) {
    pgcl_errorf(err, cap, "the PostgreSQL store is not written yet");
    return PGCL_ERR_UNSUPPORTED;
}
