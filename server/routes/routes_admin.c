/* Administrative routes: activate a version (hot swap), upload a version, attach/detach/report a
 * shadow, and manage API keys. Every change is recorded in admin_events with the caller's identity
 * before it takes effect (key changes: in the same transaction as the change). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "audit_reads.h"
#include "ids.h"
#include "keys_json.h"
#include "log.h"
#include "server.h"

#define ERR_CAP 1024

/* Reads {"version": "..."} (and nothing else) from the body. Returns the body (caller decrefs) or
 * NULL with reply set. */
static json_t *version_body(const pgcld_request *req, pgcld_reply *reply, const char **version) {
    json_t *body = pgcld_parse_json_body(req, reply);
    if (!body) return NULL;
    const char *key;
    json_t *val;
    json_object_foreach(body, key, val) {
        if (strcmp(key, "version") != 0) {
            pgcld_reply_error(reply, 400, "invalid_request", -1, key, "unknown field '%.64s'", key);
            json_decref(body);
            return NULL;
        }
    }
    json_t *v = json_object_get(body, "version");
    if (!json_is_string(v) || !pgcl_registry_valid_name(json_string_value(v), true)) {
        pgcld_reply_error(reply, 400, "invalid_request", -1, "version",
                          "'version' must be a version name ([A-Za-z0-9._-], 1 to 64 characters)");
        json_decref(body);
        return NULL;
    }
    *version = json_string_value(v);
    return body;
}

/* Starts a change of the model named in the path; replies 404/409 on failure. */
static int begin_change(pgcld_server *srv, const char *name, pgcld_reply *reply) {
    char err[ERR_CAP];
    pgcl_status st = pgcl_registry_begin_change(srv->registry, name, err, sizeof err);
    if (st == PGCL_OK) return 0;
    if (st == PGCL_ERR_BUSY) pgcld_reply_error(reply, 409, "conflict", -1, NULL, "%s; retry when it is done", err);
    else pgcld_reply_error(reply, 404, "model_not_found", -1, NULL, "%s", err);
    return -1;
}

/* Loads a version for a change; replies 404/422 on failure (and records the refusal). */
static pgcl_model *load_for_change(pgcld_server *srv, const pgcld_request *req, const char *name, const char *version,
                                   const char *purpose, pgcld_reply *reply) {
    char err[ERR_CAP];
    pgcl_model *m = NULL;
    pgcl_status st = pgcl_registry_load_version(srv->registry, name, version, &m, err, sizeof err);
    if (st == PGCL_OK) return m;
    if (st == PGCL_ERR_NOT_FOUND) {
        pgcld_reply_error(reply, 404, "version_not_found", -1, "version", "%s", err);
        return NULL;
    }
    json_t *details = json_pack("{s:s, s:s, s:s, s:s}", "model", name, "version", version, "purpose", purpose,
                                "error", err);
    char *text = json_dumps(details, JSON_COMPACT);
    char target[160];
    snprintf(target, sizeof target, "%s/%s", name, version);
    pgcl_admin_event ev = {.actor = req->actor, .action = "model.load_refused", .target = target, .details_json = text};
    char aerr[256];
    if (pgcl_audit_record_event(srv->audit, &ev, aerr, sizeof aerr) != PGCL_OK)
        pgcl_log_error("admin: could not record a refused load: %s", aerr);
    free(text);
    json_decref(details);
    pgcld_metrics_swap(srv->metrics, name, false);
    pgcld_reply_error(reply, 422, "invalid_checkpoint", -1, "version", "%s", err);
    return NULL;
}

/* Records an admin event; replies 503 on failure. */
static int record(pgcld_server *srv, const pgcld_request *req, const char *action, const char *target,
                  json_t *details, pgcld_reply *reply) {
    char *text = json_dumps(details, JSON_COMPACT | JSON_SORT_KEYS);
    pgcl_admin_event ev = {.actor = req->actor, .action = action, .target = target, .details_json = text};
    char err[256];
    pgcl_status st = pgcl_audit_record_event(srv->audit, &ev, err, sizeof err);
    free(text);
    if (st == PGCL_OK) return 0;
    reply->retry_after = "1";
    pgcld_reply_error(reply, 503, "audit_unavailable", -1, NULL,
                      "the change could not be recorded in the audit log, so it was not made: %s", err);
    return -1;
}

