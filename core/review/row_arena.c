/* A chunked bump allocator for the rows of one read; see row_arena.h. */
#include "row_arena.h"

#include <stdalign.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define BLOCK_BYTES 16384

struct pgcl_row_arena_block {
    pgcl_row_arena_block *next;
    size_t used, cap;
    alignas(max_align_t) unsigned char data[];
};

void *pgcl_row_arena_alloc(pgcl_row_arena *a, size_t n) {
    size_t align = alignof(max_align_t);
    n = (n + align - 1) / align * align;
    if (n == 0) n = align;
    pgcl_row_arena_block *b = a->head;
    if (!b || b->cap - b->used < n) {
        size_t cap = n > BLOCK_BYTES ? n : BLOCK_BYTES;
        b = malloc(sizeof *b + cap);
        if (!b) {
            a->failed = true;
            return NULL;
        }
        b->next = a->head;
        b->used = 0;
        b->cap = cap;
        a->head = b;
    }
    void *p = b->data + b->used;
    b->used += n;
    memset(p, 0, n);
    return p;
}

char *pgcl_row_arena_strdup(pgcl_row_arena *a, const char *text) {
    if (!text) return NULL;
    size_t n = strlen(text) + 1;
    char *copy = pgcl_row_arena_alloc(a, n);
    if (copy) memcpy(copy, text, n);
    return copy;
}

void *pgcl_row_arena_grow(pgcl_row_arena *a, const void *old, size_t n_old, size_t n_new, size_t size) {
    if (n_new != 0 && size > SIZE_MAX / n_new) {
        a->failed = true;
        return NULL;
    }
    void *p = pgcl_row_arena_alloc(a, n_new * size);
    if (p && old && n_old) memcpy(p, old, (n_old < n_new ? n_old : n_new) * size);
    return p;
}

void pgcl_row_arena_release(pgcl_row_arena *a) {
    while (a->head) {
        pgcl_row_arena_block *b = a->head;
        a->head = b->next;
        free(b);
    }
    a->failed = false;
}
