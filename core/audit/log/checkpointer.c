/* The checkpointer: signed C2SP tlog-checkpoint notes of this process's writer's log, every
 * interval and on demand; see checkpointer.h. */
#include "checkpointer.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../util/clock.h"
#include "../../util/log.h"
#include "log.h"
#include "tiles.h"

bool pgcl_log_writer_id_valid(const char *id) {
    size_t n = id ? strlen(id) : 0;
    if (n == 0 || n > PGCL_LOG_WRITER_ID_MAX) return false;
    if (strcmp(id, ".") == 0 || strcmp(id, "..") == 0) return false;
    for (size_t i = 0; i < n; i++) {
        char ch = id[i];
        bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '.' ||
                  ch == '_' || ch == '-';
        if (!ok) return false;
    }
    return true;
}

pgcl_status pgcl_log_origin(const char *prefix, const char *writer_id, char out[PGCL_TLOG_ORIGIN_MAX + 1], char *err,
                            int cap) {
    out[0] = 0;
    if (!prefix || !*prefix) {
        snprintf(err, (size_t)cap, "the log origin prefix is empty");
        return PGCL_ERR_INVALID;
    }
    if (!pgcl_log_writer_id_valid(writer_id)) {
        snprintf(err, (size_t)cap,
                 "writer id '%.*s' cannot name a log: it must be 1 to %d characters of A-Z a-z 0-9 . _ - "
                 "(and not '.' or '..')",
                 PGCL_LOG_WRITER_ID_MAX, writer_id ? writer_id : "", PGCL_LOG_WRITER_ID_MAX);
        return PGCL_ERR_INVALID;
    }
    int n = snprintf(out, PGCL_TLOG_ORIGIN_MAX + 1, "%s/%s", prefix, writer_id);
    if (n < 0 || n > PGCL_TLOG_ORIGIN_MAX || !pgcl_note_name_valid(out, (size_t)n)) {
        snprintf(err, (size_t)cap,
                 "the log origin '%.64s/%.64s' is not a valid note key name of at most %d bytes (no white space, "
                 "no '+', no control characters)",
                 prefix, writer_id, PGCL_TLOG_ORIGIN_MAX);
        out[0] = 0;
        return PGCL_ERR_INVALID;
    }
    return PGCL_OK;
}

char *pgcl_log_checkpoint_sign(const pgcl_note_signer *signer, uint64_t size, const pgcl_merkle_hash *root,
                               pgcl_status *st, char *err, int cap) {
    pgcl_tlog_checkpoint cp = {.size = size, .root = *root};
    const char *origin = pgcl_note_signer_verifier(signer)->name;
    snprintf(cp.origin, sizeof cp.origin, "%s", origin);
    char text[PGCL_TLOG_CHECKPOINT_MAX];
    size_t len = 0;
    *st = pgcl_tlog_checkpoint_format(&cp, text, &len, err, cap);
    if (*st != PGCL_OK) return NULL;
    size_t out_len = 0;
    return pgcl_note_sign(text, len, &signer, 1, 0, &out_len, st, err, cap);
}

struct pgcl_checkpointer {
    pgcl_audit *audit;
    pgcl_note_signer *signer;
    char writer_id[PGCL_LOG_WRITER_ID_MAX + 1];
    long interval_s;
    pthread_mutex_t run_lock; /* one checkpoint at a time (the thread's, on-demand ones) */
    bool have_stored;         /* a checkpoint is stored; stored_size is its size */
    uint64_t stored_size;
    pgcl_checkpoint_signed_fn on_signed; /* under run_lock; NULL: none */
    void *on_signed_ctx;
    /* the thread's */
    bool has_thread;
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t wake;
    bool stopping;
};

/* The log's state, checked against its tiles: what pgcl_audit_log_read's callback fills. */
typedef struct state_read {
    uint64_t size;
    pgcl_merkle_hash root;
} state_read;

