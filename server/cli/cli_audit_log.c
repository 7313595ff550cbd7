/* pgcld audit verify, its transparency logs' part (issue 28; core/audit/log/log_verify.h): opens
 * the store read-only through its driver (pgcl_audit_options.read_only: nothing is written to it),
 * verifies every writer's log incrementally from the state file beside the store (or in full), and
 * adds what it found to verify's JSON line. A store without logs (an archive file, a database from
 * before them) has an empty "logs" and a "log_note" that says so. */
#include "cli_audit_log.h"

#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audit.h"
#include "log_verify.h"
#include "note.h"
#include "signing.h"

/* The 32-byte Ed25519 public key of --public-key (hex) or of --signing-key's file, into pk. */
static int public_key_of(const pgcld_log_verify_args *args, unsigned char pk[32], bool *has, char *err, int cap) {
    *has = false;
    char hex[PGCL_PUBLIC_KEY_HEX_LEN + 1];
    const char *text = args->public_key_hex;
    if (!text && args->signing_key) {
        if (pgcl_signing_public_key(args->signing_key, hex, err, cap) != PGCL_OK) return -1;
        text = hex;
    }
    if (!text) return 0;
    size_t bin_len = 0;
    if (sodium_hex2bin(pk, 32, text, strlen(text), NULL, &bin_len, NULL) != 0 || bin_len != 32) {
        snprintf(err, (size_t)cap, "the public key is not 64 hex digits");
        return -1;
    }
    *has = true;
    return 0;
}

/* The logs' part of a store that has none it can read (note says why): intact, nothing checked. */
static int no_logs(json_t *out, bool *intact, const char *note) {
    *intact = true;
    json_object_set_new(out, "log_intact", json_true());
    json_object_set_new(out, "logs", json_array());
    json_object_set_new(out, "log_note", json_string(note));
    return 0;
}

static json_t *writers_json(const pgcl_log_verify_report *r) {
    json_t *arr = json_array();
    for (int i = 0; arr && i < r->n_writers; i++) {
        const pgcl_log_verify_writer *w = &r->writers[i];
        char root[2 * PGCL_MERKLE_HASH_BYTES + 1];
        pgcl_merkle_to_hex(&w->root, root);
        json_array_append_new(arr,
                              json_pack("{s:s, s:I, s:s, s:I, s:o, s:b, s:b}", "writer_id", w->writer_id, "size",
                                        (json_int_t)w->size, "root", root, "verified_from",
                                        (json_int_t)w->verified_from, "checkpoint_size",
                                        w->has_checkpoint ? json_integer((json_int_t)w->checkpoint_size) : json_null(),
                                        "checkpoint_signed", w->checkpoint_signed, "legacy_head", w->legacy_head));
    }
    return arr;
}

int pgcld_audit_verify_logs(const pgcld_log_verify_args *args, json_t *out, bool *intact) {
    *intact = false;
    char err[1024] = "";
    pgcl_note_verifier *keys = calloc((size_t)(args->n_log_keys ? args->n_log_keys : 1), sizeof *keys);
    if (!keys) {
        fprintf(stderr, "pgcld audit verify: out of memory\n");
        return 1;
    }
    int rc = 1;
    for (int i = 0; i < args->n_log_keys; i++)
        if (pgcl_note_verifier_parse(args->log_keys[i], &keys[i], err, sizeof err) != PGCL_OK) {
            fprintf(stderr, "pgcld audit verify: --log-key %s: %s\n", args->log_keys[i], err);
            free(keys);
            return 2;
        }
    unsigned char pk[32];
    bool has_pk = false;
    if (public_key_of(args, pk, &has_pk, err, sizeof err) != 0) {
        fprintf(stderr, "pgcld audit verify: %s\n", err);
        free(keys);
        return 1;
    }
    char state_path[4096];
    if (args->state)
        snprintf(state_path, sizeof state_path, "%s", args->state);
    else
        pgcl_log_verify_default_state(args->db, state_path, sizeof state_path);
    pgcl_audit_options aopts = {.path = args->db, .read_only = true, .busy_timeout_ms = 5000, .max_pending_rows = 16};
    pgcl_audit *a = NULL;
    pgcl_log_verify_report rep;
    memset(&rep, 0, sizeof rep);
    pgcl_status st = pgcl_audit_open(&aopts, &a, err, sizeof err);
    if (st == PGCL_ERR_UNSUPPORTED) { /* a schema newer than this build's (read-only: not migrated) */
        rc = no_logs(out, intact, err);
        goto done;
    }
    if (st != PGCL_OK) {
        fprintf(stderr, "pgcld audit verify: the logs: %s\n", err);
        goto done;
    }
    pgcl_audit_log_info one;
    int n_logs = 0;
    if (pgcl_audit_logs(a, &one, 1, &n_logs, err, sizeof err) != PGCL_OK) {
        fprintf(stderr, "pgcld audit verify: the logs: %s\n", err);
        goto done;
    }
    if (n_logs == 0) { /* an archive file, a database from before the logs */
        rc = no_logs(out, intact, "the store has no log");
        goto done;
    }
    pgcl_log_verify_options o = {.full = args->full,
                                 .state_path = state_path[0] ? state_path : NULL,
                                 .origin_prefix = args->log_origin,
                                 .keys = keys,
                                 .n_keys = args->n_log_keys,
                                 .public_key = has_pk ? pk : NULL};
    if (pgcl_log_verify(a, &o, &rep, err, sizeof err) != PGCL_OK) {
        fprintf(stderr, "pgcld audit verify: the logs: %s\n", err);
        goto done;
    }
    *intact = rep.intact;
    json_object_set_new(out, "log_intact", json_boolean(rep.intact));
    json_object_set_new(out, "log_reason", rep.intact ? json_null() : json_string(rep.reason));
    json_object_set_new(out, "log_bad_writer", rep.intact ? json_null() : json_string(rep.bad_writer_id));
    json_object_set_new(out, "log_bad_leaf",
                        rep.intact || rep.bad_leaf < 0 ? json_null() : json_integer((json_int_t)rep.bad_leaf));
    json_object_set_new(out, "log_mode", json_string(args->full ? "full" : "incremental"));
    json_object_set_new(out, "log_leaves_checked", json_integer((json_int_t)rep.leaves_checked));
    json_object_set_new(out, "log_state", state_path[0] ? json_string(state_path) : json_null());
    json_object_set_new(out, "logs", writers_json(&rep));
    rc = 0;
done:
    pgcl_log_verify_report_release(&rep);
    pgcl_audit_close(a);
    free(keys);
    return rc;
}
