/* The daemon's witnesses (issue 28, c2sp.org/tlog-witness): --witness NAME=URL,KEY parsed at start,
 * a witness manager (core/audit/log/witness.h) fed with every checkpoint the checkpointer signs,
 * consistency proofs read from the store's tiles on the manager's thread, and each cosignature
 * stored beside its checkpoint (pgcl_audit_log_add_cosignatures) so that GET /log/<w>/checkpoint
 * serves it. Scoring never waits for a witness: the checkpointer only hands the manager a copy. */
#ifndef PGCLD_WITNESSES_H
#define PGCLD_WITNESSES_H

#include "server.h"
#include "witness.h"

/* Splits a --witness list (specs separated by spaces, config.h's witness) and parses it with
 * pgcl_witness_parse_all into out[0:*n) (PGCL_WITNESS_MAX room). 0, or -1 with err naming the spec
 * at fault. An empty list gives *n = 0. */
int pgcld_witnesses_parse(const char *list, pgcl_witness out[PGCL_WITNESS_MAX], int *n, char *err, int cap);

/* With --witness: parses the list (a bad one: -1, the daemon refuses to start), reads which
 * witnesses already cosigned the latest stored checkpoint (their known size; else 0), starts the
 * manager, hands it that checkpoint and subscribes it to the checkpointer's new ones. Without a
 * checkpointer (no --signing-key, a read-only store) witnesses cannot be given anything: -1 with
 * err saying so. Without --witness: 0, nothing started. Call after the checkpointer started. */
int pgcld_witnesses_start(pgcld_server *srv, char *err, int cap);

/* The witnesses' states into out[0:cap) (for /metrics); how many there are (0 without any). */
int pgcld_witnesses_states(pgcld_server *srv, pgcl_witness_state *out, int cap);

/* Unsubscribes the manager from the checkpointer, stops it (an exchange in flight ends within its
 * timeouts) and frees it. Call before the checkpointer is destroyed. Does nothing when none was
 * started. */
void pgcld_witnesses_stop(pgcld_server *srv);

#endif
