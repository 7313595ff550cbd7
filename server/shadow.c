/* Shadow worker; see shadow.h. */
#include "shadow.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

typedef struct shadow_job {
    pgcl_model *primary, *shadow;
    int n;
    float *z;                                  /* (n, D) */
    char (*decision_ids)[PGCL_UUID_LEN + 1];   /* (n) */
    int *labels;                               /* (n) primary */
    pgcl_decision *decisions;                  /* (n) primary */
    float *probs;                              /* (n, K) primary */
    struct shadow_job *next;
} shadow_job;

struct pgcld_shadow {
    pgcl_audit *audit;
    pgcld_metrics *metrics;
    int max_jobs, chunk_rows;
    pthread_t worker;
    pthread_mutex_t lock;
    pthread_cond_t work;
    shadow_job *head, *tail;
    int queued;
    bool stopping;
    pgcl_scratch *scratch; /* worker-owned */
};

double pgcld_policy_score(const pgcl_model *m, const float *probs, int label_index) {
    return m->policy.kind == PGCL_POLICY_THRESHOLD ? probs[m->policy.label_index] : probs[label_index];
}

static void job_free(shadow_job *j) {
    if (!j) return;
    pgcl_model_release(j->primary);
    pgcl_model_release(j->shadow);
    free(j->z);
    free(j->decision_ids);
    free(j->labels);
    free(j->decisions);
    free(j->probs);
    free(j);
}

static void run_job(pgcld_shadow *s, shadow_job *j) {
    const pgcl_model *m = j->shadow, *pm = j->primary;
    if (!s->scratch || !pgcl_scratch_fits(s->scratch, m)) {
        pgcl_scratch_destroy(s->scratch);
        s->scratch = pgcl_scratch_create(m, s->chunk_rows);
    }
    float *vec = malloc(sizeof(float) * (size_t)j->n * (size_t)m->d);
    float *probs = malloc(sizeof(float) * (size_t)j->n * (size_t)m->K);
    pgcl_shadow_row *rows = calloc((size_t)j->n, sizeof *rows);
    char **pj = calloc((size_t)j->n, sizeof *pj);
    if (!s->scratch || !vec || !probs || !rows || !pj) {
        pgcld_metrics_shadow(s->metrics, pm->name, true, j->n);
    } else {
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
                .primary_score = pgcld_policy_score(pm, j->probs + (size_t)i * pm->K, j->labels[i]),
                .shadow_score = pgcld_policy_score(m, p, label), .probabilities_json = pj[i] ? pj[i] : "{}"};
        }
        char err[256];
        pgcl_status st = pgcl_audit_append_shadow(s->audit, rows, j->n, err, sizeof err);
        if (st != PGCL_OK) pgcl_log_warn("shadow: %s/%s: rows not written: %s", pm->name, m->version, err);
        pgcld_metrics_shadow(s->metrics, pm->name, st != PGCL_OK, j->n);
    }
    for (int i = 0; pj && i < j->n; i++) free(pj[i]);
    free(pj);
    free(rows);
    free(vec);
    free(probs);
}

static void *worker_main(void *arg) {
    pgcld_shadow *s = arg;
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
        job_free(j);
        pthread_mutex_lock(&s->lock);
    }
    pthread_mutex_unlock(&s->lock);
    return NULL;
}

pgcld_shadow *pgcld_shadow_create(pgcl_audit *audit, pgcld_metrics *metrics, int max_jobs, int chunk_rows) {
    pgcld_shadow *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->audit = audit;
    s->metrics = metrics;
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

void pgcld_shadow_destroy(pgcld_shadow *s) {
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

void pgcld_shadow_set_capacity(pgcld_shadow *s, int max_jobs) {
    pthread_mutex_lock(&s->lock);
    if (max_jobs > 0) s->max_jobs = max_jobs;
    pthread_mutex_unlock(&s->lock);
}

bool pgcld_shadow_submit(pgcld_shadow *s, pgcl_model *primary, pgcl_model *shadow, int n, const float *z,
                         const char (*decision_ids)[PGCL_UUID_LEN + 1], const int *labels,
                         const pgcl_decision *decisions, const float *probs) {
    shadow_job *j = calloc(1, sizeof *j);
    if (!j) {
        pgcl_model_release(primary);
        pgcl_model_release(shadow);
        return false;
    }
    j->primary = primary;
    j->shadow = shadow;
    j->n = n;
    pthread_mutex_lock(&s->lock);
    bool full = s->queued >= s->max_jobs || s->stopping;
    pthread_mutex_unlock(&s->lock);
    if (!full) {
        j->z = malloc(sizeof(float) * (size_t)n * (size_t)primary->D);
        j->decision_ids = malloc(sizeof *j->decision_ids * (size_t)n);
        j->labels = malloc(sizeof *j->labels * (size_t)n);
        j->decisions = malloc(sizeof *j->decisions * (size_t)n);
        j->probs = malloc(sizeof(float) * (size_t)n * (size_t)primary->K);
    }
    if (full || !j->z || !j->decision_ids || !j->labels || !j->decisions || !j->probs) {
        pgcld_metrics_shadow(s->metrics, primary->name, true, n);
        job_free(j);
        return false;
    }
    memcpy(j->z, z, sizeof(float) * (size_t)n * (size_t)primary->D);
    memcpy(j->decision_ids, decision_ids, sizeof *j->decision_ids * (size_t)n);
    memcpy(j->labels, labels, sizeof *j->labels * (size_t)n);
    memcpy(j->decisions, decisions, sizeof *j->decisions * (size_t)n);
    memcpy(j->probs, probs, sizeof(float) * (size_t)n * (size_t)primary->K);
    pthread_mutex_lock(&s->lock);
    if (s->tail) s->tail->next = j;
    else s->head = j;
    s->tail = j;
    s->queued++;
    pthread_cond_signal(&s->work);
    pthread_mutex_unlock(&s->lock);
    return true;
}
