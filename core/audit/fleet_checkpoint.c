/* Fleet checkpoints: the statement, its signature, the JSON file. See fleet_checkpoint.h. */
#include "fleet_checkpoint.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "files.h"

#define STATEMENT_MAGIC "pgcld-fleet-checkpoint-v1"
#define FILE_MAX (4 * 1024 * 1024)
#define HEAD_LINE_MAX (20 + 1 + 64 + 1 + 64 + 1 + PGCL_FLEET_WRITER_ID_MAX + 2)

void pgcl_fleet_checkpoint_release(pgcl_fleet_checkpoint *cp) {
    if (!cp) return;
    free(cp->heads);
    cp->heads = NULL;
    cp->n_heads = 0;
}

bool pgcl_fleet_writer_id_ok(const char *id) {
    size_t n = id ? strlen(id) : 0;
    if (n < 1 || n > PGCL_FLEET_WRITER_ID_MAX) return false;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)id[i] < 0x20 || id[i] == 0x7f) return false;
    return true;
}

static bool is_lower_hex64(const char *s) {
    if (strlen(s) != 64) return false;
    for (int i = 0; i < 64; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f'))) return false;
    return true;
}

char *pgcl_fleet_checkpoint_statement(const pgcl_fleet_checkpoint *cp, size_t *len) {
    *len = 0;
    if (cp->n_heads < 0 || cp->n_heads > PGCL_FLEET_WRITERS_MAX || strchr(cp->created_at, '\n')) return NULL;
    size_t cap = sizeof STATEMENT_MAGIC + sizeof cp->created_at + 24 + (size_t)cp->n_heads * HEAD_LINE_MAX;
    char *buf = malloc(cap);
    if (!buf) return NULL;
    size_t n = (size_t)snprintf(buf, cap, STATEMENT_MAGIC "\n%s\n%d\n", cp->created_at, cp->n_heads);
    for (int i = 0; i < cp->n_heads; i++) {
        const pgcl_fleet_head *h = &cp->heads[i];
        bool ordered = i == 0 || strcmp(cp->heads[i - 1].writer_id, h->writer_id) < 0;
        if (!ordered || !pgcl_fleet_writer_id_ok(h->writer_id) || h->head_seq < 1 || !is_lower_hex64(h->head_hash) ||
            !is_lower_hex64(h->log_root)) {
            free(buf);
            return NULL;
        }
        n += (size_t)snprintf(buf + n, cap - n, "%lld %s %s %s\n", (long long)h->head_seq, h->head_hash, h->log_root,
                              h->writer_id);
    }
    PGCL_ASSERT(n < cap);
    *len = n;
    return buf;
}

bool pgcl_fleet_checkpoint_parse_statement(const char *text, pgcl_fleet_checkpoint *cp) {
    memset(cp, 0, sizeof *cp);
    const char *magic = STATEMENT_MAGIC "\n";
    if (!text || strncmp(text, magic, strlen(magic)) != 0) return false;
    const char *p = text + strlen(magic), *nl = strchr(p, '\n');
    if (!nl || (size_t)(nl - p) >= sizeof cp->created_at) return false;
    memcpy(cp->created_at, p, (size_t)(nl - p));
    char *end = NULL;
    long n = strtol(nl + 1, &end, 10);
    if (!end || *end != '\n' || n < 1 || n > PGCL_FLEET_WRITERS_MAX) return false;
    if (!(cp->heads = calloc((size_t)n, sizeof *cp->heads))) return false;
    p = end + 1;
    for (long i = 0; i < n; i++) {
        pgcl_fleet_head *h = &cp->heads[i];
        long long seq = strtoll(p, &end, 10);
        nl = end ? strchr(end, '\n') : NULL;
        if (!end || *end != ' ' || !nl || nl - end < 1 + 64 + 1 + 64 + 2) goto bad;
        memcpy(h->head_hash, end + 1, 64);
        memcpy(h->log_root, end + 66, 64);
        size_t id_len = (size_t)(nl - (end + 131));
        if (end[65] != ' ' || end[130] != ' ' || id_len < 1 || id_len > PGCL_FLEET_WRITER_ID_MAX) goto bad;
        memcpy(h->writer_id, end + 131, id_len);
        h->head_seq = seq;
        cp->n_heads++;
        p = nl + 1;
    }
    if (*p) goto bad;
    cp->version = PGCL_FLEET_CHECKPOINT_VERSION;
    return true;
bad:
    pgcl_fleet_checkpoint_release(cp);
    return false;
}

pgcl_status pgcl_fleet_checkpoint_sign(pgcl_fleet_checkpoint *cp, const char *key_path, char *err, int cap) {
    size_t len;
    char *statement = pgcl_fleet_checkpoint_statement(cp, &len);
    if (!statement) {
        pgcl_errorf(err, cap,
                    "a fleet checkpoint statement cannot be made of these heads (a writer id with a control "
                    "character, or out of memory)");
        return PGCL_ERR_INVALID;
    }
    cp->version = PGCL_FLEET_CHECKPOINT_VERSION;
    pgcl_status st = pgcl_signing_sign(key_path, statement, len, cp->public_key, cp->signature, err, cap);
    free(statement);
    return st;
}

pgcl_status pgcl_fleet_checkpoint_verify(const pgcl_fleet_checkpoint *cp, const char *expected_public_hex, char *err,
                                         int cap) {
    const char *name = cp->file[0] ? cp->file : "fleet checkpoint";
    if (expected_public_hex && strcmp(expected_public_hex, cp->public_key) != 0) {
        pgcl_errorf(err, cap, "%s: signed by public key %s, not by the expected %.64s", name, cp->public_key,
                    expected_public_hex);
        return PGCL_ERR_MISMATCH;
    }
    size_t len;
    char *statement = pgcl_fleet_checkpoint_statement(cp, &len);
    if (!statement) {
        pgcl_errorf(err, cap, "%s: its heads do not make a statement (malformed, or not in writer id order)", name);
        return PGCL_ERR_FORMAT;
    }
    bool ok = pgcl_signing_verify(cp->public_key, cp->signature, statement, len);
    free(statement);
    if (!ok) {
        pgcl_errorf(err, cap,
                    "%s: the signature does not verify: the checkpoint was altered, or not signed by the key "
                    "it names",
                    name);
        return PGCL_ERR_MISMATCH;
    }
    return PGCL_OK;
}

int64_t pgcl_fleet_checkpoint_entries(const pgcl_fleet_checkpoint *cp) {
    int64_t sum = 0;
    for (int i = 0; i < cp->n_heads; i++)
        sum += cp->heads[i].head_seq;
    return sum;
}

const pgcl_fleet_head *pgcl_fleet_checkpoint_head(const pgcl_fleet_checkpoint *cp, const char *writer_id) {
    for (int i = 0; i < cp->n_heads; i++)
        if (strcmp(cp->heads[i].writer_id, writer_id) == 0) return &cp->heads[i];
    return NULL;
}

json_t *pgcl_fleet_checkpoint_to_json(const pgcl_fleet_checkpoint *cp) {
    json_t *writers = json_array();
    for (int i = 0; writers && i < cp->n_heads; i++) {
        const pgcl_fleet_head *h = &cp->heads[i];
        if (json_array_append_new(writers, json_pack("{s:s, s:I, s:s, s:s}", "writer_id", h->writer_id, "head_seq",
                                                     (json_int_t)h->head_seq, "head_hash", h->head_hash, "log_root",
                                                     h->log_root)) != 0) {
            json_decref(writers);
            return NULL;
        }
    }
    if (!writers) return NULL;
    return json_pack("{s:s, s:i, s:s, s:o, s:s, s:s}", "format", PGCL_FLEET_CHECKPOINT_FORMAT, "version",
                     PGCL_FLEET_CHECKPOINT_VERSION, "created_at", cp->created_at, "writers", writers, "public_key",
                     cp->public_key, "signature", cp->signature);
}

bool pgcl_fleet_checkpoint_json_is_fleet(const json_t *root) {
    json_t *format = json_object_get(root, "format");
    return json_is_string(format) && strcmp(json_string_value(format), PGCL_FLEET_CHECKPOINT_FORMAT) == 0;
}

/* A string member of 1..max bytes without NUL into out (max + 1 bytes). */
static bool get_string(const json_t *obj, const char *key, char *out, size_t max) {
    json_t *v = json_object_get(obj, key);
    if (!json_is_string(v) || json_string_length(v) > max || json_string_length(v) == 0) return false;
    memcpy(out, json_string_value(v), json_string_length(v) + 1);
    return strlen(out) == json_string_length(v);
}

pgcl_status pgcl_fleet_checkpoint_from_json(const json_t *root, const char *name, pgcl_fleet_checkpoint *out, char *err,
                                            int cap) {
    out->heads = NULL;
    out->n_heads = 0;
    if (!pgcl_fleet_checkpoint_json_is_fleet(root)) {
        pgcl_errorf(err, cap, "%s: not a pgcld fleet checkpoint (\"format\" is not \"%s\")", name,
                    PGCL_FLEET_CHECKPOINT_FORMAT);
        return PGCL_ERR_FORMAT;
    }
    json_t *version = json_object_get(root, "version");
    if (!json_is_integer(version) || json_integer_value(version) != PGCL_FLEET_CHECKPOINT_VERSION) {
        pgcl_errorf(
            err, cap, "%s: fleet checkpoint format version %lld; this pgcld reads version %d (use a newer pgcld)", name,
            json_is_integer(version) ? (long long)json_integer_value(version) : -1LL, PGCL_FLEET_CHECKPOINT_VERSION);
        return PGCL_ERR_UNSUPPORTED;
    }
    out->version = PGCL_FLEET_CHECKPOINT_VERSION;
    json_t *writers = json_object_get(root, "writers");
    if (!json_is_array(writers) || json_array_size(writers) < 1 || json_array_size(writers) > PGCL_FLEET_WRITERS_MAX) {
        pgcl_errorf(err, cap, "%s: writers must be an array of 1 to %d heads", name, PGCL_FLEET_WRITERS_MAX);
        return PGCL_ERR_FORMAT;
    }
    if (!(out->heads = calloc(json_array_size(writers), sizeof *out->heads))) {
        pgcl_errorf(err, cap, "out of memory");
        return PGCL_ERR_NOMEM;
    }
    out->n_heads = (int)json_array_size(writers);
    for (int i = 0; i < out->n_heads; i++) {
        json_t *w = json_array_get(writers, (size_t)i), *seq = json_object_get(w, "head_seq");
        pgcl_fleet_head *h = &out->heads[i];
        if (!json_is_object(w) || !get_string(w, "writer_id", h->writer_id, PGCL_FLEET_WRITER_ID_MAX) ||
            !pgcl_fleet_writer_id_ok(h->writer_id) || !json_is_integer(seq) || json_integer_value(seq) < 1 ||
            !get_string(w, "head_hash", h->head_hash, 64) || !is_lower_hex64(h->head_hash) ||
            !get_string(w, "log_root", h->log_root, 64) || !is_lower_hex64(h->log_root) ||
            (i > 0 && strcmp(out->heads[i - 1].writer_id, h->writer_id) >= 0)) {
            pgcl_errorf(err, cap,
                        "%s: writers[%d] must be {writer_id, head_seq >= 1, head_hash, log_root (64 lowercase "
                        "hex digits)}, in increasing writer_id order",
                        name, i);
            return PGCL_ERR_FORMAT;
        }
        h->head_seq = (int64_t)json_integer_value(seq);
    }
    if (!get_string(root, "created_at", out->created_at, sizeof out->created_at - 1) || strchr(out->created_at, '\n')) {
        pgcl_errorf(err, cap, "%s: created_at must be a timestamp (1 to 64 bytes, one line)", name);
        return PGCL_ERR_FORMAT;
    }
    if (!get_string(root, "public_key", out->public_key, PGCL_PUBLIC_KEY_HEX_LEN) ||
        strlen(out->public_key) != PGCL_PUBLIC_KEY_HEX_LEN ||
        !get_string(root, "signature", out->signature, PGCL_SIGNATURE_HEX_LEN) ||
        strlen(out->signature) != PGCL_SIGNATURE_HEX_LEN) {
        pgcl_errorf(err, cap, "%s: public_key must be %d and signature %d hex digits", name, PGCL_PUBLIC_KEY_HEX_LEN,
                    PGCL_SIGNATURE_HEX_LEN);
        return PGCL_ERR_FORMAT;
    }
    return PGCL_OK;
}

pgcl_status pgcl_fleet_checkpoint_read(const char *path, const char *expected_public_hex, pgcl_fleet_checkpoint *out,
                                       char *err, int cap) {
    memset(out, 0, sizeof *out);
    snprintf(out->file, sizeof out->file, "%s", path);
    pgcl_status st;
    json_t *root = pgcl_checkpoint_file_json(path, FILE_MAX, &st, err, cap);
    if (!root) return st;
    if ((st = pgcl_fleet_checkpoint_from_json(root, path, out, err, cap)) == PGCL_OK)
        st = pgcl_fleet_checkpoint_verify(out, expected_public_hex, err, cap);
    json_decref(root);
    return st;
}

pgcl_status pgcl_fleet_checkpoint_write(pgcl_fleet_checkpoint *cp, const char *out_file, const char *out_dir, char *err,
                                        int cap) {
    int64_t sum = pgcl_fleet_checkpoint_entries(cp);
    int n = out_file ? snprintf(cp->file, sizeof cp->file, "%s", out_file)
                     : snprintf(cp->file, sizeof cp->file, "%s/fleet-checkpoint-%lld.json",
                                out_dir && *out_dir ? out_dir : ".", (long long)sum);
    if (n < 0 || (size_t)n >= sizeof cp->file) {
        pgcl_errorf(err, cap, "checkpoint path too long");
        return PGCL_ERR_INVALID;
    }
    json_t *doc = pgcl_fleet_checkpoint_to_json(cp);
    pgcl_status st = pgcl_checkpoint_write_json(cp->file, doc, err, cap);
    json_decref(doc);
    return st;
}
