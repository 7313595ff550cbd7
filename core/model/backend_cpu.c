/* The CPU backend: the OpenBLAS fast path of model_forward.c behind the backend interface. A
 * worker is a pgcl_scratch; there is no per-model state (the folded constants in the model are
 * what the fast path reads). */
#include <stdio.h>
#include <stdlib.h>

#include "backend_impl.h"
#include "gemm_packed.h"

static void cpu_destroy(void *ctx) { (void)ctx; }

static void *cpu_worker_create(void *ctx, const pgcl_model *m, int max_rows, char *err, int cap) {
    pgcl_scratch *s = pgcl_scratch_create(m, max_rows);
    if (!s) pgcl_errorf(err, cap, "out of memory for the scratch of %d rows", max_rows);
    return s;
}

static void cpu_worker_destroy(void *ctx, void *worker) { pgcl_scratch_destroy(worker); }

static bool cpu_worker_fits(const void *worker, const pgcl_model *m) { return pgcl_scratch_fits(worker, m); }

static pgcl_status cpu_forward(void *ctx, void *worker, const pgcl_model *m, void *state, const float *z, int n,
                               float *vectors, float *probs) {
    pgcl_forward(m, worker, z, n, vectors, probs);
    return PGCL_OK;
}

static const pgcl_backend_ops cpu_ops = {
    .kind = "cpu",
    .destroy = cpu_destroy,
    .worker_create = cpu_worker_create,
    .worker_destroy = cpu_worker_destroy,
    .worker_fits = cpu_worker_fits,
    .forward = cpu_forward,
};

pgcl_backend *pgcl_backend_cpu_create(void) {
    char name[96];
    snprintf(name, sizeof name, "cpu (packed kernel, %s)", pgcl_gemm_isa_str(pgcl_gemm_best_isa()));
    return pgcl_backend_new(&cpu_ops, NULL, name);
}