void pgcld_handle_activate(pgcld_server *srv, const pgcld_request *req, pgcld_reply *reply) {
    const char *name = req->params[0], *version;
    json_t *body = version_body(req, reply, &version);
    if (!body) return;
    if (begin_change(srv, name, reply) != 0) {
        json_decref(body);
        return;
    }
    pgcl_model *m = load_for_change(srv, req, name, version, "activate", reply);
    if (m) {
        pgcl_model *current = pgcl_registry_acquire(srv->registry, name, NULL);
        char target[160];
        snprintf(target, sizeof target, "%s/%s", name, version);
        json_t *details = json_pack("{s:s, s:s, s:s, s:o}", "model", name, "version", version, "sha256", m->sha256,
                                    "previous_version", current ? json_string(current->version) : json_null());
        if (record(srv, req, "model.activate", target, details, reply) == 0) {
            pgcl_model *previous = NULL;
            pgcl_registry_set_active(srv->registry, m, &previous);
            pgcld_metrics_swap(srv->metrics, name, true);
            pgcl_log_info("admin: %s activated %s/%s (was %s)", req->actor, name, version,
                          previous ? previous->version : "none");
            reply->status = 200;
            reply->body = json_pack("{s:s, s:s, s:s, s:o, s:s}", "model", name, "version", version, "sha256", m->sha256,
                                    "previous_version", previous ? json_string(previous->version) : json_null(),
                                    "activated_by", req->actor);
            pgcl_model_release(previous);
        }
        json_decref(details);
        pgcl_model_release(current);
        pgcl_model_release(m);
    }
    pgcl_registry_end_change(srv->registry, name);
    json_decref(body);
}

/* ---- upload ---- */

static int write_file(const char *path, const void *data, size_t len, char *err, int cap) {
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) {
        pgcl_errorf(err, cap, "%s: %s", path, strerror(errno));
        return -1;
    }
    const char *p = data;
    size_t left = len;
    while (left > 0) {
        ssize_t n = write(fd, p, left);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            pgcl_errorf(err, cap, "%s: %s", path, strerror(errno));
            close(fd);
            return -1;
        }
        p += n;
        left -= (size_t)n;
    }
    if (fsync(fd) != 0 || close(fd) != 0) {
        pgcl_errorf(err, cap, "%s: %s", path, strerror(errno));
        return -1;
    }
    return 0;
}

static void fsync_dir(const char *path) {
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        fsync(fd);
        close(fd);
    }
}

static void remove_tree(const char *dir) {
    char path[PATH_MAX + 400];
    snprintf(path, sizeof path, "%s/config.json", dir);
    unlink(path);
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    unlink(path);
    rmdir(dir);
}

