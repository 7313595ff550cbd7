/* forward: in-process forward rate of pgcld's core (pgcl_forward, the fast path that POST /v1/score
 * runs, its GEMMs by the packed-weight kernel of core/model/gemm_packed.h) next to the raw OpenBLAS
 * SGEMM rate for the first-layer shape, the reference the CPU path was first measured against. No
 * HTTP, no JSON, no audit log.
 *
 *   forward --model DIR [--batches 1,8,64,256] [--threads 1,2] [--seconds S] [--n-sgemm N]
 *           [--only forward|sgemm|chain]   (one kind only, for profiling; the others print 0)
 *
 * For each batch size B and thread count T: T threads, each with its own pgcl_scratch (as pgcld's
 * compute workers), input and output buffers, call pgcl_forward(B rows) in a loop for S seconds; the
 * rate is all rows / elapsed. pgcl_forward runs on the calling thread; OpenBLAS (the SGEMM columns)
 * one thread per call.
 * The SGEMM reference is cblas_sgemm C(B, N) = Z(B, 1024) · W(N, 1024)ᵀ, row-major, the layout of
 * pgcld's first GEMM, with N = --n-sgemm (default 578) and with N = the model's own first-GEMM
 * width (h1 + K); "chain" adds the model's other MLP GEMMs (every GEMM a forward pass needs). Prints
 * one JSON object. Links against build-bench/core/libpgclcore.a (bench/run.sh builds it). */
#include <cblas.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "blas.h"
#include "gemm_packed.h"
#include "model.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

typedef enum { K_FORWARD, K_SGEMM, K_CHAIN } kind;

typedef struct job {
    kind k;
    const pgcl_model *m;
    int B, n_sgemm;
    double seconds;
    long rows;
    double elapsed;
    pthread_barrier_t *barrier;
} job;

static float *randn(size_t n, unsigned seed, float scale) {
    float *x = aligned_alloc(64, ((n * sizeof(float) + 63) / 64) * 64);
    srand(seed);
    for (size_t i = 0; i < n; i += 2) {
        double u1 = (rand() + 1.0) / (RAND_MAX + 2.0), u2 = (rand() + 1.0) / (RAND_MAX + 2.0);
        double r = sqrt(-2 * log(u1));
        x[i] = (float)(r * cos(2 * M_PI * u2)) * scale;
        if (i + 1 < n) x[i + 1] = (float)(r * sin(2 * M_PI * u2)) * scale;
    }
    return x;
}

static void *worker(void *arg) {
    job *j = arg;
    const pgcl_model *m = j->m;
    int D = m->D, B = j->B;
    float *z = randn((size_t)B * D, 1234u + (unsigned)B, 1.0f / sqrtf((float)D));
    float *vec = malloc((size_t)B * m->d * sizeof(float)), *probs = malloc((size_t)B * m->K * sizeof(float));
    pgcl_scratch *s = pgcl_scratch_create(m, 256);
    /* SGEMM operands: W (N, D) and the outputs of every layer. */
    int n_first = j->k == K_SGEMM ? j->n_sgemm : m->fast.n_first;
    float *w1 = randn((size_t)n_first * D, 99u, 0.03f);
    float *c1 = malloc((size_t)B * n_first * sizeof(float));
    int L = m->raw.n_layers;
    float *wl[8] = {0}, *cl[8] = {0};
    for (int l = 1; l < L; l++) {
        wl[l] = randn((size_t)m->raw.layers[l].n_out * m->raw.layers[l].n_in, 7u + (unsigned)l, 0.03f);
        cl[l] = malloc((size_t)B * m->raw.layers[l].n_out * sizeof(float));
    }
    pthread_barrier_wait(j->barrier);
    double t0 = now_s(), t = t0;
    long rows = 0;
    do {
        for (int rep = 0; rep < 4; rep++) {
            if (j->k == K_FORWARD) {
                pgcl_forward(m, s, z, B, vec, probs);
            } else {
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, B, n_first, D, 1.0f, z, D, w1, D, 0.0f, c1, n_first);
                if (j->k == K_CHAIN) {
                    const float *in = c1;
                    int ld = n_first;
                    for (int l = 1; l < L; l++) {
                        int ni = m->raw.layers[l].n_in, no = m->raw.layers[l].n_out;
                        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, B, no, ni, 1.0f, in, ld, wl[l], ni, 0.0f,
                                    cl[l], no);
                        in = cl[l];
                        ld = no;
                    }
                }
            }
            rows += B;
        }
        t = now_s();
    } while (t - t0 < j->seconds);
    j->rows = rows;
    j->elapsed = t - t0;
    pgcl_scratch_destroy(s);
    free(z), free(vec), free(probs), free(w1), free(c1);
    for (int l = 1; l < L; l++) free(wl[l]), free(cl[l]);
    return NULL;
}

