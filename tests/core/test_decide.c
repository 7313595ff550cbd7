/* The decision policy (pgcl_model_decide, core/model/model.c) at its boundaries.
 *
 * The rule, from docs/checkpoint-format.md ("Decision policy"), written out here as the expected
 * decision of every case rather than computed:
 *   threshold  score = probability of the policy's label; block if score >= t_block, else review if
 *              score >= t_review, else allow;
 *   label_map  the action of the predicted label (argmax, the first on ties; unlisted labels allow);
 *              an allow becomes review when the top probability is below min_confidence (default 0).
 *
 * Each comparison is exercised exactly at its threshold and one ulp either side, both ways: the
 * probability (a float32) one float ulp off a float32-representable threshold, and the threshold
 * (a double, as parsed from config.json) one double ulp off the probability widened to double. The
 * policies are loaded the way a checkpoint is (config.json text through pgcl_model_load_mem, the
 * thresholds printed with 17 significant digits), so a threshold reaches the comparison bit for
 * bit. Turning any `>=` into `>`, the `<` into `<=`, or the argmax's `>` into `>=` fails a case. */
#include <jansson.h>
#include <math.h>
#include <sodium.h>

#include "model.h"
#include "test_util.h"

static unsigned char *slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *buf = malloc((size_t)n + 1);
    if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    if (buf) buf[n] = 0;
    *len = (size_t)n;
    return buf;
}

/* A fixture checkpoint whose decision_policy is replaced by `policy` (taken over) and whose golden
 * entries are dropped (their recorded decisions belong to the original policy). NULL on failure,
 * with the reason reported as a failed check. */
static pgcl_model *load_with_policy(const char *fixture_dir, json_t *policy) {
    char rel[512];
    size_t config_len = 0, weights_len = 0;
    snprintf(rel, sizeof rel, "%s/config.json", fixture_dir);
    char *config_text = (char *)slurp(source_path(rel), &config_len);
    snprintf(rel, sizeof rel, "%s/model.safetensors", fixture_dir);
    unsigned char *weights = slurp(source_path(rel), &weights_len);
    json_t *config = config_text ? json_loadb(config_text, config_len, 0, NULL) : NULL;
    pgcl_model *m = NULL;
    if (!config || !weights) {
        CHECK(0, "cannot read %s (PGCLD_SOURCE_ROOT=%s)", fixture_dir, getenv("PGCLD_SOURCE_ROOT"));
        json_decref(policy);
    } else {
        json_object_set_new(config, "decision_policy", policy);
        json_object_del(config, "golden");
        char *text = json_dumps(config, JSON_REAL_PRECISION(17));
        char err[1024] = "";
        CHECK(pgcl_model_load_mem(text, strlen(text), weights, weights_len, fixture_dir, &m, err, sizeof err) ==
                  PGCL_OK,
              "%s: %s", fixture_dir, err);
        free(text);
    }
    json_decref(config);
    free(config_text);
    free(weights);
    return m;
}

static json_t *threshold_policy(const char *label, double t_review, double t_block) {
    return json_pack("{s:s, s:s, s:f, s:f}", "kind", "threshold", "label", label, "t_review", t_review, "t_block",
                     t_block);
}

/* actions: a JSON object text {label: action}; min_confidence < 0 leaves it out (the default 0). */
static json_t *label_map_policy(const char *actions, double min_confidence) {
    json_t *p = json_pack("{s:s, s:o}", "kind", "label_map", "actions", json_loads(actions, 0, NULL));
    if (min_confidence >= 0) json_object_set_new(p, "min_confidence", json_real(min_confidence));
    return p;
}

static const char *decision_name(pgcl_decision d) {
    return d == PGCL_DECISION_ALLOW ? "allow" : d == PGCL_DECISION_REVIEW ? "review" : "block";
}

/* Decides probs (m->K of them) and checks the decision and the predicted label. */
static void expect(const pgcl_model *m, const char *what, const float *probs, pgcl_decision want, int want_label) {
    int label = -1;
    pgcl_decision got = pgcl_model_decide(m, probs, &label);
    CHECK(got == want, "%s: decision %s, expected %s (probs[0..2] = %.9g %.9g %.9g; t_review %.17g t_block %.17g"
          " min_confidence %.17g)", what, decision_name(got), decision_name(want), (double)probs[0],
          (double)probs[1], m->K > 2 ? (double)probs[2] : 0.0, m->policy.t_review, m->policy.t_block,
          m->policy.min_confidence);
    CHECK(label == want_label, "%s: label index %d, expected %d", what, label, want_label);
}

