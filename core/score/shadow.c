/* Shadow worker; see shadow.h. */
#include "shadow.h"

#include <pthread.h>
#include <stdalign.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

/* One queued job and its copies, in one allocation (see job_create). */
typedef struct shadow_job {
    pgcl_model *primary, *shadow;
    int n;
    float *z;                                  /* (n, D) */
    float *probs;                              /* (n, K) primary */
    int *labels;                               /* (n) primary */
    pgcl_decision *decisions;                  /* (n) primary */
    char (*decision_ids)[PGCL_UUID_LEN + 1];   /* (n) */
    struct shadow_job *next;
} shadow_job;

struct pgcl_shadow {
    pgcl_audit *audit;
    pgcl_shadow_count_fn count;
    void *count_ctx;
    int max_jobs, chunk_rows;
    pthread_t worker;
    pthread_mutex_t lock;
    pthread_cond_t work;
    shadow_job *head, *tail;
    int queued;
    bool stopping;
    pgcl_scratch *scratch; /* worker-owned */
};

double pgcl_policy_score(const pgcl_model *m, const float *probs, int label_index) {
    return m->policy.kind == PGCL_POLICY_THRESHOLD ? probs[m->policy.label_index] : probs[label_index];
}

static void counted(pgcl_shadow *s, const char *model, bool dropped, int items) {
    if (s->count) s->count(s->count_ctx, model, dropped, items);
}

/* Rounds a byte offset up to the alignment of any object. */
static size_t aligned(size_t off) {
    size_t a = alignof(max_align_t);
    return (off + a - 1) / a * a;
}

/* A job holding copies of the primary's n items, carved from one allocation: the header, then the
 * 4-byte-aligned arrays (z, probs, labels, decisions), then the decision ids. NULL when out of
 * memory. The references are not taken here. */
static shadow_job *job_create(const pgcl_model *primary, int n, const float *z,
                              const char (*decision_ids)[PGCL_UUID_LEN + 1], const int *labels,
                              const pgcl_decision *decisions, const float *probs) {
    size_t nz = (size_t)n * (size_t)primary->D, np = (size_t)n * (size_t)primary->K;
    size_t off_z = aligned(sizeof(shadow_job)), off_p = off_z + nz * sizeof(float);
    size_t off_l = off_p + np * sizeof(float), off_d = off_l + (size_t)n * sizeof(int);
    size_t off_ids = off_d + (size_t)n * sizeof(pgcl_decision);
    size_t total = off_ids + (size_t)n * sizeof *decision_ids;
    unsigned char *base = malloc(total);
    if (!base) return NULL;
    shadow_job *j = (shadow_job *)base;
    *j = (shadow_job){.n = n,
                      .z = (float *)(base + off_z),
                      .probs = (float *)(base + off_p),
                      .labels = (int *)(base + off_l),
                      .decisions = (pgcl_decision *)(base + off_d),
                      .decision_ids = (char(*)[PGCL_UUID_LEN + 1])(base + off_ids)};
    memcpy(j->z, z, nz * sizeof(float));
    memcpy(j->probs, probs, np * sizeof(float));
    memcpy(j->labels, labels, (size_t)n * sizeof(int));
    memcpy(j->decisions, decisions, (size_t)n * sizeof(pgcl_decision));
    memcpy(j->decision_ids, decision_ids, (size_t)n * sizeof *decision_ids);
    return j;
}

static void job_destroy(shadow_job *j) {
    if (!j) return;
    pgcl_model_release(j->primary);
    pgcl_model_release(j->shadow);
    free(j);
}

