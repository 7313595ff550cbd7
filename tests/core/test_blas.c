/* The OpenBLAS kernel line (core/model/blas.c, issue 19 item 8): a kernel as wide as the CPU is
 * reported as fine, at info level, in plain words; a narrower one is a warning that names the
 * faster kernel. OPENBLAS_CORETYPE is read when the library loads, so each case runs this program
 * again (`test_blas --report`) with the variable set and reads the line it logs on stderr. The
 * narrower case runs only on a CPU with more than SSE (every x86-64 machine the suite runs on). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/blas.h"
#include "test_util.h"

/* Runs `self --report` with OPENBLAS_CORETYPE=kernel; the first line it logs goes into line. */
static void kernel_line(const char *self, const char *kernel, char *line, size_t size) {
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "OPENBLAS_CORETYPE=%s PGCLD_BLAS_REEXEC=1 '%s' --report 2>&1", kernel, self);
    FILE *p = popen(cmd, "r");
    CHECK(p != NULL, "popen %s", cmd);
    line[0] = '\0';
    if (!p) return;
    if (!fgets(line, (int)size, p)) line[0] = '\0';
    CHECK(pclose(p) == 0, "%s failed", cmd);
}

int main(int argc, char **argv) {
    if (argc == 2 && strcmp(argv[1], "--report") == 0) {
        pgcl_blas_ensure_fast_kernel(argv); /* PGCLD_BLAS_REEXEC=1: logs, never re-executes */
        return 0;
    }
    char line[1024];
    const char *best = pgcl_blas_best_kernel();

    kernel_line(argv[0], best, line, sizeof line);
    CHECK(strstr(line, " info  openblas: kernel ") != NULL, "the CPU's own kernel is not an info line: %s", line);
    CHECK(strstr(line, "suits this CPU") != NULL, "the CPU's own kernel is not said to suit it: %s", line);
    CHECK(strstr(line, "best for this CPU") == NULL, "the old wording is back: %s", line);

    if (strcmp(best, "Prescott") != 0) {
        kernel_line(argv[0], "Prescott", line, sizeof line);
        CHECK(strstr(line, " warn  openblas: ") != NULL, "a narrower kernel is not a warning: %s", line);
        CHECK(strstr(line, best) != NULL, "the warning does not name the faster kernel %s: %s", best, line);
    }
    return test_finish("test_blas");
}