/* Binary: probs = {1 - p, p}; the predicted label is pos (1) when p > 1 - p. */
static void expect_binary(const pgcl_model *m, const char *what, float p, pgcl_decision want) {
    float probs[2] = {1.0f - p, p};
    expect(m, what, probs, want, p > 1.0f - p ? 1 : 0);
}

static const char BINARY[] = "tests/fixtures/models/tiny_binary/1"; /* labels neg, pos */
static const char MULTI[] = "tests/fixtures/models/tiny_multi/1";   /* labels joy, anger, fear */
static const char ORDINAL[] = "tests/fixtures/models/tiny_ordinal/1"; /* labels s1..s5 */

/* Thresholds that are float32 values: a probability can equal them exactly. */
static void test_threshold_float_exact(void) {
    const float r = 0.375f, b = 0.8125f; /* exact in binary; b above 1/2 so the label is pos */
    pgcl_model *m = load_with_policy(BINARY, threshold_policy("pos", r, b));
    if (!m) return;
    CHECK(m->policy.t_review == (double)r && m->policy.t_block == (double)b, "thresholds parsed exactly");
    expect_binary(m, "score == t_block", b, PGCL_DECISION_BLOCK);
    expect_binary(m, "score one float ulp below t_block", nextafterf(b, 0.0f), PGCL_DECISION_REVIEW);
    expect_binary(m, "score one float ulp above t_block", nextafterf(b, 1.0f), PGCL_DECISION_BLOCK);
    expect_binary(m, "score == t_review", r, PGCL_DECISION_REVIEW);
    expect_binary(m, "score one float ulp below t_review", nextafterf(r, 0.0f), PGCL_DECISION_ALLOW);
    expect_binary(m, "score one float ulp above t_review", nextafterf(r, 1.0f), PGCL_DECISION_REVIEW);
    expect_binary(m, "score 0", 0.0f, PGCL_DECISION_ALLOW);
    expect_binary(m, "score 1", 1.0f, PGCL_DECISION_BLOCK);
    pgcl_model_release(m);
}

/* Thresholds one double ulp either side of a probability widened to double: the comparison is in
 * double, so a threshold just above the score is not reached and one just below is. */
static void test_threshold_double_ulp(void) {
    const float p = 0.6180339f; /* any float32 in (1/2, 1) */
    const double at = (double)p, above = nextafter(at, 1.0), below = nextafter(at, 0.0);
    struct {
        const char *what;
        double t_review, t_block;
        pgcl_decision want;
    } cases[] = {
        {"t_block == score", 0.25, at, PGCL_DECISION_BLOCK},
        {"t_block one double ulp above score", 0.25, above, PGCL_DECISION_REVIEW},
        {"t_block one double ulp below score", 0.25, below, PGCL_DECISION_BLOCK},
        {"t_review == score", at, 0.9, PGCL_DECISION_REVIEW},
        {"t_review one double ulp above score", above, 0.9, PGCL_DECISION_ALLOW},
        {"t_review one double ulp below score", below, 0.9, PGCL_DECISION_REVIEW},
        {"t_review == t_block == score", at, at, PGCL_DECISION_BLOCK},
        {"t_review == t_block one ulp above score", above, above, PGCL_DECISION_ALLOW},
        {"t_review == score, t_block one ulp above", at, above, PGCL_DECISION_REVIEW},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        pgcl_model *m = load_with_policy(BINARY, threshold_policy("pos", cases[i].t_review, cases[i].t_block));
        if (!m) continue;
        CHECK(m->policy.t_review == cases[i].t_review && m->policy.t_block == cases[i].t_block,
              "%s: thresholds parsed exactly (%.17g %.17g)", cases[i].what, m->policy.t_review, m->policy.t_block);
        expect_binary(m, cases[i].what, p, cases[i].want);
        pgcl_model_release(m);
    }
}

/* The ends of the allowed range [0, 1]: t_review 0 sends even a zero score to review, t_block 0
 * blocks everything, t_block 1 blocks only a certain 1. */
