/* proof_check.h: the offline check of a tlog-shape proof. */
#include "proof_check.h"

#include <string.h>

bool pgcl_tlog_record_id(const pgcl_record *r, const char *kind, char out[37]) {
    out[0] = '\0';
    if (strcmp(kind, "decision") == 0 && r->kind == PGCL_RECORD_DECISION)
        pgcl_record_uuid_format(r->decision.decision_id, out);
    else if (strcmp(kind, "contest") == 0 && r->kind == PGCL_RECORD_CONTEST)
        pgcl_record_uuid_format(r->contest.contest_id, out);
    else if (strcmp(kind, "resolution") == 0 && r->kind == PGCL_RECORD_RESOLUTION)
        pgcl_record_uuid_format(r->resolution.contest_id, out);
    else
        return false;
    return true;
}

/* The checkpoint signs (tree_size, root) of writer_id's log with key. */
static pgcl_status check_checkpoint(const pgcl_tlog_proof_claim *c, const pgcl_note_verifier *key, char *why, int cap) {
    if (!c->checkpoint) {
        pgcl_errorf(why, cap, "no checkpoint: nothing signs the proof's root (ask again after the next checkpoint)");
        return PGCL_ERR_NOT_FOUND;
    }
    pgcl_tlog_checkpoint cp;
    pgcl_status st;
    pgcl_note *n =
        pgcl_tlog_checkpoint_open(c->checkpoint, strlen(c->checkpoint), key, NULL, NULL, 0, 0, &cp, &st, why, cap);
    if (!n) return st;
    pgcl_note_destroy(n);
    size_t origin_len = strlen(cp.origin), id_len = strlen(c->writer_id);
    if (id_len == 0 || origin_len <= id_len || cp.origin[origin_len - id_len - 1] != '/' ||
        strcmp(cp.origin + origin_len - id_len, c->writer_id) != 0) {
        pgcl_errorf(why, cap, "the checkpoint is of log '%.255s', not of writer '%.128s'", cp.origin, c->writer_id);
        return PGCL_ERR_MISMATCH;
    }
    if (cp.size != c->tree_size || memcmp(&cp.root, &c->root, sizeof cp.root) != 0) {
        pgcl_errorf(why, cap, "the checkpoint signs the tree of %llu leaves, not the proof's tree of %llu and its root",
                    (unsigned long long)cp.size, (unsigned long long)c->tree_size);
        return PGCL_ERR_MISMATCH;
    }
    return PGCL_OK;
}

/* The record is the expected event, read at its position. */
static pgcl_status check_record(const pgcl_tlog_proof_claim *c, const pgcl_tlog_proof_expect *e, pgcl_record *r,
                                char *why, int cap) {
    char field[200];
    pgcl_status st = pgcl_record_decode(c->leaf_data, c->leaf_len, r, field, sizeof field);
    if (st != PGCL_OK) {
        pgcl_errorf(why, cap, "leaf_data is not a record: %s", field);
        return PGCL_ERR_FORMAT;
    }
    if (!e || !e->kind) return PGCL_OK;
    char id[37];
    if (!pgcl_tlog_record_id(r, e->kind, id)) {
        pgcl_errorf(why, cap, "leaf_data is a %s record, not a %s's", pgcl_record_kind_name(r->kind), e->kind);
        return PGCL_ERR_MISMATCH;
    }
    if (e->id && strcmp(id, e->id) != 0) {
        pgcl_errorf(why, cap, "this is a proof of %s %s, not of %.64s", e->kind, id, e->id);
        return PGCL_ERR_MISMATCH;
    }
    return PGCL_OK;
}

pgcl_status pgcl_tlog_proof_check(const pgcl_tlog_proof_claim *c, const pgcl_note_verifier *key,
                                  const pgcl_tlog_proof_expect *expect, pgcl_record *record, char *why, int cap) {
    if (!c->writer_id || !c->leaf_data || c->leaf_len == 0 || !key) {
        pgcl_errorf(why, cap, "a proof needs writer_id, leaf_data and a log key to check against");
        return PGCL_ERR_FORMAT;
    }
    pgcl_merkle_hash leaf = pgcl_merkle_leaf_hash(c->leaf_data, c->leaf_len);
    if (!pgcl_merkle_verify_inclusion(&leaf, c->leaf_index, c->tree_size, c->path, c->path_len, &c->root)) {
        pgcl_errorf(why, cap, "leaf_data at leaf_index %llu does not prove to root in a tree of %llu",
                    (unsigned long long)c->leaf_index, (unsigned long long)c->tree_size);
        return PGCL_ERR_MISMATCH;
    }
    pgcl_status st = check_checkpoint(c, key, why, cap);
    return st == PGCL_OK ? check_record(c, expect, record, why, cap) : st;
}
