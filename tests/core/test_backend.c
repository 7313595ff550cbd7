/* The backend interface (core/model/backend.h), on every machine:
 *  - the CPU backend through the interface equals pgcl_forward bit for bit, on every committed
 *    checkpoint, for batch sizes 1, 7, 64 and 300 with a worker of 64 rows (so 300 takes 5 steps);
 *  - workers: fits/re-create across models of different widths, n = 0, a bad row count;
 *  - the model-state cache, through a test backend whose model_prepare/model_release count calls
 *    (core/model/backend_impl.h): one prepare per model however many workers race for it, the entry and
 *    its model reference dropped once only the cache holds the model (by the next forward pass or
 *    by pgcl_backend_trim), a failing prepare reported and not cached, and destroy releasing what
 *    is left (ASan's leak check sees the references). */
#include <math.h>
#include <pthread.h>
#include <sodium.h>
#include <stdatomic.h>

#include "backend_impl.h"
#include "test_util.h"

static const char *const g_models[] = {"tests/fixtures/models/tiny_binary/1", "tests/fixtures/models/tiny_multi/1",
                                       "tests/fixtures/models/tiny_ordinal/1", "models/toxicity/1",
                                       "models/emotions/1"};
#define N_MODELS ((int)(sizeof g_models / sizeof g_models[0]))

static pgcl_model *load(const char *dir) {
    pgcl_model *m = NULL;
    char err[1024];
    pgcl_status st = pgcl_model_load(source_path(dir), "m", "1", &m, err, sizeof err);
    CHECK(st == PGCL_OK, "%s: %s", dir, err);
    return m;
}

/* Unit vectors from a fixed-seed generator; row 0 is zero, row 1 long, row 2 short (as test_model). */
static void fill_inputs(float *z, int n, int D, uint64_t seed) {
    for (int i = 0; i < n; i++) {
        double norm = 0;
        for (int k = 0; k < D; k++) {
            seed = seed * 6364136223846793005ull + 1442695040888963407ull;
            z[(size_t)i * D + k] = (float)((double)(seed >> 11) / 9007199254740992.0 - 0.5);
            norm += (double)z[(size_t)i * D + k] * z[(size_t)i * D + k];
        }
        float scale = i == 0 ? 0.0f : i == 1 ? 100.0f : i == 2 ? 1e-3f : 1.0f;
        for (int k = 0; k < D; k++) z[(size_t)i * D + k] = (float)(z[(size_t)i * D + k] / sqrt(norm)) * scale;
    }
}

/* ---- the CPU backend equals pgcl_forward bit for bit ---- */

static void test_cpu_bitwise(pgcl_backend *b, const char *dir) {
    pgcl_model *m = load(dir);
    if (!m) return;
    const int n_max = 300, rows = 64;
    float *z = malloc(sizeof(float) * (size_t)n_max * m->D);
    float *v1 = malloc(sizeof(float) * (size_t)n_max * m->d), *p1 = malloc(sizeof(float) * (size_t)n_max * m->K);
    float *v2 = malloc(sizeof(float) * (size_t)n_max * m->d), *p2 = malloc(sizeof(float) * (size_t)n_max * m->K);
    fill_inputs(z, n_max, m->D, 11);
    char err[256];
    pgcl_backend_worker *w = pgcl_backend_worker_create(b, m, rows, err, sizeof err);
    pgcl_scratch *s = pgcl_scratch_create(m, rows);
    CHECK(w && s, "%s: worker: %s", dir, err);
    if (w && s) {
        CHECK(pgcl_backend_worker_rows(w) == rows, "rows %d", pgcl_backend_worker_rows(w));
        CHECK(pgcl_backend_worker_fits(w, m), "%s: a worker fits the model it was made for", dir);
        const int batches[] = {1, 7, 64, 300};
        for (int t = 0; t < 4; t++) {
            int n = batches[t];
            memset(v1, 0xff, sizeof(float) * (size_t)n * m->d); /* NaN: an unwritten output cannot match */
            memset(p1, 0xff, sizeof(float) * (size_t)n * m->K);
            pgcl_status st = pgcl_backend_forward(w, m, z, n, v1, p1);
            pgcl_forward(m, s, z, n, v2, p2);
            CHECK(st == PGCL_OK, "%s batch %d: %s", dir, n, pgcl_status_str(st));
            CHECK(memcmp(v1, v2, sizeof(float) * (size_t)n * m->d) == 0, "%s batch %d: vectors differ", dir, n);
            CHECK(memcmp(p1, p2, sizeof(float) * (size_t)n * m->K) == 0, "%s batch %d: probabilities differ", dir, n);
        }
        /* n = 0 writes nothing and succeeds. */
        CHECK(pgcl_backend_forward(w, m, z, 0, NULL, NULL) == PGCL_OK, "n = 0");
    }
    CHECK(pgcl_backend_cached_models(b) == 0, "the CPU backend keeps no model state");
    CHECK(atomic_load(&m->refcount) == 1, "%s: the CPU backend took a model reference", dir);
    pgcl_backend_worker_destroy(w);
    pgcl_scratch_destroy(s);
    free(z); free(v1); free(p1); free(v2); free(p2);
    pgcl_model_release(m);
}