static void test_threshold_range_ends(void) {
    pgcl_model *m = load_with_policy(BINARY, threshold_policy("pos", 0.0, 1.0));
    if (m) {
        expect_binary(m, "t_review 0: score 0", 0.0f, PGCL_DECISION_REVIEW);
        expect_binary(m, "t_block 1: score 1", 1.0f, PGCL_DECISION_BLOCK);
        expect_binary(m, "t_block 1: score one ulp below 1", nextafterf(1.0f, 0.0f), PGCL_DECISION_REVIEW);
        pgcl_model_release(m);
    }
    m = load_with_policy(BINARY, threshold_policy("pos", 0.0, 0.0));
    if (m) {
        expect_binary(m, "t_block 0: score 0", 0.0f, PGCL_DECISION_BLOCK);
        pgcl_model_release(m);
    }
}

/* The score is the probability of the policy's label, not of the predicted one: here label 0 (neg)
 * of a binary model, and label 2 (fear) of a multiclass model whose argmax is elsewhere. */
static void test_threshold_other_label(void) {
    const float b = 0.625f, r = 0.25f;
    pgcl_model *m = load_with_policy(BINARY, threshold_policy("neg", r, b));
    if (m) {
        float at_block[2] = {b, 1.0f - b}, below_block[2] = {nextafterf(b, 0.0f), 1.0f - b};
        float at_review[2] = {r, 1.0f - r}, below_review[2] = {nextafterf(r, 0.0f), 1.0f - r};
        expect(m, "label neg: score == t_block", at_block, PGCL_DECISION_BLOCK, 0);
        expect(m, "label neg: score one ulp below t_block", below_block, PGCL_DECISION_REVIEW, 0);
        expect(m, "label neg: score == t_review", at_review, PGCL_DECISION_REVIEW, 1);
        expect(m, "label neg: score one ulp below t_review", below_review, PGCL_DECISION_ALLOW, 1);
        pgcl_model_release(m);
    }
    m = load_with_policy(MULTI, threshold_policy("fear", r, b));
    if (m) {
        float review[3] = {0.5f, 0.25f - 1e-3f, r}, allow[3] = {0.5f, 0.25f, nextafterf(r, 0.0f)};
        expect(m, "multiclass threshold on fear: score == t_review, argmax joy", review, PGCL_DECISION_REVIEW, 0);
        expect(m, "multiclass threshold on fear: one ulp below t_review", allow, PGCL_DECISION_ALLOW, 0);
        pgcl_model_release(m);
    }
}

/* label_map on the multiclass fixture (joy, anger, fear): joy allows, anger reviews, fear blocks;
 * min_confidence a float32 value, and one double ulp either side of a probability. */
static void test_label_map_min_confidence(void) {
    const char *actions = "{\"anger\": \"review\", \"fear\": \"block\"}";
    const float c = 0.4375f;
    pgcl_model *m = load_with_policy(MULTI, label_map_policy(actions, c));
    if (m) {
        CHECK(m->policy.min_confidence == (double)c, "min_confidence parsed exactly");
        float at[3] = {c, 0.3f, 0.2f}, below[3] = {nextafterf(c, 0.0f), 0.3f, 0.2f};
        float above[3] = {nextafterf(c, 1.0f), 0.3f, 0.2f};
        expect(m, "top (joy, allow) == min_confidence", at, PGCL_DECISION_ALLOW, 0);
        expect(m, "top (joy, allow) one float ulp below min_confidence", below, PGCL_DECISION_REVIEW, 0);
        expect(m, "top (joy, allow) one float ulp above min_confidence", above, PGCL_DECISION_ALLOW, 0);
        /* min_confidence only turns an allow into review: a review or block stays as it is */
        float anger_low[3] = {0.2f, nextafterf(c, 0.0f), 0.3f}, fear_low[3] = {0.2f, 0.3f, nextafterf(c, 0.0f)};
        expect(m, "top anger (review) below min_confidence", anger_low, PGCL_DECISION_REVIEW, 1);
        expect(m, "top fear (block) below min_confidence", fear_low, PGCL_DECISION_BLOCK, 2);
        float fear_at[3] = {0.2f, 0.3f, c};
        expect(m, "top fear (block) == min_confidence", fear_at, PGCL_DECISION_BLOCK, 2);
        pgcl_model_release(m);
    }

    const float p = 0.51234567f;
    const double at = (double)p;
    struct {
        const char *what;
        double min_confidence;
        pgcl_decision want;
    } cases[] = {
        {"min_confidence == top", at, PGCL_DECISION_ALLOW},
        {"min_confidence one double ulp above top", nextafter(at, 1.0), PGCL_DECISION_REVIEW},
        {"min_confidence one double ulp below top", nextafter(at, 0.0), PGCL_DECISION_ALLOW},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        m = load_with_policy(MULTI, label_map_policy("{\"joy\": \"allow\"}", cases[i].min_confidence));
        if (!m) continue;
        CHECK(m->policy.min_confidence == cases[i].min_confidence, "%s: parsed exactly", cases[i].what);
        float probs[3] = {p, 0.25f, 0.125f};
        expect(m, cases[i].what, probs, cases[i].want, 0);
        pgcl_model_release(m);
    }
}

