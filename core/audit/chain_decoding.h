/* Reading a version-2 Merkle leaf back by its layout (docs/audit.md, "Encoding version 2" and
 * "Decision leaf, extended"): the inverse of chain_encoding.c's leaf encoders, for whoever holds
 * leaf data and a claim about it (an inclusion proof names a decision). A claim is true only of the
 * field at its position: a leaf's texts include the ones a client chose (an item id, an
 * X-Request-Id), which can hold any other decision's id, so searching the leaf's bytes for the
 * claimed value proves nothing.
 *
 * Leaf data = TEXT kind (a table of pgcl_chain_tables), then that table's columns, each in the
 * value encoding of chain_encoding.h, with exactly the documented count and types: decisions 21
 * columns, or 25 when the extension (migration 0011) is there, which is then not all NULL; an
 * admin event or a contest 7, a resolution 8. Anything else (a truncated value, an unknown tag, a
 * column too many or too few, a type the column never has) is not a leaf. */
#ifndef PGCL_CHAIN_DECODING_H
#define PGCL_CHAIN_DECODING_H

#include <stdbool.h>
#include <stddef.h>

#include "chain_encoding.h"
#include "status.h"

/* A decisions leaf's columns, at their positions after the kind (the row SELECT's order, with the
 * input's place holding its digest and the extension after input_dtype). */
typedef enum pgcl_chain_decision_column {
    PGCL_CHAIN_DECISION_SEQ,
    PGCL_CHAIN_DECISION_ID,
    PGCL_CHAIN_DECISION_CREATED_AT,
    PGCL_CHAIN_DECISION_REQUEST_ID,
    PGCL_CHAIN_DECISION_ITEM_ID,
    PGCL_CHAIN_DECISION_MODEL_NAME,
    PGCL_CHAIN_DECISION_MODEL_VERSION,
    PGCL_CHAIN_DECISION_MODEL_SHA256,
    PGCL_CHAIN_DECISION_LABEL,
    PGCL_CHAIN_DECISION_LABEL_INDEX,
    PGCL_CHAIN_DECISION_PROBABILITIES,
    PGCL_CHAIN_DECISION_TOXICITY,
    PGCL_CHAIN_DECISION_DECISION,
    PGCL_CHAIN_DECISION_POLICY,
    PGCL_CHAIN_DECISION_T_REVIEW,
    PGCL_CHAIN_DECISION_T_BLOCK,
    PGCL_CHAIN_DECISION_VECTOR,
    PGCL_CHAIN_DECISION_INPUT_SHA256,
    PGCL_CHAIN_DECISION_LATENCY_US,
    PGCL_CHAIN_DECISION_INPUT_DIGEST, /* BLOB SHA-256 of the stored input (or 64 bytes, or NULL) */
    PGCL_CHAIN_DECISION_INPUT_DTYPE,
    PGCL_CHAIN_DECISION_TRACE_ID, /* the extension: NULL in a leaf without it */
    PGCL_CHAIN_DECISION_CONTENT_DATE,
    PGCL_CHAIN_DECISION_TERRITORIAL_SCOPE,
    PGCL_CHAIN_DECISION_CONTENT_LANGUAGE,
    PGCL_CHAIN_DECISION_COLUMNS
} pgcl_chain_decision_column;

#define PGCL_CHAIN_LEAF_MAX_COLUMNS PGCL_CHAIN_DECISION_COLUMNS

/* A decoded leaf. Its TEXT and BLOB values point into the leaf data, which must outlive it. */
typedef struct pgcl_chain_leaf {
    int table;     /* pgcl_chain_tables index: the leaf's kind */
    int n_columns; /* the table's columns; for decisions always PGCL_CHAIN_DECISION_COLUMNS */
    bool extended; /* decisions: the extension was encoded (else its columns here are NULL) */
    pgcl_chain_value columns[PGCL_CHAIN_LEAF_MAX_COLUMNS];
} pgcl_chain_leaf;

/* Decodes data[0..len) as the leaf of one row by its kind's layout (above). PGCL_OK, or
 * PGCL_ERR_FORMAT with why saying where it is not a leaf. Pure; any thread. */
pgcl_status pgcl_chain_leaf_decode(const unsigned char *data, size_t len, pgcl_chain_leaf *out, char *why, int cap);

/* The name of column i of table `table` ("decision_id"), for messages. */
const char *pgcl_chain_leaf_column_name(int table, int i);

/* Whether v is exactly the TEXT value s[0..strlen(s)): same type, length and bytes. */
bool pgcl_chain_value_is_text(const pgcl_chain_value *v, const char *s);

#endif
