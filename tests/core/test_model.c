/* Checkpoint loading and the forward pass.
 *  - every committed fixture loads and its goldens verify;
 *  - broken checkpoints (shape, NaN weight, golden mismatch, digest, unknown field, version, stray
 *    tensor, truncated weights) are refused with a message naming file, tensor or field;
 *  - a valid `calibration` object is kept on the model; each broken one is refused naming its field;
 *  - the OpenBLAS fast path equals the naive oracle (tol 1e-5 + 1e-5·|ref|) for several batch sizes;
 *  - the oracle and the fast path equal the PyTorch forward of the same checkpoint within 1e-5
 *    (the safetensors files in tests/fixtures/parity, written by python3 -m train parity). */
#include <jansson.h>
#include <math.h>
#include <sodium.h>

#include "model.h"
#include "safetensors.h"
#include "test_util.h"

static unsigned char *slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *buf = malloc((size_t)n + 1);
    if (fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    if (buf) buf[n] = 0;
    *len = (size_t)n;
    return buf;
}

typedef struct fixture {
    char *config;
    size_t config_len;
    unsigned char *weights;
    size_t weights_len;
} fixture;

static fixture fixture_read(const char *rel_dir) {
    fixture fx = {0};
    char rel[512];
    snprintf(rel, sizeof rel, "%s/config.json", rel_dir);
    fx.config = (char *)slurp(source_path(rel), &fx.config_len);
    snprintf(rel, sizeof rel, "%s/model.safetensors", rel_dir);
    fx.weights = slurp(source_path(rel), &fx.weights_len);
    if (!fx.config || !fx.weights) {
        fprintf(stderr, "cannot read fixture %s (PGCLD_SOURCE_ROOT=%s)\n", rel_dir, getenv("PGCLD_SOURCE_ROOT"));
        exit(1);
    }
    return fx;
}

static void fixture_free(fixture *fx) {
    free(fx->config);
    free(fx->weights);
}

/* Loads config (modified by `edit`, if given) with the weights; expects refusal naming `needle`. */
static void expect_refused(const char *what, const fixture *fx, void (*edit)(json_t *), const unsigned char *weights,
                           size_t weights_len, const char *needle) {
    json_t *cfg = json_loadb(fx->config, fx->config_len, 0, NULL);
    if (edit) edit(cfg);
    char *text = json_dumps(cfg, JSON_REAL_PRECISION(17));
    pgcl_model *m = NULL;
    char err[1024] = "";
    pgcl_status st = pgcl_model_load_mem(text, strlen(text), weights ? weights : fx->weights,
                                         weights ? weights_len : fx->weights_len, "fx", &m, err, sizeof err);
    CHECK(st != PGCL_OK && m == NULL, "%s: accepted", what);
    CHECK(strstr(err, needle) != NULL, "%s: message '%s' lacks '%s'", what, err, needle);
    pgcl_model_release(m);
    free(text);
    json_decref(cfg);
}

static void edit_dim(json_t *c) { json_object_set_new(json_object_get(c, "dims"), "D", json_integer(33)); }
static void edit_golden(json_t *c) {
    json_t *v = json_object_get(json_array_get(json_object_get(c, "golden"), 0), "vector");
    json_array_set_new(v, 3, json_real(json_real_value(json_array_get(v, 3)) + 0.01));
}
static void edit_digest(json_t *c) {
    json_object_set_new(c, "weights_sha256", json_string("0000000000000000000000000000000000000000000000000000000000000000"));
}
static void edit_unknown(json_t *c) { json_object_set_new(c, "decison_policy", json_object()); }
static void edit_version(json_t *c) { json_object_set_new(c, "format_version", json_integer(2)); }
static void edit_thresholds(json_t *c) {
    json_object_set_new(json_object_get(c, "decision_policy"), "t_review", json_real(0.9));
}
static void edit_tensor_name(json_t *c) {
    json_object_set_new(json_object_get(c, "attention"), "query", json_string("query_fcx"));
    json_object_del(c, "weights_sha256");
}
static void edit_labels(json_t *c) { json_array_set_new(json_object_get(c, "labels"), 1, json_string("neg")); }
static void drop_digest(json_t *c) { json_object_del(c, "weights_sha256"); }

