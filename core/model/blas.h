/* OpenBLAS kernel selection. Debian's OpenBLAS is built with DYNAMIC_ARCH and picks its kernel from
 * cpuid at load; on some virtual CPUs it falls back to a generic kernel several times slower than
 * what the CPU can run. pgcl_blas_ensure_fast_kernel() compares the kernel in use with the best one
 * the CPU's instruction set supports and, when it is worse and the operator has not chosen one with
 * OPENBLAS_CORETYPE, re-executes the process once with OPENBLAS_CORETYPE set (the variable is only
 * read when the library loads). Call it first thing in main(). */
#ifndef PGCL_BLAS_H
#define PGCL_BLAS_H

/* Re-executes the process if a faster kernel is available; returns only when no re-exec happened
 * (or it failed, which is logged). argv must be main()'s. */
void pgcl_blas_ensure_fast_kernel(char **argv);

/* Kernel name in use, e.g. "Haswell". */
const char *pgcl_blas_kernel(void);

/* The best kernel the CPU supports: "SkylakeX", "Haswell", "Sandybridge" or "Prescott". */
const char *pgcl_blas_best_kernel(void);

/* Sets the number of threads OpenBLAS uses inside one call. */
void pgcl_blas_set_threads(int n);

#endif
