/* The PostgreSQL store's chain reads, inside (audit_pg_chain.c describes them): what their three
 * files share. audit_pg_chain.c holds the verifier; audit_pg_chain_rows.c the leaves of rows as
 * PostgreSQL stores them and the read snapshot; audit_pg_chain_proofs.c fleet checkpoints, inclusion
 * and consistency proofs. Nothing here is for other files of the store. */
#ifndef PGCL_AUDIT_PG_CHAIN_INTERNAL_H
#define PGCL_AUDIT_PG_CHAIN_INTERNAL_H

#include "audit_pg.h"
#include "chain.h"
#include "fleet_checkpoint.h"

#define ERR_CAP 512
#define DECISIONS_TABLE 0

/* The most columns of a chained row select (decisions: the encoded ones and input_digest). */
enum { MAX_ROW_COLUMNS = 26 };

/* One row's values; TEXT and BLOB bytes point into the result (binary format: no decoding). */
typedef struct row_values {
    pgcl_chain_value v[MAX_ROW_COLUMNS];
    int n; /* its columns (for decisions, the encoded ones and input_digest) */
} row_values;

/* ---- audit_pg_chain_rows.c ---- */

/* An integer column of a binary result (int2, int4 or int8, big-endian). */
int64_t pgchain_binary_int(const PGresult *res, int row, int col);
/* The values of row `row` of a result of table `table`'s row select, its columns from offset, for
 * pgcl_chain_leaf_of_values. PGCL_ERR_FORMAT for a value of an unexpected size (a decision's input
 * SHA-256 that is not NULL or 32 bytes included). */
pgcl_status pgchain_row_values_of(int table, const PGresult *res, int row, int offset, row_values *r);
/* Decision row_seq in the binary format, or NULL with *st and err. */
PGresult *pgchain_read_decision_row(PGconn *conn, int64_t row_seq, pgcl_status *st, char *err, int cap);
/* Begins a REPEATABLE READ, READ ONLY transaction on conn: one snapshot of the fleet. */
pgcl_status pgchain_begin_snapshot(PGconn *conn, char *err, int cap);
/* Ends the transaction (commit or rollback); a failure is ignored. */
void pgchain_end_transaction(PGconn *conn, bool commit);

/* ---- audit_pg_chain_proofs.c ---- */

/* A statement as recorded in audit_checkpoints (or audit_cuts) back into cp, with its key and
 * signature (heads malloc'd); false when it is not a fleet statement. */
bool pgchain_parse_statement(const char *text, const char *public_key, const char *signature,
                             pgcl_fleet_checkpoint *cp);

#endif