void pgcld_handle_upload(pgcld_server *srv, const pgcld_request *req, pgcld_reply *reply) {
    const char *name = req->params[0], *version = req->params[1];
    char err[ERR_CAP];
    unsigned char *weights = NULL;
    char *config_text = NULL;
    char tmp[PATH_MAX + 200] = "";
    char created_dir[PATH_MAX] = ""; /* the model directory this upload made, removed if it fails */
    json_t *body = NULL;
    bool changing = false;
    if (!pgcl_registry_valid_name(name, false) || !pgcl_registry_valid_name(version, true)) {
        pgcld_reply_error(reply, 400, "invalid_request", -1, NULL,
                          "model names are [A-Za-z0-9_-] and versions [A-Za-z0-9._-], 1 to 64 characters");
        return;
    }
    /* A version for a model the repository does not have yet creates that model, but only when the
     * request says so: a mistyped model name must not quietly start serving a new model. */
    const char *create = pgcld_request_query(req, "create_model");
    if (create && strcmp(create, "true") != 0 && strcmp(create, "false") != 0) {
        pgcld_reply_error(reply, 400, "invalid_request", -1, "create_model", "'create_model' must be true or false");
        return;
    }
    bool may_create = create && strcmp(create, "true") == 0;
    if (!(body = pgcld_parse_json_body(req, reply))) return;
    const char *key;
    json_t *val;
    json_object_foreach(body, key, val) {
        if (strcmp(key, "config") && strcmp(key, "weights_b64") && strcmp(key, "weights_sha256")) {
            pgcld_reply_error(reply, 400, "invalid_request", -1, key, "unknown field '%.64s'", key);
            goto done;
        }
    }
    json_t *config = json_object_get(body, "config"), *jw = json_object_get(body, "weights_b64"),
           *jsum = json_object_get(body, "weights_sha256");
    if (!json_is_object(config) || !json_is_string(jw) || !json_is_string(jsum)) {
        pgcld_reply_error(reply, 400, "invalid_request", -1, NULL,
                          "the body must be {\"config\": object, \"weights_b64\": string, \"weights_sha256\": hex}");
        goto done;
    }
    size_t b64_len = json_string_length(jw), cap = b64_len / 4 * 3 + 3, wlen = 0;
    weights = malloc(cap ? cap : 1);
    const char *end = NULL;
    if (!weights || sodium_base642bin(weights, cap, json_string_value(jw), b64_len, NULL, &wlen, &end,
                                      sodium_base64_VARIANT_ORIGINAL) != 0 ||
        end != json_string_value(jw) + b64_len) {
        pgcld_reply_error(reply, 400, "invalid_base64", -1, "weights_b64", "weights_b64 is not valid padded base64");
        goto done;
    }
    char digest[65];
    pgcl_sha256_hex(weights, wlen, digest);
    if (strcasecmp(digest, json_string_value(jsum)) != 0) {
        pgcld_reply_error(reply, 422, "checksum_mismatch", -1, "weights_sha256",
                          "the weights' SHA-256 is %s, the request says %.64s", digest, json_string_value(jsum));
        goto done;
    }
    config_text = json_dumps(config, JSON_INDENT(2) | JSON_REAL_PRECISION(17));
    pgcl_model *probe = NULL;
    char label[200];
    snprintf(label, sizeof label, "%s/%s", name, version);
    if (!config_text ||
        pgcl_model_load_mem(config_text, strlen(config_text), weights, wlen, label, &probe, err, sizeof err) != PGCL_OK) {
        pgcld_reply_error(reply, 422, "invalid_checkpoint", -1, NULL, "%s", config_text ? err : "out of memory");
        goto done;
    }
    pgcl_model_release(probe);

    /* Write beside the final place, then rename: a version appears whole or not at all. */
    const char *root = pgcl_registry_dir(srv->registry);
    char mdir[PATH_MAX], vdir[PATH_MAX + 200], path[PATH_MAX + 400];
    snprintf(mdir, sizeof mdir, "%s/%s", root, name);
    struct stat sb;
    bool created_model = false;
    if (lstat(mdir, &sb) != 0) {
        if (!may_create) {
            pgcld_reply_error(reply, 404, "model_not_found", -1, NULL,
                              "no model named '%s' in the model repository; to create it with this version, send "
                              "the upload with ?create_model=true",
                              name);
            goto done;
        }
        created_model = true;
        snprintf(created_dir, sizeof created_dir, "%s", mdir);
        if (mkdir(mdir, 0755) != 0 && errno != EEXIST) {
            pgcld_reply_error(reply, 500, "internal_error", -1, NULL, "cannot create %s: %s", mdir, strerror(errno));
            goto done;
        }
        fsync_dir(root);
    } else if (!S_ISDIR(sb.st_mode)) {
        pgcld_reply_error(reply, 409, "conflict", -1, NULL, "%s exists and is not a plain directory", mdir);
        goto done;
    }
    /* Serialise with other changes of this model (a concurrent upload of the same version gets 409). */
    if (begin_change(srv, name, reply) != 0) goto done;
    changing = true;
    snprintf(vdir, sizeof vdir, "%s/%s", mdir, version);
    if (lstat(vdir, &sb) == 0) {
        pgcld_reply_error(reply, 409, "version_exists", -1, NULL, "version %s/%s exists; versions are immutable", name,
                          version);
        goto done;
    }
    char id[PGCL_UUID_LEN + 1];
    pgcl_uuid7(id);
    snprintf(tmp, sizeof tmp, "%s/.upload-%s", mdir, id);
    if (mkdir(tmp, 0755) != 0) {
        pgcld_reply_error(reply, 500, "internal_error", -1, NULL, "cannot create %s: %s", tmp, strerror(errno));
        tmp[0] = 0;
        goto done;
    }
    snprintf(path, sizeof path, "%s/config.json", tmp);
    if (write_file(path, config_text, strlen(config_text), err, sizeof err) != 0) goto io_error;
    snprintf(path, sizeof path, "%s/model.safetensors", tmp);
    if (write_file(path, weights, wlen, err, sizeof err) != 0) goto io_error;
    fsync_dir(tmp);
    /* Record first: if the audit log cannot take the event, the version never appears. */
    json_t *details = json_pack("{s:s, s:s, s:s, s:I, s:b}", "model", name, "version", version, "sha256", digest,
                                "bytes", (json_int_t)wlen, "created_model", created_model);
    char target[160];
    snprintf(target, sizeof target, "%s/%s", name, version);
    int recorded = record(srv, req, "model.upload", target, details, reply);
    json_decref(details);
    if (recorded != 0) goto done;
    if (rename(tmp, vdir) != 0) {
        /* Only a change made behind pgcld's back (a copy into the repository) gets here. */
        pgcl_log_error("admin: upload of %s recorded but not renamed into place: %s", target, strerror(errno));
        pgcld_reply_error(reply, 409, "version_exists", -1, NULL, "version %s/%s appeared meanwhile: %s", name, version,
                          strerror(errno));
        goto done;
    }
    tmp[0] = 0;
    fsync_dir(mdir);
    pgcl_log_info("admin: %s uploaded %s (%zu bytes, sha256 %.12s…)", req->actor, target, wlen, digest);
    reply->status = 201;
    reply->body = json_pack("{s:s, s:s, s:s, s:s, s:b}", "model", name, "version", version, "sha256", digest, "state",
                            "available", "created_model", created_model);
    goto done;
io_error:
    pgcld_reply_error(reply, 500, "internal_error", -1, NULL, "writing the upload failed: %s", err);
done:
    if (tmp[0]) remove_tree(tmp);
    if (created_dir[0] && reply->status != 201) rmdir(created_dir); /* only when still empty */
    if (changing) pgcl_registry_end_change(srv->registry, name);
    free(weights);
    free(config_text);
    json_decref(body);
}