/* A valid calibration object for tiny_binary (labels neg, pos), as the trainer writes it. */
static json_t *valid_calibration(void) {
    return json_pack("{s:s, s:{s:f, s:f}, s:b, s:{s:f, s:f}, s:s, s:{s:i, s:f, s:i, s:f, s:f, s:{s:f, s:f, s:f}}}",
                     "method", "platt", "parameters", "scale", 0.9, "shift", -0.6, "folded_into_head", 1,
                     "prevalence", "neg", 0.75, "pos", 0.25, "prevalence_source", "--prevalence", "validation",
                     "rows", 600, "ece", 0.02, "ece_bins", 15, "brier", 0.06, "nll", 0.2, "uncalibrated", "ece",
                     0.08, "brier", 0.07, "nll", 0.3);
}
static json_t *calibration_of(json_t *c) { return json_object_get(c, "calibration"); }
static json_t *prevalence_of(json_t *c) { return json_object_get(calibration_of(c), "prevalence"); }
static void add_calibration(json_t *c) { json_object_set_new(c, "calibration", valid_calibration()); }
static void edit_cal_unknown(json_t *c) {
    add_calibration(c);
    json_object_set_new(json_object_get(calibration_of(c), "validation"), "eec", json_real(0.02));
}
static void edit_cal_method(json_t *c) {
    add_calibration(c);
    json_object_set_new(calibration_of(c), "method", json_string("isotonic"));
}
static void edit_cal_not_folded(json_t *c) {
    add_calibration(c);
    json_object_set_new(calibration_of(c), "folded_into_head", json_false());
}
static void edit_cal_missing_label(json_t *c) {
    add_calibration(c);
    json_object_del(prevalence_of(c), "pos");
    json_object_set_new(prevalence_of(c), "neg", json_real(0.999999999));
}
static void edit_cal_unknown_label(json_t *c) {
    add_calibration(c);
    json_object_set_new(prevalence_of(c), "toxic", json_real(0.1));
}
static void edit_cal_share_zero(json_t *c) {
    add_calibration(c);
    json_object_set_new(prevalence_of(c), "pos", json_real(0.0));
}
static void edit_cal_share_one(json_t *c) {
    add_calibration(c);
    json_object_set_new(prevalence_of(c), "neg", json_integer(1));
}
static void edit_cal_sum(json_t *c) {
    add_calibration(c);
    json_object_set_new(prevalence_of(c), "pos", json_real(0.26));
}
/* jansson holds no NaN or infinity (nor does JSON text), so a non-number stands for them */
static void edit_cal_parameter(json_t *c) {
    add_calibration(c);
    json_object_set_new(json_object_get(calibration_of(c), "parameters"), "scale", json_string("NaN"));
}
static void edit_cal_negative_ece(json_t *c) {
    add_calibration(c);
    json_object_set_new(json_object_get(calibration_of(c), "validation"), "ece", json_real(-0.01));
}
static void edit_cal_bins(json_t *c) {
    add_calibration(c);
    json_object_set_new(json_object_get(calibration_of(c), "validation"), "ece_bins", json_integer(0));
}
static void edit_cal_uncalibrated(json_t *c) {
    add_calibration(c);
    json_object_del(json_object_get(json_object_get(calibration_of(c), "validation"), "uncalibrated"), "nll");
}
static void edit_cal_source(json_t *c) {
    add_calibration(c);
    json_object_set_new(calibration_of(c), "prevalence_source", json_string(""));
}

/* A checkpoint with a valid calibration loads, keeps the object as written, and scores as before
 * (pgcld applies nothing); one without it has none; each broken calibration is refused naming
 * its field. */
