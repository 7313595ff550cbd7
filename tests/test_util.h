/* Minimal test helpers shared by the C test programs: CHECK records a failure and goes on, so one
 * run reports every broken expectation; the program's exit code is the verdict (77 = skipped). */
#ifndef PGCL_TEST_UTIL_H
#define PGCL_TEST_UTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int g_checks, g_failures;

#define CHECK(cond, ...)                                                                   \
    do {                                                                                   \
        g_checks++;                                                                        \
        if (!(cond)) {                                                                     \
            g_failures++;                                                                  \
            fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);                \
            fprintf(stderr, __VA_ARGS__);                                                  \
            fputc('\n', stderr);                                                           \
        }                                                                                  \
    } while (0)

/* Path of a file under the source tree (meson passes PGCLD_SOURCE_ROOT). */
static inline const char *source_path(const char *rel) {
    static char buf[8][4096];
    static int next;
    const char *root = getenv("PGCLD_SOURCE_ROOT");
    char *out = buf[next++ % 8];
    snprintf(out, sizeof buf[0], "%s/%s", root ? root : ".", rel);
    return out;
}

static inline int test_finish(const char *name) {
    printf("%s: %d checks, %d failed\n", name, g_checks, g_failures);
    return g_failures ? 1 : 0;
}

#endif
