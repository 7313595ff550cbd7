/* The memory of a read's result rows: one arena per read, given back at once.
 *
 * The reviewer reads return rows as plain structs whose strings and arrays live in an arena the
 * caller owns: start it zeroed (`pgcl_row_arena a = {0};`), pass it to the reads, use the rows,
 * then pgcl_row_arena_release(&a) frees everything at once. An allocation that fails makes the
 * arena `failed` (sticky), so a reader can copy a whole row and check once. Not thread-safe: one
 * arena belongs to one request. */
#ifndef PGCL_ROW_ARENA_H
#define PGCL_ROW_ARENA_H

#include <stdbool.h>
#include <stddef.h>

typedef struct pgcl_row_arena_block pgcl_row_arena_block;

typedef struct pgcl_row_arena {
    pgcl_row_arena_block *head; /* the block being carved, newest first */
    bool failed;                /* an allocation failed since the arena started */
} pgcl_row_arena;

/* n bytes, zeroed, aligned for any type; NULL (and a->failed) when out of memory. */
void *pgcl_row_arena_alloc(pgcl_row_arena *a, size_t n);

/* A copy of text (NULL stays NULL without failing); NULL (and a->failed) when out of memory. */
char *pgcl_row_arena_strdup(pgcl_row_arena *a, const char *text);

/* Room for n_new elements of `size` bytes holding the n_old of old first (old may be NULL): the
 * growth step of an array whose length is not known in advance. NULL (and a->failed) when out of
 * memory; old stays valid either way. */
void *pgcl_row_arena_grow(pgcl_row_arena *a, const void *old, size_t n_old, size_t n_new, size_t size);

/* Frees every allocation and leaves the arena empty and usable again. */
void pgcl_row_arena_release(pgcl_row_arena *a);

#endif
