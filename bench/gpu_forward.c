/* gpu_forward: in-process forward-pass rate through the backend interface (core/model/backend.h), the
 * CPU backend next to the CUDA backend in each precision when this build has CUDA and a device.
 * No HTTP, no JSON parsing, no audit log: the number is what one compute slot (or T of them) can
 * do, inputs from host memory to outputs in host memory, copies included.
 *
 *   gpu_forward [--model DIR] [--batches 1,64,256,1024] [--threads T] [--seconds S]
 *               [--chunk-rows N] [--backends cpu,fp32,tf32,bf16] [--device N] [--blas-threads N]
 *
 * For each backend and batch size B: T threads, each with its own worker of N rows (as pgcld's
 * compute slots; N defaults to the largest batch, so one call is one step), call the forward pass on
 * B rows in a loop for S seconds after one warm-up call (which uploads the weights and initialises
 * cuBLAS). Prints one line per case: rows/s over all threads and the mean latency of one call.
 * Built by meson (bench/meson.build) into BUILD/bench/gpu_forward; --model defaults to
 * $PGCLD_SOURCE_ROOT/models/toxicity/1, else models/toxicity/1 under the working directory. */
#include <pthread.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend.h"
#include "backend_cuda.h"
#include "blas.h"
#include "model.h"

#define MAX_LIST 16

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

typedef struct run {
    pgcl_backend *b;
    const pgcl_model *m;
    const float *z; /* (B, D), shared read-only */
    int B, chunk_rows;
    double seconds;
    pthread_barrier_t *barrier;
    long calls;
    double elapsed;
    pgcl_status st;
    char err[256];
} run;

static void *run_thread(void *p) {
    run *r = p;
    const pgcl_model *m = r->m;
    float *vec = malloc(sizeof(float) * (size_t)r->B * m->d), *probs = malloc(sizeof(float) * (size_t)r->B * m->K);
    pgcl_backend_worker *w = pgcl_backend_worker_create(r->b, m, r->chunk_rows, r->err, sizeof r->err);
    r->st = w && vec && probs ? pgcl_backend_forward(w, m, r->z, r->B, vec, probs) : PGCL_ERR_NOMEM; /* warm-up */
    pthread_barrier_wait(r->barrier);
    double t0 = now_s(), t = t0;
    while (r->st == PGCL_OK && t - t0 < r->seconds) {
        r->st = pgcl_backend_forward(w, m, r->z, r->B, vec, probs);
        r->calls++;
        t = now_s();
    }
    r->elapsed = t - t0;
    pgcl_backend_worker_destroy(w);
    free(vec);
    free(probs);
    return NULL;
}

/* Parses "1,64,256" into out (at most MAX_LIST values >= 1); returns the count, or -1. */
static int parse_ints(const char *s, int *out) {
    int n = 0;
    while (*s && n < MAX_LIST) {
        char *end;
        long v = strtol(s, &end, 10);
        if (end == s || v < 1 || v > 1 << 20) return -1;
        out[n++] = (int)v;
        s = *end == ',' ? end + 1 : end;
        if (*end && *end != ',') return -1;
    }
    return n;
}

static void bench_backend(pgcl_backend *b, const pgcl_model *m, const float *z, const int *batches, int n_batches,
                          int threads, int chunk_rows, double seconds) {
    for (int i = 0; i < n_batches; i++) {
        pthread_barrier_t barrier;
        pthread_barrier_init(&barrier, NULL, (unsigned)threads);
        run runs[64];
        pthread_t th[64];
        for (int t = 0; t < threads; t++) {
            runs[t] = (run){.b = b, .m = m, .z = z, .B = batches[i], .chunk_rows = chunk_rows, .seconds = seconds,
                            .barrier = &barrier};
            pthread_create(&th[t], NULL, run_thread, &runs[t]);
        }
        long rows = 0, calls = 0;
        double elapsed = 0;
        pgcl_status st = PGCL_OK;
        const char *err = "";
        for (int t = 0; t < threads; t++) {
            pthread_join(th[t], NULL);
            rows += runs[t].calls * batches[i];
            calls += runs[t].calls;
            elapsed = runs[t].elapsed > elapsed ? runs[t].elapsed : elapsed;
            if (runs[t].st != PGCL_OK) st = runs[t].st, err = runs[t].err;
        }
        pthread_barrier_destroy(&barrier);
        if (st != PGCL_OK) {
            printf("%-44s batch %5d: failed (%s) %s\n", pgcl_backend_name(b), batches[i], pgcl_status_str(st), err);
            continue;
        }
        printf("%-44s batch %5d  threads %2d: %12.0f rows/s  %9.3f ms/call\n", pgcl_backend_name(b), batches[i],
               threads, (double)rows / elapsed, elapsed * 1e3 * threads / (double)(calls ? calls : 1));
        fflush(stdout);
    }
}