static void test_calibration(void) {
    fixture fx = fixture_read("tests/fixtures/models/tiny_binary/1");
    json_t *cfg = json_loadb(fx.config, fx.config_len, 0, NULL);
    add_calibration(cfg);
    char *text = json_dumps(cfg, JSON_REAL_PRECISION(17));
    pgcl_model *m = NULL;
    char err[1024] = "";
    pgcl_status st = pgcl_model_load_mem(text, strlen(text), fx.weights, fx.weights_len, "fx", &m, err, sizeof err);
    CHECK(st == PGCL_OK, "valid calibration refused: %s", err);
    if (m) {
        json_t *want = valid_calibration();
        CHECK(m->calibration && json_equal(m->calibration, want), "the calibration object is kept as written");
        CHECK(m->n_golden == 3, "goldens still verify with a calibration present (%d)", m->n_golden);
        json_decref(want);
    }
    pgcl_model_release(m);
    m = NULL;
    CHECK(pgcl_model_load_mem(fx.config, fx.config_len, fx.weights, fx.weights_len, "fx", &m, err, sizeof err) == PGCL_OK,
          "%s", err);
    CHECK(m && m->calibration == NULL, "no calibration in config.json: none on the model");
    pgcl_model_release(m);
    free(text);
    json_decref(cfg);

    expect_refused("calibration unknown key", &fx, edit_cal_unknown, NULL, 0,
                   "'calibration.validation.eec': unknown field");
    expect_refused("calibration method", &fx, edit_cal_method, NULL, 0,
                   "'calibration.method': must be \"platt\", \"temperature\" or \"none\"");
    expect_refused("calibration not folded", &fx, edit_cal_not_folded, NULL, 0,
                   "'calibration.folded_into_head': must be true");
    expect_refused("prevalence missing a label", &fx, edit_cal_missing_label, NULL, 0,
                   "'calibration.prevalence': lacks label 'pos'");
    expect_refused("prevalence unknown label", &fx, edit_cal_unknown_label, NULL, 0,
                   "'calibration.prevalence.toxic': is not one of the labels");
    expect_refused("prevalence share 0", &fx, edit_cal_share_zero, NULL, 0,
                   "'calibration.prevalence.pos': must be a number in (0, 1)");
    expect_refused("prevalence share 1", &fx, edit_cal_share_one, NULL, 0,
                   "'calibration.prevalence.neg': must be a number in (0, 1)");
    expect_refused("prevalence sum", &fx, edit_cal_sum, NULL, 0,
                   "'calibration.prevalence': shares sum to 1.01, not 1");
    expect_refused("non-finite parameter", &fx, edit_cal_parameter, NULL, 0,
                   "'calibration.parameters.scale': must be a finite number");
    expect_refused("negative ece", &fx, edit_cal_negative_ece, NULL, 0,
                   "'calibration.validation.ece': -0.01 is outside [0, inf]");
    expect_refused("ece_bins 0", &fx, edit_cal_bins, NULL, 0,
                   "'calibration.validation.ece_bins': 0 is outside [1, 1000]");
    expect_refused("uncalibrated without nll", &fx, edit_cal_uncalibrated, NULL, 0,
                   "'calibration.validation.uncalibrated.nll': is missing");
    expect_refused("empty prevalence_source", &fx, edit_cal_source, NULL, 0,
                   "'calibration.prevalence_source': must be a non-empty string");
    fixture_free(&fx);
}

/* ---- dsa: the DSA Transparency Database vocabulary of a model ---- */

static json_t *valid_dsa(void) {
    return json_pack("{s:s, s:[ss], s:s}", "category", "STATEMENT_CATEGORY_SCAMS_AND_FRAUD", "category_specification",
                     "KEYWORD_PHISHING", "KEYWORD_OTHER", "category_specification_other", "Lottery bait");
}
static json_t *dsa_of(json_t *c) {
    if (!json_object_get(c, "dsa")) json_object_set_new(c, "dsa", valid_dsa());
    return json_object_get(c, "dsa");
}
static void edit_dsa_not_object(json_t *c) { json_object_set_new(c, "dsa", json_string("STATEMENT_CATEGORY_SCAMS_AND_FRAUD")); }
static void edit_dsa_unknown(json_t *c) { json_object_set_new(dsa_of(c), "category_addition", json_array()); }
static void edit_dsa_no_category(json_t *c) { json_object_del(dsa_of(c), "category"); }
static void edit_dsa_category(json_t *c) {
    json_object_set_new(dsa_of(c), "category", json_string("STATEMENT_CATEGORY_TOXICITY"));
}
static void edit_dsa_keyword(json_t *c) {
    json_array_set_new(json_object_get(dsa_of(c), "category_specification"), 0, json_string("KEYWORD_SPAM"));
}
static void edit_dsa_keyword_twice(json_t *c) {
    json_array_set_new(json_object_get(dsa_of(c), "category_specification"), 0, json_string("KEYWORD_OTHER"));
}
static void edit_dsa_keywords_empty(json_t *c) { json_object_set_new(dsa_of(c), "category_specification", json_array()); }
static void edit_dsa_other_without_keyword(json_t *c) {
    json_array_remove(json_object_get(dsa_of(c), "category_specification"), 1);
}
static void edit_dsa_other_long(json_t *c) {
    char text[502];
    memset(text, 'x', 501);
    text[501] = 0;
    json_object_set_new(dsa_of(c), "category_specification_other", json_string(text));
}