/* The ends of min_confidence: absent (0) never reviews an allow; 1 reviews every allow but a
 * certain 1. */
static void test_label_map_range_ends(void) {
    pgcl_model *m = load_with_policy(MULTI, label_map_policy("{}", -1));
    if (m) {
        CHECK(m->policy.min_confidence == 0.0, "min_confidence defaults to 0");
        float flat[3] = {1.0f / 3, 1.0f / 3, 1.0f / 3}, zero[3] = {0.0f, 0.0f, 0.0f};
        expect(m, "no min_confidence: a flat distribution (tie: the first label)", flat, PGCL_DECISION_ALLOW, 0);
        expect(m, "no min_confidence: top probability 0", zero, PGCL_DECISION_ALLOW, 0);
        pgcl_model_release(m);
    }
    m = load_with_policy(MULTI, label_map_policy("{}", 1.0));
    if (m) {
        float one[3] = {0.0f, 1.0f, 0.0f}, almost[3] = {0.0f, nextafterf(1.0f, 0.0f), 0.0f};
        expect(m, "min_confidence 1: top == 1", one, PGCL_DECISION_ALLOW, 1);
        expect(m, "min_confidence 1: top one ulp below 1", almost, PGCL_DECISION_REVIEW, 1);
        pgcl_model_release(m);
    }
}

/* The predicted label is the argmax, the first on ties; it picks the action. */
static void test_label_map_ties(void) {
    pgcl_model *m = load_with_policy(MULTI, label_map_policy("{\"anger\": \"review\", \"fear\": \"block\"}", 0.25));
    if (!m) return;
    float joy_anger[3] = {0.4f, 0.4f, 0.2f}, anger_fear[3] = {0.2f, 0.4f, 0.4f}, all[3] = {0.3f, 0.3f, 0.3f};
    float fear_by_ulp[3] = {0.2f, 0.4f, nextafterf(0.4f, 1.0f)};
    expect(m, "tie joy/anger: joy", joy_anger, PGCL_DECISION_ALLOW, 0);
    expect(m, "tie anger/fear: anger", anger_fear, PGCL_DECISION_REVIEW, 1);
    expect(m, "three-way tie: joy", all, PGCL_DECISION_ALLOW, 0);
    expect(m, "fear above anger by one ulp: fear", fear_by_ulp, PGCL_DECISION_BLOCK, 2);
    pgcl_model_release(m);
}

/* The ordinal fixture's own kind of policy (s1 blocks, s2 reviews, the rest allow), five labels. */
static void test_label_map_ordinal(void) {
    const float c = 0.40625f;
    pgcl_model *m = load_with_policy(ORDINAL, label_map_policy("{\"s1\": \"block\", \"s2\": \"review\"}", c));
    if (!m) return;
    float s5_at[5] = {0.1f, 0.1f, 0.1f, 0.2f, c}, s5_below[5] = {0.1f, 0.1f, 0.1f, 0.2f, nextafterf(c, 0.0f)};
    float s1_below[5] = {nextafterf(c, 0.0f), 0.1f, 0.1f, 0.2f, 0.2f};
    float s2_below[5] = {0.1f, nextafterf(c, 0.0f), 0.1f, 0.2f, 0.2f};
    expect(m, "ordinal: top s5 (allow) == min_confidence", s5_at, PGCL_DECISION_ALLOW, 4);
    expect(m, "ordinal: top s5 (allow) one ulp below min_confidence", s5_below, PGCL_DECISION_REVIEW, 4);
    expect(m, "ordinal: top s1 (block) below min_confidence", s1_below, PGCL_DECISION_BLOCK, 0);
    expect(m, "ordinal: top s2 (review) below min_confidence", s2_below, PGCL_DECISION_REVIEW, 1);
    pgcl_model_release(m);
}

int main(void) {
    if (sodium_init() < 0) return 1;
    test_threshold_float_exact();
    test_threshold_double_ulp();
    test_threshold_range_ends();
    test_threshold_other_label();
    test_label_map_min_confidence();
    test_label_map_range_ends();
    test_label_map_ties();
    test_label_map_ordinal();
    return test_finish("test_decide");
}
