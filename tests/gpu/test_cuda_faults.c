/* The CUDA backend's failure paths, against the host emulation of CUDA and cuBLAS (fake_cuda.c), so
 * they run on every machine with the toolkit's headers:
 *  - start-up: no device, a device index past the last, an unknown precision — each refused with a
 *    message naming it; auto then serves on the CPU, an explicit cuda:N does not;
 *  - a worker whose device buffers cannot be allocated: NULL, the message names the allocation,
 *    nothing left allocated;
 *  - an upload that fails: the forward pass answers PGCL_ERR_NOMEM, nothing is cached, the model
 *    keeps its reference count; the next pass retries and succeeds;
 *  - a GEMM that fails mid-pass: PGCL_ERR_IO; the next pass on the same worker is correct;
 *  - at the end every emulated device and pinned allocation has been freed. */
#include <math.h>
#include <sodium.h>
#include <stdatomic.h>

#include "backend_cuda.h"
#include "backend_select.h"
#include "fake_cuda.h"
#include "test_util.h"

static void test_start_up(void) {
    char err[1024] = "";
    fake_cuda_set_devices(0);
    pgcl_backend *b = pgcl_backend_cuda_create(0, "fp32", err, sizeof err);
    CHECK(b == NULL && strstr(err, "cuda:0") && strstr(err, "cudaErrorNoDevice"), "no device: '%s'", err);
    b = pgcl_backend_open("auto", "fp32", err, sizeof err);
    CHECK(b && strcmp(pgcl_backend_kind(b), "cpu") == 0 && strstr(err, "serving on the CPU"), "auto: '%s'", err);
    pgcl_backend_destroy(b);
    b = pgcl_backend_open("cuda:0", "fp32", err, sizeof err);
    CHECK(b == NULL && strstr(err, "cuda:0"), "explicit cuda:0 without a device: '%s'", err);

    fake_cuda_set_devices(2);
    b = pgcl_backend_cuda_create(2, "fp32", err, sizeof err);
    CHECK(b == NULL && strstr(err, "no such device (the driver reports 2: cuda:0 to cuda:1)"), "'%s'", err);
    b = pgcl_backend_cuda_create(1, "fp16", err, sizeof err);
    CHECK(b == NULL && strstr(err, "unknown CUDA precision 'fp16'"), "'%s'", err);
    b = pgcl_backend_open("auto", "tf32", err, sizeof err);
    CHECK(b && strcmp(pgcl_backend_kind(b), "cuda") == 0 && err[0] == 0, "auto with devices: '%s'", err);
    CHECK(b && strstr(pgcl_backend_name(b), "cuda:0 (") && strstr(pgcl_backend_name(b), "tf32)"), "name '%s'",
          b ? pgcl_backend_name(b) : "");
    pgcl_backend_destroy(b);
    fake_cuda_set_devices(1);
    CHECK(fake_cuda_live_allocations() == 0, "%d allocations left", fake_cuda_live_allocations());
}

static void test_run_time(void) {
    char err[1024] = "";
    pgcl_backend *b = pgcl_backend_cuda_create(0, "bf16", err, sizeof err);
    CHECK(b != NULL, "%s", err);
    pgcl_model *m = NULL;
    CHECK(pgcl_model_load(source_path("models/toxicity/1"), "m", "1", &m, err, sizeof err) == PGCL_OK, "%s", err);
    if (!b || !m) goto out;
    enum { N = 20 };
    float *z = calloc((size_t)N * m->D, sizeof *z), vec[N * 64], probs[N * 2], rv[64], rp[2];
    for (int i = 0; i < N * m->D; i++) z[i] = (float)((i * 7919) % 997) / 997.0f - 0.5f;

    fake_cuda_fail_malloc(1);
    pgcl_backend_worker *w = pgcl_backend_worker_create(b, m, 8, err, sizeof err);
    CHECK(w == NULL && strstr(err, "cudaMalloc (worker buffers)") && strstr(err, "out of memory"), "'%s'", err);
    CHECK(fake_cuda_live_allocations() == 0, "a failed worker leaves %d allocations", fake_cuda_live_allocations());

    w = pgcl_backend_worker_create(b, m, 8, err, sizeof err); /* 8 rows: 20 rows take three steps */
    CHECK(w != NULL, "%s", err);
    if (!w) goto out_z;
    fake_cuda_fail_malloc(1);
    CHECK(pgcl_backend_forward(w, m, z, N, vec, probs) == PGCL_ERR_NOMEM, "a failed upload is out of memory");
    CHECK(pgcl_backend_cached_models(b) == 0 && atomic_load(&m->refcount) == 1, "and caches nothing");
    fake_cuda_fail_malloc(1);
    CHECK(pgcl_backend_prepare(w, m, err, sizeof err) == PGCL_ERR_NOMEM && strstr(err, "cudaMalloc (model weights)"),
          "prepare says which allocation: '%s'", err);

    fake_cuda_fail_gemm(5); /* first GEMM, two hidden layers, head; then the second step's first GEMM */
    CHECK(pgcl_backend_forward(w, m, z, N, vec, probs) == PGCL_ERR_IO, "a failed GEMM is a device error");
    CHECK(pgcl_backend_cached_models(b) == 1, "the upload itself succeeded and stays");
    CHECK(pgcl_backend_forward(w, m, z, N, vec, probs) == PGCL_OK, "the next pass works");
    double worst = 0;
    for (int i = 0; i < N; i++) {
        pgcl_forward_reference(m, z + (size_t)i * m->D, rv, rp);
        for (int j = 0; j < m->d; j++) worst = fmax(worst, fabs((double)vec[i * m->d + j] - rv[j]));
    }
    CHECK(worst < 1e-2, "bf16 after the failures: max abs error %.3g", worst);
    pgcl_backend_worker_destroy(w);
out_z:
    free(z);
out:
    pgcl_model_release(m);
    pgcl_backend_destroy(b);
    CHECK(fake_cuda_live_allocations() == 0, "%d allocations left", fake_cuda_live_allocations());
}

int main(void) {
    if (sodium_init() < 0) return 1;
    test_start_up();
    test_run_time();
    return test_finish("test_cuda_faults");
}
