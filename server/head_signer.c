/* The head signer: periodic signed checkpoints of the audit chain's head; see head_signer.h. */
#include "head_signer.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#include "clock.h"
#include "log.h"
#include "audit_reads.h"
#include "signing.h"

struct pgcld_head_signer {
    pgcld_server *srv;
    long interval_s;
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t wake;
    bool stopping;
    int64_t last_seq; /* head of the last checkpoint written: logged only when it moved. An unchanged
                       * head is signed again each interval all the same (docs/audit.md): the newer
                       * checkpoint says the log had not grown as of its time. */
};

static void checkpoint_once(pgcld_head_signer *c) {
    pgcl_store_checkpoint *cp = malloc(sizeof *cp);
    char err[1024];
    if (!cp) {
        pgcl_log_error("audit checkpoint failed: out of memory");
        return;
    }
    pgcl_status st = pgcld_checkpoint_now(c->srv, cp, err, sizeof err);
    if (st == PGCL_OK) {
        /* a fleet's "head": the sum of its writers' heads, which grows whenever one chain grows */
        int64_t seq = cp->is_fleet ? pgcl_fleet_checkpoint_entries(&cp->fleet) : cp->chain.head_seq;
        if (seq != c->last_seq)
            pgcl_log_info("audit checkpoint: head %lld signed, written to %s", (long long)seq,
                          cp->is_fleet ? cp->fleet.file : cp->chain.file);
        c->last_seq = seq;
    } else if (st != PGCL_ERR_NOT_FOUND) {
        pgcl_log_error("audit checkpoint failed: %s", err);
    }
    pgcl_store_checkpoint_release(cp);
    free(cp);
}

static void *head_signer_main(void *arg) {
    pgcld_head_signer *c = arg;
    pthread_mutex_lock(&c->lock);
    while (!c->stopping) {
        struct timespec deadline = pgcl_monotonic_timespec(pgcl_monotonic_us() + c->interval_s * 1000000LL);
        while (!c->stopping && pthread_cond_timedwait(&c->wake, &c->lock, &deadline) != ETIMEDOUT) {
        }
        pthread_mutex_unlock(&c->lock);
        checkpoint_once(c); /* also once more at stop: the last head is covered too */
        pthread_mutex_lock(&c->lock);
    }
    pthread_mutex_unlock(&c->lock);
    return NULL;
}

pgcld_head_signer *pgcld_head_signer_start(pgcld_server *srv) {
    long interval = srv->cfg->checkpoint_interval_s;
    if (interval <= 0) return NULL;
    if (!srv->cfg->signing_key || !*srv->cfg->signing_key) {
        pgcl_log_warn("audit checkpoint: --checkpoint-interval is set but --signing-key is not; no checkpoints");
        return NULL;
    }
    pgcld_head_signer *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    c->srv = srv;
    c->interval_s = interval;
    c->last_seq = -1;
    pthread_mutex_init(&c->lock, NULL);
    pgcl_cond_init_monotonic(&c->wake);
    if (pthread_create(&c->thread, NULL, head_signer_main, c) != 0) {
        pgcl_log_error("audit checkpoint: cannot start the checkpoint thread");
        pthread_mutex_destroy(&c->lock);
        pthread_cond_destroy(&c->wake);
        free(c);
        return NULL;
    }
    pgcl_log_info("audit checkpoint: a signed checkpoint every %ld s", interval);
    return c;
}

void pgcld_head_signer_stop(pgcld_head_signer *c) {
    if (!c) return;
    pthread_mutex_lock(&c->lock);
    c->stopping = true;
    pthread_cond_signal(&c->wake);
    pthread_mutex_unlock(&c->lock);
    pthread_join(c->thread, NULL);
    pthread_mutex_destroy(&c->lock);
    pthread_cond_destroy(&c->wake);
    free(c);
}
