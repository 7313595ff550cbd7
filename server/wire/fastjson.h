/* The fast input path of POST /v1/score: a validating JSON parser for exactly the score request's
 * shape that writes embedding numbers straight into the float32 input buffer, without building a
 * jansson DOM (which costs ~10× the forward pass per embedding).
 *
 * Contract: for a body it accepts, the result is what the DOM path would have produced, except
 * that numbers are rounded to float32 correctly (directly from the decimal text, not through a
 * double). For anything it does not accept — malformed JSON, wrong types, unknown or repeated
 * fields, a bad item — it returns PGCLD_FAST_BAIL and the caller runs the DOM path, which words
 * the error. So errors cost the old price and valid requests the new one. */
#ifndef PGCLD_FASTJSON_H
#define PGCLD_FASTJSON_H

#include <stdbool.h>
#include <stddef.h>

typedef enum { PGCLD_FAST_OK = 0, PGCLD_FAST_BAIL } pgcld_fast_status;

/* Called once the model's name is known (NULL: the request names none) to learn its input
 * dimension; returns D > 0, or 0 to bail (unknown model: the DOM path answers it). */
typedef int (*pgcld_fast_resolve_fn)(void *ctx, const char *model_name);

typedef struct pgcld_fast_request {
    char model[129];     /* "" when absent */
    bool has_model;
    bool return_vector;  /* default true */
    int n;               /* items */
    int D;
    float *z;            /* (n, D), malloc'd; owned by the caller after OK */
    char **ids;          /* (n) NUL-terminated, pointing into id_arena */
    char *id_arena;      /* malloc'd */
} pgcld_fast_request;

/* Parses body. max_items bounds n (more → bail). On OK the caller owns z, ids and id_arena
 * (pgcld_fast_request_free). Thread-safe; allocates O(body) once. */
pgcld_fast_status pgcld_fast_parse_score(const char *body, size_t len, int max_items, pgcld_fast_resolve_fn resolve,
                                         void *ctx, pgcld_fast_request *out);

void pgcld_fast_request_free(pgcld_fast_request *r);

/* Parses one JSON number at s (exactly the JSON grammar) into the correctly rounded float32.
 * Returns the number of bytes consumed, or 0 if s does not start with a JSON number. *out may be
 * infinite when the value overflows float32. */
size_t pgcld_parse_f32(const char *s, const char *end, float *out);

#endif
