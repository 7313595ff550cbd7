/* The model registry: the models of a model repository directory (DIR/<model>/<version>/), each
 * with at most one active version and one shadow version.
 *
 * At start each model's preferred version (the last one activated, as recorded in the audit log)
 * is loaded, falling back to the highest version that loads; other versions stay on disk
 * ("available") until activated. Activation loads and validates the new version beside the old
 * one and then switches with a single pointer swap under the registry lock; requests that
 * acquired the old version keep it (reference counting) and it is freed after its last user.
 *
 * Thread-safety: every function may be called from any thread. Administrative changes of one model
 * (activate, shadow) are serialised by pgcl_registry_begin_change(), which refuses a second
 * concurrent change instead of waiting. */
#ifndef PGCL_REGISTRY_H
#define PGCL_REGISTRY_H

#include <jansson.h>

#include "model.h"
#include "status.h"

typedef struct pgcl_registry pgcl_registry;

/* Scans dir; loads nothing (every version "available"). Fails only if dir cannot be read. */
pgcl_status pgcl_registry_create(const char *dir, pgcl_registry **out, char *err, int cap);

/* Loads each model's preferred version — `preferred` maps model name -> version (may be NULL) —
 * falling back to the highest version that loads, and makes it active. Meant to run once, right
 * after create, while the HTTP server already answers /healthz. A model with no loadable version
 * stays without an active version (not ready). */
void pgcl_registry_load_initial(pgcl_registry *r, json_t *preferred);
void pgcl_registry_destroy(pgcl_registry *r); /* accepts NULL */

const char *pgcl_registry_dir(const pgcl_registry *r);

/* The active version of `name`, retained, or NULL if there is none. Release with pgcl_model_release().
 * With shadow != NULL also returns the shadow version, retained, or NULL. */
pgcl_model *pgcl_registry_acquire(pgcl_registry *r, const char *name, pgcl_model **shadow);

/* True when the repository has a model of that name, whether or not a version of it loaded. */
bool pgcl_registry_knows(pgcl_registry *r, const char *name);

/* True when the repository holds version `version` of model `name` (its directory exists, inside the
 * repository), whether or not it loads. */
bool pgcl_registry_knows_version(pgcl_registry *r, const char *name, const char *version);

/* Number of models with an active version. */
int pgcl_registry_ready_count(pgcl_registry *r);

/* ---- administrative changes ---- */

/* Starts a change of model `name` (creating its entry if DIR/<name> appeared on disk since start).
 * Returns PGCL_OK, PGCL_ERR_BUSY if another change of that model is in progress, or
 * PGCL_ERR_NOT_FOUND if there is no such model directory. Pair with pgcl_registry_end_change(). */
pgcl_status pgcl_registry_begin_change(pgcl_registry *r, const char *name, char *err, int cap);
void pgcl_registry_end_change(pgcl_registry *r, const char *name);

/* Loads and validates DIR/<name>/<version> (state "loading", then "ready" or "failed" with the
 * reason); returns the retained model. Must be inside a change of `name`. If the version is already
 * loaded (active or shadow) the loaded model is returned. PGCL_ERR_NOT_FOUND: no such version;
 * other errors: the checkpoint was refused (err says why). */
pgcl_status pgcl_registry_load_version(pgcl_registry *r, const char *name, const char *version, pgcl_model **out,
                                       char *err, int cap);

/* Loads DIR/<name>/<version> for reading only: no registry state changes, nothing is listed or
 * served; the caller releases the model. For a read about a version that is not loaded (e.g. the
 * statement of reasons of a decision an earlier version made). PGCL_ERR_NOT_FOUND: no such
 * version; other errors: the checkpoint was refused (err says why). Thread-safe. */
pgcl_status pgcl_registry_read_version(const pgcl_registry *r, const char *name, const char *version, pgcl_model **out,
                                       char *err, int cap);

/* Makes m (from load_version) the active version of its model; the previous active version, if
 * any, becomes "retired" and is written to *previous (retained; NULL if none). Inside a change. */
void pgcl_registry_set_active(pgcl_registry *r, pgcl_model *m, pgcl_model **previous);

/* Attaches m as the shadow of its model (NULL detaches). The previous shadow, retained, goes to
 * *previous. Inside a change. */
void pgcl_registry_set_shadow(pgcl_registry *r, const char *name, pgcl_model *m, pgcl_model **previous);

/* {"models": [{"name", "active_version", "shadow_version", "versions": [{"version", "state", ...}]}]};
 * picks up versions that appeared on disk. Caller owns the result. */
json_t *pgcl_registry_describe(pgcl_registry *r);

/* Calls fn for each model's active version (under the registry lock: fn must not call back). */
void pgcl_registry_foreach_active(pgcl_registry *r, void (*fn)(const pgcl_model *m, void *ctx), void *ctx);

/* Names safe as path components: [A-Za-z0-9_-] (models) or [A-Za-z0-9._-] (versions), 1..64
 * bytes, never starting with '.' (so never ".", ".." or an upload's temporary directory). */
bool pgcl_registry_valid_name(const char *name, bool allow_dot);

#endif
