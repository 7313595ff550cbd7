/* The model registry: every <model>/<version> under the model repository directory, each version
 * loaded and validated at start, one active version per model (the highest version name, compared
 * with version-number ordering, among those that loaded). A version that fails to load is kept in
 * the listing as "failed" with its reason and never serves.
 *
 * Thread-safe. pgcl_registry_acquire() returns a retained model that stays valid until the caller
 * releases it, whatever happens to the registry meanwhile. */
#ifndef PGCL_REGISTRY_H
#define PGCL_REGISTRY_H

#include <jansson.h>

#include "model.h"
#include "status.h"

typedef struct pgcl_registry pgcl_registry;

/* Scans dir and loads every version. Fails only if dir cannot be read; a registry with no loadable
 * model is valid (and not ready). */
pgcl_status pgcl_registry_create(const char *dir, pgcl_registry **out, char *err, int cap);
void pgcl_registry_destroy(pgcl_registry *r); /* accepts NULL */

/* The active version of `name`, retained, or NULL if there is none. Release with pgcl_model_release(). */
pgcl_model *pgcl_registry_acquire(pgcl_registry *r, const char *name);

/* True when the repository has a model of that name, whether or not a version of it loaded. */
bool pgcl_registry_knows(pgcl_registry *r, const char *name);

/* Number of models with an active version. */
int pgcl_registry_ready_count(pgcl_registry *r);

/* Largest first-GEMM width and hidden width over loaded versions (to size scratch buffers). */
void pgcl_registry_max_dims(pgcl_registry *r, int *n_first, int *max_hidden);

/* {"models": [{"name", "active_version", "versions": [{"version", "state", ...}]}]}; caller owns it. */
json_t *pgcl_registry_describe(pgcl_registry *r);

/* Names safe as path components: [A-Za-z0-9_-] (models) or [A-Za-z0-9._-] (versions), 1..64
 * bytes, and never "." or "..". */
bool pgcl_registry_valid_name(const char *name, bool allow_dot);

#endif
