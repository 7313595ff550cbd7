/* Checkpoint loading: config.json (model.c is the load). Field access with messages that name the
 * field, and the sections: the header (task, labels, dimensions), the decision policy, the
 * calibration (validated and kept, never applied) and the DSA vocabulary. The format is in
 * docs/checkpoint-format.md. */
#include "model_internal.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dsa_vocabulary.h"
#include "gemm_packed.h"
#include "ids.h"
#include "safetensors.h"

static int parse_decision(const char *s, pgcl_decision *out) {
    static const pgcl_decision all[] = {PGCL_DECISION_ALLOW, PGCL_DECISION_REVIEW, PGCL_DECISION_BLOCK};
    for (int i = 0; i < 3; i++) {
        if (strcmp(s, pgcl_decision_str(all[i])) == 0) {
            *out = all[i];
            return 0;
        }
    }
    return -1;
}

/* ---- config.json field access with messages that name the field ---- */

pgcl_status model_cfg_fail(load_ctx *c, const char *field, const char *problem) {
    pgcl_errorf(c->err, c->cap, "%s/config.json: field '%s': %s", c->label, field, problem);
    return PGCL_ERR_INVALID;
}

pgcl_status model_cfg_int(load_ctx *c, json_t *obj, const char *key, const char *field, long lo, long hi, int *out) {
    json_t *v = json_object_get(obj, key);
    if (!v) return model_cfg_fail(c, field, "is missing");
    if (!json_is_integer(v)) return model_cfg_fail(c, field, "must be an integer");
    json_int_t x = json_integer_value(v);
    if (x < lo || x > hi) {
        char msg[96];
        snprintf(msg, sizeof msg, "%lld is outside [%ld, %ld]", (long long)x, lo, hi);
        return model_cfg_fail(c, field, msg);
    }
    *out = (int)x;
    return PGCL_OK;
}

pgcl_status model_cfg_real(load_ctx *c, json_t *obj, const char *key, const char *field, double lo, double hi,
                           double *out) {
    json_t *v = json_object_get(obj, key);
    if (!v) return model_cfg_fail(c, field, "is missing");
    if (!json_is_number(v)) return model_cfg_fail(c, field, "must be a number");
    double x = json_number_value(v);
    if (!isfinite(x) || x < lo || x > hi) {
        char msg[96];
        snprintf(msg, sizeof msg, "%g is outside [%g, %g]", x, lo, hi);
        return model_cfg_fail(c, field, msg);
    }
    *out = x;
    return PGCL_OK;
}

pgcl_status model_cfg_str(load_ctx *c, json_t *obj, const char *key, const char *field, const char **out) {
    json_t *v = json_object_get(obj, key);
    if (!v) return model_cfg_fail(c, field, "is missing");
    if (!json_is_string(v) || json_string_length(v) == 0) return model_cfg_fail(c, field, "must be a non-empty string");
    *out = json_string_value(v);
    return PGCL_OK;
}

/* Refuses keys of obj not in the NULL-terminated list `allowed`. */
pgcl_status model_cfg_only(load_ctx *c, json_t *obj, const char *where, const char *const *allowed) {
    const char *key;
    json_t *val;
    json_object_foreach(obj, key, val) {
        bool ok = false;
        for (int i = 0; allowed[i] && !ok; i++) ok = strcmp(key, allowed[i]) == 0;
        if (!ok) {
            char field[160];
            snprintf(field, sizeof field, "%s%s%s", where, *where ? "." : "", key);
            return model_cfg_fail(c, field, "unknown field");
        }
    }
    return PGCL_OK;
}

static int find_label(const pgcl_model *m, const char *name) {
    for (int i = 0; i < m->K && m->labels[i]; i++)
        if (strcmp(m->labels[i], name) == 0) return i;
    return -1;
}

/* ---- the phases of a load ---- */

