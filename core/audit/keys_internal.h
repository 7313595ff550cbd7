/* API keys, inside (keys.h is the contract): what keys.c (generation, the create/revoke/list
 * transactions) and keyring.c (the daemon's in-memory keyring and its sources) share. Nothing here
 * is for other files. */
#ifndef PGCL_KEYS_INTERNAL_H
#define PGCL_KEYS_INTERNAL_H

#include <sqlite3.h>
#include <stdbool.h>

#include "keys.h"

#define ERR_CAP 512

/* Whether s is a key id: "pgcld_" and 8 lowercase hex digits, nothing more. NULL: false. */
bool keys_key_id_wellformed(const char *s);
/* Whether s has the shape of a whole key (its id, '_', 43 base64url characters). NULL: false. */
bool keys_token_wellformed(const char *s);
/* Opens an existing pgcld database (never creates the file) with the busy timeout, and checks that
 * the key tables exist. On failure *out is NULL. */
pgcl_status keys_db_open(const char *path, sqlite3 **out, char *err, int cap);

#endif
