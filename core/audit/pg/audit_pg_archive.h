/* Archival of the PostgreSQL store past a horizon (issue 17; docs/audit.md, "Archival on
 * PostgreSQL"): the SQLite store's archive (archive.h) adapted to a fleet of writers.
 *
 * The steps of pgcl_pg_archive_run():
 *   1. plan, in one snapshot: per event table, the largest seq `through` such that every row in
 *      (previous cut, through] is older than the horizon (decisions also older than the contest
 *      window), at most max_decisions decisions, lowered until no archived decision has a contest
 *      that stays (open, or filed or resolved after the cut), no archived contest has a decision or
 *      a resolution that stays, and no archived resolution a contest that stays. Seqs are handed
 *      out in commit order across the fleet (fleet_counters), so the rows of any snapshot are a
 *      prefix and `through` names a set that no later commit can change;
 *   2. a signed fleet checkpoint (every writer's head), written to a file and recorded in
 *      audit_checkpoints: every row at or below `through` is chained by an entry at or below its
 *      writer's head;
 *   3. the archive: a new SQLite file (pgcl_pg_archive_verify's format below) with the rows of
 *      (previous, through] (decisions with their stored inputs, those still live) and every
 *      writer's entries, runs and log tree nodes up to its head, verified offline against the
 *      checkpoint before anything is deleted;
 *   4. pruning, one transaction (audit_cuts locked against a second archiver; the writers go on:
 *      their rows lie above every bound): the contest rule checked again, an audit_cuts row, then
 *      the rows at or below `through` deleted (each count equal to what the archive holds). A
 *      contest filed on an archived decision meanwhile cannot slip through: its foreign key makes
 *      the DELETE wait for it and fail, or the contest fail, and nothing else writes rows below the
 *      bounds (seqs only grow).
 * Entries, runs and log tree nodes stay in the live database: proofs and consistency proofs are
 * unchanged, and pgcl_pg_chain_verify reads a missing row at or below the latest cut as archived.
 *
 * Why a SQLite file: it is self-contained and verifiable offline with pgcld alone (no PostgreSQL
 * server), its event tables have the SQLite store's columns, so each leaf is recomputed by the
 * same code that verifies SQLite chains (pgcl_chain_leaf_of_row), and it can be queried with
 * sqlite3 like the SQLite store's archives. */
#ifndef PGCL_AUDIT_PG_ARCHIVE_H
#define PGCL_AUDIT_PG_ARCHIVE_H

#include <stdbool.h>
#include <stdint.h>

#include "chain.h"
#include "chain_encoding.h"
#include "fleet_checkpoint.h"
#include "status.h"

#define PGCL_PG_ARCHIVE_FORMAT "pgcld-fleet-archive" /* fleet_archive.format */

/* Per event table (pgcl_chain_tables order): the previous cut's maxima (0: none) and this one's.
 * The archive holds the rows with previous[t] < seq <= through[t]. */
typedef struct pgcl_pg_archive_cut {
    int64_t previous[PGCL_CHAIN_TABLES];
    int64_t through[PGCL_CHAIN_TABLES];
} pgcl_pg_archive_cut;

typedef struct pgcl_pg_archive_result {
    pgcl_pg_archive_cut cut;
    int64_t cut_seq;       /* audit_cuts.seq */
    int64_t rows_archived; /* event rows deleted from the live database */
    int64_t prune_us;      /* how long the pruning transaction took */
    char archive_sha256[PGCL_CHAIN_HEX_LEN + 1];
    pgcl_fleet_checkpoint checkpoint; /* signed at the cut (its file: where it was written) */
} pgcl_pg_archive_result;

/* The four steps above on the database at uri (a connection of its own; safe while daemons
 * write). horizon: the audit columns' format (UTC, 6 fraction digits); contest_window_days: a
 * decision younger than that is never archived (0: no such bound); max_decisions 0: no bound.
 * archive_path must not exist; checkpoint_dir NULL: the archive's directory. PGCL_ERR_NOT_FOUND:
 * nothing to archive (err says why). On failure before step 4 the live database is unchanged.
 * Release out with pgcl_pg_archive_result_release (also on failure). */
pgcl_status pgcl_pg_archive_run(const char *uri, const char *horizon, int contest_window_days, int64_t max_decisions,
                                const char *key_path, const char *archive_path, const char *checkpoint_dir,
                                pgcl_pg_archive_result *out, char *err, int cap);
void pgcl_pg_archive_result_release(pgcl_pg_archive_result *r);

/* True when path is a SQLite file made by pgcl_pg_archive_run (a fleet_archive table). */
bool pgcl_pg_archive_is_fleet(const char *path);

/* Verifies the fleet archive at path offline: the fleet checkpoint it holds is signed (by
 * public_key_hex unless NULL), and equals each of the checkpoint files given (read and checked as
 * pgcl_fleet_checkpoint_read); each writer's entries 1..head are present, linked, hashed, their
 * commit roots from their leaves, the genesis payloads, the log root and head hash the
 * checkpoint's; every archived row's leaf is the one its run names in its entry; the archive holds
 * every row of (previous, through] and nothing else. The report as pgcl_pg_chain_verify's
 * (writers, archived_rows = the rows it holds). Release the report. */
pgcl_status pgcl_pg_archive_verify(const char *path, const char *const *checkpoint_files, int n_checkpoints,
                                   const char *public_key_hex, pgcl_chain_report *report, char *err, int cap);

#endif
