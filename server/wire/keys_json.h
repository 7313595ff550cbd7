/* API keys as JSON, for `GET /v1/keys` and `pgcld keys list`. */
#ifndef PGCLD_KEYS_JSON_H
#define PGCLD_KEYS_JSON_H

#include <jansson.h>
#include <stdbool.h>

#include "keys.h"

/* {key_id, name, role, created_at, created_by, revoked_at, revoked_by}, null for a key that is
 * not revoked. NULL when a field is not valid UTF-8 or out of memory. */
json_t *pgcld_key_json(const pgcl_key_info *key);

/* A pgcl_key_fn: appends pgcld_key_json(key) to the json_t array ctx. */
bool pgcld_key_append_json(const pgcl_key_info *key, void *ctx);

#endif