/* Scores one job with the shadow model and appends its shadow_decisions rows. */
static void run_job(pgcl_shadow *s, shadow_job *j) {
    const pgcl_model *m = j->shadow, *pm = j->primary;
    if (!s->scratch || !pgcl_scratch_fits(s->scratch, m)) {
        pgcl_scratch_destroy(s->scratch);
        s->scratch = pgcl_scratch_create(m, s->chunk_rows);
    }
    /* One allocation for the job's outputs: rows and probability texts (pointer-aligned) first,
     * then vectors (n, d) and probabilities (n, K). */
    size_t n = (size_t)j->n;
    size_t off_pj = n * sizeof(pgcl_shadow_row), off_vec = off_pj + n * sizeof(char *);
    size_t off_probs = off_vec + n * (size_t)m->d * sizeof(float);
    unsigned char *work = calloc(1, off_probs + n * (size_t)m->K * sizeof(float));
    if (!s->scratch || !work) {
        counted(s, pm->name, true, j->n);
        free(work);
        return;
    }
    pgcl_shadow_row *rows = (pgcl_shadow_row *)work;
    char **pj = (char **)(work + off_pj);
    float *vec = (float *)(work + off_vec), *probs = (float *)(work + off_probs);
    pgcl_forward(m, s->scratch, j->z, j->n, vec, probs);
    for (int i = 0; i < j->n; i++) {
        const float *p = probs + (size_t)i * m->K;
        int label;
        pgcl_decision d = pgcl_model_decide(m, p, &label);
        pj[i] = pgcl_model_probabilities_json(m, p);
        rows[i] = (pgcl_shadow_row){
            .decision_id = j->decision_ids[i], .model_name = pm->name,
            .primary_version = pm->version, .shadow_version = m->version, .shadow_sha256 = m->sha256,
            .primary_label = pm->labels[j->labels[i]], .shadow_label = m->labels[label],
            .primary_decision = pgcl_decision_str(j->decisions[i]), .shadow_decision = pgcl_decision_str(d),
            .primary_score = pgcl_policy_score(pm, j->probs + (size_t)i * pm->K, j->labels[i]),
            .shadow_score = pgcl_policy_score(m, p, label), .probabilities_json = pj[i] ? pj[i] : "{}"};
    }
    char err[256];
    pgcl_status st = pgcl_audit_append_shadow(s->audit, rows, j->n, err, sizeof err);
    if (st != PGCL_OK) pgcl_log_warn("shadow: %s/%s: rows not written: %s", pm->name, m->version, err);
    counted(s, pm->name, st != PGCL_OK, j->n);
    for (size_t i = 0; i < n; i++) free(pj[i]);
    free(work);
}

static void *worker_main(void *arg) {
    pgcl_shadow *s = arg;
    pthread_mutex_lock(&s->lock);
    for (;;) {
        while (!s->head && !s->stopping) pthread_cond_wait(&s->work, &s->lock);
        if (!s->head) break;
        shadow_job *j = s->head;
        s->head = j->next;
        if (!s->head) s->tail = NULL;
        s->queued--;
        pthread_mutex_unlock(&s->lock);
        run_job(s, j);
        job_destroy(j);
        pthread_mutex_lock(&s->lock);
    }
    pthread_mutex_unlock(&s->lock);
    return NULL;
}

pgcl_shadow *pgcl_shadow_create(pgcl_audit *audit, pgcl_shadow_count_fn count, void *count_ctx, int max_jobs,
                                int chunk_rows) {
    pgcl_shadow *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->audit = audit;
    s->count = count;
    s->count_ctx = count_ctx;
    s->max_jobs = max_jobs;
    s->chunk_rows = chunk_rows;
    pthread_mutex_init(&s->lock, NULL);
    pthread_cond_init(&s->work, NULL);
    if (pthread_create(&s->worker, NULL, worker_main, s) != 0) {
        pthread_mutex_destroy(&s->lock);
        pthread_cond_destroy(&s->work);
        free(s);
        return NULL;
    }
    return s;
}

void pgcl_shadow_destroy(pgcl_shadow *s) {
    if (!s) return;
    pthread_mutex_lock(&s->lock);
    s->stopping = true;
    pthread_cond_signal(&s->work);
    pthread_mutex_unlock(&s->lock);
    pthread_join(s->worker, NULL);
    pgcl_scratch_destroy(s->scratch);
    pthread_mutex_destroy(&s->lock);
    pthread_cond_destroy(&s->work);
    free(s);
}

void pgcl_shadow_set_capacity(pgcl_shadow *s, int max_jobs) {
    pthread_mutex_lock(&s->lock);
    if (max_jobs > 0) s->max_jobs = max_jobs;
    pthread_mutex_unlock(&s->lock);
}

bool pgcl_shadow_submit(pgcl_shadow *s, pgcl_model *primary, pgcl_model *shadow, int n, const float *z,
                        const char (*decision_ids)[PGCL_UUID_LEN + 1], const int *labels,
                        const pgcl_decision *decisions, const float *probs) {
    pthread_mutex_lock(&s->lock);
    bool full = s->queued >= s->max_jobs || s->stopping;
    pthread_mutex_unlock(&s->lock);
    shadow_job *j = full ? NULL : job_create(primary, n, z, decision_ids, labels, decisions, probs);
    if (!j) {
        counted(s, primary->name, true, n);
        pgcl_model_release(primary);
        pgcl_model_release(shadow);
        return false;
    }
    j->primary = primary;
    j->shadow = shadow;
    pthread_mutex_lock(&s->lock);
    if (s->tail) s->tail->next = j;
    else s->head = j;
    s->tail = j;
    s->queued++;
    pthread_cond_signal(&s->work);
    pthread_mutex_unlock(&s->lock);
    return true;
}
