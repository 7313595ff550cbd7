/* A helper of tests/integration/test_retention.py (not a test by itself): one input-retention pass
 * (core/audit/retention.h, pgcl_retention_run_before) on a store with the horizon given, not taken
 * from the clock, so that the test places it between decisions it wrote — some older, some newer —
 * on either store:
 *
 *   retention_pass DB|URI HORIZON
 *
 * DB: a SQLite file; URI: a PostgreSQL database (the pass writes as writer "retention-pass"). Both
 * are safe beside a running daemon. HORIZON: RFC 3339 UTC with 6 fraction digits, as the audit
 * columns hold it. Prints the number of stored inputs dropped; exit 0, 1 (the pass failed: the
 * reason on stderr) or 2 (usage). */
#include <stdio.h>
#include <string.h>

#include "audit.h"
#include "clock.h"
#include "retention.h"

int main(int argc, char **argv) {
    if (argc != 3 || strlen(argv[2]) != PGCL_TIMESTAMP_LEN) {
        fprintf(stderr, "usage: retention_pass DB|URI HORIZON (e.g. 2026-11-21T10:33:00.123456Z)\n");
        return 2;
    }
    char err[1024] = "";
    pgcl_audit_options o = {.path = argv[1],
                            .writer_id = "retention-pass",
                            .writer_lock_wait_ms = 10000,
                            .synchronous_full = true,
                            .busy_timeout_ms = 5000,
                            .max_pending_rows = 1000};
    pgcl_audit *store = NULL;
    if (pgcl_audit_open(&o, &store, err, sizeof err) != PGCL_OK) {
        fprintf(stderr, "retention_pass: %s\n", err);
        return 1;
    }
    int64_t dropped = pgcl_retention_run_before(store, argv[2], err, sizeof err);
    pgcl_audit_close(store);
    if (dropped < 0) {
        fprintf(stderr, "retention_pass: %s\n", err);
        return 1;
    }
    printf("%lld\n", (long long)dropped);
    return 0;
}
