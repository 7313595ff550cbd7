/* The transparency logs of an open store (issue 28), caller's side: what the HTTP routes
 * (/log/...), the checkpointer and the proofs read and write, the same for every store. Each
 * writer of a store has one log (log/log.h); a SQLite store has one writer, whose id is fixed when
 * the database is created (default: the host name); a PostgreSQL store has one per replica
 * (--writer-id). Every entry point dispatches on the store's operations table
 * (audit_store_impl.h). */
#ifndef PGCL_AUDIT_LOG_H
#define PGCL_AUDIT_LOG_H

#include <stdbool.h>
#include <stdint.h>

#include "audit.h"
#include "log/log.h"
#include "status.h"

#define PGCL_LOG_WRITER_ID_MAX 128

/* One writer's log as the store holds it now. */
typedef struct pgcl_audit_log_info {
    char writer_id[PGCL_LOG_WRITER_ID_MAX + 1];
    uint64_t size;          /* leaves committed */
    pgcl_merkle_hash root;  /* MTH of them (SHA-256("") at 0) */
} pgcl_audit_log_info;

/* The store's logs, ordered by writer id, into out[0..cap); *n how many there are (may exceed cap:
 * call again with more room). */
pgcl_status pgcl_audit_logs(pgcl_audit *a, pgcl_audit_log_info *out, int cap, int *n, char *err, int err_cap);

/* This process's writer's id ("" for a store opened read-only). */
const char *pgcl_audit_writer_id(pgcl_audit *a);

/* A read of one writer's log in one consistent snapshot: fn is called once with the log's rows
 * (ops, ops_ctx: valid during the call only) and its state, and its status is the call's.
 * PGCL_ERR_NOT_FOUND (fn not called) when the store has no log of that writer. Thread-safe: reads
 * run on the store's readers, never on its writer. */
typedef pgcl_status (*pgcl_audit_log_read_fn)(void *ctx, const pgcl_log_ops *ops, void *ops_ctx,
                                              const pgcl_audit_log_info *log, char *err, int cap);
pgcl_status pgcl_audit_log_read(pgcl_audit *a, const char *writer_id, pgcl_audit_log_read_fn fn, void *ctx,
                                char *err, int cap);

/* The latest checkpoint stored for writer_id's log: its signed note text with every cosignature
 * line received for it (malloc'd, the caller frees) and the tree size it covers. PGCL_ERR_NOT_FOUND
 * when none is stored yet. */
pgcl_status pgcl_audit_log_checkpoint(pgcl_audit *a, const char *writer_id, char **note, uint64_t *size, char *err,
                                      int cap);

/* Stores a checkpoint of this process's writer's log: note is the signed note of the tree of
 * `size` leaves. Idempotent for an identical (size, note). Later cosignatures of the same checkpoint
 * are stored with pgcl_audit_log_add_cosignatures (lines appended to the served note). */
pgcl_status pgcl_audit_log_put_checkpoint(pgcl_audit *a, uint64_t size, const char *note, char *err, int cap);
pgcl_status pgcl_audit_log_add_cosignatures(pgcl_audit *a, uint64_t size, const char *signature_lines, char *err,
                                            int cap);

/* Where an event is in the logs: kind "decision", "contest", "resolution", "admin_event",
 * "key_event"; id its UUID text. PGCL_ERR_NOT_FOUND when the store has no such event (or it was
 * written before the log: a legacy event). */
pgcl_status pgcl_audit_log_leaf_of(pgcl_audit *a, const char *kind, const char *id,
                                   char writer_id[PGCL_LOG_WRITER_ID_MAX + 1], uint64_t *leaf_index, char *err,
                                   int cap);

#endif
