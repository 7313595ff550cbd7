/* Reading version-2 leaves back by their layout (core/audit/chain_decoding.c; issue 27) and the
 * proof check that relies on it (pgcl_chain_proof_check):
 *  - every leaf the encoders make (pgcl_chain_leaf_data_of_values: decisions plain, extended, with
 *    a stored input, with a recorded digest that differs, without an input; an admin event, a
 *    contest, a resolution) decodes to its values, column by column;
 *  - anything else is refused: every truncation, a value appended, an unknown tag or kind, an
 *    extension of NULLs, a type a column never holds;
 *  - a one-leaf proof of a decision verifies, and the same proof relabelled to any other text its
 *    leaf holds (the item id and request id a client chose among them), to a row seq it does not
 *    hold, or built from a contest's leaf that holds the decision's id, does not. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chain_decoding.h"
#include "chain_proof.h"
#include "test_util.h"

#define DECISIONS 0
#define CONTESTS 2

static const char VICTIM_ID[] = "01a1fdee-f6d5-7001-bd28-0e186b68696d"; /* another decision's id */

static pgcl_chain_value v_null(void) {
    return (pgcl_chain_value){.type = PGCL_CHAIN_VALUE_NULL};
}
static pgcl_chain_value v_int(int64_t i) {
    return (pgcl_chain_value){.type = PGCL_CHAIN_VALUE_INTEGER, .integer = i};
}
static pgcl_chain_value v_real(double r) {
    return (pgcl_chain_value){.type = PGCL_CHAIN_VALUE_REAL, .real = r};
}
static pgcl_chain_value v_text(const char *s) {
    return (pgcl_chain_value){.type = PGCL_CHAIN_VALUE_TEXT, .bytes = s, .len = strlen(s)};
}
static pgcl_chain_value v_blob(const void *p, size_t n) {
    return (pgcl_chain_value){.type = PGCL_CHAIN_VALUE_BLOB, .bytes = p, .len = n};
}

static const float VECTOR[4] = {0.25f, -1.5f, 3.0f, 0.0f};
static const unsigned char DIGEST[32] = {1,  2,  3,  4,  5,  6,  7,  8,  9,  10, 11, 12, 13, 14, 15, 16,
                                         17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32};
static const unsigned char OTHER_DIGEST[32] = {9};

/* A decisions row as the row SELECT gives it (26 values: the encoded 21, input_digest, the
 * extension's 4); the item id and request id are another decision's id, as a client may choose. */
typedef struct decision_row {
    pgcl_chain_value v[PGCL_CHAIN_DECISIONS_EXTENSION_COLUMN + PGCL_CHAIN_DECISIONS_EXTENSION_COLUMNS];
} decision_row;

static decision_row decision_values(int64_t seq, const char *decision_id, bool extended, int input_kind) {
    decision_row r;
    int i = 0;
    r.v[i++] = v_int(seq);
    r.v[i++] = v_text(decision_id);
    r.v[i++] = v_text("2026-01-02T03:04:05.123456Z");
    r.v[i++] = v_text(VICTIM_ID); /* request_id: a client's X-Request-Id */
    r.v[i++] = v_text(VICTIM_ID); /* item_id: a client's id */
    r.v[i++] = v_text("toxicity");
    r.v[i++] = v_text("1");
    r.v[i++] = v_text("5c1e8a0b9d7f6e5d4c3b2a1908f7e6d5c4b3a29180f7e6d5c4b3a29180f7e6d5");
    r.v[i++] = v_text("toxic");
    r.v[i++] = v_int(1);
    r.v[i++] = v_text("{\"non_toxic\":0.25,\"toxic\":0.75}");
    r.v[i++] = v_real(0.75);
    r.v[i++] = v_text("block");
    r.v[i++] = v_text("{\"kind\":\"threshold\"}");
    r.v[i++] = v_real(0.5);
    r.v[i++] = v_real(0.7);
    r.v[i++] = v_blob(VECTOR, sizeof VECTOR);
    r.v[i++] = v_text("ab12ab12ab12ab12ab12ab12ab12ab12ab12ab12ab12ab12ab12ab12ab12ab12");
    r.v[i++] = v_int(1234);
    /* input_kind 0: none stored; 1: stored (its SHA-256), recorded equal; 2: recorded differs */
    r.v[i++] = input_kind ? v_blob(DIGEST, sizeof DIGEST) : v_null();
    r.v[i++] = input_kind ? v_text("f16") : v_null();
    r.v[i++] = input_kind == 2 ? v_blob(OTHER_DIGEST, sizeof OTHER_DIGEST)
               : input_kind    ? v_blob(DIGEST, sizeof DIGEST)
                               : v_null();
    r.v[i++] = extended ? v_text("4bf92f3577b34da6a3ce929d0e0e4736") : v_null();
    r.v[i++] = v_null(); /* content_date: a NULL inside an extension */
    r.v[i++] = extended ? v_text("[\"DE\",\"FR\"]") : v_null();
    r.v[i++] = extended ? v_text("DE") : v_null();
    return r;
}