/* A valid `dsa` loads and is kept with its category; without one the category is the task's
 * default; a 500-character text in a multi-byte script is accepted (the TDB counts characters);
 * each broken dsa is refused naming its field. */
static void test_dsa(void) {
    fixture fx = fixture_read("tests/fixtures/models/tiny_binary/1");
    json_t *cfg = json_loadb(fx.config, fx.config_len, 0, NULL);
    json_t *dsa = dsa_of(cfg);
    char text[1001];
    for (int i = 0; i < 500; i++) memcpy(text + 2 * i, "\xc3\xa9", 2); /* 500 × 'é': 1000 bytes */
    text[1000] = 0;
    json_object_set_new(dsa, "category_specification_other", json_string(text));
    char *dumped = json_dumps(cfg, JSON_REAL_PRECISION(17));
    pgcl_model *m = NULL;
    char err[1024] = "";
    pgcl_status st = pgcl_model_load_mem(dumped, strlen(dumped), fx.weights, fx.weights_len, "fx", &m, err, sizeof err);
    CHECK(st == PGCL_OK, "valid dsa refused: %s", err);
    if (m) {
        CHECK(m->dsa && json_equal(m->dsa, dsa), "the dsa object is kept as written");
        CHECK(m->dsa_category && strcmp(m->dsa_category, "STATEMENT_CATEGORY_SCAMS_AND_FRAUD") == 0,
              "the category is dsa.category (%s)", m->dsa_category ? m->dsa_category : "NULL");
    }
    pgcl_model_release(m);
    m = NULL;
    CHECK(pgcl_model_load_mem(fx.config, fx.config_len, fx.weights, fx.weights_len, "fx", &m, err, sizeof err) == PGCL_OK,
          "%s", err);
    CHECK(m && m->dsa == NULL && strcmp(m->dsa_category, "STATEMENT_CATEGORY_ILLEGAL_OR_HARMFUL_SPEECH") == 0,
          "no dsa in a binary model's config.json: the binary default");
    pgcl_model_release(m);
    fixture multi = fixture_read("tests/fixtures/models/tiny_multi/1");
    m = NULL;
    CHECK(pgcl_model_load_mem(multi.config, multi.config_len, multi.weights, multi.weights_len, "fx", &m, err,
                              sizeof err) == PGCL_OK,
          "%s", err);
    CHECK(m && m->dsa == NULL && strcmp(m->dsa_category, "STATEMENT_CATEGORY_OTHER_VIOLATION_TC") == 0,
          "no dsa in a multiclass model's config.json: the multiclass default");
    pgcl_model_release(m);
    fixture_free(&multi);
    free(dumped);
    json_decref(cfg);

    expect_refused("dsa not an object", &fx, edit_dsa_not_object, NULL, 0, "'dsa': must be an object");
    expect_refused("dsa unknown key", &fx, edit_dsa_unknown, NULL, 0, "'dsa.category_addition': unknown field");
    expect_refused("dsa without category", &fx, edit_dsa_no_category, NULL, 0, "'dsa.category': is missing");
    expect_refused("dsa category", &fx, edit_dsa_category, NULL, 0,
                   "'dsa.category': must be one of the DSA Transparency Database's STATEMENT_CATEGORY_* values");
    expect_refused("dsa keyword", &fx, edit_dsa_keyword, NULL, 0,
                   "'dsa.category_specification[0]': must be one of the DSA Transparency Database's KEYWORD_* values");
    expect_refused("dsa keyword twice", &fx, edit_dsa_keyword_twice, NULL, 0,
                   "'dsa.category_specification[1]': duplicate keyword");
    expect_refused("dsa keywords empty", &fx, edit_dsa_keywords_empty, NULL, 0,
                   "'dsa.category_specification': must be a non-empty array");
    expect_refused("dsa other without KEYWORD_OTHER", &fx, edit_dsa_other_without_keyword, NULL, 0,
                   "'dsa.category_specification_other': is allowed only when category_specification holds KEYWORD_OTHER");
    expect_refused("dsa other too long", &fx, edit_dsa_other_long, NULL, 0,
                   "'dsa.category_specification_other': must be at most 500 characters");
    fixture_free(&fx);
}

