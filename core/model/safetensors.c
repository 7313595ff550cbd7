/* safetensors parsing and validation; see safetensors.h for the contract. */
#include "safetensors.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "f16.h"

struct pgcl_safetensors {
    void *map;          /* mmap of the whole file, or NULL for in-memory parses */
    size_t map_size;
    const uint8_t *bytes; /* the whole image (the mapping, or the caller's buffer) */
    size_t size;
    int n;
    pgcl_st_tensor *tensors;
};

static const struct { const char *name; pgcl_dtype dt; size_t size; } g_dtypes[] = {
    {"BOOL", PGCL_DT_BOOL, 1}, {"U8", PGCL_DT_U8, 1}, {"I8", PGCL_DT_I8, 1},
    {"F8_E5M2", PGCL_DT_F8_E5M2, 1}, {"F8_E4M3", PGCL_DT_F8_E4M3, 1},
    {"I16", PGCL_DT_I16, 2}, {"U16", PGCL_DT_U16, 2}, {"F16", PGCL_DT_F16, 2}, {"BF16", PGCL_DT_BF16, 2},
    {"I32", PGCL_DT_I32, 4}, {"U32", PGCL_DT_U32, 4}, {"F32", PGCL_DT_F32, 4},
    {"F64", PGCL_DT_F64, 8}, {"I64", PGCL_DT_I64, 8}, {"U64", PGCL_DT_U64, 8},
};
#define N_DTYPES ((int)(sizeof g_dtypes / sizeof g_dtypes[0]))

const char *pgcl_dtype_name(pgcl_dtype dt) {
    for (int i = 0; i < N_DTYPES; i++)
        if (g_dtypes[i].dt == dt) return g_dtypes[i].name;
    return "?";
}

size_t pgcl_dtype_size(pgcl_dtype dt) {
    for (int i = 0; i < N_DTYPES; i++)
        if (g_dtypes[i].dt == dt) return g_dtypes[i].size;
    return 0;
}

void pgcl_shape_str(const int64_t *shape, int ndim, char *buf, int cap) {
    int off = snprintf(buf, (size_t)cap, "[");
    for (int i = 0; i < ndim && off < cap; i++)
        off += snprintf(buf + off, (size_t)(cap - off), i ? ", %lld" : "%lld", (long long)shape[i]);
    if (off < cap) snprintf(buf + off, (size_t)(cap - off), "]");
}

void pgcl_safetensors_destroy(pgcl_safetensors *st) {
    if (!st) return;
    for (int i = 0; i < st->n; i++) free(st->tensors[i].name);
    free(st->tensors);
    if (st->map) munmap(st->map, st->map_size);
    free(st);
}

static int cmp_by_begin(const void *a, const void *b) {
    const pgcl_st_tensor *x = a, *y = b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    return x->end < y->end ? -1 : (x->end > y->end);
}

/* Reads one header entry into t. Returns 0 or -1 with err set. */
static int parse_entry(const char *label, const char *name, json_t *desc, size_t buffer_size,
                       pgcl_st_tensor *t, char *err, int cap) {
    if (!json_is_object(desc)) {
        pgcl_errorf(err, cap, "%s: tensor '%s': header entry is not an object", label, name);
        return -1;
    }
    const char *key;
    json_t *val;
    json_object_foreach(desc, key, val) {
        if (strcmp(key, "dtype") && strcmp(key, "shape") && strcmp(key, "data_offsets")) {
            pgcl_errorf(err, cap, "%s: tensor '%s': unknown header field '%s'", label, name, key);
            return -1;
        }
    }
    json_t *jdt = json_object_get(desc, "dtype");
    if (!json_is_string(jdt)) {
        pgcl_errorf(err, cap, "%s: tensor '%s': missing dtype", label, name);
        return -1;
    }
    size_t esize = 0;
    for (int i = 0; i < N_DTYPES; i++) {
        if (strcmp(json_string_value(jdt), g_dtypes[i].name) == 0) {
            t->dtype = g_dtypes[i].dt;
            esize = g_dtypes[i].size;
        }
    }
    if (!esize) {
        pgcl_errorf(err, cap, "%s: tensor '%s': unknown dtype '%s'", label, name, json_string_value(jdt));
        return -1;
    }
    json_t *jshape = json_object_get(desc, "shape");
    if (!json_is_array(jshape) || json_array_size(jshape) > PGCL_ST_MAX_DIMS) {
        pgcl_errorf(err, cap, "%s: tensor '%s': shape must be an array of at most %d integers", label,
                    name, PGCL_ST_MAX_DIMS);
        return -1;
    }
    t->ndim = (int)json_array_size(jshape);
    uint64_t numel = 1;
    for (int i = 0; i < t->ndim; i++) {
        json_t *d = json_array_get(jshape, (size_t)i);
        if (!json_is_integer(d) || json_integer_value(d) < 0 || json_integer_value(d) > (1ll << 40)) {
            pgcl_errorf(err, cap, "%s: tensor '%s': shape[%d] is not a non-negative integer", label, name, i);
            return -1;
        }
        t->shape[i] = json_integer_value(d);
        numel *= (uint64_t)t->shape[i];
        if (numel > (1ull << 40)) {
            pgcl_errorf(err, cap, "%s: tensor '%s': shape is too large", label, name);
            return -1;
        }
    }
    t->numel = (int64_t)numel;
    json_t *joff = json_object_get(desc, "data_offsets");
    if (!json_is_array(joff) || json_array_size(joff) != 2 || !json_is_integer(json_array_get(joff, 0)) ||
        !json_is_integer(json_array_get(joff, 1))) {
        pgcl_errorf(err, cap, "%s: tensor '%s': data_offsets must be [begin, end]", label, name);
        return -1;
    }
    json_int_t b = json_integer_value(json_array_get(joff, 0));
    json_int_t e = json_integer_value(json_array_get(joff, 1));
    if (b < 0 || e < b || (uint64_t)e > buffer_size) {
        pgcl_errorf(err, cap, "%s: tensor '%s': data_offsets [%lld, %lld] out of range (data buffer is %zu bytes)",
                    label, name, (long long)b, (long long)e, buffer_size);
        return -1;
    }
    t->begin = (size_t)b;
    t->end = (size_t)e;
    if ((uint64_t)(e - b) != numel * esize) {
        pgcl_errorf(err, cap, "%s: tensor '%s': %lld bytes for %llu %s elements (need %llu)", label, name,
                    (long long)(e - b), (unsigned long long)numel, json_string_value(jdt),
                    (unsigned long long)(numel * esize));
        return -1;
    }
    return 0;
}

