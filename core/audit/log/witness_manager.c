/* The witness manager (witness.h): one thread that sends the latest checkpoint to every configured
 * witness, one exchange at a time, and retries a failing witness after a backoff that doubles per
 * consecutive failure. Its callers (the checkpointer) only copy a note under a mutex: scoring never
 * waits for a witness. State per witness is kept for metrics and logs. */
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "util/log.h"
#include "witness.h"

typedef struct witness_slot {
    pgcl_witness w;
    pgcl_witness_state state;
    uint64_t send_from;      /* the old size of the next request: the witness's size as last known */
    int64_t next_attempt_us; /* monotonic: not before (0: now) */
    uint64_t attempted_seq;  /* the submission last tried (cosigned or failed) */
} witness_slot;

struct pgcl_witness_manager {
    pthread_mutex_t mu;
    pthread_cond_t wake; /* submit, destroy -> the thread (monotonic clock) */
    pthread_cond_t done; /* the thread -> pgcl_witness_manager_wait */
    pthread_t thread;
    bool stop;
    char *note; /* the latest checkpoint submitted, [note_len]; NULL before the first */
    size_t note_len;
    uint64_t note_size;
    uint64_t seq; /* submissions so far */
    pgcl_witness_manager_config cfg;
    int n;
    witness_slot slots[PGCL_WITNESS_MAX];
};

/* True when slot has yet to cosign the latest checkpoint. Under mu. */
static bool slot_behind(const pgcl_witness_manager *m, const witness_slot *s) {
    return m->note && s->state.cosigned_size < m->note_size;
}

static int64_t backoff_us(const pgcl_witness_manager *m, int failures) {
    int64_t wait = (int64_t)(m->cfg.backoff_min_ms > 0 ? m->cfg.backoff_min_ms : 1000) * 1000;
    int64_t max = (int64_t)(m->cfg.backoff_max_ms > 0 ? m->cfg.backoff_max_ms : 60000) * 1000;
    for (int i = 1; i < failures && wait < max; i++)
        wait *= 2;
    return wait < max ? wait : max;
}

/* Records the outcome of an exchange of slot for the checkpoint of `size` leaves, submission seq.
 * Under mu. */
static void slot_record(pgcl_witness_manager *m, witness_slot *s, const pgcl_witness_result *r, uint64_t size,
                        uint64_t seq) {
    pgcl_witness_state *st = &s->state;
    st->last_outcome = r->outcome;
    st->last_http_status = r->http_status;
    s->attempted_seq = seq;
    if (r->outcome == PGCL_WITNESS_COSIGNED) {
        if (size > st->cosigned_size) st->cosigned_size = size;
        st->witness_size = size;
        s->send_from = size;
        st->last_cosigned_unix = (int64_t)r->timestamp;
        st->cosignatures++;
        st->consecutive_failures = 0;
        st->last_error[0] = 0;
        s->next_attempt_us = 0;
        return;
    }
    st->failures++;
    st->conflicts += r->outcome == PGCL_WITNESS_CONFLICT;
    st->consecutive_failures++;
    snprintf(st->last_error, sizeof st->last_error, "%s", r->error);
    if (r->http_status == 409 || r->outcome == PGCL_WITNESS_CONFLICT) st->witness_size = r->witness_size;
    /* the next request starts from the witness's own size when it is one this log can extend */
    /* (after a conflict the old size stays: the next attempt meets the same 409 and reports the same) */
    if (r->outcome != PGCL_WITNESS_CONFLICT && r->witness_size <= size) s->send_from = r->witness_size;
    s->next_attempt_us = pgcl_monotonic_us() + backoff_us(m, st->consecutive_failures);
}