static void test_refusals(void) {
    fixture fx = fixture_read("tests/fixtures/models/tiny_binary/1");
    expect_refused("dimension", &fx, edit_dim, NULL, 0, "'semantic_mlp.layers[0].in'");
    expect_refused("golden", &fx, edit_golden, NULL, 0, "golden[0]: recomputed vector[3]");
    expect_refused("digest", &fx, edit_digest, NULL, 0, "does not match config.json weights_sha256");
    expect_refused("unknown field", &fx, edit_unknown, NULL, 0, "'decison_policy': unknown field");
    expect_refused("version", &fx, edit_version, NULL, 0, "format_version 2 is not supported");
    expect_refused("thresholds", &fx, edit_thresholds, NULL, 0, "must not exceed t_block");
    expect_refused("missing tensor", &fx, edit_tensor_name, NULL, 0, "tensor 'query_fcx.weight' is missing");
    expect_refused("duplicate label", &fx, edit_labels, NULL, 0, "duplicate label");

    /* A NaN inside a weight: find query_fc.weight's bytes in the image and poison one element. */
    pgcl_safetensors *st = NULL;
    char err[512];
    CHECK(pgcl_safetensors_parse(fx.weights, fx.weights_len, "w", &st, err, sizeof err) == PGCL_OK, "%s", err);
    const pgcl_st_tensor *t = st ? pgcl_safetensors_find(st, "query_fc.weight") : NULL;
    CHECK(t != NULL, "query_fc.weight present");
    if (t) {
        unsigned char *poisoned = malloc(fx.weights_len);
        memcpy(poisoned, fx.weights, fx.weights_len);
        float nan = NAN;
        memcpy(poisoned + (t->data - fx.weights) + 4 * 5, &nan, 4);
        expect_refused("nan weight", &fx, drop_digest, poisoned, fx.weights_len, "tensor 'query_fc.weight': element 5 is NaN");
        /* and the digest catches it before anything else when present */
        expect_refused("nan weight digest", &fx, NULL, poisoned, fx.weights_len, "SHA-256");
        free(poisoned);
    }
    pgcl_safetensors_destroy(st);
    /* truncated weights */
    expect_refused("truncated weights", &fx, drop_digest, fx.weights, fx.weights_len - 100, "out of range");

    /* a stray tensor: rebuild the file with one extra tensor appended to the header and data */
    {
        uint64_t hlen = 0;
        for (int i = 7; i >= 0; i--) hlen = (hlen << 8) | fx.weights[i];
        size_t data_len = fx.weights_len - 8 - hlen;
        json_t *hdr = json_loadb((const char *)fx.weights + 8, hlen, 0, NULL);
        json_object_set_new(hdr, "extra", json_pack("{s:s, s:[i], s:[I, I]}", "dtype", "F32", "shape", 1, "data_offsets",
                                                    (json_int_t)data_len, (json_int_t)data_len + 4));
        char *htext = json_dumps(hdr, JSON_COMPACT);
        size_t nh = strlen(htext), total = 8 + nh + data_len + 4;
        unsigned char *img = calloc(1, total);
        for (int i = 0; i < 8; i++) img[i] = (unsigned char)((uint64_t)nh >> (8 * i));
        memcpy(img + 8, htext, nh);
        memcpy(img + 8 + nh, fx.weights + 8 + hlen, data_len);
        expect_refused("stray tensor", &fx, drop_digest, img, total, "tensor 'extra' is not referenced");
        free(img);
        free(htext);
        json_decref(hdr);
    }
    fixture_free(&fx);

    /* from disk: a missing directory names the file */
    pgcl_model *m = NULL;
    CHECK(pgcl_model_load("/nonexistent/m/1", "m", "1", &m, err, sizeof err) == PGCL_ERR_IO &&
              strstr(err, "/nonexistent/m/1/config.json"),
          "missing dir: %s", err);
}

