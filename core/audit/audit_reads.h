/* The audit store interface, read side: everything pgcld reads back from its record, through the
 * store handle (audit.h), so that the reviewers' answers, the idempotency replays and the
 * operators' reports do not know which store holds the record. Each read runs beside the writer
 * (the SQLite store: on a read-only connection of its reader pool, WAL) and is thread-safe.
 *
 * Rows come back as plain structs whose strings live in the caller's row arena (row_arena.h); the
 * JSON of the HTTP answers is built in server/. Statuses: PGCL_OK; PGCL_ERR_NOT_FOUND where a
 * read names one thing; PGCL_ERR_BUSY (every read connection busy) and PGCL_ERR_DB (the record
 * cannot be read: retry) with err set; PGCL_ERR_NOMEM; other codes as each read says. */
#ifndef PGCL_AUDIT_READS_H
#define PGCL_AUDIT_READS_H

#include <stdbool.h>
#include <stdint.h>

#include "archive.h"
#include "audit.h"
#include "chain.h"
#include "chain_proof.h"
#include "contest_reads.h"
#include "decision_lists.h"
#include "decision_record.h"
#include "export.h"
#include "idempotency.h"
#include "keys.h"
#include "row_arena.h"
#include "stats_reads.h"
#include "time_cursor.h"

/* ---- reviewers ---- */

/* One decision: its record, chain entry and contests (decision_record.h). */
pgcl_status pgcl_audit_read_decision(pgcl_audit *a, const char *decision_id, pgcl_row_arena *arena,
                                     pgcl_decision_record *out, char *err, int cap);

/* One page of decisions matching f, newest first, below before_seq (0: from the newest). */
pgcl_status pgcl_audit_read_decisions(pgcl_audit *a, const pgcl_decision_filter *f, int64_t before_seq, int limit,
                                      pgcl_row_arena *arena, pgcl_decision_page *out, char *err, int cap);

/* One page of the contest queue (open ones, or all), past after_seq (contest_reads.h). */
pgcl_status pgcl_audit_read_contests(pgcl_audit *a, bool open, int64_t after_seq, int limit, int window_days,
                                     int64_t now_us, pgcl_row_arena *arena, pgcl_contest_page *out, char *err,
                                     int cap);

/* The transparency figures of [since, until) (either may be NULL: unbounded). */
pgcl_status pgcl_audit_read_stats(pgcl_audit *a, const char *since, const char *until, pgcl_row_arena *arena,
                                  pgcl_audit_stats *out, char *err, int cap);

/* Opens the export stream of [since, until); read it with pgcl_export_read, end it with
 * pgcl_export_destroy (export.h). */
pgcl_status pgcl_audit_open_export(pgcl_audit *a, const char *since, const char *until, pgcl_export_format fmt,
                                   pgcl_export **out, char *err, int cap);

/* A decision as recorded (texts NULL where the column was NULL). */
typedef struct pgcl_recorded_decision {
    const char *model_name, *model_version, *model_sha256, *label, *decision;
    const char *probabilities_json;
    bool has_toxicity;
    double toxicity;
} pgcl_recorded_decision;

/* A decision as recorded with the input it was scored on as stored (for a re-score). Zero it
 * before the read; release with pgcl_stored_decision_clear. */
typedef struct pgcl_stored_decision {
    pgcl_recorded_decision original;
    const unsigned char *input; /* (input_bytes) little-endian float16 or float32; NULL: not stored */
    int input_bytes;
    bool input_half;            /* float16 (else float32) */
    bool input_dropped;         /* input is NULL because retention dropped it (it was stored) */
    unsigned char *owned;       /* private: the texts and the input, in one allocation */
} pgcl_stored_decision;

/* Reads decision_id as recorded with its stored input. PGCL_ERR_NOT_FOUND: no such decision;
 * PGCL_ERR_DB: the record could not be read (err says why); PGCL_ERR_NOMEM. */
pgcl_status pgcl_audit_read_stored_decision(pgcl_audit *a, const char *decision_id, pgcl_stored_decision *out,
                                            char *err, int cap);

/* Frees what a stored decision holds and zeroes it. Accepts a zeroed one. */
void pgcl_stored_decision_clear(pgcl_stored_decision *d);

/* ---- the scoring routes ---- */

/* Looks (scope, key) up among the idempotency keys (idempotency.h); now: RFC 3339 UTC. *found is
 * false for an expired key. */
pgcl_status pgcl_audit_read_idempotency_key(pgcl_audit *a, const char *scope, const char *key, const char *now,
                                            bool *found, pgcl_idem_record *out, char *err, int cap);

/* The inclusion proof of decision decision_id (chain_proof.h; release it with
 * pgcl_chain_proof_release). PGCL_ERR_NOT_FOUND: no such decision; PGCL_ERR_UNSUPPORTED: chained
 * in encoding version 1 or before the chain. */
pgcl_status pgcl_audit_read_proof(pgcl_audit *a, const char *decision_id, pgcl_chain_proof *out, char *err, int cap);