pgcl_status model_parse_header(load_ctx *c) {
    static const char *const top[] = {"format", "format_version", "task", "dims", "labels", "semantic_mlp",
                                      "attention", "head", "decision_policy", "weights_sha256", "golden",
                                      "training", "calibration", "dsa", NULL};
    pgcl_model *m = c->m;
    json_t *cfg = c->config;
    pgcl_status st;
    if (!json_is_object(cfg)) {
        pgcl_errorf(c->err, c->cap, "%s/config.json: top level must be a JSON object", c->label);
        return PGCL_ERR_FORMAT;
    }
    if ((st = model_cfg_only(c, cfg, "", top))) return st;
    const char *format;
    if ((st = model_cfg_str(c, cfg, "format", "format", &format))) return st;
    if (strcmp(format, "pgcld-checkpoint") != 0) return model_cfg_fail(c, "format", "must be \"pgcld-checkpoint\"");
    int version;
    if ((st = model_cfg_int(c, cfg, "format_version", "format_version", 1, 1000000, &version))) return st;
    if (version != 1) {
        pgcl_errorf(c->err, c->cap,
                    "%s/config.json: format_version %d is not supported: this pgcld reads version 1; "
                    "upgrade pgcld or re-export the checkpoint with a matching trainer",
                    c->label, version);
        return PGCL_ERR_UNSUPPORTED;
    }
    const char *task;
    if ((st = model_cfg_str(c, cfg, "task", "task", &task))) return st;
    if (strcmp(task, "binary") == 0) m->task = PGCL_TASK_BINARY;
    else if (strcmp(task, "multiclass") == 0) m->task = PGCL_TASK_MULTICLASS;
    else if (strcmp(task, "ordinal") == 0) m->task = PGCL_TASK_ORDINAL;
    else return model_cfg_fail(c, "task", "must be \"binary\", \"multiclass\" or \"ordinal\"");

    json_t *dims = json_object_get(cfg, "dims");
    if (!json_is_object(dims)) return model_cfg_fail(c, "dims", "must be an object {D, d, K}");
    static const char *const dims_keys[] = {"D", "d", "K", NULL};
    if ((st = model_cfg_only(c, dims, "dims", dims_keys))) return st;
    if ((st = model_cfg_int(c, dims, "D", "dims.D", 1, 65536, &m->D))) return st;
    if ((st = model_cfg_int(c, dims, "d", "dims.d", 1, 4096, &m->d))) return st;
    if ((st = model_cfg_int(c, dims, "K", "dims.K", 2, 1024, &m->K))) return st;
    if (m->task == PGCL_TASK_BINARY && m->K != 2) return model_cfg_fail(c, "dims.K", "must be 2 for a binary task");
    m->H = m->task == PGCL_TASK_BINARY ? 1 : m->K;

    json_t *labels = json_object_get(cfg, "labels");
    if (!json_is_array(labels) || (int)json_array_size(labels) != m->K)
        return model_cfg_fail(c, "labels", "must be an array of K strings");
    m->labels = calloc((size_t)m->K, sizeof *m->labels);
    m->labels_json = calloc((size_t)m->K, sizeof *m->labels_json);
    if (!m->labels || !m->labels_json) return PGCL_ERR_NOMEM;
    for (int i = 0; i < m->K; i++) {
        json_t *l = json_array_get(labels, (size_t)i);
        char field[32];
        snprintf(field, sizeof field, "labels[%d]", i);
        if (!json_is_string(l) || json_string_length(l) == 0 || json_string_length(l) > PGCL_MAX_LABEL_BYTES)
            return model_cfg_fail(c, field, "must be a non-empty string of at most 128 bytes");
        if (find_label(m, json_string_value(l)) >= 0) return model_cfg_fail(c, field, "duplicate label");
        m->labels[i] = strdup(json_string_value(l));
        m->labels_json[i] = json_dumps(l, JSON_ENCODE_ANY);
        if (!m->labels[i] || !m->labels_json[i]) return PGCL_ERR_NOMEM;
    }
    return PGCL_OK;
}