static double rate(kind k, const pgcl_model *m, int B, int T, double seconds, int n_sgemm) {
    pthread_t th[16];
    job jobs[16];
    pthread_barrier_t barrier;
    pthread_barrier_init(&barrier, NULL, (unsigned)T);
    for (int t = 0; t < T; t++) {
        jobs[t] = (job){.k = k, .m = m, .B = B, .n_sgemm = n_sgemm, .seconds = seconds, .barrier = &barrier};
        pthread_create(&th[t], NULL, worker, &jobs[t]);
    }
    double total = 0, elapsed = 0;
    for (int t = 0; t < T; t++) {
        pthread_join(th[t], NULL);
        total += (double)jobs[t].rows;
        if (jobs[t].elapsed > elapsed) elapsed = jobs[t].elapsed;
    }
    pthread_barrier_destroy(&barrier);
    return total / elapsed;
}

static int parse_list(const char *s, int *out, int cap) {
    int n = 0;
    while (*s && n < cap) {
        out[n++] = atoi(s);
        s = strchr(s, ',');
        if (!s) break;
        s++;
    }
    return n;
}

int main(int argc, char **argv) {
    pgcl_blas_ensure_fast_kernel(argv);
    const char *dir = NULL;
    int batches[16] = {1, 8, 64, 256}, nb = 4, threads[16] = {1, 2}, nt = 2, n_sgemm = 578;
    double seconds = 1.0;
    const char *only = NULL;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--model")) dir = argv[i + 1];
        else if (!strcmp(argv[i], "--batches")) nb = parse_list(argv[i + 1], batches, 16);
        else if (!strcmp(argv[i], "--threads")) nt = parse_list(argv[i + 1], threads, 16);
        else if (!strcmp(argv[i], "--seconds")) seconds = atof(argv[i + 1]);
        else if (!strcmp(argv[i], "--n-sgemm")) n_sgemm = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--only")) only = argv[i + 1];
        else {
            fprintf(stderr, "usage: forward --model DIR [--batches 1,8,64,256] [--threads 1,2] [--seconds S] [--n-sgemm N]"
                            " [--only forward|sgemm|chain]\n");
            return 2;
        }
    }
    if (!dir) {
        fprintf(stderr, "forward: --model DIR is required\n");
        return 2;
    }
    pgcl_blas_set_threads(1);
    pgcl_model *m = NULL;
    char err[512];
    if (pgcl_model_load(dir, "bench", "1", &m, err, sizeof err) != PGCL_OK) {
        fprintf(stderr, "forward: %s\n", err);
        return 1;
    }
    double flops_first = 2.0 * m->D * m->fast.n_first, flops_sgemm = 2.0 * m->D * n_sgemm, flops_chain = flops_first;
    for (int l = 1; l < m->raw.n_layers; l++) flops_chain += 2.0 * m->raw.layers[l].n_in * m->raw.layers[l].n_out;
    printf("{\"gemm_kernel\":\"%s\",\"kernel\":\"%s\",\"best_kernel\":\"%s\",\"blas_threads_per_call\":1,\"D\":%d,\"n_first\":%d,\"n_sgemm\":%d,"
           "\"flops_per_row\":{\"sgemm\":%.0f,\"first\":%.0f,\"chain\":%.0f},\"seconds\":%.2f,\"rows\":[",
           pgcl_gemm_isa_str(pgcl_gemm_best_isa()), pgcl_blas_kernel(), pgcl_blas_best_kernel(), m->D, m->fast.n_first, n_sgemm, flops_sgemm, flops_first,
           flops_chain, seconds);
    bool first = true;
    for (int b = 0; b < nb; b++)
        for (int t = 0; t < nt; t++) {
            int B = batches[b], T = threads[t];
            double fwd = !only || !strcmp(only, "forward") ? rate(K_FORWARD, m, B, T, seconds, n_sgemm) : 0;
            double sg = !only || !strcmp(only, "sgemm") ? rate(K_SGEMM, m, B, T, seconds, n_sgemm) : 0;
            double ch = !only || !strcmp(only, "chain") ? rate(K_CHAIN, m, B, T, seconds, n_sgemm) : 0;
            printf("%s{\"batch\":%d,\"threads\":%d,\"forward_emb_s\":%.0f,\"sgemm_emb_s\":%.0f,\"sgemm_gflops\":%.2f,"
                   "\"chain_emb_s\":%.0f,\"chain_gflops\":%.2f,\"forward_over_sgemm\":%.3f,\"forward_over_chain\":%.3f}",
                   first ? "" : ",", B, T, fwd, sg, sg * flops_sgemm * 1e-9, ch, ch * flops_chain * 1e-9, sg > 0 ? fwd / sg : 0,
                   ch > 0 ? fwd / ch : 0);
            fflush(stdout);
            first = false;
        }
    printf("]}\n");
    pgcl_model_release(m);
    return 0;
}