/* Whether decision_id, not found, was archived: the first archive cut whose horizon lies after the
 * time in its id (archive.h, pgcl_archive_where_is). */
pgcl_status pgcl_audit_read_archive_where(pgcl_audit *a, const char *decision_id, pgcl_archive_where *out, char *err,
                                          int cap);

/* The consistency proof between the log trees of first and second entries (chain_proof.h,
 * pgcl_chain_prove_consistency: PGCL_ERR_INVALID for sizes out of order, PGCL_ERR_NOT_FOUND beyond
 * the head) of writer_id's log. writer_id: NULL for the store's only log; the SQLite store has one
 * log and refuses any writer_id (PGCL_ERR_INVALID); the PostgreSQL store needs one when several
 * writers have a chain (PGCL_ERR_INVALID naming them), and answers PGCL_ERR_NOT_FOUND for a writer
 * without a chain. */
pgcl_status pgcl_audit_read_consistency(pgcl_audit *a, const char *writer_id, int64_t first, int64_t second,
                                        pgcl_log_consistency *out, char *err, int cap);

/* ---- operators ---- */

/* Verifies the whole chain (chain.h, pgcl_chain_verify without checkpoints): *report says whether
 * it is intact. PGCL_ERR_DB when the chain cannot be read. */
pgcl_status pgcl_audit_verify_chain(pgcl_audit *a, pgcl_chain_report *report, char *err, int cap);

/* A signed checkpoint a store made: of its one chain (SQLite, signing.h) or a fleet checkpoint over
 * every writer's chain (PostgreSQL, fleet_checkpoint.h). */
typedef struct pgcl_store_checkpoint {
    bool is_fleet;
    pgcl_checkpoint chain;       /* !is_fleet */
    pgcl_fleet_checkpoint fleet; /* is_fleet: its heads are malloc'd (pgcl_store_checkpoint_release) */
} pgcl_store_checkpoint;
void pgcl_store_checkpoint_release(pgcl_store_checkpoint *cp); /* accepts NULL */

/* Signs the store's head(s) with the key file at key_path and writes the checkpoint file at
 * out_file, or, when that is NULL, into out_dir (pgcl_checkpoint_create; fleet:
 * pgcl_fleet_checkpoint_write), then records it in audit_checkpoints. PGCL_ERR_NOT_FOUND: no chain
 * has an entry yet. out is filled on PGCL_OK; release it in any case. */
pgcl_status pgcl_audit_create_checkpoint(pgcl_audit *a, const char *key_path, const char *out_file, const char *out_dir,
                                         pgcl_store_checkpoint *out, char *err, int cap);

/* API keys (keys.h): create, revoke, and the keyring that authenticates requests, on the store's
 * record. Contracts as pgcl_keys_create, pgcl_keys_revoke and pgcl_keyring_open. */
pgcl_status pgcl_audit_create_key(pgcl_audit *a, pgcl_role role, const char *name, const char *actor,
                                  char key_out[128], char key_id_out[32], char *err, int cap);
pgcl_status pgcl_audit_revoke_key(pgcl_audit *a, const char *key_id, const char *actor, char *err, int cap);
/* Registers a key made elsewhere (keys.h, pgcl_keys_import's contract). */
pgcl_status pgcl_audit_import_key(pgcl_audit *a, pgcl_role role, const char *name, const char *actor, const char *key,
                                  char key_id_out[32], bool *created, char *err, int cap);
pgcl_status pgcl_audit_open_keyring(pgcl_audit *a, pgcl_keyring **out, char *err, int cap);

/* Calls on_key for every API key, oldest first (keys.h, pgcl_keys_list). */
pgcl_status pgcl_audit_read_keys(pgcl_audit *a, pgcl_key_fn on_key, void *ctx, char *err, int cap);

/* Calls on_activation(model, version, ctx) for every successful model.activate event, oldest
 * first: the last call for a model names the version it should come back with. */
typedef void (*pgcl_activation_fn)(const char *model, const char *version, void *ctx);
pgcl_status pgcl_audit_read_activations(pgcl_audit *a, pgcl_activation_fn on_activation, void *ctx, char *err,
                                        int cap);

/* The decisions of the policy, in this order, as matrix indexes. */
enum { PGCL_DECISION_KINDS = 3 };
extern const char *const pgcl_decision_kind_names[PGCL_DECISION_KINDS]; /* "allow", "review", "block" */

/* Agreement of a shadow version with the primary on the same items. */
typedef struct pgcl_shadow_report {
    int64_t items;
    int64_t decision_agreements;
    int64_t decision_matrix[PGCL_DECISION_KINDS][PGCL_DECISION_KINDS]; /* [primary][shadow] */
    int64_t label_agreements;
    double sum_abs_score_difference, max_abs_score_difference;
} pgcl_shadow_report;

pgcl_status pgcl_audit_read_shadow_report(pgcl_audit *a, const char *model, const char *shadow_version,
                                          pgcl_shadow_report *out, char *err, int cap);

#endif
