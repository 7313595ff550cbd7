/* Binary array parameters (pg_array.h). */
#include "pg_array.h"

#include <stdlib.h>
#include <string.h>

#include "status.h"

#define ARRAY_HEADER_BYTES 20

static void put_be32(unsigned char *p, uint32_t v) {
    p[0] = (unsigned char)(v >> 24);
    p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8);
    p[3] = (unsigned char)v;
}

static bool array_reserve(pgcl_pg_array *a, size_t more) {
    if (a->oom) return false;
    if (a->len + more <= a->cap) return true;
    size_t cap = a->cap ? a->cap : 4096;
    while (cap < a->len + more)
        cap *= 2;
    unsigned char *grown = realloc(a->buf, cap);
    if (!grown) {
        a->oom = true;
        return false;
    }
    a->buf = grown;
    a->cap = cap;
    return true;
}

/* Empties a (its buffer kept) for elements of type elem_oid. */
void pgcl_pg_array_reset(pgcl_pg_array *a, uint32_t elem_oid) {
    a->len = 0;
    a->n = 0;
    a->has_null = false;
    a->oom = false;
    a->elem_oid = elem_oid;
    if (array_reserve(a, ARRAY_HEADER_BYTES)) a->len = ARRAY_HEADER_BYTES;
}

void pgcl_pg_array_destroy(pgcl_pg_array *a) {
    free(a->buf);
    *a = (pgcl_pg_array){0};
}

/* Appends one element: len bytes at p, or NULL (p == NULL). */
void pgcl_pg_array_add(pgcl_pg_array *a, const void *p, size_t len) {
    PGCL_ASSERT(!p || len <= INT32_MAX);
    if (!array_reserve(a, 4 + (p ? len : 0))) return;
    put_be32(a->buf + a->len, p ? (uint32_t)len : 0xFFFFFFFFu);
    a->len += 4;
    if (p) {
        if (len) memcpy(a->buf + a->len, p, len);
        a->len += len;
    } else {
        a->has_null = true;
    }
    a->n++;
}

void pgcl_pg_array_add_text(pgcl_pg_array *a, const char *text) {
    pgcl_pg_array_add(a, text, text ? strlen(text) : 0);
}

/* Writes the header; the parameter is then buf[0, len). */
void pgcl_pg_array_finish(pgcl_pg_array *a) {
    if (a->oom) return;
    put_be32(a->buf, 1);
    put_be32(a->buf + 4, a->has_null ? 1u : 0u);
    put_be32(a->buf + 8, a->elem_oid);
    put_be32(a->buf + 12, (uint32_t)a->n);
    put_be32(a->buf + 16, 1);
}