/* ---- shadows ---- */

void pgcld_handle_shadow_attach(pgcld_server *srv, const pgcld_request *req, pgcld_reply *reply) {
    const char *name = req->params[0], *version;
    json_t *body = version_body(req, reply, &version);
    if (!body) return;
    if (begin_change(srv, name, reply) != 0) {
        json_decref(body);
        return;
    }
    pgcl_model *active = pgcl_registry_acquire(srv->registry, name, NULL);
    pgcl_model *m = NULL;
    if (!active) {
        reply->retry_after = "5";
        pgcld_reply_error(reply, 503, "not_ready", -1, NULL, "model '%s' has no active version to shadow", name);
    } else if ((m = load_for_change(srv, req, name, version, "shadow", reply))) {
        if (m->D != active->D) {
            pgcld_reply_error(reply, 422, "invalid_checkpoint", -1, "version",
                              "shadow %s/%s takes D=%d inputs, the active version takes D=%d", name, version, m->D,
                              active->D);
        } else if (strcmp(m->version, active->version) == 0) {
            /* The active version scoring its own traffic again would report a perfect agreement
             * that says nothing about any candidate. */
            pgcld_reply_error(reply, 409, "shadow_is_active", -1, "version",
                              "version %s is the active version of model '%s'; a shadow must be another version",
                              version, name);
        } else {
            char target[160];
            snprintf(target, sizeof target, "%s/%s", name, version);
            json_t *details = json_pack("{s:s, s:s, s:s, s:s}", "model", name, "version", version, "sha256", m->sha256,
                                        "active_version", active->version);
            if (record(srv, req, "shadow.attach", target, details, reply) == 0) {
                pgcl_model *previous = NULL;
                pgcl_registry_set_shadow(srv->registry, name, m, &previous);
                reply->status = 200;
                reply->body = json_pack("{s:s, s:s, s:s, s:s, s:o}", "model", name, "shadow_version", version, "sha256",
                                        m->sha256, "active_version", active->version, "previous_shadow_version",
                                        previous ? json_string(previous->version) : json_null());
                pgcl_model_release(previous);
            }
            json_decref(details);
        }
    }
    pgcl_model_release(m);
    pgcl_model_release(active);
    pgcl_registry_end_change(srv->registry, name);
    json_decref(body);
}