pgcl_status model_parse_policy(load_ctx *c) {
    pgcl_model *m = c->m;
    pgcl_status st;
    json_t *p = json_object_get(c->config, "decision_policy");
    if (!json_is_object(p)) return model_cfg_fail(c, "decision_policy", "must be an object");
    const char *kind;
    if ((st = model_cfg_str(c, p, "kind", "decision_policy.kind", &kind))) return st;
    if (strcmp(kind, "threshold") == 0) {
        static const char *const keys[] = {"kind", "label", "t_review", "t_block", "source", NULL};
        if ((st = model_cfg_only(c, p, "decision_policy", keys))) return st;
        m->policy.kind = PGCL_POLICY_THRESHOLD;
        const char *label;
        if ((st = model_cfg_str(c, p, "label", "decision_policy.label", &label))) return st;
        m->policy.label_index = find_label(m, label);
        if (m->policy.label_index < 0) return model_cfg_fail(c, "decision_policy.label", "is not one of the labels");
        if ((st = model_cfg_real(c, p, "t_review", "decision_policy.t_review", 0, 1, &m->policy.t_review))) return st;
        if ((st = model_cfg_real(c, p, "t_block", "decision_policy.t_block", 0, 1, &m->policy.t_block))) return st;
        if (m->policy.t_review > m->policy.t_block)
            return model_cfg_fail(c, "decision_policy.t_review", "must not exceed t_block");
    } else if (strcmp(kind, "label_map") == 0) {
        static const char *const keys[] = {"kind", "actions", "min_confidence", "source", NULL};
        if ((st = model_cfg_only(c, p, "decision_policy", keys))) return st;
        m->policy.kind = PGCL_POLICY_LABEL_MAP;
        m->policy.actions = calloc((size_t)m->K, sizeof *m->policy.actions);
        if (!m->policy.actions) return PGCL_ERR_NOMEM;
        json_t *actions = json_object_get(p, "actions");
        if (actions && !json_is_object(actions))
            return model_cfg_fail(c, "decision_policy.actions", "must be an object {label: action}");
        const char *key;
        json_t *val;
        json_object_foreach(actions, key, val) {
            char field[192];
            snprintf(field, sizeof field, "decision_policy.actions.%s", key);
            int li = find_label(m, key);
            if (li < 0) return model_cfg_fail(c, field, "is not one of the labels");
            if (!json_is_string(val) || parse_decision(json_string_value(val), &m->policy.actions[li]) != 0)
                return model_cfg_fail(c, field, "must be \"allow\", \"review\" or \"block\"");
        }
        m->policy.min_confidence = 0;
        if (json_object_get(p, "min_confidence") &&
            (st = model_cfg_real(c, p, "min_confidence", "decision_policy.min_confidence", 0, 1,
                           &m->policy.min_confidence)))
            return st;
    } else {
        return model_cfg_fail(c, "decision_policy.kind", "must be \"threshold\" or \"label_map\"");
    }
    json_t *source = json_object_get(p, "source");
    if (source && !json_is_object(source)) return model_cfg_fail(c, "decision_policy.source", "must be an object");
    m->policy_json = json_incref(p);
    m->policy_text = json_dumps(p, JSON_COMPACT | JSON_SORT_KEYS | JSON_REAL_PRECISION(17));
    if (!m->policy_text) return PGCL_ERR_NOMEM;
    json_t *training = json_object_get(c->config, "training");
    if (training && !json_is_object(training)) return model_cfg_fail(c, "training", "must be an object");
    m->training = json_incref(training);
    return PGCL_OK;
}

/* ---- calibration: validated, kept, shown on GET /v1/models; pgcld applies nothing ---- */

/* obj (at `field`) must be an object whose every value is a finite number; it may be empty. */
static pgcl_status cfg_finite_numbers(load_ctx *c, json_t *obj, const char *field) {
    if (!json_is_object(obj)) return model_cfg_fail(c, field, "must be an object of numbers");
    const char *key;
    json_t *val;
    json_object_foreach(obj, key, val) {
        char sub[192];
        snprintf(sub, sizeof sub, "%s.%s", field, key);
        if (!json_is_number(val) || !isfinite(json_number_value(val)))
            return model_cfg_fail(c, sub, "must be a finite number");
    }
    return PGCL_OK;
}

/* calibration.prevalence: every label exactly once, each share in (0, 1), the shares summing to 1
 * within 1e-6. Labels must already be parsed. */
