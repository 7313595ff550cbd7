/* parse_forward: the in-process rate of what POST /v1/score computes for a body before the audit
 * log — the fast parser (server/wire/fastjson.c) then the forward pass (pgcl_forward) — with no
 * HTTP, no decisions and no audit rows. The reference the throughput bench holds pgcld's HTTP rate
 * against for JSON bodies (issue 16: "≥ 60 % of the in-process rate of fast-parse + forward").
 *
 *   BUILD/bench/parse_forward --model DIR --body FILE [--body FILE]... [--threads 1,2] [--seconds S]
 *
 * For each body (a score request as bench/throughput/make_bodies.py writes them: JSON arrays or
 * base64) and thread count T: T threads, each with its own pgcl_scratch, parse the body and run the
 * forward pass of its rows in a loop for S seconds. Prints one JSON object: per body and T, the
 * embeddings per second and the parse share of the time. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "fastjson.h"
#include "model.h"

#define MAX_BODIES 8
#define MAX_ITEMS 1024

static double now_s(void) { return (double)pgcl_monotonic_us() * 1e-6; }

typedef struct worker {
    const pgcl_model *m;
    const char *body;
    size_t len;
    double seconds;
    long rows;          /* out: rows parsed and forwarded */
    double parse_s;     /* out: time in the parser */
    int failures;       /* out: bodies the fast parser refused */
} worker;

static int resolve_dim(void *ctx, const char *model_name) {
    (void)model_name;
    return ((const pgcl_model *)ctx)->D;
}

static void *worker_main(void *arg) {
    worker *w = arg;
    pgcl_scratch *s = pgcl_scratch_create(w->m, MAX_ITEMS);
    float *vectors = malloc(sizeof(float) * (size_t)w->m->d * MAX_ITEMS);
    float *probs = malloc(sizeof(float) * (size_t)w->m->K * MAX_ITEMS);
    double t0 = now_s(), t = t0;
    while (s && vectors && probs && t - t0 < w->seconds) {
        pgcld_fast_request req;
        double p0 = now_s();
        if (pgcld_fast_parse_score(w->body, w->len, MAX_ITEMS, resolve_dim, (void *)w->m, &req) != PGCLD_FAST_OK) {
            w->failures++;
            break;
        }
        w->parse_s += now_s() - p0;
        pgcl_forward(w->m, s, req.z, req.n, vectors, probs);
        w->rows += req.n;
        pgcld_fast_request_free(&req);
        t = now_s();
    }
    free(vectors);
    free(probs);
    pgcl_scratch_destroy(s);
    return NULL;
}

/* The whole file (malloc'd, NUL-terminated), or NULL. */
static char *read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    if (buf) {
        buf[n] = 0;
        *len = (size_t)n;
    }
    return buf;
}

int main(int argc, char **argv) {
    const char *model_dir = NULL, *bodies[MAX_BODIES];
    const char *threads_list = "1,2";
    int n_bodies = 0;
    double seconds = 1.0;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--model") == 0) model_dir = argv[i + 1];
        else if (strcmp(argv[i], "--body") == 0 && n_bodies < MAX_BODIES) bodies[n_bodies++] = argv[i + 1];
        else if (strcmp(argv[i], "--threads") == 0) threads_list = argv[i + 1];
        else if (strcmp(argv[i], "--seconds") == 0) seconds = atof(argv[i + 1]);
        else goto usage;
    }
    if (!model_dir || !n_bodies || seconds <= 0) goto usage;
    pgcl_model *m = NULL;
    char err[512];
    if (pgcl_model_load(model_dir, "bench", "1", &m, err, sizeof err) != PGCL_OK) {
        fprintf(stderr, "parse_forward: %s\n", err);
        return 1;
    }
    printf("{\"model\": \"%s\", \"rows\": [", model_dir);
    const char *sep = "";
    for (int b = 0; b < n_bodies; b++) {
        size_t len = 0;
        char *body = read_file(bodies[b], &len);
        if (!body) {
            fprintf(stderr, "parse_forward: cannot read %s\n", bodies[b]);
            return 1;
        }
        for (const char *p = threads_list; *p;) {
            int T = atoi(p);
            worker w[64] = {{0}};
            pthread_t tid[64];
            T = T < 1 ? 1 : T > 64 ? 64 : T;
            double t0 = now_s();
            for (int t = 0; t < T; t++) {
                w[t] = (worker){.m = m, .body = body, .len = len, .seconds = seconds};
                pthread_create(&tid[t], NULL, worker_main, &w[t]);
            }
            long rows = 0;
            double parse_s = 0;
            int failures = 0;
            for (int t = 0; t < T; t++) {
                pthread_join(tid[t], NULL);
                rows += w[t].rows;
                parse_s += w[t].parse_s;
                failures += w[t].failures;
            }
            double elapsed = now_s() - t0;
            printf("%s{\"body\": \"%s\", \"threads\": %d, \"emb_s\": %.0f, \"parse_share\": %.3f, \"failures\": %d}",
                   sep, bodies[b], T, (double)rows / elapsed, parse_s / (elapsed * T), failures);
            sep = ", ";
            p = strchr(p, ',');
            if (!p) break;
            p++;
        }
        free(body);
    }
    printf("]}\n");
    pgcl_model_release(m);
    return 0;
usage:
    fprintf(stderr, "usage: parse_forward --model DIR --body FILE [--body FILE]... [--threads 1,2] [--seconds S]\n");
    return 2;
}
