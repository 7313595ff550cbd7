/* Archival of the audit log past a horizon (docs/audit.md, "Archival past a horizon"): the event
 * rows up to a cut leave the live database for a self-contained archive database, while the chain's
 * entries, runs and log tree nodes stay, so that the chain, every checkpoint and every proof of a
 * live decision verify as before.
 *
 * The steps of pgcl_archive_run():
 *   1. cut: the last encoding-2 commit entry E after the previous cut whose rows are all older than
 *      the horizon (entries walked in seq order), lowered until no decision at or below the cut has
 *      an open contest, or a contest or resolution chained after E;
 *   2. a signed checkpoint at E (pgcl_checkpoint_create_at), written to a file and recorded in
 *      audit_checkpoints;
 *   3. the archive: VACUUM INTO a new file, everything after E (and the secrets: API keys,
 *      idempotency keys) deleted from the copy, which must then verify intact with head E and the
 *      checkpoint's hash;
 *   4. pruning, one write transaction on the live database: an audit_cuts row (migration 0010),
 *      then the event rows (and stored inputs) at or below the cut's per-table maxima deleted.
 * Safe while a daemon writes the same database: step 1 reads one snapshot, step 4 re-checks the cut
 * inside its own BEGIN IMMEDIATE (SQLite serialises it with the daemon's writer, busy timeout
 * PGCL_DB_BUSY_TIMEOUT_MS). */
#ifndef PGCL_ARCHIVE_H
#define PGCL_ARCHIVE_H

#include <sqlite3.h>
#include <stdbool.h>
#include <stdint.h>

#include "chain_encoding.h"
#include "signing.h"
#include "status.h"

/* Where the live database is cut: entry E and, per table (pgcl_chain_tables order):
 *  - chained[t]: the largest seq chained by entries 1..E (the archive holds the rows up to it);
 *  - through[t]: the largest seq deleted from the live database, at most chained[t] and below the
 *    table's last row, which always stays (SQLite gives a new row max(seq) + 1: a table emptied by
 *    the cut would hand out archived seqs again), lowered so that no row kept references a deleted
 *    one (a resolution its contest, a contest its decision: the foreign keys).
 * Rows above through[t] chained at or below E stay in the live database and are verified there. */
typedef struct pgcl_archive_cut {
    int64_t entry_seq;
    char entry_hash[PGCL_CHAIN_HEX_LEN + 1];
    int64_t chained[PGCL_CHAIN_TABLES];
    int64_t through[PGCL_CHAIN_TABLES];
    int64_t previous_entry_seq; /* the previous cut's entry, 0 for none */
} pgcl_archive_cut;

typedef struct pgcl_archive_result {
    pgcl_archive_cut cut;
    int64_t rows_archived; /* event rows deleted from the live database */
    int64_t prune_us;      /* how long the pruning transaction held the write lock */
    char archive_sha256[PGCL_CHAIN_HEX_LEN + 1];
    pgcl_checkpoint checkpoint; /* signed at the cut (checkpoint.file: where it was written) */
} pgcl_archive_result;

/* What keeps a decision in the live database when archival cannot pass it: one of its contests,
 * open or chained after any cut the plan could take (both stores' plans fill it in). */
typedef struct pgcl_archive_blocker {
    int64_t decision_seq;
    char decision_id[64];
    char contest_id[64];
    char filed_at[40];
    char resolved_at[40]; /* "" while the contest is open */
} pgcl_archive_blocker;

/* The refusal "nothing to archive" when no cut can pass decision b (b filled in), written into err:
 * it names the decision and its contest and what the operator can change — resolving the contest
 * while it is open; otherwise what keeps the cut before its resolution: root (the contest that
 * keeps b's, when of another decision: the one the cut had to stay below first, or the first of
 * the contests, archived in order, that stays; NULL for none) and what would change that, a horizon
 * after a resolution newer than horizon, or a larger bound on the decisions of one run when
 * bounded (the bound lowered the cut). */
void pgcl_archive_contest_refusal(const pgcl_archive_blocker *b, const pgcl_archive_blocker *root, const char *horizon,
                                  bool bounded, char *err, int cap);

/* The default bound on the decisions one cut archives: the pruning transaction holds the write lock
 * (the daemon's commits wait, up to their 5 s busy timeout) for 15–32 µs per decision measured on a
 * shared 2-vCPU VM (0.75–0.9 s per 50,000), so a larger backlog takes several runs. */
#define PGCL_ARCHIVE_MAX_DECISIONS_DEFAULT 50000

/* Finds the cut for horizon (the audit columns' format, UTC with 6 fraction digits) on db, inside
 * a transaction the caller holds, archiving at most max_decisions decisions (0: no bound; a single
 * commit larger than the bound is taken whole). PGCL_ERR_NOT_FOUND: nothing to archive (err says
 * why and what would change it: a later horizon, or the contest that keeps a decision, named by
 * pgcl_archive_contest_refusal); PGCL_ERR_UNSUPPORTED: the horizon or the bound puts the cut on an
 * encoding-1 entry (err names the first commit entry, if any); PGCL_ERR_FORMAT: the schema
 * predates migration 0010. */
pgcl_status pgcl_archive_plan(sqlite3 *db, const char *horizon, int64_t max_decisions, pgcl_archive_cut *cut,
                              char *err, int cap);

/* The four steps above. archive_path must not exist. checkpoint_dir NULL: the database's directory.
 * On failure before step 4 the live database is unchanged (a checkpoint file and an archive file
 * may have been written; err says which). */
pgcl_status pgcl_archive_run(const char *db_path, const char *horizon, int64_t max_decisions, const char *key_path,
                             const char *archive_path, const char *checkpoint_dir, pgcl_archive_result *out, char *err,
                             int cap);

/* Where a decision that is not in the live database would be: the first cut whose horizon lies
 * after the time in its id (a UUIDv7 carries its Unix milliseconds). */
typedef struct pgcl_archive_where {
    bool archived;       /* the id's time is before a cut's horizon: it was archived (or never made) */
    int64_t entry_seq;   /* that cut's entry */
    char before[32];     /* its horizon */
    char created_at[32]; /* when it was made */
    char archive_name[256];
} pgcl_archive_where;

/* The time in decision_id (a UUIDv7 carries its Unix milliseconds) in the audit columns' format;
 * false when it is not a UUIDv7. What pgcl_archive_where_is compares with the cuts' horizons (also
 * the PostgreSQL store's). */
bool pgcl_archive_id_time(const char *decision_id, char out[32]);

/* The SHA-256 of the (archive) file at path, lowercase hex; PGCL_ERR_IO with err when it cannot be
 * read. Both stores' archives record it in their cut. */
pgcl_status pgcl_archive_file_sha256(const char *path, char out[PGCL_CHAIN_HEX_LEN + 1], char *err, int cap);

/* Looks decision_id up against audit_cuts on db (any connection; no transaction needed). A schema
 * without audit_cuts, an id that is not a UUIDv7 or a time after every horizon: archived false. */
pgcl_status pgcl_archive_where_is(sqlite3 *db, const char *decision_id, pgcl_archive_where *out, char *err, int cap);

#endif