static pgcl_status parse_prevalence(load_ctx *c, json_t *cal) {
    const pgcl_model *m = c->m;
    json_t *prev = json_object_get(cal, "prevalence");
    if (!prev) return model_cfg_fail(c, "calibration.prevalence", "is missing");
    if (!json_is_object(prev)) return model_cfg_fail(c, "calibration.prevalence", "must be an object {label: share}");
    const char *key;
    json_t *val;
    double sum = 0;
    json_object_foreach(prev, key, val) {
        char field[192];
        snprintf(field, sizeof field, "calibration.prevalence.%s", key);
        if (find_label(m, key) < 0) return model_cfg_fail(c, field, "is not one of the labels");
        double share = json_is_number(val) ? json_number_value(val) : NAN;
        if (!(share > 0 && share < 1)) return model_cfg_fail(c, field, "must be a number in (0, 1)");
        sum += share;
    }
    for (int k = 0; k < m->K; k++) {
        if (json_object_get(prev, m->labels[k])) continue;
        char msg[192];
        snprintf(msg, sizeof msg, "lacks label '%s' (every label must have a share)", m->labels[k]);
        return model_cfg_fail(c, "calibration.prevalence", msg);
    }
    if (!(fabs(sum - 1) <= 1e-6)) {
        char msg[96];
        snprintf(msg, sizeof msg, "shares sum to %.9g, not 1 (within 1e-6)", sum);
        return model_cfg_fail(c, "calibration.prevalence", msg);
    }
    return PGCL_OK;
}

/* ece, brier and nll of obj (at `where`): each present, finite and >= 0. */
static pgcl_status parse_calibration_scores(load_ctx *c, json_t *obj, const char *where) {
    static const char *const scores[] = {"ece", "brier", "nll"};
    for (int i = 0; i < 3; i++) {
        char field[96];
        double ignored;
        snprintf(field, sizeof field, "%s.%s", where, scores[i]);
        pgcl_status st = model_cfg_real(c, obj, scores[i], field, 0, INFINITY, &ignored);
        if (st) return st;
    }
    return PGCL_OK;
}

/* calibration.validation (optional): rows, ece_bins and the scores, and optionally the
 * uncalibrated scores. */
static pgcl_status parse_calibration_validation(load_ctx *c, json_t *cal) {
    json_t *val = json_object_get(cal, "validation");
    if (!val) return PGCL_OK;
    if (!json_is_object(val)) return model_cfg_fail(c, "calibration.validation", "must be an object");
    static const char *const keys[] = {"rows", "ece", "ece_bins", "brier", "nll", "uncalibrated", NULL};
    pgcl_status st;
    if ((st = model_cfg_only(c, val, "calibration.validation", keys))) return st;
    int ignored;
    if ((st = model_cfg_int(c, val, "rows", "calibration.validation.rows", 1, INT_MAX, &ignored))) return st;
    if ((st = model_cfg_int(c, val, "ece_bins", "calibration.validation.ece_bins", 1, 1000, &ignored))) return st;
    if ((st = parse_calibration_scores(c, val, "calibration.validation"))) return st;
    json_t *uncal = json_object_get(val, "uncalibrated");
    if (!uncal) return PGCL_OK;
    const char *where = "calibration.validation.uncalibrated";
    if (!json_is_object(uncal)) return model_cfg_fail(c, where, "must be an object");
    static const char *const uncal_keys[] = {"ece", "brier", "nll", NULL};
    if ((st = model_cfg_only(c, uncal, where, uncal_keys))) return st;
    return parse_calibration_scores(c, uncal, where);
}

/* The optional top-level `calibration` object the trainer writes (docs/checkpoint-format.md):
 * validated strictly, then kept on the model for GET /v1/models. The calibration is already
 * folded into the head's weights (folded_into_head must be true): nothing here changes scoring. */
pgcl_status model_parse_calibration(load_ctx *c) {
    json_t *cal = json_object_get(c->config, "calibration");
    if (!cal) return PGCL_OK;
    if (!json_is_object(cal)) return model_cfg_fail(c, "calibration", "must be an object");
    static const char *const keys[] = {"method", "parameters", "folded_into_head", "prevalence",
                                       "prevalence_source", "validation", NULL};
    pgcl_status st;
    if ((st = model_cfg_only(c, cal, "calibration", keys))) return st;
    const char *method, *source;
    if ((st = model_cfg_str(c, cal, "method", "calibration.method", &method))) return st;
    if (strcmp(method, "platt") && strcmp(method, "temperature") && strcmp(method, "none"))
        return model_cfg_fail(c, "calibration.method", "must be \"platt\", \"temperature\" or \"none\"");
    json_t *params = json_object_get(cal, "parameters");
    if (!params) return model_cfg_fail(c, "calibration.parameters", "is missing");
    if ((st = cfg_finite_numbers(c, params, "calibration.parameters"))) return st;
    json_t *folded = json_object_get(cal, "folded_into_head");
    if (!folded) return model_cfg_fail(c, "calibration.folded_into_head", "is missing");
    if (!json_is_true(folded))
        return model_cfg_fail(c, "calibration.folded_into_head",
                        "must be true (pgcld applies no calibration: the head's weights must already hold it)");
    if ((st = parse_prevalence(c, cal))) return st;
    if ((st = model_cfg_str(c, cal, "prevalence_source", "calibration.prevalence_source", &source))) return st;
    if ((st = parse_calibration_validation(c, cal))) return st;
    c->m->calibration = json_incref(cal);
    return PGCL_OK;
}

