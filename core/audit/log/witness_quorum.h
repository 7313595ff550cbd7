/* `pgcld audit verify --witness-quorum N` (issue 28): every log of a store must have a latest
 * checkpoint signed by its log key and cosigned by at least N distinct configured witnesses. Once N
 * independent witnesses cosigned a checkpoint, the operator cannot show another history of that
 * log without each of them noticing (witness.h). Store-neutral: reads through audit_log.h. */
#ifndef PGCL_WITNESS_QUORUM_H
#define PGCL_WITNESS_QUORUM_H

#include <stdbool.h>
#include <stdint.h>

#include "audit_log.h"
#include "note.h"
#include "witness.h"

/* One log's verdict. */
typedef struct pgcl_log_quorum {
    char writer_id[PGCL_LOG_WRITER_ID_MAX + 1];
    uint64_t size;  /* of its latest checkpoint (0: none stored) */
    int cosigners;  /* distinct configured witnesses whose cosignature verifies (-1: not counted) */
    bool ok;        /* signed by its log key, cosigners >= quorum */
    char reason[512]; /* when not ok: why, naming the log and the count */
} pgcl_log_quorum;

/* Checks every log of a (pgcl_audit_logs) into out[0:cap), *n the number of logs (may exceed cap:
 * those beyond are checked, not reported). For each: its latest checkpoint (none: not ok) must be
 * a note signed by the log key of log_keys[0:n_keys) whose name is the checkpoint's origin (none
 * of them: not ok), an origin ending in "/<writer id>", and carry valid cosignatures of at least
 * quorum distinct witnesses of witnesses[0:n_witnesses) (pgcl_witness_count_cosignatures: a
 * configured witness's line that does not verify fails the log). *all_ok: every log ok and at
 * least one log. Returns PGCL_OK when the check ran (whatever its verdict), else the store's error
 * with err set. */
pgcl_status pgcl_log_witness_quorum(pgcl_audit *a, const pgcl_note_verifier *log_keys, int n_keys,
                                    const pgcl_witness *witnesses, int n_witnesses, int quorum, pgcl_log_quorum *out,
                                    int cap, int *n, bool *all_ok, char *err, int err_cap);

#endif
