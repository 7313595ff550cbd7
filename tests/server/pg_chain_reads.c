/* A helper of tests/integration/test_pg_chain.py (not a test by itself): the PostgreSQL store's
 * inclusion and consistency proofs (core/audit/pg/audit_pg_chain.c) read on a database URI and
 * printed as the HTTP routes answer them (server/wire/review_json.c), without a daemon — so the test
 * checks them on chains it wrote itself, with docs/verify_proof.py and `pgcld audit verify-proof`.
 *
 *   pg_chain_reads URI proof DECISION_ID
 *   pg_chain_reads URI consistency WRITER|- FIRST SECOND      (-: no writer named)
 *
 * Prints the JSON on stdout; exit 0, or 3 (PGCL_ERR_NOT_FOUND), 4 (PGCL_ERR_INVALID), 5
 * (PGCL_ERR_UNSUPPORTED), 1 (any other error), 2 (usage), with the message on stderr. */
#include <jansson.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audit_pg.h"
#include "review_json.h"

static int finish(pgcl_status st, json_t *doc, const char *err) {
    if (st != PGCL_OK) {
        fprintf(stderr, "pg_chain_reads: %s\n", err);
        return st == PGCL_ERR_NOT_FOUND ? 3 : st == PGCL_ERR_INVALID ? 4 : st == PGCL_ERR_UNSUPPORTED ? 5 : 1;
    }
    char *text = doc ? json_dumps(doc, JSON_COMPACT) : NULL;
    json_decref(doc);
    if (!text) return 1;
    printf("%s\n", text);
    free(text);
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 4 || sodium_init() < 0) {
        fprintf(stderr, "usage: pg_chain_reads URI proof ID | URI consistency WRITER|- FIRST SECOND\n");
        return 2;
    }
    char err[1024] = "";
    PGconn *conn = pgcl_pg_connect(argv[1], err, sizeof err);
    if (!conn) return finish(PGCL_ERR_DB, NULL, err);
    int rc = 2;
    if (strcmp(argv[2], "proof") == 0 && argc == 4) {
        pgcl_chain_proof proof;
        pgcl_status st = pgcl_pg_chain_prove(conn, argv[3], &proof, err, sizeof err);
        rc = finish(st, st == PGCL_OK ? pgcld_inclusion_proof_json(argv[3], &proof) : NULL, err);
        if (st == PGCL_OK) pgcl_chain_proof_release(&proof);
    } else if (strcmp(argv[2], "consistency") == 0 && argc == 6) {
        pgcl_log_consistency *c = calloc(1, sizeof *c);
        if (!c) return 1;
        pgcl_status st =
            pgcl_pg_chain_consistency(conn, strcmp(argv[3], "-") == 0 ? NULL : argv[3], strtoll(argv[4], NULL, 10),
                                      strtoll(argv[5], NULL, 10), c, err, sizeof err);
        rc = finish(st, st == PGCL_OK ? pgcld_consistency_proof_json(c) : NULL, err);
        free(c);
    } else {
        fprintf(stderr, "usage: pg_chain_reads URI proof ID | URI consistency WRITER|- FIRST SECOND\n");
    }
    PQfinish(conn);
    return rc;
}
