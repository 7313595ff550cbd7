/* The JSON of the reviewers' read answers, built from the rows core's reads return (core/
 * decision_record.h, decision_lists.h, contest_reads.h, stats_reads.h). Members come in the order
 * the API documents (openapi.yaml) and the tests pin; strings are copied, so the rows' arena may be
 * released as soon as a function returns. Each returns a new reference, or NULL when out of memory
 * (or when a stored string is not UTF-8, which jansson refuses). */
#ifndef PGCLD_REVIEW_JSON_H
#define PGCLD_REVIEW_JSON_H

#include <jansson.h>

#include "contest_reads.h"
#include "decision_lists.h"
#include "chain.h"
#include "chain_proof.h"
#include "decision_record.h"
#include "stats_reads.h"

/* GET /v1/decisions/{id} without nearest_prototypes (the route adds it): every column but the
 * stored input (vector as numbers, probabilities and policy as the stored JSON, null where that
 * is not JSON), input_stored, contest_status, provenance, chain {seq, hash} or null, contests
 * oldest first each with its resolution or null, effective_outcome. */
json_t *pgcld_decision_record_json(const pgcl_decision_record *r);

/* One row of GET /v1/decisions. */
json_t *pgcld_decision_summary_json(const pgcl_decision_summary *r);

/* The rows of a decisions page, as an array. */
json_t *pgcld_decision_rows_json(const pgcl_decision_page *page);

/* The rows of a contests page (GET /v1/contests), as an array. */
json_t *pgcld_contest_rows_json(const pgcl_contest_page *page);

/* GET /v1/audit/stats: {since, until, decisions {...}, contests {...}}; since/until as asked
 * (NULL: null). Durations are rounded to milliseconds. */
/* An old chain's inclusion proof ("format":"chain-v2") as GET /v1/decisions/{id}/proof answers it
 * for a decision without a leaf, or asked with ?format=chain-v2 (openapi.yaml, InclusionProof):
 * what docs/verify_proof.py and pgcld audit verify-proof read. NULL when out of memory. */
json_t *pgcld_inclusion_proof_json(const char *decision_id, const pgcl_chain_proof *p);

/* The writers of a verify report of the PostgreSQL store (GET /v1/audit/verify, pgcld audit
 * verify): [{writer_id, head_seq, head_hash, log_root (null unless its walk went through),
 * intact}...] in the report's order. NULL when out of memory. */
json_t *pgcld_chain_writers_json(const pgcl_chain_report *rep);

/* A consistency proof as GET /v1/audit/consistency answers it (openapi.yaml, ConsistencyProof):
 * {first, second, first_root, second_root, path}. NULL when out of memory. */
json_t *pgcld_consistency_proof_json(const pgcl_log_consistency *c);

json_t *pgcld_audit_stats_json(const pgcl_audit_stats *s, const char *since, const char *until);

#endif
