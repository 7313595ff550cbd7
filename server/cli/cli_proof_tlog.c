/* cli_proof_tlog.h: the proof file's members decoded, then proof_check.h's check. */
#include "cli_proof_tlog.h"

#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proof_check.h"

/* Standard padded base64 of exactly n bytes (a hash). */
static bool b64_hash(const char *text, pgcl_merkle_hash *out) {
    size_t got = 0;
    return text && strlen(text) == 44 &&
           sodium_base642bin(out->b, sizeof out->b, text, 44, NULL, &got, NULL, sodium_base64_VARIANT_ORIGINAL) == 0 &&
           got == sizeof out->b;
}

/* A JSON non-negative integer member into *out. */
static bool u64_member(json_t *doc, const char *name, uint64_t *out) {
    json_t *v = json_object_get(doc, name);
    if (!json_is_integer(v) || json_integer_value(v) < 0) return false;
    *out = (uint64_t)json_integer_value(v);
    return true;
}

typedef struct tlog_file {
    pgcl_tlog_proof_claim claim;
    pgcl_merkle_hash path[PGCL_MERKLE_MAX_PATH];
    unsigned char *leaf_data;
    const char *kind;
} tlog_file;

/* The proof's members into f; false with why set. */
static bool read_tlog(json_t *doc, tlog_file *f, char *why, int cap) {
    pgcl_tlog_proof_claim *c = &f->claim;
    json_t *inclusion = json_object_get(doc, "inclusion"), *cp = json_object_get(doc, "checkpoint");
    const char *b64 = json_string_value(json_object_get(doc, "leaf_data"));
    c->writer_id = json_string_value(json_object_get(doc, "writer_id"));
    f->kind = json_string_value(json_object_get(doc, "kind"));
    if (!c->writer_id || !f->kind || !b64 || !u64_member(doc, "leaf_index", &c->leaf_index) ||
        !u64_member(doc, "tree_size", &c->tree_size) ||
        !b64_hash(json_string_value(json_object_get(doc, "root")), &c->root) || !json_is_array(inclusion) ||
        json_array_size(inclusion) > PGCL_MERKLE_MAX_PATH || !(json_is_null(cp) || json_is_string(cp))) {
        snprintf(why, (size_t)cap,
                 "not a tlog proof: kind, writer_id, leaf_index, leaf_data, tree_size, root, "
                 "inclusion and checkpoint are required");
        return false;
    }
    c->path_len = (int)json_array_size(inclusion);
    for (int i = 0; i < c->path_len; i++)
        if (!b64_hash(json_string_value(json_array_get(inclusion, (size_t)i)), &f->path[i])) {
            snprintf(why, (size_t)cap, "inclusion[%d] is not the base64 of a 32-byte hash", i);
            return false;
        }
    c->path = f->path;
    c->checkpoint = json_string_value(cp);
    size_t cap_bytes = strlen(b64) / 4 * 3 + 3, len = 0;
    if (!(f->leaf_data = malloc(cap_bytes)) || sodium_base642bin(f->leaf_data, cap_bytes, b64, strlen(b64), NULL, &len,
                                                                 NULL, sodium_base64_VARIANT_ORIGINAL) != 0) {
        snprintf(why, (size_t)cap, "leaf_data is not base64");
        return false;
    }
    c->leaf_data = f->leaf_data;
    c->leaf_len = len;
    return true;
}

int pgcld_cli_verify_tlog_proof(json_t *doc, const char *file, const char *vkey, const char *expect_id) {
    tlog_file f = {0};
    pgcl_note_verifier key;
    pgcl_record record;
    char why[512], id[37] = "";
    bool valid = false;
    if (!vkey) {
        snprintf(why, sizeof why, "a tlog proof needs --key: the log's note verifier key (GET /log/ lists it)");
    } else if (pgcl_note_verifier_parse(vkey, &key, why, sizeof why) == PGCL_OK &&
               read_tlog(doc, &f, why, sizeof why)) {
        pgcl_tlog_proof_expect expect = {.kind = f.kind, .id = expect_id};
        valid = pgcl_tlog_proof_check(&f.claim, &key, &expect, &record, why, sizeof why) == PGCL_OK &&
                pgcl_tlog_record_id(&record, f.kind, id);
    }
    int rc = 1;
    if (valid) {
        json_t *out =
            json_pack("{s:b, s:s, s:s, s:s, s:s, s:I, s:I, s:s}", "valid", 1, "format", "tlog", "kind", f.kind, "id",
                      id, "writer_id", f.claim.writer_id, "leaf_index", (json_int_t)f.claim.leaf_index, "tree_size",
                      (json_int_t)f.claim.tree_size, "origin", key.name);
        char *line = out ? json_dumps(out, JSON_COMPACT) : NULL;
        rc = line && printf("%s\n", line) > 0 && fflush(stdout) == 0 ? 0 : 1;
        free(line);
        json_decref(out);
    } else {
        fprintf(stderr, "pgcld audit verify-proof: %s: NOT VALID: %s\n", file, why);
    }
    free(f.leaf_data);
    return rc;
}
