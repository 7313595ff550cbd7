/* Checkpoint loading, inside (model.c describes it): what model.c (tensors, folding, golden vectors,
 * the load) and model_config.c (config.json's fields and sections) share. Nothing here is for other
 * files. */
#ifndef PGCL_MODEL_INTERNAL_H
#define PGCL_MODEL_INTERNAL_H

#include <jansson.h>
#include <stdbool.h>

#include "model.h"
#include "safetensors.h"

/* ---- loading context: everything a load holds, released in one place ---- */

typedef struct load_ctx {
    const char *label; /* directory, for messages */
    json_t *config;
    pgcl_safetensors *st;
    pgcl_model *m;
    float *arena_next; /* bump pointer into m->arena */
    size_t arena_left;
    const char **bound; /* tensor names bound so far, to find strays */
    int n_bound;
    bool dry_run; /* bind_tensor() only checks presence, shape and dtype */
    char *err;
    int cap;
} load_ctx;

/* ---- config.json field access with messages that name the field (model_config.c) ---- */

/* Fails the load with "FIELD PROBLEM" in c->err; returns PGCL_ERR_FORMAT. */
pgcl_status model_cfg_fail(load_ctx *c, const char *field, const char *problem);
/* An integer obj[key] within [lo, hi] into *out. */
pgcl_status model_cfg_int(load_ctx *c, json_t *obj, const char *key, const char *field, long lo, long hi, int *out);
/* A finite number obj[key] within [lo, hi] into *out. */
pgcl_status model_cfg_real(load_ctx *c, json_t *obj, const char *key, const char *field, double lo, double hi,
                           double *out);
/* A string obj[key] into *out (owned by obj). */
pgcl_status model_cfg_str(load_ctx *c, json_t *obj, const char *key, const char *field, const char **out);
/* Fails on a key of obj not in allowed (NULL-terminated). */
pgcl_status model_cfg_only(load_ctx *c, json_t *obj, const char *where, const char *const *allowed);

/* ---- the sections of config.json (model_config.c), each into c->m ---- */

pgcl_status model_parse_header(load_ctx *c);
pgcl_status model_parse_policy(load_ctx *c);
pgcl_status model_parse_calibration(load_ctx *c);
pgcl_status model_parse_dsa(load_ctx *c);

#endif