/* ---- dsa: the model's vocabulary in the EU DSA Transparency Database ---- */

/* Characters (UTF-8 code points) of a valid UTF-8 string: the unit of the TDB's length limits. */
static size_t utf8_chars(const char *s) {
    size_t n = 0;
    for (; *s; s++) n += ((unsigned char)*s & 0xC0) != 0x80;
    return n;
}

/* dsa.category_specification (optional): a non-empty array of distinct KEYWORD_* values. Sets
 * *has_other when KEYWORD_OTHER is among them. */
static pgcl_status parse_dsa_keywords(load_ctx *c, json_t *dsa, bool *has_other) {
    *has_other = false;
    json_t *spec = json_object_get(dsa, "category_specification");
    if (!spec) return PGCL_OK;
    if (!json_is_array(spec) || json_array_size(spec) == 0)
        return model_cfg_fail(c, "dsa.category_specification", "must be a non-empty array of KEYWORD_* values");
    size_t i, j;
    json_t *kw;
    json_array_foreach(spec, i, kw) {
        char field[64];
        snprintf(field, sizeof field, "dsa.category_specification[%zu]", i);
        if (!pgcl_dsa_is_keyword(json_string_value(kw)))
            return model_cfg_fail(c, field, "must be one of the DSA Transparency Database's KEYWORD_* values");
        for (j = 0; j < i; j++)
            if (json_equal(json_array_get(spec, j), kw)) return model_cfg_fail(c, field, "duplicate keyword");
        if (strcmp(json_string_value(kw), "KEYWORD_OTHER") == 0) *has_other = true;
    }
    return PGCL_OK;
}

/* The optional top-level `dsa` object (docs/checkpoint-format.md): the statement category of the
 * content this model moderates, and optionally the TDB's category specification, in the TDB's
 * vocabulary (dsa_vocabulary.h). Statements of reasons of this model's decisions use it. Without
 * it, the category is the task's default. Kept as m->dsa; m->dsa_category is the category in
 * either case. */
pgcl_status model_parse_dsa(load_ctx *c) {
    json_t *dsa = json_object_get(c->config, "dsa");
    c->m->dsa_category = pgcl_dsa_default_category(c->m->task);
    if (!dsa) return PGCL_OK;
    if (!json_is_object(dsa)) return model_cfg_fail(c, "dsa", "must be an object");
    static const char *const keys[] = {"category", "category_specification", "category_specification_other", NULL};
    pgcl_status st;
    if ((st = model_cfg_only(c, dsa, "dsa", keys))) return st;
    const char *category;
    if ((st = model_cfg_str(c, dsa, "category", "dsa.category", &category))) return st;
    if (!pgcl_dsa_is_category(category))
        return model_cfg_fail(c, "dsa.category",
                              "must be one of the DSA Transparency Database's STATEMENT_CATEGORY_* values");
    bool has_other;
    if ((st = parse_dsa_keywords(c, dsa, &has_other))) return st;
    json_t *other = json_object_get(dsa, "category_specification_other");
    if (other) {
        if (!has_other)
            return model_cfg_fail(c, "dsa.category_specification_other",
                            "is allowed only when category_specification holds KEYWORD_OTHER");
        const char *text;
        if ((st = model_cfg_str(c, dsa, "category_specification_other", "dsa.category_specification_other", &text)))
            return st;
        if (utf8_chars(text) > PGCL_DSA_TEXT_MAX)
            return model_cfg_fail(c, "dsa.category_specification_other", "must be at most 500 characters");
    }
    c->m->dsa = json_incref(dsa);
    c->m->dsa_category = category;
    return PGCL_OK;
}