static bool same_value(const pgcl_chain_value *a, const pgcl_chain_value *b) {
    if (a->type != b->type) return false;
    switch (a->type) {
    case PGCL_CHAIN_VALUE_INTEGER:
        return a->integer == b->integer;
    case PGCL_CHAIN_VALUE_REAL:
        return memcmp(&a->real, &b->real, sizeof a->real) == 0;
    case PGCL_CHAIN_VALUE_TEXT:
    case PGCL_CHAIN_VALUE_BLOB:
        return a->len == b->len && (a->len == 0 || memcmp(a->bytes, b->bytes, a->len) == 0);
    default:
        return true;
    }
}

/* The decisions leaf of r decodes to r's encoded values in their places (the input's place: the
 * digest value the encoder made, checked by length only). */
static void check_decision_round_trip(const char *what, const decision_row *r, bool extended, int input_kind) {
    unsigned char *data;
    size_t len;
    pgcl_chain_leaf_data_of_values(DECISIONS, r->v, (int)(sizeof r->v / sizeof r->v[0]), &data, &len);
    pgcl_chain_leaf leaf;
    char why[256] = "";
    CHECK(pgcl_chain_leaf_decode(data, len, &leaf, why, sizeof why) == PGCL_OK, "%s: %s", what, why);
    CHECK(leaf.table == DECISIONS && leaf.n_columns == PGCL_CHAIN_DECISION_COLUMNS && leaf.extended == extended,
          "%s: table %d, %d columns, extended %d", what, leaf.table, leaf.n_columns, leaf.extended);
    for (int i = 0; i < PGCL_CHAIN_DECISION_COLUMNS; i++) {
        const pgcl_chain_value *want =
            i < PGCL_CHAIN_DECISION_TRACE_ID ? &r->v[i] : &r->v[i + 1]; /* past input_digest */
        if (i == PGCL_CHAIN_DECISION_INPUT_DIGEST) {
            size_t digest_len = input_kind == 0 ? 0 : input_kind == 1 ? 32 : 64;
            CHECK(leaf.columns[i].type == (input_kind ? PGCL_CHAIN_VALUE_BLOB : PGCL_CHAIN_VALUE_NULL) &&
                      leaf.columns[i].len == digest_len,
                  "%s: the input's place", what);
            continue;
        }
        CHECK(same_value(&leaf.columns[i], want), "%s: column %s", what, pgcl_chain_leaf_column_name(DECISIONS, i));
    }
    free(data);
}

static void test_decision_leaves_decode(void) {
    for (int input_kind = 0; input_kind < 3; input_kind++) {
        for (int extended = 0; extended < 2; extended++) {
            char what[64];
            snprintf(what, sizeof what, "decision (input %d, extended %d)", input_kind, extended);
            decision_row r = decision_values(7, "01a1fdee-0000-7000-8000-000000000001", extended, input_kind);
            check_decision_round_trip(what, &r, extended, input_kind);
        }
    }
}

static void test_other_leaves_decode(void) {
    const pgcl_chain_value admin[] = {
        v_int(3),     v_text("ev-1"), v_text("2026-01-02T03:04:05Z"), v_text("admin (k1)"), v_text("key.create"),
        v_text("k2"), v_text("{}")};
    const pgcl_chain_value contest[] = {
        v_int(4), v_text("ct-1"), v_text(VICTIM_ID), v_text("2026-01-02T03:04:05Z"), v_text("reviewer (k3)"),
        v_null(), v_text("wrong")};
    const pgcl_chain_value resolution[] = {v_int(5),    v_text("ct-1"),   v_text("2026-01-03T03:04:05Z"),
                                           v_text("r"), v_text("k4"),     v_text("overturned"),
                                           v_null(),    v_text("a quote")};
    const struct {
        int table;
        const pgcl_chain_value *v;
        int n;
    } rows[] = {{1, admin, 7}, {2, contest, 7}, {3, resolution, 8}};
    for (size_t k = 0; k < sizeof rows / sizeof rows[0]; k++) {
        unsigned char *data;
        size_t len;
        pgcl_chain_leaf_data_of_values(rows[k].table, rows[k].v, rows[k].n, &data, &len);
        pgcl_chain_leaf leaf;
        char why[256] = "";
        CHECK(pgcl_chain_leaf_decode(data, len, &leaf, why, sizeof why) == PGCL_OK, "%s: %s",
              pgcl_chain_tables[rows[k].table].name, why);
        CHECK(leaf.table == rows[k].table && leaf.n_columns == rows[k].n && !leaf.extended, "%s: layout",
              pgcl_chain_tables[rows[k].table].name);
        for (int i = 0; i < rows[k].n; i++)
            CHECK(same_value(&leaf.columns[i], &rows[k].v[i]), "%s: column %d", pgcl_chain_tables[rows[k].table].name,
                  i);
        free(data);
    }
}

