/* Binary one-dimensional array parameters for libpq (PostgreSQL's array_recv format, every integer
 * big-endian): ndim = 1, has-nulls flag, element type OID, length, lower bound 1, then per element
 * its length (-1: NULL) and bytes. The PostgreSQL store sends many rows in one statement with them
 * (INSERT ... SELECT FROM unnest($1::text[], $2::bytea[], ...)): the writer's decisions, shadows
 * and inputs, and the log's leaves (pg_log.c). The elements are text (PGCL_PG_TEXT_OID) or bytea
 * (PGCL_PG_BYTEA_OID) only, each exactly the bytes a per-row statement would bind as that
 * parameter, so that the casts in the statement (text::bigint, ...) run the same input functions
 * on the same text as a per-row parameter would: every stored byte is the same. */
#ifndef PGCL_PG_ARRAY_H
#define PGCL_PG_ARRAY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PGCL_PG_TEXT_OID 25u
#define PGCL_PG_BYTEA_OID 17u

/* One array being built; zero-initialised, then pgcl_pg_array_reset before the first element. An
 * allocation failure sets oom and makes every later add a no-op (checked once, before sending). */
typedef struct pgcl_pg_array {
    unsigned char *buf;
    size_t len, cap;
    int32_t n;
    bool has_null, oom;
    uint32_t elem_oid;
} pgcl_pg_array;

/* Empties a (its buffer kept) for elements of type elem_oid. */
void pgcl_pg_array_reset(pgcl_pg_array *a, uint32_t elem_oid);
/* Frees a's buffer; a is zeroed. */
void pgcl_pg_array_destroy(pgcl_pg_array *a);
/* Appends one element: len bytes at p, or NULL (p == NULL). */
void pgcl_pg_array_add(pgcl_pg_array *a, const void *p, size_t len);
/* Appends a NUL-terminated text (NULL: SQL NULL). */
void pgcl_pg_array_add_text(pgcl_pg_array *a, const char *text);
/* Writes the header; the parameter is then buf[0, len) (unless oom). */
void pgcl_pg_array_finish(pgcl_pg_array *a);

#endif