/* Random unit-ish inputs with a few extreme rows. */
static void fill_inputs(float *z, int n, int D, unsigned seed) {
    srand(seed);
    for (int i = 0; i < n; i++) {
        double norm = 0;
        for (int k = 0; k < D; k++) {
            z[(size_t)i * D + k] = (float)rand() / (float)RAND_MAX - 0.5f;
            norm += (double)z[(size_t)i * D + k] * z[(size_t)i * D + k];
        }
        float scale = i == 0 ? 0.0f : i == 1 ? 100.0f : i == 2 ? 1e-3f : 1.0f;
        for (int k = 0; k < D; k++) z[(size_t)i * D + k] = (float)(z[(size_t)i * D + k] / sqrt(norm)) * scale;
    }
}

static void test_fast_vs_oracle(const char *dir) {
    pgcl_model *m = NULL;
    char err[1024];
    pgcl_status st = pgcl_model_load(source_path(dir), "m", "1", &m, err, sizeof err);
    CHECK(st == PGCL_OK, "%s: %s", dir, err);
    if (!m) return;
    CHECK(m->n_golden > 0, "%s: no golden verified", dir);
    const int n = 37; /* not a multiple of the chunk sizes below */
    float *z = malloc(sizeof(float) * (size_t)n * m->D);
    float *vec = malloc(sizeof(float) * (size_t)n * m->d), *probs = malloc(sizeof(float) * (size_t)n * m->K);
    float *rv = malloc(sizeof(float) * (size_t)m->d), *rp = malloc(sizeof(float) * (size_t)m->K);
    fill_inputs(z, n, m->D, 7);
    const int chunks[] = {1, 8, 64};
    double worst = 0;
    for (int c = 0; c < 3; c++) {
        pgcl_scratch *s = pgcl_scratch_create(m, chunks[c]);
        pgcl_forward(m, s, z, n, vec, probs);
        for (int i = 0; i < n; i++) {
            pgcl_forward_reference(m, z + (size_t)i * m->D, rv, rp);
            double norm = 0;
            for (int j = 0; j < m->d; j++) {
                double diff = fabs((double)vec[(size_t)i * m->d + j] - rv[j]);
                worst = fmax(worst, diff);
                CHECK(diff <= 1e-5 + 1e-5 * fabs(rv[j]), "%s chunk %d row %d vector[%d]: fast %.9g oracle %.9g", dir,
                      chunks[c], i, j, (double)vec[(size_t)i * m->d + j], (double)rv[j]);
                norm += (double)vec[(size_t)i * m->d + j] * vec[(size_t)i * m->d + j];
            }
            CHECK(fabs(sqrt(norm) - 1) < 1e-5, "%s row %d: |e| = %.9g", dir, i, sqrt(norm));
            double psum = 0;
            for (int k = 0; k < m->K; k++) {
                double diff = fabs((double)probs[(size_t)i * m->K + k] - rp[k]);
                worst = fmax(worst, diff);
                CHECK(diff <= 1e-5 + 1e-5 * fabs(rp[k]), "%s row %d prob[%d]: fast %.9g oracle %.9g", dir, i, k,
                      (double)probs[(size_t)i * m->K + k], (double)rp[k]);
                psum += probs[(size_t)i * m->K + k];
            }
            CHECK(fabs(psum - 1) < 1e-5, "%s row %d: probabilities sum to %.9g", dir, i, psum);
        }
        pgcl_scratch_destroy(s);
    }
    printf("%s: fast path vs oracle, max abs difference %.3g\n", dir, worst);
    free(z);
    free(vec);
    free(probs);
    free(rv);
    free(rp);
    pgcl_model_release(m);
}

