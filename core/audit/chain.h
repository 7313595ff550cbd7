/* The tamper-evident hash chain over the audit events (table audit_chain, migrations 0003 and 0007;
 * the format is in docs/audit.md).
 *
 * Every event row — a decision, an admin event, a contest, a resolution — is chained in the same
 * transaction that writes it. Encoding version 1 gives each event an entry:
 *   payload_sha256 = SHA-256(canonical encoding of the row's columns, an explicit per-table list)
 *   hash           = SHA-256(canonical encoding of seq, kind, row_seq, payload_sha256, prev_hash)
 * Encoding version 2 gives each write transaction one entry (kind "commit") whose payload is the
 * root of an RFC 9162 Merkle tree over the transaction's events (merkle.h, chain_encoding.h), so
 * that a decision's inclusion can be proved with a logarithmic path. In both, prev_hash is the
 * previous entry's hash (entry 1, the genesis entry, records how many rows of each table predate
 * the chain) and entries are numbered 1, 2, 3, … without gaps. A chain may switch from version 1
 * to version 2 at any entry; the verifier reads both.
 *
 * Writers: any connection inside its own write transaction (BEGIN IMMEDIATE), so the daemon's
 * audit writer and the keys CLI in another process both extend the same chain: begin() reads the
 * head inside the transaction; record() chains an event (version 1: appends its entry; version 2:
 * keeps its leaf); seal() appends version 2's entry and must run before COMMIT. A rolled-back
 * transaction takes its entries with it; the next begin() reads the head again. */
#ifndef PGCL_CHAIN_H
#define PGCL_CHAIN_H

#include <sqlite3.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "chain_encoding.h"
#include "status.h"

typedef struct pgcl_chain pgcl_chain;

/* SQL: the audit_chain_runs row `u` whose run holds decisions row `d` (encoding version 2), found
 * through the runs' primary key (kind, first_row_seq): the run starting last at or before d.seq,
 * if d.seq falls inside it. Used as a JOIN condition by the reads of a decision's chain entry. */
#define PGCL_CHAIN_RUN_OF_DECISION_SQL                                                                  \
    "u.kind = 'decisions' AND u.first_row_seq = (SELECT max(first_row_seq) FROM audit_chain_runs"      \
    " WHERE kind = 'decisions' AND first_row_seq <= d.seq) AND d.seq < u.first_row_seq + u.n"

/* The encoding of new entries: 1, 2, or that of the head entry (version 1 while the chain holds
 * no commit entry) — what a second writer such as the keys CLI uses, to follow the daemon's. */
enum { PGCL_CHAIN_ENCODING_AS_HEAD = 0, PGCL_CHAIN_ENCODING_DEFAULT = 2 };

/* Prepares the chain's statements on db (a read-write connection whose schema has audit_chain;
 * version 2 needs migration 0007 too). Returns NULL with err set on failure. Destroy before
 * closing db. pgcl_chain_create() follows the head (PGCL_CHAIN_ENCODING_AS_HEAD). */
pgcl_chain *pgcl_chain_create_encoding(sqlite3 *db, int encoding, char *err, int cap);
pgcl_chain *pgcl_chain_create(sqlite3 *db, char *err, int cap);
void pgcl_chain_destroy(pgcl_chain *c); /* accepts NULL */

/* Inside an open write transaction: reads the chain head (writing the genesis entry if the chain
 * is empty). Call once per transaction, before record(). */
pgcl_status pgcl_chain_begin(pgcl_chain *c, char *err, int cap);

/* Inside the same transaction: appends the entry for row `row_seq` of table `kind` ("decisions",
 * "admin_events", "contests" or "resolutions"), hashing the row as it is now stored. */
pgcl_status pgcl_chain_record(pgcl_chain *c, const char *kind, int64_t row_seq, char *err, int cap);

/* As record("decisions", v->seq) for the row just inserted with values v: version 2 hashes the
 * leaf from the values, without reading the row back (the audit writer's path); version 1 reads
 * it back as record() does. */
pgcl_status pgcl_chain_record_decision(pgcl_chain *c, const pgcl_chain_decision_values *v, char *err, int cap);

/* Inside the same transaction, after its last record() and before COMMIT: version 2 appends the
 * transaction's commit entry (nothing when it chained no event); version 1 has nothing to do. */
pgcl_status pgcl_chain_seal(pgcl_chain *c, char *err, int cap);

/* For a savepoint: mark() before it, rewind(mark) after ROLLBACK TO it forgets what record()
 * chained since (version 2 drops the pending leaves; version 1 re-reads the head). */
size_t pgcl_chain_mark(const pgcl_chain *c);
pgcl_status pgcl_chain_rewind(pgcl_chain *c, size_t mark, char *err, int cap);

/* The head after the last begin()/record()/seal() (seq 0 and "" before any). */
int64_t pgcl_chain_head_seq(const pgcl_chain *c);
const char *pgcl_chain_head_hash(const pgcl_chain *c);

/* One writer's chain in a report of the PostgreSQL store (one chain per writer, audit_pg.h). */
typedef struct pgcl_chain_writer_head {
    char writer_id[129];
    int64_t head_seq;  /* its last entry */
    char head_hash[65];
    char log_root[65]; /* the root of its log tree over entries 1..head_seq; "" unless its walk went through */
    bool intact;       /* nothing was found wrong in this writer's chain */
} pgcl_chain_writer_head;

typedef struct pgcl_chain_report {
    bool intact;
    int64_t events;          /* chain entries checked */
    int64_t first_bad_seq;   /* 0 when intact */
    char reason[512];        /* what is wrong at first_bad_seq, or "" */
    int64_t head_seq;
    char head_hash[65];
    int64_t archive_cut_seq; /* the latest archive cut's entry E (audit_cuts, migration 0010), 0 for none */
    int64_t archived_rows;   /* event rows archived by the cuts (their audit_cuts.rows_archived) */
    /* The PostgreSQL store (several chains): each writer's head, in writer id order (malloc'd;
     * pgcl_chain_report_release), and the writer of first_bad_seq ("" when none or SQLite). There,
     * events counts the entries checked over every chain, and head_seq/head_hash are the one
     * writer's head when there is one writer, else head_seq is the sum of the heads' seqs (the
     * fleet's entries) and head_hash is "" (see writers). */
    bool has_writers; /* a report of the PostgreSQL store (writers, bad_writer_id are set) */
    int n_writers;
    pgcl_chain_writer_head *writers;
    char bad_writer_id[129];
} pgcl_chain_report;

/* Frees report->writers; accepts NULL. */
void pgcl_chain_report_release(pgcl_chain_report *report);

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
 * entry's maxima predate the chain and are not checked (legacy rows).
 *
 * Archive cuts (audit_cuts, archive.h): entries 1..E of the latest cut are checked as a hash chain
 * (hashes, links, commit roots from their stored leaves, runs, log tree nodes), and against the rows
 * they chain only above the cut's per-table maxima (the rows at or below were archived; the few
 * above, kept so that a table never empties, are checked as usual); a row at or below the maxima
 * that is present is reported at E; each cut's entry_hash must be its entry's hash, its log_root the
 * log tree's root over 1..E, and its signed statement must verify (by public_key_hex when given,
 * else by the key it records). */
pgcl_status pgcl_chain_verify_signed(const char *path, const char *const *checkpoint_files, int n_checkpoints,
                                     const char *public_key_hex, pgcl_chain_report *report, char *err, int cap);

#endif
