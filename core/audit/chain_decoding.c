/* Version-2 leaves read back by their layout (chain_decoding.h; docs/audit.md). The layouts below
 * are the column lists of chain_encoding.c's row SELECTs, written out with each column's type; the
 * static asserts and tests/core/test_chain_decoding.c (every leaf the encoders make decodes to its
 * values) hold the two files together. */
#include "chain_decoding.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* A table's leaf layout: one letter per column, I INTEGER, R REAL, T TEXT, B BLOB, lower case for
 * "that type or NULL"; every leaf has the first plain_columns, a decisions leaf may have all. */
typedef struct leaf_layout {
    const char *types;
    int plain_columns;
    const char *const *names;
} leaf_layout;

/* decisions' column names by their enum (chain_decoding.h) */
static const char *const DECISION_NAMES[PGCL_CHAIN_DECISION_COLUMNS] = {
    [PGCL_CHAIN_DECISION_SEQ] = "seq",
    [PGCL_CHAIN_DECISION_ID] = "decision_id",
    [PGCL_CHAIN_DECISION_CREATED_AT] = "created_at",
    [PGCL_CHAIN_DECISION_REQUEST_ID] = "request_id",
    [PGCL_CHAIN_DECISION_ITEM_ID] = "item_id",
    [PGCL_CHAIN_DECISION_MODEL_NAME] = "model_name",
    [PGCL_CHAIN_DECISION_MODEL_VERSION] = "model_version",
    [PGCL_CHAIN_DECISION_MODEL_SHA256] = "model_sha256",
    [PGCL_CHAIN_DECISION_LABEL] = "label",
    [PGCL_CHAIN_DECISION_LABEL_INDEX] = "label_index",
    [PGCL_CHAIN_DECISION_PROBABILITIES] = "probabilities",
    [PGCL_CHAIN_DECISION_TOXICITY] = "toxicity",
    [PGCL_CHAIN_DECISION_DECISION] = "decision",
    [PGCL_CHAIN_DECISION_POLICY] = "policy",
    [PGCL_CHAIN_DECISION_T_REVIEW] = "t_review",
    [PGCL_CHAIN_DECISION_T_BLOCK] = "t_block",
    [PGCL_CHAIN_DECISION_VECTOR] = "vector",
    [PGCL_CHAIN_DECISION_INPUT_SHA256] = "input_sha256",
    [PGCL_CHAIN_DECISION_LATENCY_US] = "latency_us",
    [PGCL_CHAIN_DECISION_INPUT_DIGEST] = "input_digest",
    [PGCL_CHAIN_DECISION_INPUT_DTYPE] = "input_dtype",
    [PGCL_CHAIN_DECISION_TRACE_ID] = "trace_id",
    [PGCL_CHAIN_DECISION_CONTENT_DATE] = "content_date",
    [PGCL_CHAIN_DECISION_TERRITORIAL_SCOPE] = "territorial_scope",
    [PGCL_CHAIN_DECISION_CONTENT_LANGUAGE] = "content_language",
};
static const char *const ADMIN_EVENT_NAMES[] = {"seq",    "event_id", "created_at", "actor",
                                                "action", "target",   "details"};
static const char *const CONTEST_NAMES[] = {"seq",      "contest_id",   "decision_id", "filed_at",
                                            "filed_by", "filer_key_id", "reason"};
static const char *const RESOLUTION_NAMES[] = {
    "seq", "contest_id", "resolved_at", "resolved_by", "resolver_key_id", "outcome", "corrected_label", "note"};

static const leaf_layout LAYOUTS[PGCL_CHAIN_TABLES] = {
    {"ITTTTTTTTITrTTrrBTIbt" /* the 21 encoded columns */
     "tttt",                 /* the extension */
     PGCL_CHAIN_DECISIONS_ENCODED_COLUMNS, DECISION_NAMES},
    {"ITTTTTT", 7, ADMIN_EVENT_NAMES},
    {"ITTTTtT", 7, CONTEST_NAMES},
    {"ITTTtTtT", 8, RESOLUTION_NAMES},
};

_Static_assert((int)PGCL_CHAIN_DECISION_INPUT_DIGEST == (int)PGCL_CHAIN_DECISIONS_INPUT_COLUMN,
               "the input's digest is in the input's place");
_Static_assert((int)PGCL_CHAIN_DECISION_TRACE_ID == (int)PGCL_CHAIN_DECISIONS_ENCODED_COLUMNS &&
                   (int)PGCL_CHAIN_DECISION_COLUMNS ==
                       (int)PGCL_CHAIN_DECISIONS_ENCODED_COLUMNS + (int)PGCL_CHAIN_DECISIONS_EXTENSION_COLUMNS,
               "the extension follows the encoded columns");
_Static_assert(sizeof ADMIN_EVENT_NAMES / sizeof *ADMIN_EVENT_NAMES == 7 &&
                   sizeof CONTEST_NAMES / sizeof *CONTEST_NAMES == 7 &&
                   sizeof RESOLUTION_NAMES / sizeof *RESOLUTION_NAMES == 8,
               "a name per column of the layouts above");
_Static_assert(PGCL_CHAIN_VALUE_NULL == 0, "a zeroed value is NULL (a plain leaf's extension)");
_Static_assert(sizeof "ITTTTTTTTITrTTrrBTIbt" - 1 == PGCL_CHAIN_DECISIONS_ENCODED_COLUMNS,
               "a type letter per encoded decisions column");

const char *pgcl_chain_leaf_column_name(int table, int i) {
    PGCL_ASSERT(table >= 0 && table < PGCL_CHAIN_TABLES && i >= 0 && i < (int)strlen(LAYOUTS[table].types));
    return LAYOUTS[table].names[i];
}