static void log_outcome(const witness_slot *s, const pgcl_witness_result *r, uint64_t size) {
    if (r->outcome == PGCL_WITNESS_COSIGNED) {
        pgcl_log(PGCL_LOG_INFO, "witness: %s cosigned the checkpoint of size %" PRIu64, s->w.name, size);
    } else {
        pgcl_log(r->outcome == PGCL_WITNESS_CONFLICT ? PGCL_LOG_ERROR : PGCL_LOG_WARN,
                 "witness: %s: %s for the checkpoint of size %" PRIu64 " (HTTP %d, %d failures in a row): %s",
                 s->w.name, pgcl_witness_outcome_str(r->outcome), size, r->http_status, s->state.consecutive_failures,
                 r->error);
    }
}

/* The slot due now, or -1 with *wake_at_us the earliest time one will be (0: none pending). Under mu. */
static int slot_due(const pgcl_witness_manager *m, int64_t now_us, int64_t *wake_at_us) {
    *wake_at_us = 0;
    for (int i = 0; i < m->n; i++) {
        const witness_slot *s = &m->slots[i];
        if (!slot_behind(m, s)) continue;
        if (s->next_attempt_us <= now_us) return i;
        if (*wake_at_us == 0 || s->next_attempt_us < *wake_at_us) *wake_at_us = s->next_attempt_us;
    }
    return -1;
}

static void *manager_main(void *arg) {
    pgcl_witness_manager *m = arg;
    pgcl_witness_result *r = malloc(sizeof *r);
    pthread_mutex_lock(&m->mu);
    while (!m->stop) {
        int64_t wake_at = 0;
        int i = slot_due(m, pgcl_monotonic_us(), &wake_at);
        char *note = NULL;
        if (i >= 0 && r) note = malloc(m->note_len);
        if (i < 0 || !note) {
            /* nothing due (or no memory: try again shortly) */
            if (i >= 0) wake_at = pgcl_monotonic_us() + 100000;
            if (wake_at == 0) {
                pthread_cond_wait(&m->wake, &m->mu);
            } else {
                struct timespec ts = pgcl_monotonic_timespec(wake_at);
                pthread_cond_timedwait(&m->wake, &m->mu, &ts);
            }
            continue;
        }
        witness_slot *s = &m->slots[i];
        memcpy(note, m->note, m->note_len);
        size_t len = m->note_len;
        uint64_t size = m->note_size, seq = m->seq, from = s->send_from;
        pgcl_witness w = s->w;
        pthread_mutex_unlock(&m->mu);

        pgcl_witness_add_checkpoint(&w, note, len, from, m->cfg.proof_fn, m->cfg.proof_ctx, &m->cfg.timeouts, r);
        free(note);
        if (r->outcome == PGCL_WITNESS_COSIGNED && m->cfg.on_cosigned)
            m->cfg.on_cosigned(m->cfg.cosigned_ctx, i, &w, size, r->line);

        pthread_mutex_lock(&m->mu);
        slot_record(m, s, r, size, seq);
        log_outcome(s, r, size);
        pthread_cond_broadcast(&m->done);
    }
    pthread_mutex_unlock(&m->mu);
    free(r);
    return NULL;
}

pgcl_witness_manager *pgcl_witness_manager_create(const pgcl_witness_manager_config *cfg, pgcl_status *st, char *err,
                                                  int cap) {
    if (!cfg || cfg->n < 1 || cfg->n > PGCL_WITNESS_MAX || !cfg->witnesses || !cfg->proof_fn) {
        pgcl_errorf(err, cap, "witness manager: 1 to %d witnesses and a proof source", PGCL_WITNESS_MAX);
        *st = PGCL_ERR_INVALID;
        return NULL;
    }
    if (!pgcl_witness_http_init()) {
        pgcl_errorf(err, cap, "witness manager: libcurl could not be initialised");
        *st = PGCL_ERR_IO;
        return NULL;
    }
    pgcl_witness_manager *m = calloc(1, sizeof *m);
    if (!m) {
        pgcl_errorf(err, cap, "witness manager: out of memory");
        *st = PGCL_ERR_NOMEM;
        return NULL;
    }
    m->cfg = *cfg;
    m->cfg.witnesses = NULL; /* copied into the slots */
    m->cfg.known_sizes = NULL;
    m->n = cfg->n;
    for (int i = 0; i < m->n; i++) {
        witness_slot *s = &m->slots[i];
        s->w = cfg->witnesses[i];
        _Static_assert(sizeof s->state.name == sizeof s->w.name, "a witness's name and its state's are one size");
        memcpy(s->state.name, s->w.name, sizeof s->state.name); /* both NUL-terminated arrays of one size */
        s->send_from = cfg->known_sizes ? cfg->known_sizes[i] : 0;
        s->state.cosigned_size = s->send_from;
        s->state.witness_size = s->send_from;
    }
    pthread_mutex_init(&m->mu, NULL);
    pgcl_cond_init_monotonic(&m->wake);
    pthread_cond_init(&m->done, NULL);
    if (pthread_create(&m->thread, NULL, manager_main, m) != 0) {
        pthread_cond_destroy(&m->done);
        pthread_cond_destroy(&m->wake);
        pthread_mutex_destroy(&m->mu);
        free(m);
        pgcl_errorf(err, cap, "witness manager: its thread could not start");
        *st = PGCL_ERR_IO;
        return NULL;
    }
    *st = PGCL_OK;
    return m;
}

