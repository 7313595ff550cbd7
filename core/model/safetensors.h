/* Read-only parser for the safetensors format (8-byte LE header length, JSON header, raw buffer).
 * Every structural rule is checked before a tensor is exposed: header bounds, dtype, shape and
 * byte-size agreement, offsets inside the buffer, no overlap and no holes. Parsing does not read
 * tensor data; pgcl_st_read_f32() converts and checks values on demand. */
#ifndef PGCL_SAFETENSORS_H
#define PGCL_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "status.h"

#define PGCL_ST_MAX_DIMS 8
#define PGCL_ST_MAX_HEADER (100u << 20) /* refuse headers over 100 MiB */

typedef enum {
    PGCL_DT_BOOL, PGCL_DT_U8, PGCL_DT_I8, PGCL_DT_F8_E5M2, PGCL_DT_F8_E4M3,
    PGCL_DT_I16, PGCL_DT_U16, PGCL_DT_F16, PGCL_DT_BF16,
    PGCL_DT_I32, PGCL_DT_U32, PGCL_DT_F32, PGCL_DT_F64, PGCL_DT_I64, PGCL_DT_U64,
} pgcl_dtype;

typedef struct pgcl_st_tensor {
    char *name;
    pgcl_dtype dtype;
    int ndim;
    int64_t shape[PGCL_ST_MAX_DIMS];
    int64_t numel;
    size_t begin, end;     /* byte offsets into the data buffer */
    const uint8_t *data;   /* points into the file's mapping; unaligned */
} pgcl_st_tensor;

typedef struct pgcl_safetensors pgcl_safetensors;

/* Maps `path` and parses it. On failure returns an error and writes "<path>: <reason>" into err.
 * The result owns the mapping; destroy it with pgcl_safetensors_destroy(). */
pgcl_status pgcl_safetensors_open(const char *path, pgcl_safetensors **out, char *err, int cap);

/* Parses an in-memory file image of `size` bytes. `bytes` must outlive the result (not copied).
 * `label` names the source in error messages. */
pgcl_status pgcl_safetensors_parse(const uint8_t *bytes, size_t size, const char *label,
                                   pgcl_safetensors **out, char *err, int cap);

void pgcl_safetensors_destroy(pgcl_safetensors *st); /* accepts NULL */

int pgcl_safetensors_count(const pgcl_safetensors *st);
const pgcl_st_tensor *pgcl_safetensors_at(const pgcl_safetensors *st, int i);
/* Returns NULL when no tensor has that name. */
const pgcl_st_tensor *pgcl_safetensors_find(const pgcl_safetensors *st, const char *name);

const char *pgcl_dtype_name(pgcl_dtype dt);
size_t pgcl_dtype_size(pgcl_dtype dt);

/* Converts a F32, F16 or BF16 tensor to `numel` float32 values in dst and checks that every value
 * is finite. Other dtypes are PGCL_ERR_UNSUPPORTED. err names the tensor and the first bad index. */
pgcl_status pgcl_st_read_f32(const pgcl_st_tensor *t, float *dst, char *err, int cap);

/* Formats a shape as "[a, b]" into buf. */
void pgcl_shape_str(const int64_t *shape, int ndim, char *buf, int cap);

/* The whole mapped file (for hashing). size is 0 for an empty file. */
void pgcl_safetensors_bytes(const pgcl_safetensors *st, const uint8_t **bytes, size_t *size);

#endif