static const char *type_name(pgcl_chain_value_type t) {
    switch (t) {
    case PGCL_CHAIN_VALUE_INTEGER:
        return "an INTEGER";
    case PGCL_CHAIN_VALUE_REAL:
        return "a REAL";
    case PGCL_CHAIN_VALUE_TEXT:
        return "a TEXT";
    case PGCL_CHAIN_VALUE_BLOB:
        return "a BLOB";
    default:
        return "a NULL";
    }
}

/* Whether a value of type t may stand where the layout says `letter`. */
static bool type_fits(char letter, pgcl_chain_value_type t) {
    bool nullable = letter >= 'a' && letter <= 'z';
    switch (t) {
    case PGCL_CHAIN_VALUE_NULL:
        return nullable;
    case PGCL_CHAIN_VALUE_INTEGER:
        return letter == 'I' || letter == 'i';
    case PGCL_CHAIN_VALUE_REAL:
        return letter == 'R' || letter == 'r';
    case PGCL_CHAIN_VALUE_TEXT:
        return letter == 'T' || letter == 't';
    default:
        return letter == 'B' || letter == 'b';
    }
}

static uint64_t get_be(const unsigned char *p, int bytes) {
    uint64_t v = 0;
    for (int i = 0; i < bytes; i++)
        v = v << 8 | p[i];
    return v;
}

/* The value at data[*at..len) into v, *at moved past it; false when no whole value is there. */
static bool read_value(const unsigned char *data, size_t len, size_t *at, pgcl_chain_value *v) {
    memset(v, 0, sizeof *v);
    if (*at >= len) return false;
    unsigned char tag = data[(*at)++];
    size_t left = len - *at;
    switch (tag) {
    case 0:
        v->type = PGCL_CHAIN_VALUE_NULL;
        return true;
    case 1:
    case 2: {
        if (left < 8) return false;
        uint64_t bits = get_be(data + *at, 8);
        *at += 8;
        v->type = tag == 1 ? PGCL_CHAIN_VALUE_INTEGER : PGCL_CHAIN_VALUE_REAL;
        if (tag == 1)
            v->integer = (int64_t)bits;
        else
            memcpy(&v->real, &bits, sizeof v->real);
        return true;
    }
    case 3:
    case 4: {
        if (left < 4) return false;
        uint64_t n = get_be(data + *at, 4);
        if (n > left - 4) return false;
        v->type = tag == 3 ? PGCL_CHAIN_VALUE_TEXT : PGCL_CHAIN_VALUE_BLOB;
        v->bytes = data + *at + 4;
        v->len = (size_t)n;
        *at += 4 + (size_t)n;
        return true;
    }
    default:
        return false;
    }
}

pgcl_status pgcl_chain_leaf_decode(const unsigned char *data, size_t len, pgcl_chain_leaf *out, char *why, int cap) {
    memset(out, 0, sizeof *out);
    out->table = -1;
    size_t at = 0;
    pgcl_chain_value kind;
    if (!data || !read_value(data, len, &at, &kind) || kind.type != PGCL_CHAIN_VALUE_TEXT ||
        (out->table = pgcl_chain_table_index(kind.bytes, kind.len)) < 0) {
        pgcl_errorf(why, cap, "it does not begin with the TEXT kind of an event table");
        return PGCL_ERR_FORMAT;
    }
    const leaf_layout *layout = &LAYOUTS[out->table];
    const char *table = pgcl_chain_tables[out->table].name;
    const int all_columns = (int)strlen(layout->types);
    int n = 0;
    while (at < len) {
        size_t value_at = at;
        if (n == all_columns) {
            pgcl_errorf(why, cap, "a %s row has %d columns; more values follow at byte %zu", table, all_columns, at);
            return PGCL_ERR_FORMAT;
        }
        if (!read_value(data, len, &at, &out->columns[n])) {
            pgcl_errorf(why, cap, "column %d (%s) at byte %zu is no whole value (an unknown tag, or the data ends)", n,
                        layout->names[n], value_at);
            return PGCL_ERR_FORMAT;
        }
        if (!type_fits(layout->types[n], out->columns[n].type)) {
            pgcl_errorf(why, cap, "column %d (%s) is %s value, which a %s row never holds there", n, layout->names[n],
                        type_name(out->columns[n].type), table);
            return PGCL_ERR_FORMAT;
        }
        n++;
    }
    if (n != layout->plain_columns && n != all_columns) {
        if (all_columns > layout->plain_columns)
            pgcl_errorf(why, cap, "it holds %d columns; a %s row has %d, or %d with its extension", n, table,
                        layout->plain_columns, all_columns);
        else
            pgcl_errorf(why, cap, "it holds %d columns; a %s row has %d", n, table, all_columns);
        return PGCL_ERR_FORMAT;
    }
    out->extended = n > layout->plain_columns;
    if (out->extended) {
        bool any_set = false;
        for (int i = layout->plain_columns; i < n; i++)
            any_set = any_set || out->columns[i].type != PGCL_CHAIN_VALUE_NULL;
        if (!any_set) { /* the writer appends the extension only when any of it is set */
            pgcl_errorf(why, cap, "its extension is all NULL, which no %s row is encoded with", table);
            return PGCL_ERR_FORMAT;
        }
    }
    out->n_columns = all_columns; /* the extension's columns of a plain leaf stay NULL (zeroed above) */
    return PGCL_OK;
}

bool pgcl_chain_value_is_text(const pgcl_chain_value *v, const char *s) {
    size_t n = strlen(s);
    return v->type == PGCL_CHAIN_VALUE_TEXT && v->len == n && (n == 0 || memcmp(v->bytes, s, n) == 0);
}
