/* The head signer: periodic signed checkpoints of the audit chain (--checkpoint-interval with
 * --signing-key). Not to be confused with the WAL checkpoints of core/audit/audit_sqlite.c: this is a thread
 * that signs the chain head every interval and writes it beside the database (or into
 * --checkpoint-dir), so that a rewrite of the database's history is caught by comparing it with
 * files an attacker with write access to the database alone cannot forge. */
#ifndef PGCLD_HEAD_SIGNER_H
#define PGCLD_HEAD_SIGNER_H

#include "server.h"

typedef struct pgcld_head_signer pgcld_head_signer;

/* Starts the thread when both options are set; returns NULL (nothing to do, or failure, logged)
 * otherwise. */
pgcld_head_signer *pgcld_head_signer_start(pgcld_server *srv);

/* Wakes the thread, lets it write a last checkpoint, and joins it. Accepts NULL. */
void pgcld_head_signer_stop(pgcld_head_signer *c);

#endif