/* A CPU worker is a pgcl_scratch: it fits any model whose first GEMM (h1 + K) and widest layer are
 * no wider than its own; the input width D does not matter (z is the caller's). */
static void test_cpu_workers(pgcl_backend *b) {
    pgcl_model *tiny = load("tests/fixtures/models/tiny_binary/1"), *tox = load("models/toxicity/1"),
               *multi = load("tests/fixtures/models/tiny_multi/1");
    if (!tiny || !tox || !multi) goto out;
    char err[256] = "";
    CHECK(pgcl_backend_worker_create(b, tiny, 0, err, sizeof err) == NULL && strstr(err, "at least one row"),
          "a worker of 0 rows is refused: '%s'", err);
    pgcl_backend_worker *w = pgcl_backend_worker_create(b, tiny, 16, err, sizeof err);
    CHECK(w != NULL, "%s", err);
    if (w) {
        CHECK(pgcl_backend_worker_fits(w, tiny), "fits its own model");
        CHECK(pgcl_backend_worker_fits(w, tox), "h1 + K = 514 and 512 wide, as tiny_binary: fits");
        CHECK(!pgcl_backend_worker_fits(w, multi), "h1 + K = 515 (tiny_multi: 512 wide, K = 3): does not fit");
        static float z[1024], v[64], p[8];
        CHECK(pgcl_backend_forward(w, multi, z, 1, v, p) == PGCL_ERR_INVALID, "a worker that does not fit is refused");
    }
    pgcl_backend_worker_destroy(w);
    pgcl_backend_worker_destroy(NULL);
out:
    pgcl_model_release(tiny);
    pgcl_model_release(tox);
    pgcl_model_release(multi);
}

/* ---- the model-state cache, through a counting test backend ---- */

typedef struct count_ctx {
    _Atomic int prepared, released;
    _Atomic int fail_next; /* the next prepare fails */
    pgcl_backend *cpu;     /* does the arithmetic */
} count_ctx;

typedef struct count_state {
    const pgcl_model *m;
    char sha256[65];
} count_state;

static void count_destroy(void *ctx) { free(ctx); }

static void *count_worker_create(void *ctx, const pgcl_model *m, int max_rows, char *err, int cap) {
    return pgcl_backend_worker_create(((count_ctx *)ctx)->cpu, m, max_rows, err, cap);
}
static void count_worker_destroy(void *ctx, void *w) { pgcl_backend_worker_destroy(w); }
static bool count_worker_fits(const void *w, const pgcl_model *m) { return pgcl_backend_worker_fits(w, m); }

static void *count_prepare(void *vctx, void *worker, const pgcl_model *m, pgcl_status *st, char *err, int cap) {
    count_ctx *ctx = vctx;
    if (atomic_exchange(&ctx->fail_next, 0)) {
        *st = PGCL_ERR_IO;
        pgcl_errorf(err, cap, "simulated device failure");
        return NULL;
    }
    struct timespec ts = {0, 2 * 1000 * 1000}; /* an upload takes time: let racing workers pile up */
    nanosleep(&ts, NULL);
    count_state *s = calloc(1, sizeof *s);
    s->m = m;
    memcpy(s->sha256, m->sha256, sizeof s->sha256);
    atomic_fetch_add(&ctx->prepared, 1);
    *st = PGCL_OK;
    return s;
}

static void count_release(void *vctx, void *state) {
    count_ctx *ctx = vctx;
    atomic_fetch_add(&ctx->released, 1);
    free(state);
}

