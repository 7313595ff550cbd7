/* The checkpointer (issue 28): signs this process's writer's log as C2SP tlog-checkpoint notes
 * and stores them (audit_log.h), every interval when the log grew and on demand. Store-neutral: it
 * sees the store through audit_log.h only. Its thread reads the log on the store's readers and
 * stores the note in a short transaction of its own; it never holds anything scoring waits for.
 *
 * Names. A writer's log is served under /log/<writer_id>/ and its checkpoints carry the origin
 * "<origin prefix>/<writer_id>" (--log-origin), which is also the name of the note key that signs
 * them (the C2SP recommendation: a checkpoint's origin is its key's name). So a writer id must be
 * both a URL path segment and part of a note key name without escaping: 1 to
 * PGCL_LOG_WRITER_ID_MAX bytes of [A-Za-z0-9._-], not "." or ".." (pgcl_log_writer_id_valid). A
 * daemon whose writer id breaks that rule refuses to start (server/main.c).
 *
 * Coverage. A checkpoint is made from the log's state as a read snapshot taken when the checkpoint
 * begins, so it covers every commit that completed before — every decision acknowledged before the
 * checkpoint was taken (a decision is acknowledged after its commit). The root signed is the one the
 * tiles give (recomputed from the rows through log.h's tile source), checked against the state's
 * root: a mismatch is never signed. */
#ifndef PGCL_CHECKPOINTER_H
#define PGCL_CHECKPOINTER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "audit_log.h"
#include "note.h"
#include "status.h"

/* True when id is a servable writer id (see above). */
bool pgcl_log_writer_id_valid(const char *id);

/* The origin of writer_id's log under prefix: "<prefix>/<writer_id>", into out. The prefix must be
 * non-empty, and the origin a valid note key name (note.h) of at most PGCL_TLOG_ORIGIN_MAX bytes.
 * PGCL_ERR_INVALID (err says why) otherwise. */
pgcl_status pgcl_log_origin(const char *prefix, const char *writer_id, char out[PGCL_TLOG_ORIGIN_MAX + 1], char *err,
                            int cap);

/* Signs writer_id's log of the tree (size, root) as a checkpoint note with signer (named by the
 * origin): the signed note, malloc'd, for the caller to free; NULL with *st, err set (note.h's
 * errors). Pure: no store. */
char *pgcl_log_checkpoint_sign(const pgcl_note_signer *signer, uint64_t size, const pgcl_merkle_hash *root,
                               pgcl_status *st, char *err, int cap);

typedef struct pgcl_checkpointer pgcl_checkpointer;

/* A checkpointer of a's writer's log (pgcl_audit_writer_id: a store opened for writing), signing with
 * signer (owned from now on, destroyed with the checkpointer, also on failure), whose name must be
 * that log's origin. interval_s > 0 starts a thread that checkpoints every interval_s seconds when
 * the log grew; 0 checkpoints only on demand. NULL with err set: PGCL_ERR_INVALID (no writer, a
 * signer named otherwise than a valid origin), PGCL_ERR_NOMEM, a thread that cannot start. */
pgcl_checkpointer *pgcl_checkpointer_create(pgcl_audit *a, pgcl_note_signer *signer, long interval_s, char *err,
                                            int cap);

/* Takes a checkpoint now (on demand; thread-safe, serialised with the thread's): signs and stores
 * one when the log grew since the last one stored (or none is stored yet), else does nothing.
 * *size (may be NULL): the size the latest stored checkpoint covers. *signed_now (may be NULL):
 * whether this call stored one. Errors: the store's, PGCL_ERR_MISMATCH when the state's root is not
 * the tiles' (nothing signed), note.h's. */
pgcl_status pgcl_checkpointer_now(pgcl_checkpointer *c, uint64_t *size, bool *signed_now, char *err, int cap);

/* Called with each checkpoint this checkpointer signs and stores (the note as signed, without
 * cosignatures, note[0:len), of `size` leaves), on the signing thread while the checkpointer's lock
 * is held: it must not block (the witness manager's pgcl_witness_manager_submit only copies it). */
typedef void (*pgcl_checkpoint_signed_fn)(void *ctx, const char *note, size_t len, uint64_t size);

/* Sets (fn non-NULL) or clears the callback above; thread-safe; later checkpoints only. */
void pgcl_checkpointer_on_signed(pgcl_checkpointer *c, pgcl_checkpoint_signed_fn fn, void *ctx);

/* The signer's verifier key (note.h format) into out; its length. */
int pgcl_checkpointer_verifier_key(const pgcl_checkpointer *c, char out[PGCL_NOTE_VKEY_MAX]);

/* Stops the thread after a last checkpoint (so it covers every decision answered before the
 * drain), and frees c. Accepts NULL. */
void pgcl_checkpointer_destroy(pgcl_checkpointer *c);

#endif