static pgcl_status read_checked_state(void *ctx, const pgcl_log_ops *ops, void *ops_ctx, const pgcl_audit_log_info *log,
                                      char *err, int cap) {
    state_read *out = ctx;
    pgcl_log_source source;
    pgcl_log_source_init(&source, ops, ops_ctx, log->size);
    pgcl_tiles_reader *reader = pgcl_tiles_reader_create(pgcl_log_tile_read, &source);
    pgcl_status st = PGCL_ERR_NOMEM;
    if (!reader) {
        snprintf(err, (size_t)cap, "out of memory");
        goto done;
    }
    pgcl_merkle_hash from_tiles;
    st = pgcl_tiles_root(reader, log->size, &from_tiles, err, cap);
    if (st != PGCL_OK) goto done;
    if (memcmp(from_tiles.b, log->root.b, sizeof from_tiles.b) != 0) {
        snprintf(err, (size_t)cap, "the log of writer '%s' at size %llu: its stored root is not the root of its tiles",
                 log->writer_id, (unsigned long long)log->size);
        st = PGCL_ERR_MISMATCH;
        goto done;
    }
    out->size = log->size;
    out->root = from_tiles;
done:
    pgcl_tiles_reader_destroy(reader);
    pgcl_log_source_free(&source);
    return st;
}

/* Under run_lock: the stored checkpoint's size, read once. */
static pgcl_status load_stored(pgcl_checkpointer *c, char *err, int cap) {
    if (c->have_stored) return PGCL_OK;
    char *note = NULL;
    uint64_t size = 0;
    pgcl_status st = pgcl_audit_log_checkpoint(c->audit, c->writer_id, &note, &size, err, cap);
    free(note);
    if (st == PGCL_ERR_NOT_FOUND) return PGCL_OK;
    if (st != PGCL_OK) return st;
    c->have_stored = true;
    c->stored_size = size;
    return PGCL_OK;
}

pgcl_status pgcl_checkpointer_now(pgcl_checkpointer *c, uint64_t *size, bool *signed_now, char *err, int cap) {
    if (signed_now) *signed_now = false;
    pthread_mutex_lock(&c->run_lock);
    char *note = NULL;
    state_read state = {0};
    pgcl_status st = load_stored(c, err, cap);
    if (st != PGCL_OK) goto done;
    st = pgcl_audit_log_read(c->audit, c->writer_id, read_checked_state, &state, err, cap);
    if (st == PGCL_ERR_NOT_FOUND) { /* no log row yet: the empty tree */
        memset(&state, 0, sizeof state);
        state.root = pgcl_merkle_root(NULL, 0);
        st = PGCL_OK;
    }
    if (st != PGCL_OK) goto done;
    /* The log only grows: a smaller state than a stored checkpoint is a store that lost commits. */
    if (c->have_stored && state.size < c->stored_size) {
        snprintf(err, (size_t)cap, "the log of writer '%s' has %llu leaves, fewer than its last checkpoint's %llu",
                 c->writer_id, (unsigned long long)state.size, (unsigned long long)c->stored_size);
        st = PGCL_ERR_MISMATCH;
        goto done;
    }
    if (c->have_stored && state.size == c->stored_size) goto done;
    note = pgcl_log_checkpoint_sign(c->signer, state.size, &state.root, &st, err, cap);
    if (!note) goto done;
    st = pgcl_audit_log_put_checkpoint(c->audit, state.size, note, err, cap);
    if (st != PGCL_OK) goto done;
    c->have_stored = true;
    c->stored_size = state.size;
    if (signed_now) *signed_now = true;
    if (c->on_signed) c->on_signed(c->on_signed_ctx, note, strlen(note), state.size);
done:
    if (size) *size = c->have_stored ? c->stored_size : 0;
    pthread_mutex_unlock(&c->run_lock);
    free(note);
    return st;
}