static _Atomic int g_wrong_state;

static pgcl_status count_forward(void *ctx, void *worker, const pgcl_model *m, void *state, const float *z, int n,
                                 float *vectors, float *probs) {
    const count_state *s = state;
    if (!s || s->m != m || strcmp(s->sha256, m->sha256) != 0) atomic_fetch_add(&g_wrong_state, 1);
    return pgcl_backend_forward(worker, m, z, n, vectors, probs);
}

static const pgcl_backend_ops count_ops = {
    .kind = "count",
    .destroy = count_destroy,
    .worker_create = count_worker_create,
    .worker_destroy = count_worker_destroy,
    .worker_fits = count_worker_fits,
    .model_prepare = count_prepare,
    .model_release = count_release,
    .forward = count_forward,
};

typedef struct race_arg {
    pgcl_backend *b;
    const pgcl_model *m;
    pgcl_status st;
} race_arg;

static void *race_worker(void *p) {
    race_arg *a = p;
    char err[256];
    pgcl_backend_worker *w = pgcl_backend_worker_create(a->b, a->m, 8, err, sizeof err);
    float z[8 * 1024], v[8 * 64], pr[8 * 8];
    fill_inputs(z, 8, a->m->D, 5);
    a->st = w ? pgcl_backend_forward(w, a->m, z, 8, v, pr) : PGCL_ERR_NOMEM;
    pgcl_backend_worker_destroy(w);
    return NULL;
}

static void test_cache(pgcl_backend *cpu) {
    count_ctx *ctx = calloc(1, sizeof *ctx);
    ctx->cpu = cpu;
    pgcl_backend *b = pgcl_backend_new(&count_ops, ctx, "count");
    CHECK(b && strcmp(pgcl_backend_kind(b), "count") == 0 && strcmp(pgcl_backend_name(b), "count") == 0, "new");
    if (!b) return;
    pgcl_model *a = load("models/toxicity/1"), *c = load("tests/fixtures/models/tiny_multi/1");
    if (!a || !c) goto out;

    /* Eight workers race for a model nobody has prepared: one prepare, one entry, one reference. */
    pthread_t th[8];
    race_arg args[8];
    for (int i = 0; i < 8; i++) {
        args[i] = (race_arg){b, a, PGCL_ERR_CLOSED};
        pthread_create(&th[i], NULL, race_worker, &args[i]);
    }
    for (int i = 0; i < 8; i++) {
        pthread_join(th[i], NULL);
        CHECK(args[i].st == PGCL_OK, "racer %d: %s", i, pgcl_status_str(args[i].st));
    }
    CHECK(atomic_load(&ctx->prepared) == 1, "prepared %d times", atomic_load(&ctx->prepared));
    CHECK(pgcl_backend_cached_models(b) == 1, "%d entries", pgcl_backend_cached_models(b));
    CHECK(atomic_load(&a->refcount) == 2, "the cache holds one reference (refcount %d)", atomic_load(&a->refcount));

    /* A second model; a prepare that fails is reported and leaves nothing behind. */
    char err[256] = "";
    pgcl_backend_worker *w = pgcl_backend_worker_create(b, c, 8, err, sizeof err); /* 515 wide: fits both */
    CHECK(w != NULL, "%s", err);
    CHECK(pgcl_backend_worker_fits(w, a), "fits toxicity too");
    float z[8 * 1024], v[8 * 64], pr[8 * 8];
    fill_inputs(z, 8, c->D, 9);
    atomic_store(&ctx->fail_next, 1);
    CHECK(pgcl_backend_prepare(w, c, err, sizeof err) == PGCL_ERR_IO && strstr(err, "simulated"), "failed: %s", err);
    CHECK(pgcl_backend_cached_models(b) == 1 && atomic_load(&c->refcount) == 1, "a failed prepare caches nothing");
    CHECK(pgcl_backend_prepare(w, c, err, sizeof err) == PGCL_OK, "%s", err);
    CHECK(pgcl_backend_forward(w, c, z, 8, v, pr) == PGCL_OK, "forward on the second model");
    CHECK(atomic_load(&ctx->prepared) == 2 && pgcl_backend_cached_models(b) == 2, "two models, two entries");

    /* The registry lets go of model a: the next forward pass (on any model) drops its entry. */
    pgcl_model_release(a);
    a = NULL;
    CHECK(pgcl_backend_cached_models(b) == 2, "nothing is dropped before the next pass");
    CHECK(pgcl_backend_forward(w, c, z, 8, v, pr) == PGCL_OK, "forward");
    CHECK(pgcl_backend_cached_models(b) == 1 && atomic_load(&ctx->released) == 1,
          "the unused model's state is released (entries %d, released %d)", pgcl_backend_cached_models(b),
          atomic_load(&ctx->released));
    /* A model still held is never dropped by trim; once let go, trim drops it. */
    pgcl_backend_trim(b);
    CHECK(pgcl_backend_cached_models(b) == 1, "trim keeps a model in use");
    CHECK(atomic_load(&g_wrong_state) == 0, "forward received another model's state %d times",
          atomic_load(&g_wrong_state));

    /* A second backend caches c too: while the test holds c neither drops it; once only the two
     * caches hold it, each drops its own entry, and the last one frees the model (ASan would see
     * a leak otherwise). */
    count_ctx *ctx2 = calloc(1, sizeof *ctx2);
    ctx2->cpu = cpu;
    pgcl_backend *b2 = pgcl_backend_new(&count_ops, ctx2, "count2");
    pgcl_backend_worker *w2 = b2 ? pgcl_backend_worker_create(b2, c, 8, err, sizeof err) : NULL;
    CHECK(w2 && pgcl_backend_prepare(w2, c, err, sizeof err) == PGCL_OK, "second backend: %s", err);
    CHECK(atomic_load(&c->refcount) == 3, "test + two caches (refcount %d)", atomic_load(&c->refcount));
    pgcl_backend_trim(b2);
    CHECK(pgcl_backend_cached_models(b2) == 1, "still held by the test");
    pgcl_model_release(c);
    c = NULL;
    pgcl_backend_trim(b);
    CHECK(pgcl_backend_cached_models(b) == 0 && atomic_load(&ctx->released) == 2,
          "held only by caches: the first backend drops its entry (entries %d)", pgcl_backend_cached_models(b));
    pgcl_backend_trim(b2);
    CHECK(pgcl_backend_cached_models(b2) == 0 && atomic_load(&ctx2->released) == 1, "and so does the second");
    pgcl_backend_worker_destroy(w2);
    pgcl_backend_destroy(b2);
    pgcl_backend_worker_destroy(w);
out:
    pgcl_model_release(a);
    pgcl_model_release(c);
    pgcl_backend_destroy(b);
}