pgcl_status pgcl_witness_manager_submit(pgcl_witness_manager *m, const char *note, size_t len, uint64_t size) {
    if (!note || len == 0 || len > PGCL_NOTE_MAX_BYTES) return PGCL_ERR_INVALID;
    char *copy = malloc(len);
    if (!copy) return PGCL_ERR_NOMEM;
    memcpy(copy, note, len);
    pthread_mutex_lock(&m->mu);
    pgcl_status st = PGCL_OK;
    if (m->stop) {
        st = PGCL_ERR_CLOSED;
    } else if (m->note && size <= m->note_size) {
        /* not newer than the one already held: the latest wins */
    } else {
        free(m->note);
        m->note = copy;
        copy = NULL;
        m->note_len = len;
        m->note_size = size;
        m->seq++;
        for (int i = 0; i < m->n; i++)
            m->slots[i].next_attempt_us = 0; /* a new checkpoint: try at once */
        pthread_cond_signal(&m->wake);
    }
    pthread_mutex_unlock(&m->mu);
    free(copy);
    return st;
}

int pgcl_witness_manager_states(pgcl_witness_manager *m, pgcl_witness_state *out, int cap) {
    pthread_mutex_lock(&m->mu);
    for (int i = 0; i < m->n && i < cap; i++) {
        out[i] = m->slots[i].state;
        out[i].pending_size = slot_behind(m, &m->slots[i]) ? m->note_size : 0;
    }
    int n = m->n;
    pthread_mutex_unlock(&m->mu);
    return n;
}

bool pgcl_witness_manager_wait(pgcl_witness_manager *m, int timeout_ms) {
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += timeout_ms / 1000;
    deadline.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
    if (deadline.tv_nsec >= 1000000000L) {
        deadline.tv_sec++;
        deadline.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&m->mu);
    uint64_t seq = m->seq;
    bool all = false;
    for (;;) {
        all = true;
        for (int i = 0; i < m->n && all; i++)
            all = !slot_behind(m, &m->slots[i]) || m->slots[i].attempted_seq >= seq;
        if (all || pthread_cond_timedwait(&m->done, &m->mu, &deadline) != 0) break;
    }
    if (!all) { /* one last look after the timeout */
        all = true;
        for (int i = 0; i < m->n && all; i++)
            all = !slot_behind(m, &m->slots[i]) || m->slots[i].attempted_seq >= seq;
    }
    pthread_mutex_unlock(&m->mu);
    return all;
}

void pgcl_witness_manager_destroy(pgcl_witness_manager *m) {
    if (!m) return;
    pthread_mutex_lock(&m->mu);
    m->stop = true;
    pthread_cond_signal(&m->wake);
    pthread_mutex_unlock(&m->mu);
    pthread_join(m->thread, NULL);
    pthread_cond_destroy(&m->done);
    pthread_cond_destroy(&m->wake);
    pthread_mutex_destroy(&m->mu);
    free(m->note);
    free(m);
}