void pgcld_handle_shadow_detach(pgcld_server *srv, const pgcld_request *req, pgcld_reply *reply) {
    const char *name = req->params[0];
    if (begin_change(srv, name, reply) != 0) return;
    pgcl_model *shadow = NULL;
    pgcl_model *active = pgcl_registry_acquire(srv->registry, name, &shadow);
    if (!shadow) {
        pgcld_reply_error(reply, 404, "no_shadow", -1, NULL, "model '%s' has no shadow attached", name);
    } else {
        char target[160];
        snprintf(target, sizeof target, "%s/%s", name, shadow->version);
        json_t *details = json_pack("{s:s, s:s}", "model", name, "version", shadow->version);
        if (record(srv, req, "shadow.detach", target, details, reply) == 0) {
            pgcl_model *previous = NULL;
            pgcl_registry_set_shadow(srv->registry, name, NULL, &previous);
            reply->status = 200;
            reply->body = json_pack("{s:s, s:n, s:s}", "model", name, "shadow_version", "previous_shadow_version",
                                    shadow->version);
            pgcl_model_release(previous);
        }
        json_decref(details);
    }
    pgcl_model_release(shadow);
    pgcl_model_release(active);
    pgcl_registry_end_change(srv->registry, name);
}

/* The report's counts as the answer's JSON (the keys in the documented order). */
static json_t *shadow_report_json(const pgcl_shadow_report *r) {
    json_t *matrix = json_object();
    for (int p = 0; p < PGCL_DECISION_KINDS; p++) {
        json_t *row = json_object();
        for (int q = 0; q < PGCL_DECISION_KINDS; q++)
            json_object_set_new(row, pgcl_decision_kind_names[q], json_integer(r->decision_matrix[p][q]));
        json_object_set_new(matrix, pgcl_decision_kind_names[p], row);
    }
    double items = (double)r->items;
    return json_pack("{s:I, s:I, s:I, s:o, s:f, s:f, s:f, s:f}", "items", (json_int_t)r->items, "decision_agreements",
                     (json_int_t)r->decision_agreements, "decision_flips",
                     (json_int_t)(r->items - r->decision_agreements), "decision_matrix", matrix, "label_agreement",
                     r->items ? (double)r->label_agreements / items : 0.0, "decision_agreement",
                     r->items ? (double)r->decision_agreements / items : 0.0, "mean_abs_score_difference",
                     r->items ? r->sum_abs_score_difference / items : 0.0, "max_abs_score_difference",
                     r->max_abs_score_difference);
}

void pgcld_handle_shadow_report(pgcld_server *srv, const pgcld_request *req, pgcld_reply *reply) {
    const char *name = req->params[0];
    if (!pgcl_registry_knows(srv->registry, name)) {
        pgcld_reply_error(reply, 404, "model_not_found", -1, NULL, "no model named '%.128s'", name);
        return;
    }
    pgcl_model *shadow = NULL;
    pgcl_model *active = pgcl_registry_acquire(srv->registry, name, &shadow);
    const char *version = pgcld_request_query(req, "version");
    if (version && !pgcl_registry_valid_name(version, true)) {
        pgcld_reply_error(reply, 400, "invalid_request", -1, "version",
                          "'version' must be a version name ([A-Za-z0-9._-], 1 to 64 characters, not starting with '.')");
    } else if (!version && !(version = shadow ? shadow->version : NULL)) {
        pgcld_reply_error(reply, 404, "no_shadow", -1, NULL,
                          "model '%s' has no shadow attached; ask for a past one with ?version=", name);
    } else if (!pgcl_registry_knows_version(srv->registry, name, version)) {
        /* A report of zeros for a version that never existed would read as a shadow that never
         * disagreed. (Versions are immutable and never removed by pgcld.) */
        pgcld_reply_error(reply, 404, "version_not_found", -1, "version", "model '%s' has no version '%s'", name,
                          version);
    } else {
        pgcl_shadow_report counts;
        char err[ERR_CAP];
        if (pgcl_audit_read_shadow_report(srv->audit, name, version, &counts, err, sizeof err) != PGCL_OK) {
            reply->retry_after = "1";
            pgcld_reply_error(reply, 503, "audit_unavailable", -1, NULL, "%s", err);
        } else {
            json_t *report = shadow_report_json(&counts);
            json_object_set_new(report, "model", json_string(name));
            json_object_set_new(report, "shadow_version", json_string(version));
            json_object_set_new(report, "attached", json_boolean(shadow && strcmp(shadow->version, version) == 0));
            json_object_set_new(report, "active_version", active ? json_string(active->version) : json_null());
            reply->status = 200;
            reply->body = report;
        }
    }
    pgcl_model_release(shadow);
    pgcl_model_release(active);
}