static bool decodes(const unsigned char *data, size_t len) {
    pgcl_chain_leaf leaf;
    char why[256];
    return pgcl_chain_leaf_decode(data, len, &leaf, why, sizeof why) == PGCL_OK;
}

/* The byte offset where the extension's values begin in an extended decisions leaf. */
static size_t plain_leaf_length(void) {
    decision_row r = decision_values(7, "01a1fdee-0000-7000-8000-000000000001", false, 1);
    unsigned char *data;
    size_t len;
    pgcl_chain_leaf_data_of_values(DECISIONS, r.v, (int)(sizeof r.v / sizeof r.v[0]), &data, &len);
    free(data);
    return len;
}

static void test_what_is_not_a_leaf_is_refused(void) {
    decision_row r = decision_values(7, "01a1fdee-0000-7000-8000-000000000001", true, 1);
    unsigned char *data;
    size_t len;
    pgcl_chain_leaf_data_of_values(DECISIONS, r.v, (int)(sizeof r.v / sizeof r.v[0]), &data, &len);
    CHECK(decodes(data, len), "the extended leaf itself");
    size_t plain = plain_leaf_length();
    for (size_t cut = 0; cut < len; cut++) /* every prefix but the plain leaf it begins with */
        CHECK(decodes(data, cut) == (cut == plain), "a leaf cut to %zu of %zu bytes", cut, len);
    CHECK(!decodes(NULL, 0), "no data");

    unsigned char *longer = malloc(len + 9);
    memcpy(longer, data, len);
    longer[len] = 1; /* an INTEGER 0 appended */
    memset(longer + len + 1, 0, 8);
    CHECK(!decodes(longer, len + 9), "a value past the layout");
    longer[len] = 0; /* a NULL appended */
    CHECK(!decodes(longer, len + 1), "a NULL past the layout");
    free(longer);

    unsigned char *bad = malloc(len);
    memcpy(bad, data, len);
    bad[plain] = 7; /* the trace id's tag */
    CHECK(!decodes(bad, len), "an unknown tag");
    memcpy(bad, data, len);
    bad[5] = 'D'; /* the kind "Decisions" */
    CHECK(!decodes(bad, len), "an unknown kind");
    memcpy(bad, data, len);
    bad[5 + 9] = 3; /* seq's tag: TEXT (its 8 bytes then read as a length) */
    CHECK(!decodes(bad, len), "seq as a TEXT");
    free(bad);
    free(data);

    /* an extension of four NULLs: never written (a plain leaf with NULLs appended) */
    decision_row plain_row = decision_values(7, "01a1fdee-0000-7000-8000-000000000001", false, 1);
    pgcl_chain_leaf_data_of_values(DECISIONS, plain_row.v, (int)(sizeof plain_row.v / sizeof plain_row.v[0]), &data,
                                   &len);
    unsigned char *nulls = malloc(len + 4);
    memcpy(nulls, data, len);
    memset(nulls + len, 0, 4);
    CHECK(decodes(data, len) && !decodes(nulls, len + 4), "an extension of NULLs");
    free(nulls);
    free(data);

    /* a type a column never holds: decision_id as a BLOB */
    decision_row blob_id = decision_values(7, "x", false, 0);
    blob_id.v[PGCL_CHAIN_DECISION_ID] = v_blob(VICTIM_ID, strlen(VICTIM_ID));
    pgcl_chain_leaf_data_of_values(DECISIONS, blob_id.v, (int)(sizeof blob_id.v / sizeof blob_id.v[0]), &data, &len);
    CHECK(!decodes(data, len), "decision_id as a BLOB");
    free(data);
}

