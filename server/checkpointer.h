/* Periodic signed checkpoints of the audit chain (--checkpoint-interval with --signing-key): a
 * thread that signs the chain head every interval and writes it beside the database (or into
 * --checkpoint-dir), so that a rewrite of the database's history is caught by comparing it with
 * files an attacker with write access to the database alone cannot forge. */
#ifndef PGCLD_CHECKPOINTER_H
#define PGCLD_CHECKPOINTER_H

#include "server.h"

typedef struct pgcld_checkpointer pgcld_checkpointer;

/* Starts the thread when both options are set; returns NULL (nothing to do, or failure, logged)
 * otherwise. */
pgcld_checkpointer *pgcld_checkpointer_start(pgcld_server *srv);

/* Wakes the thread, lets it write a last checkpoint, and joins it. Accepts NULL. */
void pgcld_checkpointer_stop(pgcld_checkpointer *c);

#endif