/* ---- keys ---- */

static void reload_keyring(pgcld_server *srv) {
    char err[256];
    if (srv->keyring && pgcl_keyring_reload(srv->keyring, err, sizeof err) != PGCL_OK)
        pgcl_log_warn("keys: reload failed: %s", err);
}

static void key_error(pgcld_reply *reply, pgcl_status st, const char *err) {
    if (st == PGCL_ERR_INVALID) pgcld_reply_error(reply, 400, "invalid_request", -1, NULL, "%s", err);
    else {
        reply->retry_after = "1";
        pgcld_reply_error(reply, 503, "audit_unavailable", -1, NULL, "%s", err);
    }
}

void pgcld_handle_keys_create(pgcld_server *srv, const pgcld_request *req, pgcld_reply *reply) {
    json_t *body = pgcld_parse_json_body(req, reply);
    if (!body) return;
    const char *key;
    json_t *val;
    json_object_foreach(body, key, val) {
        if (strcmp(key, "role") && strcmp(key, "name")) {
            pgcld_reply_error(reply, 400, "invalid_request", -1, key, "unknown field '%.64s'", key);
            json_decref(body);
            return;
        }
    }
    json_t *jrole = json_object_get(body, "role"), *jname = json_object_get(body, "name");
    pgcl_role role;
    if (!json_is_string(jrole) || pgcl_role_parse(json_string_value(jrole), &role) != 0) {
        pgcld_reply_error(reply, 400, "invalid_request", -1, "role", "'role' must be scorer, reviewer or admin");
    } else if (!json_is_string(jname)) {
        pgcld_reply_error(reply, 400, "invalid_request", -1, "name", "'name' must be a string naming the key's holder");
    } else {
        char text[128], key_id[32], err[ERR_CAP];
        pgcl_status st = pgcl_audit_create_key(srv->audit, role, json_string_value(jname), req->actor, text,
                                               key_id, err, sizeof err);
        if (st != PGCL_OK) {
            key_error(reply, st, err);
        } else {
            reload_keyring(srv);
            pgcl_log_info("keys: %s created %s key %s for '%s'", req->actor, pgcl_role_str(role), key_id,
                          json_string_value(jname));
            reply->status = 201;
            reply->body = json_pack("{s:s, s:s, s:s, s:s}", "key_id", key_id, "key", text, "role", pgcl_role_str(role),
                                    "name", json_string_value(jname));
            sodium_memzero(text, sizeof text);
        }
    }
    json_decref(body);
}

void pgcld_handle_keys_list(pgcld_server *srv, const pgcld_request *req, pgcld_reply *reply) {
    json_t *keys = json_array();
    char err[ERR_CAP];
    pgcl_status st = keys ? pgcl_audit_read_keys(srv->audit, pgcld_key_append_json, keys, err, sizeof err)
                          : PGCL_ERR_NOMEM;
    if (st != PGCL_OK) {
        if (st == PGCL_ERR_NOMEM) snprintf(err, sizeof err, "out of memory");
        json_decref(keys);
        key_error(reply, st, err);
        return;
    }
    reply->status = 200;
    reply->body = json_pack("{s:o}", "keys", keys);
}

void pgcld_handle_keys_revoke(pgcld_server *srv, const pgcld_request *req, pgcld_reply *reply) {
    const char *key_id = req->params[0];
    char err[ERR_CAP];
    pgcl_status st = pgcl_audit_revoke_key(srv->audit, key_id, req->actor, err, sizeof err);
    if (st == PGCL_ERR_INVALID) {
        pgcld_reply_error(reply, 404, "key_not_found", -1, NULL, "%s", err);
        return;
    }
    if (st != PGCL_OK) {
        key_error(reply, st, err);
        return;
    }
    reload_keyring(srv);
    pgcl_log_info("keys: %s revoked %s", req->actor, key_id);
    reply->status = 200;
    reply->body = json_pack("{s:s, s:b, s:s}", "key_id", key_id, "revoked", 1, "revoked_by", req->actor);
}