/* A proof of a one-leaf commit, entry 1 of a one-entry log, around data (owned by the caller). */
static pgcl_chain_proof one_leaf_proof(unsigned char *data, size_t len, int64_t row_seq) {
    pgcl_chain_proof p;
    memset(&p, 0, sizeof p);
    p.row_seq = row_seq;
    p.leaf_data = data;
    p.leaf_data_len = len;
    p.leaf_hash = pgcl_merkle_leaf_hash(data, len);
    p.tree_size = 1;
    p.root = p.leaf_hash;
    p.entry_seq = 1;
    memcpy(p.prev_hash, pgcl_chain_zero_hash, sizeof p.prev_hash);
    char root_hex[65];
    pgcl_merkle_to_hex(&p.root, root_hex);
    pgcl_chain_entry_hash(1, PGCL_CHAIN_COMMIT_KIND, strlen(PGCL_CHAIN_COMMIT_KIND), 1, root_hex, 64, p.prev_hash, 64,
                          p.entry_hash);
    pgcl_merkle_hash entry;
    pgcl_merkle_from_hex(p.entry_hash, &entry);
    p.log_size = 1;
    p.log_root = pgcl_merkle_leaf_hash(entry.b, sizeof entry.b);
    return p;
}

static bool proof_checks(const pgcl_chain_proof *p, const char *decision_id, char *why, int cap) {
    return pgcl_chain_proof_check(p, decision_id, NULL, why, cap);
}

static void test_relabelled_proofs_fail(void) {
    const char *id = "01a1fdee-0000-7000-8000-000000000001";
    decision_row r = decision_values(7, id, true, 1);
    unsigned char *data;
    size_t len;
    pgcl_chain_leaf_data_of_values(DECISIONS, r.v, (int)(sizeof r.v / sizeof r.v[0]), &data, &len);
    char why[512] = "";
    pgcl_chain_proof p = one_leaf_proof(data, len, 7);
    CHECK(proof_checks(&p, id, why, sizeof why), "the honest proof: %s", why);
    pgcl_chain_proof unseq = one_leaf_proof(data, len, 0);
    CHECK(proof_checks(&unseq, id, why, sizeof why), "the honest proof, without its row seq (a file's): %s", why);
    /* relabelled to each text of the leaf: the planted ids, the trace id, the facts, the model, ... */
    pgcl_chain_leaf leaf;
    CHECK(pgcl_chain_leaf_decode(data, len, &leaf, why, sizeof why) == PGCL_OK, "%s", why);
    int texts = 0;
    for (int i = 0; i < leaf.n_columns; i++) {
        if (leaf.columns[i].type != PGCL_CHAIN_VALUE_TEXT || i == PGCL_CHAIN_DECISION_ID) continue;
        char claimed[256];
        snprintf(claimed, sizeof claimed, "%.*s", (int)leaf.columns[i].len, (const char *)leaf.columns[i].bytes);
        why[0] = 0;
        CHECK(!proof_checks(&p, claimed, why, sizeof why), "relabelled to its %s",
              pgcl_chain_leaf_column_name(DECISIONS, i));
        CHECK(strstr(why, "not decision") != NULL, "relabelled to its %s: %s",
              pgcl_chain_leaf_column_name(DECISIONS, i), why);
        texts++;
    }
    CHECK(texts == 15, "%d texts relabelled to", texts);
    CHECK(!proof_checks(&p, VICTIM_ID, why, sizeof why), "relabelled to the id planted as item and request id");
    pgcl_chain_proof other_seq = one_leaf_proof(data, len, 8);
    CHECK(!proof_checks(&other_seq, id, why, sizeof why) && strstr(why, "row 7, not row 8"), "another row seq: %s",
          why);
    free(data);

    /* a contest's leaf holds the contested decision's id as its decision_id column */
    const pgcl_chain_value contest[] = {
        v_int(4), v_text("ct-1"), v_text(VICTIM_ID), v_text("2026-01-02T03:04:05Z"), v_text("reviewer (k3)"),
        v_null(), v_text("wrong")};
    pgcl_chain_leaf_data_of_values(CONTESTS, contest, 7, &data, &len);
    pgcl_chain_proof c = one_leaf_proof(data, len, 0);
    why[0] = 0;
    CHECK(!proof_checks(&c, VICTIM_ID, why, sizeof why) && strstr(why, "a row of contests"),
          "a contest's leaf as the contested decision's: %s", why);
    free(data);
}

int main(void) {
    test_decision_leaves_decode();
    test_other_leaves_decode();
    test_what_is_not_a_leaf_is_refused();
    test_relabelled_proofs_fail();
    return test_finish("test_chain_decoding");
}