/* destroy releases what the cache still holds. */
static void test_cache_destroy(pgcl_backend *cpu) {
    count_ctx *ctx = calloc(1, sizeof *ctx);
    ctx->cpu = cpu;
    pgcl_backend *b = pgcl_backend_new(&count_ops, ctx, "count");
    pgcl_model *m = load("tests/fixtures/models/tiny_ordinal/1");
    if (!b || !m) goto out;
    char err[256] = "";
    pgcl_backend_worker *w = pgcl_backend_worker_create(b, m, 4, err, sizeof err);
    CHECK(w && pgcl_backend_prepare(w, m, err, sizeof err) == PGCL_OK, "%s", err);
    CHECK(atomic_load(&m->refcount) == 2, "cached");
    pgcl_backend_worker_destroy(w);
    pgcl_backend_destroy(b);
    b = NULL;
    CHECK(atomic_load(&m->refcount) == 1, "destroy released the cache's reference");
out:
    pgcl_backend_destroy(b);
    pgcl_model_release(m);
}

int main(void) {
    if (sodium_init() < 0) return 1;
    pgcl_backend *b = pgcl_backend_cpu_create();
    CHECK(b != NULL, "cpu backend");
    if (!b) return test_finish("test_backend");
    CHECK(strcmp(pgcl_backend_kind(b), "cpu") == 0, "kind %s", pgcl_backend_kind(b));
    CHECK(strncmp(pgcl_backend_name(b), "cpu (packed kernel, ", 20) == 0, "name %s", pgcl_backend_name(b));
    for (int i = 0; i < N_MODELS; i++) test_cpu_bitwise(b, g_models[i]);
    test_cpu_workers(b);
    test_cache(b);
    test_cache_destroy(b);
    pgcl_backend_destroy(b);
    pgcl_backend_destroy(NULL);
    return test_finish("test_backend");
}
