/* pgcld audit verify-proof for a proof in the transparency log's shape ("format": "tlog",
 * GET /v1/decisions/{id}/proof?format=tlog, /v1/contests/{id}/proof, .../resolution/proof):
 * core/audit/log/proof_check.h's check over the proof file's members. */
#ifndef PGCLD_CLI_PROOF_TLOG_H
#define PGCLD_CLI_PROOF_TLOG_H

#include <jansson.h>

/* Checks doc (read from file) against the log's note verifier key vkey (required: the key GET /log/
 * lists for the proof's writer) and, when expect_id is not NULL, that the record (decoded by
 * position) is that event's: the proof's kind's id field (a decision's decision_id, a contest's or
 * a resolution's contest_id). Prints one JSON line {valid, format, kind, id, writer_id, leaf_index,
 * tree_size, origin} and returns 0, or prints NOT VALID and the reason to stderr and returns 1. */
int pgcld_cli_verify_tlog_proof(json_t *doc, const char *file, const char *vkey, const char *expect_id);

#endif