pgcl_status pgcl_safetensors_parse(const uint8_t *bytes, size_t size, const char *label,
                                   pgcl_safetensors **out, char *err, int cap) {
    *out = NULL;
    if (size < 8) {
        pgcl_errorf(err, cap, "%s: truncated: %zu bytes, a safetensors file has at least 8", label, size);
        return PGCL_ERR_FORMAT;
    }
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = (hlen << 8) | bytes[i];
    if (hlen > PGCL_ST_MAX_HEADER) {
        pgcl_errorf(err, cap, "%s: header length %llu exceeds the %u-byte limit", label,
                    (unsigned long long)hlen, PGCL_ST_MAX_HEADER);
        return PGCL_ERR_FORMAT;
    }
    if (hlen > size - 8) {
        pgcl_errorf(err, cap, "%s: header length %llu runs past the end of the file (%zu bytes)", label,
                    (unsigned long long)hlen, size);
        return PGCL_ERR_FORMAT;
    }
    const uint8_t *buffer = bytes + 8 + hlen;
    size_t buffer_size = size - 8 - (size_t)hlen;

    pgcl_status st = PGCL_ERR_FORMAT;
    pgcl_safetensors *res = NULL;
    json_error_t jerr;
    json_t *root = json_loadb((const char *)bytes + 8, (size_t)hlen, JSON_REJECT_DUPLICATES, &jerr);
    if (!root) {
        pgcl_errorf(err, cap, "%s: header is not valid JSON: %s (offset %d)", label, jerr.text, jerr.position);
        goto done;
    }
    if (!json_is_object(root)) {
        pgcl_errorf(err, cap, "%s: header is not a JSON object", label);
        goto done;
    }
    res = calloc(1, sizeof *res);
    if (!res) { st = PGCL_ERR_NOMEM; goto done; }
    size_t n_entries = json_object_size(root);
    res->tensors = calloc(n_entries ? n_entries : 1, sizeof *res->tensors);
    if (!res->tensors) { st = PGCL_ERR_NOMEM; goto done; }
    const char *name;
    json_t *desc;
    json_object_foreach(root, name, desc) {
        if (strcmp(name, "__metadata__") == 0) {
            if (!json_is_object(desc)) {
                pgcl_errorf(err, cap, "%s: __metadata__ is not an object", label);
                goto done;
            }
            continue;
        }
        pgcl_st_tensor *t = &res->tensors[res->n];
        if (parse_entry(label, name, desc, buffer_size, t, err, cap) != 0) goto done;
        t->name = strdup(name);
        if (!t->name) { st = PGCL_ERR_NOMEM; goto done; }
        t->data = buffer + t->begin;
        res->n++;
    }
    /* Tensors must tile the buffer exactly: sorted by offset, each begins where the previous ended. */
    pgcl_st_tensor *sorted = malloc(sizeof *sorted * (size_t)(res->n ? res->n : 1));
    if (!sorted) { st = PGCL_ERR_NOMEM; goto done; }
    memcpy(sorted, res->tensors, sizeof *sorted * (size_t)res->n);
    qsort(sorted, (size_t)res->n, sizeof *sorted, cmp_by_begin);
    size_t expect = 0;
    for (int i = 0; i < res->n; i++) {
        if (sorted[i].begin < expect) {
            pgcl_errorf(err, cap, "%s: tensor '%s' [%zu, %zu) overlaps tensor '%s' [%zu, %zu)", label,
                        sorted[i].name, sorted[i].begin, sorted[i].end, sorted[i - 1].name,
                        sorted[i - 1].begin, sorted[i - 1].end);
            free(sorted);
            goto done;
        }
        if (sorted[i].begin > expect) {
            pgcl_errorf(err, cap, "%s: %zu unused bytes before tensor '%s' at offset %zu", label,
                        sorted[i].begin - expect, sorted[i].name, expect);
            free(sorted);
            goto done;
        }
        expect = sorted[i].end;
    }
    free(sorted);
    if (expect != buffer_size) {
        pgcl_errorf(err, cap, "%s: %zu trailing bytes after the last tensor", label, buffer_size - expect);
        goto done;
    }
    st = PGCL_OK;
done:
    json_decref(root);
    if (st != PGCL_OK) {
        pgcl_safetensors_destroy(res);
        return st;
    }
    res->bytes = bytes;
    res->size = size;
    *out = res;
    return PGCL_OK;
}