/* The PyTorch forward, dumped by `python3 -m train parity`, against both C paths. */
static void test_torch_parity(const char *model_dir, const char *parity_file) {
    pgcl_model *m = NULL;
    char err[1024];
    CHECK(pgcl_model_load(source_path(model_dir), "m", "1", &m, err, sizeof err) == PGCL_OK, "%s", err);
    pgcl_safetensors *st = NULL;
    CHECK(pgcl_safetensors_open(source_path(parity_file), &st, err, sizeof err) == PGCL_OK, "%s", err);
    if (!m || !st) {
        pgcl_model_release(m);
        pgcl_safetensors_destroy(st);
        return;
    }
    const pgcl_st_tensor *ti = pgcl_safetensors_find(st, "inputs"), *tv = pgcl_safetensors_find(st, "vectors"),
                         *tp = pgcl_safetensors_find(st, "probabilities"), *tl = pgcl_safetensors_find(st, "label_index");
    CHECK(ti && tv && tp && tl && ti->shape[1] == m->D && tv->shape[1] == m->d && tp->shape[1] == m->K,
          "%s: parity tensors and shapes", parity_file);
    if (!(ti && tv && tp && tl)) return;
    int n = (int)ti->shape[0];
    float *z = malloc(sizeof(float) * (size_t)n * m->D), *tvec = malloc(sizeof(float) * (size_t)n * m->d);
    float *tprob = malloc(sizeof(float) * (size_t)n * m->K), *tlab = malloc(sizeof(float) * (size_t)n);
    float *vec = malloc(sizeof(float) * (size_t)n * m->d), *probs = malloc(sizeof(float) * (size_t)n * m->K);
    float *rv = malloc(sizeof(float) * (size_t)m->d), *rp = malloc(sizeof(float) * (size_t)m->K);
    pgcl_st_read_f32(ti, z, err, sizeof err);
    pgcl_st_read_f32(tv, tvec, err, sizeof err);
    pgcl_st_read_f32(tp, tprob, err, sizeof err);
    pgcl_st_read_f32(tl, tlab, err, sizeof err);
    pgcl_scratch *s = pgcl_scratch_create(m, 16);
    pgcl_forward(m, s, z, n, vec, probs);
    double worst_fast = 0, worst_oracle = 0;
    for (int i = 0; i < n; i++) {
        pgcl_forward_reference(m, z + (size_t)i * m->D, rv, rp);
        for (int j = 0; j < m->d; j++) {
            worst_fast = fmax(worst_fast, fabs((double)vec[(size_t)i * m->d + j] - tvec[(size_t)i * m->d + j]));
            worst_oracle = fmax(worst_oracle, fabs((double)rv[j] - tvec[(size_t)i * m->d + j]));
        }
        for (int k = 0; k < m->K; k++) {
            worst_fast = fmax(worst_fast, fabs((double)probs[(size_t)i * m->K + k] - tprob[(size_t)i * m->K + k]));
            worst_oracle = fmax(worst_oracle, fabs((double)rp[k] - tprob[(size_t)i * m->K + k]));
        }
        int label;
        pgcl_model_decide(m, probs + (size_t)i * m->K, &label);
        CHECK(label == (int)tlab[i], "%s row %d: label %d, PyTorch %d", parity_file, i, label, (int)tlab[i]);
    }
    CHECK(worst_oracle <= 1e-5, "%s: oracle vs PyTorch max abs difference %.3g > 1e-5", parity_file, worst_oracle);
    CHECK(worst_fast <= 1e-5, "%s: fast path vs PyTorch max abs difference %.3g > 1e-5", parity_file, worst_fast);
    printf("%s: %d rows; max abs difference vs PyTorch: oracle %.3g, fast path %.3g\n", parity_file, n, worst_oracle,
           worst_fast);
    pgcl_scratch_destroy(s);
    free(z); free(tvec); free(tprob); free(tlab); free(vec); free(probs); free(rv); free(rp);
    pgcl_safetensors_destroy(st);
    pgcl_model_release(m);
}

int main(void) {
    if (sodium_init() < 0) return 1;
    test_refusals();
    test_calibration();
    test_dsa();
    test_fast_vs_oracle("tests/fixtures/models/tiny_binary/1");
    test_fast_vs_oracle("tests/fixtures/models/tiny_multi/1");
    test_fast_vs_oracle("tests/fixtures/models/tiny_ordinal/1");
    test_fast_vs_oracle("models/toxicity/1");
    test_fast_vs_oracle("models/emotions/1");
    test_torch_parity("models/toxicity/1", "tests/fixtures/parity/toxicity.safetensors");
    test_torch_parity("models/emotions/1", "tests/fixtures/parity/emotions.safetensors");
    test_torch_parity("tests/fixtures/models/tiny_multi/1", "tests/fixtures/parity/tiny_multi.safetensors");
    return test_finish("test_model");
}
