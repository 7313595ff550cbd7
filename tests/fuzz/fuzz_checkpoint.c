/* libFuzzer harness: the checkpoint loader (core/model/safetensors.c, core/model/model.c). The input is a
 * 4-byte little-endian length L, then L bytes of config.json (L is taken modulo what is left), then
 * the model.safetensors image. The safetensors parser runs on the image alone, then
 * pgcl_model_load_mem() on both: every validation, the folding and the golden vectors. A model
 * that loads must be usable: it scores one input. */
#include <math.h>
#include <sodium.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"
#include "safetensors.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    if (sodium_init() < 0) abort();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 4) return 0;
    uint32_t l = (uint32_t)data[0] | (uint32_t)data[1] << 8 | (uint32_t)data[2] << 16 | (uint32_t)data[3] << 24;
    size_t left = size - 4, config_len = left ? l % (left + 1) : 0;
    /* Copies of exactly the right size, so that ASan sees any read past either one. */
    char *config = malloc(config_len ? config_len : 1);
    size_t wlen = left - config_len;
    uint8_t *weights = malloc(wlen ? wlen : 1);
    if (!config || !weights) abort();
    memcpy(config, data + 4, config_len);
    memcpy(weights, data + 4 + config_len, wlen);

    char err[1024];
    pgcl_safetensors *st = NULL;
    if (pgcl_safetensors_parse(weights, wlen, "fuzz", &st, err, sizeof err) == PGCL_OK) {
        for (int i = 0; i < pgcl_safetensors_count(st); i++) {
            const pgcl_st_tensor *t = pgcl_safetensors_at(st, i);
            if (t->numel > (1 << 20)) continue;
            float *dst = malloc(sizeof(float) * (size_t)(t->numel ? t->numel : 1));
            if (!dst) abort();
            pgcl_st_read_f32(t, dst, err, sizeof err);
            free(dst);
        }
        pgcl_safetensors_destroy(st);
    }

    pgcl_model *m = NULL;
    if (pgcl_model_load_mem(config, config_len, weights, wlen, "fuzz", &m, err, sizeof err) == PGCL_OK) {
        float *z = calloc((size_t)m->D, sizeof(float)), *vec = malloc(sizeof(float) * (size_t)m->d),
              *probs = malloc(sizeof(float) * (size_t)m->K);
        pgcl_scratch *s = pgcl_scratch_create(m, 1);
        if (!z || !vec || !probs || !s) abort();
        for (int k = 0; k < m->D; k++) z[k] = (float)(k % 7) * 0.125f - 0.375f;
        pgcl_forward(m, s, z, 1, vec, probs);
        int label;
        pgcl_model_decide(m, probs, &label);
        if (label < 0 || label >= m->K) abort();
        char *pj = pgcl_model_probabilities_json(m, probs);
        free(pj);
        pgcl_scratch_destroy(s);
        free(z);
        free(vec);
        free(probs);
        pgcl_model_release(m);
    }
    free(config);
    free(weights);
    return 0;
}
