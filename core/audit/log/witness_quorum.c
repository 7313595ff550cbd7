/* Witness quorum over a store's logs; see witness_quorum.h. */
#include "witness_quorum.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The key of log_keys named origin, or NULL. */
static const pgcl_note_verifier *key_named(const pgcl_note_verifier *keys, int n, const char *origin) {
    for (int i = 0; i < n; i++)
        if (strcmp(keys[i].name, origin) == 0) return &keys[i];
    return NULL;
}

/* True when origin is "<anything>/<writer_id>". */
static bool origin_names_writer(const char *origin, const char *writer_id) {
    size_t o = strlen(origin), w = strlen(writer_id);
    return o > w + 1 && origin[o - w - 1] == '/' && strcmp(origin + o - w, writer_id) == 0;
}

/* One log's verdict into *q. PGCL_OK, or the store's error reading its checkpoint. */
static pgcl_status check_log(pgcl_audit *a, const char *writer_id, const pgcl_note_verifier *log_keys, int n_keys,
                             const pgcl_witness *witnesses, int n_witnesses, int quorum, pgcl_log_quorum *q, char *err,
                             int cap) {
    memset(q, 0, sizeof *q);
    snprintf(q->writer_id, sizeof q->writer_id, "%s", writer_id);
    q->cosigners = -1;
    char *note = NULL;
    pgcl_status st = pgcl_audit_log_checkpoint(a, writer_id, &note, &q->size, err, cap);
    if (st == PGCL_ERR_NOT_FOUND) {
        snprintf(q->reason, sizeof q->reason, "the log of writer '%s' has no checkpoint: 0 of %d cosignatures",
                 writer_id, quorum);
        return PGCL_OK;
    }
    if (st != PGCL_OK) return st;
    size_t len = strlen(note);
    pgcl_tlog_checkpoint cp;
    char why[400] = "";
    const char *nl = memchr(note, '\n', len);
    char origin[PGCL_TLOG_ORIGIN_MAX + 1] = "";
    if (nl && (size_t)(nl - note) <= PGCL_TLOG_ORIGIN_MAX) {
        memcpy(origin, note, (size_t)(nl - note));
        origin[nl - note] = 0;
    }
    const pgcl_note_verifier *key = key_named(log_keys, n_keys, origin);
    if (!key) {
        snprintf(q->reason, sizeof q->reason,
                 "the log of writer '%s': no --log-key is named its checkpoint's origin '%.200s'", writer_id, origin);
        goto done;
    }
    if (!origin_names_writer(origin, writer_id)) {
        snprintf(q->reason, sizeof q->reason, "the log of writer '%s': its checkpoint's origin '%.200s' names another",
                 writer_id, origin);
        goto done;
    }
    pgcl_note *opened = pgcl_tlog_checkpoint_open(note, len, key, origin, NULL, 0, 0, &cp, &st, why, sizeof why);
    if (!opened) {
        snprintf(q->reason, sizeof q->reason, "the log of writer '%s': its checkpoint of size %llu is not signed by "
                                              "its log key: %s",
                 writer_id, (unsigned long long)q->size, why);
        goto done;
    }
    pgcl_note_destroy(opened);
    q->cosigners = pgcl_witness_count_cosignatures(note, len, witnesses, n_witnesses, why, sizeof why);
    if (q->cosigners < 0) {
        snprintf(q->reason, sizeof q->reason, "the log of writer '%s': its checkpoint of size %llu: %s", writer_id,
                 (unsigned long long)q->size, why);
        goto done;
    }
    if (q->cosigners < quorum) {
        snprintf(q->reason, sizeof q->reason,
                 "the log of writer '%s': its checkpoint of size %llu has %d of the %d witness cosignatures required",
                 writer_id, (unsigned long long)q->size, q->cosigners, quorum);
        goto done;
    }
    q->ok = true;
done:
    free(note);
    return PGCL_OK;
}

pgcl_status pgcl_log_witness_quorum(pgcl_audit *a, const pgcl_note_verifier *log_keys, int n_keys,
                                    const pgcl_witness *witnesses, int n_witnesses, int quorum, pgcl_log_quorum *out,
                                    int cap, int *n, bool *all_ok, char *err, int err_cap) {
    *n = 0;
    *all_ok = false;
    int count = 64;
    pgcl_audit_log_info *logs = NULL;
    pgcl_status st = PGCL_OK;
    for (;;) { /* with more room while the store has more logs than room */
        free(logs);
        logs = calloc((size_t)count, sizeof *logs);
        if (!logs) {
            snprintf(err, (size_t)err_cap, "out of memory");
            return PGCL_ERR_NOMEM;
        }
        int total = 0;
        st = pgcl_audit_logs(a, logs, count, &total, err, err_cap);
        if (st != PGCL_OK || total <= count) {
            count = total;
            break;
        }
        count = total;
    }
    int got = st == PGCL_OK ? count : 0;
    bool ok = st == PGCL_OK && got > 0;
    for (int i = 0; st == PGCL_OK && i < got; i++) {
        pgcl_log_quorum q;
        st = check_log(a, logs[i].writer_id, log_keys, n_keys, witnesses, n_witnesses, quorum, &q, err, err_cap);
        ok = ok && st == PGCL_OK && q.ok;
        if (st == PGCL_OK && i < cap) out[i] = q;
    }
    free(logs);
    if (st != PGCL_OK) return st;
    *n = got;
    *all_ok = ok;
    return PGCL_OK;
}