pgcl_status pgcl_safetensors_open(const char *path, pgcl_safetensors **out, char *err, int cap) {
    *out = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        pgcl_errorf(err, cap, "%s: %s", path, strerror(errno));
        return PGCL_ERR_IO;
    }
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        pgcl_errorf(err, cap, "%s: not a regular file", path);
        close(fd);
        return PGCL_ERR_IO;
    }
    size_t size = (size_t)sb.st_size;
    void *map = NULL;
    if (size > 0) {
        map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (map == MAP_FAILED) {
            pgcl_errorf(err, cap, "%s: mmap: %s", path, strerror(errno));
            close(fd);
            return PGCL_ERR_IO;
        }
    }
    close(fd);
    static const uint8_t empty[1];
    pgcl_status st = pgcl_safetensors_parse(map ? map : empty, size, path, out, err, cap);
    if (st != PGCL_OK) {
        if (map) munmap(map, size);
        return st;
    }
    (*out)->map = map;
    (*out)->map_size = size;
    return PGCL_OK;
}

int pgcl_safetensors_count(const pgcl_safetensors *st) { return st->n; }

const pgcl_st_tensor *pgcl_safetensors_at(const pgcl_safetensors *st, int i) {
    return (i >= 0 && i < st->n) ? &st->tensors[i] : NULL;
}

const pgcl_st_tensor *pgcl_safetensors_find(const pgcl_safetensors *st, const char *name) {
    for (int i = 0; i < st->n; i++)
        if (strcmp(st->tensors[i].name, name) == 0) return &st->tensors[i];
    return NULL;
}

pgcl_status pgcl_st_read_f32(const pgcl_st_tensor *t, float *dst, char *err, int cap) {
    const uint8_t *p = t->data;
    for (int64_t i = 0; i < t->numel; i++) {
        float v;
        if (t->dtype == PGCL_DT_F32) {
            uint32_t bits = (uint32_t)p[4 * i] | (uint32_t)p[4 * i + 1] << 8 | (uint32_t)p[4 * i + 2] << 16 |
                            (uint32_t)p[4 * i + 3] << 24;
            memcpy(&v, &bits, 4);
        } else if (t->dtype == PGCL_DT_F16) {
            v = pgcl_f16_to_f32((uint16_t)(p[2 * i] | p[2 * i + 1] << 8));
        } else if (t->dtype == PGCL_DT_BF16) {
            uint32_t bits = (uint32_t)(p[2 * i] | p[2 * i + 1] << 8) << 16;
            memcpy(&v, &bits, 4);
        } else {
            pgcl_errorf(err, cap, "tensor '%s': dtype %s is not a float type (F32, F16 or BF16)", t->name,
                        pgcl_dtype_name(t->dtype));
            return PGCL_ERR_UNSUPPORTED;
        }
        if (!isfinite(v)) {
            pgcl_errorf(err, cap, "tensor '%s': element %lld is %s", t->name, (long long)i,
                        isnan(v) ? "NaN" : "infinite");
            return PGCL_ERR_INVALID;
        }
        dst[i] = v;
    }
    return PGCL_OK;
}

void pgcl_safetensors_bytes(const pgcl_safetensors *st, const uint8_t **bytes, size_t *size) {
    *bytes = st->bytes;
    *size = st->size;
}
