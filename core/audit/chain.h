/* The tamper-evident hash chain over the audit events (table audit_chain, migration 0003).
 *
 * Every event row — a decision, an admin event, a contest, a resolution — gets one chain entry in
 * the same transaction that writes it:
 *   payload_sha256 = SHA-256(canonical encoding of the row's columns, an explicit per-table list)
 *   hash           = SHA-256(canonical encoding of seq, kind, row_seq, payload_sha256, prev_hash)
 * with prev_hash the previous entry's hash (entry 1, the genesis entry, records how many rows of
 * each table predate the chain). Entries are numbered 1, 2, 3, … without gaps.
 *
 * Writers: any connection inside its own write transaction (BEGIN IMMEDIATE), so the daemon's
 * audit writer and the keys CLI in another process both extend the same chain: begin() reads the
 * head inside the transaction; record() appends. A rolled-back transaction takes its entries
 * with it; the next begin() reads the head again. */
#ifndef PGCL_CHAIN_H
#define PGCL_CHAIN_H

#include <sqlite3.h>
#include <stdbool.h>
#include <stdint.h>

#include "status.h"

typedef struct pgcl_chain pgcl_chain;

/* Prepares the chain's statements on db (a read-write connection whose schema has audit_chain).
 * Returns NULL with err set on failure. Destroy before closing db. */
pgcl_chain *pgcl_chain_create(sqlite3 *db, char *err, int cap);
void pgcl_chain_destroy(pgcl_chain *c); /* accepts NULL */

/* Inside an open write transaction: reads the chain head (writing the genesis entry if the chain
 * is empty). Call once per transaction, before record(). */
pgcl_status pgcl_chain_begin(pgcl_chain *c, char *err, int cap);

/* Inside the same transaction: appends the entry for row `row_seq` of table `kind` ("decisions",
 * "admin_events", "contests" or "resolutions"), hashing the row as it is now stored. */
pgcl_status pgcl_chain_record(pgcl_chain *c, const char *kind, int64_t row_seq, char *err, int cap);

/* The head after the last begin()/record() (seq 0 and "" before any). */
int64_t pgcl_chain_head_seq(const pgcl_chain *c);
const char *pgcl_chain_head_hash(const pgcl_chain *c);

typedef struct pgcl_chain_report {
    bool intact;
    int64_t events;          /* chain entries checked */
    int64_t first_bad_seq;   /* 0 when intact */
    char reason[512];        /* what is wrong at first_bad_seq, or "" */
    int64_t head_seq;
    char head_hash[65];
} pgcl_chain_report;

/* Verifies the whole chain of the database at path (read-only connection): sequence without gaps,
 * each prev_hash and hash, each payload against its row, every event row chained, and (when
 * checkpoint files are given) that each signed checkpoint's head is in the chain with the same
 * hash. PGCL_OK means the verification ran (see report->intact); an error means it could not. */
pgcl_status pgcl_chain_verify(const char *path, const char *const *checkpoint_files, int n_checkpoints,
                              pgcl_chain_report *report, char *err, int cap);

/* As pgcl_chain_verify(), and each checkpoint file must be signed by public_key_hex (64 hex digits)
 * unless that is NULL. A checkpoint file that cannot be read, is malformed, is not signed by its own
 * key or by the expected one is an error (PGCL_ERR_IO/FORMAT/UNSUPPORTED/MISMATCH, err naming the
 * file), not a report: the verification cannot rely on it.
 *
 * Conventions of the report: events counts the entries checked (all N when intact; the walk stops
 * at the first bad entry). A row that no entry refers to is reported at first_bad_seq N + 1, where
 * its entry is missing; so is a checkpoint whose head lies beyond the chain's end. A checkpoint
 * whose head entry has another hash is reported at its head_seq. Rows with seq at most the genesis
 * entry's maxima predate the chain and are not checked (legacy rows). */
pgcl_status pgcl_chain_verify_signed(const char *path, const char *const *checkpoint_files, int n_checkpoints,
                                     const char *public_key_hex, pgcl_chain_report *report, char *err, int cap);

#endif
