/* API keys as JSON; see keys_json.h. */
#include "keys_json.h"

json_t *pgcld_key_json(const pgcl_key_info *k) {
    return json_pack("{s:s?, s:s?, s:s?, s:s?, s:s?, s:s?, s:s?}", "key_id", k->key_id, "name", k->name, "role",
                     k->role, "created_at", k->created_at, "created_by", k->created_by, "revoked_at", k->revoked_at,
                     "revoked_by", k->revoked_by);
}

bool pgcld_key_append_json(const pgcl_key_info *key, void *ctx) {
    json_t *row = pgcld_key_json(key);
    return row && json_array_append_new(ctx, row) == 0;
}
