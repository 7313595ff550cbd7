/* OpenBLAS kernel detection and selection; see blas.h. */
#include "blas.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"

/* Declared by OpenBLAS's own headers in some versions only. */
char *openblas_get_corename(void);
void openblas_set_num_threads(int num_threads);

#define REEXEC_GUARD "PGCLD_BLAS_REEXEC"

/* Vector-ISA tier of a kernel or a CPU: 3 AVX-512, 2 AVX2+FMA, 1 AVX, 0 SSE only. */
static int kernel_tier(const char *core) {
    static const char *const t3[] = {"SkylakeX", "Cooperlake", "SapphireRapids", "Zen4", NULL};
    static const char *const t2[] = {"Haswell", "Zen", "Excavator", "Steamroller", "Piledriver", NULL};
    static const char *const t1[] = {"Sandybridge", "Bulldozer", NULL};
    const char *const *tiers[] = {t3, t2, t1};
    for (int t = 0; t < 3; t++)
        for (int i = 0; tiers[t][i]; i++)
            if (strcasecmp(core, tiers[t][i]) == 0) return 3 - t;
    return 0;
}

/* The instructions a tier stands for, as an operator would say them. */
static const char *tier_isa(int tier) {
    static const char *const names[] = {"SSE", "AVX", "AVX2+FMA", "AVX-512"};
    return names[tier];
}

static int cpu_tier(void) {
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl"))
        return 3;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return 2;
    if (__builtin_cpu_supports("avx")) return 1;
    return 0;
}

const char *pgcl_blas_kernel(void) { return openblas_get_corename(); }

const char *pgcl_blas_best_kernel(void) {
    static const char *const names[] = {"Prescott", "Sandybridge", "Haswell", "SkylakeX"};
    return names[cpu_tier()];
}

void pgcl_blas_set_threads(int n) { openblas_set_num_threads(n); }

void pgcl_blas_ensure_fast_kernel(char **argv) {
    const char *core = openblas_get_corename();
    int have = kernel_tier(core), best = cpu_tier();
    const char *chosen = getenv("OPENBLAS_CORETYPE");
    if (have >= best) {
        /* Fine: the kernel uses the widest vectors the CPU has (Cooperlake on a SkylakeX-class CPU
         * is as fast as SkylakeX), so this is said plainly, at info level. The warnings below are
         * for a kernel narrower than the CPU. */
        pgcl_log_info("openblas: kernel %s suits this CPU (%s, the widest vectors it has; no faster kernel to pick)",
                      core, tier_isa(best));
        return;
    }
    if (chosen && *chosen && !getenv(REEXEC_GUARD)) {
        pgcl_log_warn("openblas: kernel %s chosen by OPENBLAS_CORETYPE=%s uses %s; this CPU has %s (kernel %s), which is faster",
                      core, chosen, tier_isa(have), tier_isa(best), pgcl_blas_best_kernel());
        return;
    }
    if (getenv(REEXEC_GUARD)) {
        pgcl_log_warn("openblas: asked for kernel %s but got %s; running on the slower kernel",
                      pgcl_blas_best_kernel(), core);
        return;
    }
    pgcl_log_warn("openblas: picked the slow kernel %s on a CPU that supports %s; restarting with OPENBLAS_CORETYPE=%s",
                  core, pgcl_blas_best_kernel(), pgcl_blas_best_kernel());
    setenv("OPENBLAS_CORETYPE", pgcl_blas_best_kernel(), 1);
    setenv(REEXEC_GUARD, "1", 1);
    execv("/proc/self/exe", argv);
    pgcl_log_error("openblas: re-exec failed; running on kernel %s", core);
}
