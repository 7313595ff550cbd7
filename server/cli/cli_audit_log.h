/* pgcld audit verify's part for the transparency logs (issue 28): see cli_audit_log.c. */
#ifndef PGCLD_CLI_AUDIT_LOG_H
#define PGCLD_CLI_AUDIT_LOG_H

#include <jansson.h>
#include <stdbool.h>

typedef struct pgcld_log_verify_args {
    const char *db;
    bool full;                   /* --full */
    const char *state;           /* --state FILE, or NULL: the default beside the store */
    const char *log_origin;      /* --log-origin PREFIX, or NULL: "pgcld" */
    const char *public_key_hex;  /* --public-key, or NULL */
    const char *signing_key;     /* --signing-key (its public half), or NULL */
    const char *const *log_keys; /* --log-key VKEY... */
    int n_log_keys;
} pgcld_log_verify_args;

/* Verifies db's logs (log_verify.h) and adds log_intact, log_reason, log_bad_writer, log_bad_leaf,
 * log_mode, log_leaves_checked, log_state and logs (one object per writer) to out; *intact says
 * whether every log verified. Returns 0 when the verification ran, 1 when it could not (the reason
 * printed on stderr), 2 for a malformed --log-key. */
int pgcld_audit_verify_logs(const pgcld_log_verify_args *args, json_t *out, bool *intact);

#endif
