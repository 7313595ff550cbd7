/* Shared by the record's encoder and decoder (record.c), its field rules (record_check.c) and its
 * text forms (record_text.c); internal to core/audit/log. */
#ifndef PGCL_RECORD_INTERNAL_H
#define PGCL_RECORD_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "record.h"

/* The character sets of texts (docs/log-record.md, "Texts"). */
typedef enum pgcl_record_text_class {
    PGCL_RECORD_TEXT_UTF8,          /* UTF-8 without NUL */
    PGCL_RECORD_TEXT_PLAIN,         /* UTF-8 without control characters (C0, DEL, C1) */
    PGCL_RECORD_TEXT_REQUEST_ID,    /* visible ASCII 0x21..0x7e other than " ' \ */
    PGCL_RECORD_TEXT_MODEL_NAME,    /* [A-Za-z0-9_-] */
    PGCL_RECORD_TEXT_MODEL_VERSION, /* [A-Za-z0-9_.-], not starting with '.' */
    PGCL_RECORD_TEXT_ACTION,        /* [a-z0-9_.], not starting with "key." */
} pgcl_record_text_class;

/* Whether s[0..n) is well-formed UTF-8 (shortest forms, no surrogates, at most U+10FFFF) without
 * NUL and, unless controls_ok, without C0, DEL or C1 control characters. */
bool pgcl_record_utf8_ok(const unsigned char *s, size_t n, bool controls_ok);
/* Whether s[0..n) is of class cls (any length; the caller checks the length). */
bool pgcl_record_text_class_ok(const unsigned char *s, size_t n, pgcl_record_text_class cls);
/* Whether s is a key id: "pgcld_" and 8 lowercase hex digits, NUL-terminated. */
bool pgcl_record_key_id_ok(const char *s);
/* Whether t is a JSON object of 2..PGCL_RECORD_JSON_MAX bytes (no duplicate member, no NUL). */
bool pgcl_record_json_object_ok(pgcl_record_text t);
/* Days of month m (1..12) of year y (proleptic Gregorian). */
int pgcl_record_days_in_month(int y, int m);

/* The shortest unsigned LEB128 of v into out (10 bytes at most); its length. */
size_t pgcl_record_varint_put(uint64_t v, unsigned char out[10]);
/* The varint at data[*at..len) into *v, *at moved past it, when it is complete, in its shortest
 * form and at most max; false otherwise (*at unchanged). */
bool pgcl_record_varint_get(const unsigned char *data, size_t len, size_t *at, uint64_t max, uint64_t *v);

/* The labels of a policy in order, from whichever form it has (record.h). Reading past the last
 * label, or a list that ends early, gives {NULL, 0}. */
typedef struct pgcl_record_label_iter {
    const pgcl_record_policy *p;
    uint16_t i;
    size_t at; /* in label_list */
} pgcl_record_label_iter;

pgcl_record_label_iter pgcl_record_label_iter_start(const pgcl_record_policy *p);
pgcl_record_text pgcl_record_label_iter_next(pgcl_record_label_iter *it);

#endif