static void usage(void) {
    fprintf(stderr, "usage: gpu_forward [--model DIR] [--batches 1,64,256,1024] [--threads T] [--seconds S]\n"
                    "                   [--chunk-rows N] [--backends cpu,fp32,tf32,bf16] [--device N] [--blas-threads N]\n");
    exit(2);
}

int main(int argc, char **argv) {
    char default_model[4096];
    const char *root = getenv("PGCLD_SOURCE_ROOT");
    snprintf(default_model, sizeof default_model, "%s/models/toxicity/1", root ? root : ".");
    const char *model_dir = default_model, *backends = "cpu,fp32,tf32,bf16";
    int batches[MAX_LIST] = {1, 64, 256, 1024}, n_batches = 4, threads = 1, chunk_rows = 0, device = 0, blas = 1;
    double seconds = 1.0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) usage();
        if (strcmp(a, "--model") == 0) model_dir = v;
        else if (strcmp(a, "--batches") == 0) n_batches = parse_ints(v, batches);
        else if (strcmp(a, "--threads") == 0) threads = atoi(v);
        else if (strcmp(a, "--seconds") == 0) seconds = atof(v);
        else if (strcmp(a, "--chunk-rows") == 0) chunk_rows = atoi(v);
        else if (strcmp(a, "--backends") == 0) backends = v;
        else if (strcmp(a, "--device") == 0) device = atoi(v);
        else if (strcmp(a, "--blas-threads") == 0) blas = atoi(v);
        else usage();
        i++;
    }
    if (n_batches < 1 || threads < 1 || threads > 64 || seconds <= 0 || chunk_rows < 0 || blas < 1) usage();
    if (chunk_rows == 0)
        for (int i = 0; i < n_batches; i++) chunk_rows = batches[i] > chunk_rows ? batches[i] : chunk_rows;
    if (sodium_init() < 0) return 1;
    pgcl_blas_set_threads(blas);

    pgcl_model *m = NULL;
    char err[1024];
    if (pgcl_model_load(model_dir, "bench", "1", &m, err, sizeof err) != PGCL_OK) {
        fprintf(stderr, "gpu_forward: %s\n", err);
        return 1;
    }
    int max_batch = 0;
    for (int i = 0; i < n_batches; i++) max_batch = batches[i] > max_batch ? batches[i] : max_batch;
    float *z = malloc(sizeof(float) * (size_t)max_batch * m->D);
    unsigned seed = 1;
    for (size_t i = 0; i < (size_t)max_batch * m->D; i++) {
        seed = seed * 1103515245u + 12345u;
        z[i] = (float)((seed >> 8) & 0xffff) / 65536.0f - 0.5f;
    }
    printf("gpu_forward: %s (D %d, d %d, K %d); worker of %d rows; %.1f s per case; OpenBLAS threads %d\n", model_dir,
           m->D, m->d, m->K, chunk_rows, seconds, blas);

    char list[256];
    snprintf(list, sizeof list, "%s", backends);
    for (char *save = NULL, *tok = strtok_r(list, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        pgcl_backend *b = NULL;
        if (strcmp(tok, "cpu") == 0) {
            b = pgcl_backend_cpu_create();
        } else if (strcmp(tok, "fp32") == 0 || strcmp(tok, "tf32") == 0 || strcmp(tok, "bf16") == 0) {
#ifdef PGCLD_HAVE_CUDA
            b = pgcl_backend_cuda_create(device, tok, err, sizeof err);
            if (!b) printf("cuda:%d %s: not measured: %s\n", device, tok, err);
#else
            printf("cuda:%d %s: not measured: this build has no CUDA\n", device, tok);
#endif
        } else {
            usage();
        }
        if (b) bench_backend(b, m, z, batches, n_batches, threads, chunk_rows, seconds);
        pgcl_backend_destroy(b);
    }
    free(z);
    pgcl_model_release(m);
    return 0;
}