static void checkpoint_logged(pgcl_checkpointer *c) {
    char err[1024];
    uint64_t size = 0;
    bool made = false;
    pgcl_status st = pgcl_checkpointer_now(c, &size, &made, err, sizeof err);
    if (st != PGCL_OK) pgcl_log_error("log checkpoint of writer '%s' failed: %s", c->writer_id, err);
    else if (made) pgcl_log_debug("log checkpoint: writer '%s' signed at size %llu", c->writer_id,
                                  (unsigned long long)size);
}

static void *checkpointer_main(void *arg) {
    pgcl_checkpointer *c = arg;
    pthread_mutex_lock(&c->lock);
    while (!c->stopping) {
        struct timespec deadline = pgcl_monotonic_timespec(pgcl_monotonic_us() + c->interval_s * 1000000LL);
        while (!c->stopping && pthread_cond_timedwait(&c->wake, &c->lock, &deadline) != ETIMEDOUT) {
        }
        pthread_mutex_unlock(&c->lock);
        checkpoint_logged(c); /* also once more at stop */
        pthread_mutex_lock(&c->lock);
    }
    pthread_mutex_unlock(&c->lock);
    return NULL;
}

pgcl_checkpointer *pgcl_checkpointer_create(pgcl_audit *a, pgcl_note_signer *signer, long interval_s, char *err,
                                            int cap) {
    const char *writer = pgcl_audit_writer_id(a);
    if (!writer || !*writer || strlen(writer) > PGCL_LOG_WRITER_ID_MAX || interval_s < 0) {
        snprintf(err, (size_t)cap, "the store has no writer to checkpoint (opened read-only?)");
        pgcl_note_signer_destroy(signer);
        return NULL;
    }
    pgcl_checkpointer *c = calloc(1, sizeof *c);
    if (!c) {
        snprintf(err, (size_t)cap, "out of memory");
        pgcl_note_signer_destroy(signer);
        return NULL;
    }
    c->audit = a;
    c->signer = signer;
    snprintf(c->writer_id, sizeof c->writer_id, "%s", writer);
    c->interval_s = interval_s;
    pthread_mutex_init(&c->run_lock, NULL);
    pthread_mutex_init(&c->lock, NULL);
    pgcl_cond_init_monotonic(&c->wake);
    if (interval_s > 0) {
        if (pthread_create(&c->thread, NULL, checkpointer_main, c) != 0) {
            snprintf(err, (size_t)cap, "cannot start the checkpoint thread");
            pgcl_checkpointer_destroy(c);
            return NULL;
        }
        c->has_thread = true;
    }
    return c;
}

void pgcl_checkpointer_on_signed(pgcl_checkpointer *c, pgcl_checkpoint_signed_fn fn, void *ctx) {
    pthread_mutex_lock(&c->run_lock);
    c->on_signed = fn;
    c->on_signed_ctx = fn ? ctx : NULL;
    pthread_mutex_unlock(&c->run_lock);
}

int pgcl_checkpointer_verifier_key(const pgcl_checkpointer *c, char out[PGCL_NOTE_VKEY_MAX]) {
    int n = pgcl_note_verifier_format(pgcl_note_signer_verifier(c->signer), out, PGCL_NOTE_VKEY_MAX);
    PGCL_ASSERT(n > 0); /* a signer made from a valid name formats */
    return n;
}

void pgcl_checkpointer_destroy(pgcl_checkpointer *c) {
    if (!c) return;
    if (c->has_thread) {
        pthread_mutex_lock(&c->lock);
        c->stopping = true;
        pthread_cond_signal(&c->wake);
        pthread_mutex_unlock(&c->lock);
        pthread_join(c->thread, NULL);
    }
    pthread_mutex_destroy(&c->run_lock);
    pthread_mutex_destroy(&c->lock);
    pthread_cond_destroy(&c->wake);
    pgcl_note_signer_destroy(c->signer);
    free(c);
}
