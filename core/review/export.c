/* The export stream of the decisions and the CSV neutralisation of its cells; see export.h. */
#include "export.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "log.h"
#include "read_sql.h"

struct pgcl_export {
    pgcl_export_chunk_fn chunk; /* the store's rows */
    void *chunk_ctx;
    pgcl_export_format fmt;
    char since[PGCL_QTIME_LEN + 1], until[PGCL_QTIME_LEN + 1];
    bool has_since, has_until;
    int64_t max_seq;                  /* rows committed after create() are not exported */
    char last_ts[PGCL_QTIME_LEN + 8]; /* (created_at, seq) of the last row sent */
    int64_t last_seq;
    int chunk_rows; /* rows formatted by the current chunk */
    bool header_sent, done;
    char *buf; /* the current chunk, formatted */
    size_t len, off, cap;
};

static const char CSV_HEADER[] = "decision_id,seq,created_at,item_id,request_id,model_name,model_version,label,"
                                 "decision,toxicity,contest_status,probabilities,vector\r\n";

static bool buf_put(pgcl_export *e, const char *data, size_t n) {
    if (e->len + n > e->cap) {
        size_t cap = e->cap ? e->cap : 65536;
        while (cap < e->len + n)
            cap *= 2;
        char *grown = realloc(e->buf, cap);
        if (!grown) return false;
        e->buf = grown;
        e->cap = cap;
    }
    memcpy(e->buf + e->len, data, n);
    e->len += n;
    return true;
}

/* The characters that start a formula once a spreadsheet has folded compatibility forms (NFKC):
 * = + - @, and U+2212 MINUS SIGN, which spreadsheets accept as a minus sign and to which the
 * superscript and subscript minus (U+207B, U+208B) fold. */
static bool formula_start(utf8proc_int32_t c) {
    return c == '=' || c == '+' || c == '-' || c == '@' || c == 0x2212;
}

/* True for a character a spreadsheet shows as nothing, or trims before reading a cell: whitespace
 * as Python's str.isspace() defines it (general category Zs, or bidirectional class WS, B or S:
 * Unicode's White_Space characters and the information separators U+001C-U+001F), and the
 * invisible format characters (category Cf: zero-width space and joiners, word joiner, byte
 * order mark, soft hyphen, bidirectional controls). */
static bool invisible(utf8proc_int32_t c) {
    const utf8proc_property_t *p = utf8proc_get_property(c);
    return p->category == UTF8PROC_CATEGORY_ZS || p->category == UTF8PROC_CATEGORY_CF ||
           p->bidi_class == UTF8PROC_BIDI_CLASS_WS || p->bidi_class == UTF8PROC_BIDI_CLASS_B ||
           p->bidi_class == UTF8PROC_BIDI_CLASS_S;
}

/* c folded by NFKC (its compatibility decomposition, canonically ordered, then composed) into
 * folded, which holds cap code points. Returns the number of code points (at most 18 for any
 * character of Unicode 15), or 1 with c itself should utf8proc fail. */
static utf8proc_ssize_t nfkc_fold(utf8proc_int32_t c, utf8proc_int32_t *folded, utf8proc_ssize_t cap) {
    const utf8proc_option_t nfkc = UTF8PROC_STABLE | UTF8PROC_COMPAT | UTF8PROC_COMPOSE;
    utf8proc_uint8_t utf8[4];
    utf8proc_ssize_t n = utf8proc_decompose(utf8, utf8proc_encode_char(c, utf8), folded, cap, nfkc);
    if (n > 0 && n <= cap) n = utf8proc_normalize_utf32(folded, n, nfkc);
    if (n <= 0 || n > cap) {
        folded[0] = c;
        n = 1;
    }
    return n;
}

/* The rule (docs/audit.md, "CSV exports and spreadsheets"): a cell is a formula when its first
 * character is a tab, CR or LF (OWASP's list), or when, each of its characters folded by NFKC and
 * the invisible ones (invisible()) skipped, the first remaining character is one of
 * formula_start()'s. Folding character by character never misses what folding the whole text
 * would find (composition only turns a formula character into another character, = and U+0338
 * into U+2260), and at a byte that is not UTF-8 the text is no formula. */
bool pgcl_csv_formula_trigger(const char *text) {
    const utf8proc_uint8_t *p = (const utf8proc_uint8_t *)text;
    if (*p == '\t' || *p == '\r' || *p == '\n') return true;
    while (*p) {
        if (*p > ' ' && *p < 0x7f) return formula_start(*p); /* printable ASCII folds to itself */
        utf8proc_int32_t c, folded[32];
        utf8proc_ssize_t len = utf8proc_iterate(p, -1, &c);
        if (len <= 0) return true; /* not UTF-8 (never stored so): undecidable, so neutralised */
        p += len;
        utf8proc_ssize_t n = nfkc_fold(c, folded, sizeof folded / sizeof folded[0]);
        for (utf8proc_ssize_t k = 0; k < n; k++)
            if (!invisible(folded[k])) return formula_start(folded[k]);
    }
    return false;
}

/* One CSV text field, quoted (RFC 4180) when it holds a comma, a quote, CR or LF, so that no cell
 * can start inside it; one that a spreadsheet would take for a formula is neutralised as OWASP
 * recommends: a single quote is put before it (the cell then reads as text, showing the quote),
 * and it is quoted. */
static bool csv_field(pgcl_export *e, const char *text, bool last) {
    bool ok = true;
    bool formula = text && pgcl_csv_formula_trigger(text);
    if (text && (formula || text[strcspn(text, ",\"\r\n")])) {
        ok = buf_put(e, formula ? "\"'" : "\"", formula ? 2 : 1);
        for (const char *p = text; ok && *p; p++)
            ok = *p == '"' ? buf_put(e, "\"\"", 2) : buf_put(e, p, 1);
        ok = ok && buf_put(e, "\"", 1);
    } else if (text) {
        ok = buf_put(e, text, strlen(text));
    }
    return ok && buf_put(e, last ? "\r\n" : ",", last ? 2 : 1);
}

/* The vector BLOB as a JSON array, "%.9g" per value (float32 round-trips; the same digits as the
 * JSON answers, which jansson writes with JSON_REAL_PRECISION(9)). Formatting floats is most of an
 * export's CPU time, hence no JSON tree here. */
static bool put_vector(pgcl_export *e, const unsigned char *b, size_t bytes) {
    size_t n = bytes / sizeof(float);
    bool ok = buf_put(e, "[", 1);
    for (size_t k = 0; ok && b && k < n; k++) {
        float f;
        memcpy(&f, b + (size_t)k * sizeof f, sizeof f);
        char num[40];
        int len = snprintf(num + 1, sizeof num - 1, "%.9g", (double)f);
        num[0] = ',';
        ok = buf_put(e, k ? num : num + 1, (size_t)len + (k ? 1 : 0));
    }
    return ok && buf_put(e, "]", 1);
}

/* One JSON scalar as jansson writes it in the answers (compact, reals with 9 significant digits,
 * strings escaped as jansson escapes them), so an NDJSON line reads byte for byte like the JSON
 * the lists answer. v is consumed; NULL (a string that is not UTF-8, out of memory) fails. */
static bool put_scalar(pgcl_export *e, json_t *v) {
    char text[512];
    size_t n = v ? json_dumpb(v, text, sizeof text, JSON_COMPACT | JSON_REAL_PRECISION(9) | JSON_ENCODE_ANY) : 0;
    bool ok = false;
    if (n > 0 && n <= sizeof text) {
        ok = buf_put(e, text, n);
    } else if (n > sizeof text) { /* a long string: let jansson allocate */
        char *big = json_dumps(v, JSON_COMPACT | JSON_REAL_PRECISION(9) | JSON_ENCODE_ANY);
        ok = big && buf_put(e, big, strlen(big));
        free(big);
    }
    json_decref(v);
    return ok;
}

static bool put_text(pgcl_export *e, const char *text) {
    return text ? put_scalar(e, json_string(text)) : buf_put(e, "null", 4);
}

/* The summary members of an NDJSON line, from `{` to the last member (no closing brace): the keys
 * and order of a row of GET /v1/decisions. */
static bool put_summary_json(pgcl_export *e, const pgcl_decision_summary *r) {
    char seq[32];
    int n_seq = snprintf(seq, sizeof seq, "%" JSON_INTEGER_FORMAT, (json_int_t)r->seq);
    return buf_put(e, "{\"decision_id\":", 15) && put_text(e, r->decision_id) && buf_put(e, ",\"seq\":", 7) &&
           buf_put(e, seq, (size_t)n_seq) && buf_put(e, ",\"created_at\":", 14) && put_text(e, r->created_at) &&
           buf_put(e, ",\"item_id\":", 11) && put_text(e, r->item_id) && buf_put(e, ",\"request_id\":", 14) &&
           put_text(e, r->request_id) && buf_put(e, ",\"model_name\":", 14) && put_text(e, r->model_name) &&
           buf_put(e, ",\"model_version\":", 17) && put_text(e, r->model_version) && buf_put(e, ",\"label\":", 9) &&
           put_text(e, r->label) && buf_put(e, ",\"decision\":", 12) && put_text(e, r->decision) &&
           buf_put(e, ",\"toxicity\":", 12) &&
           (r->toxicity.present ? put_scalar(e, json_real(r->toxicity.value)) : buf_put(e, "null", 4)) &&
           buf_put(e, ",\"contest_status\":", 18) && put_text(e, r->contest_status);
}

/* The summary cells of a CSV line (each followed by a comma), in CSV_HEADER's order. */
static bool put_summary_csv(pgcl_export *e, const pgcl_decision_summary *r) {
    char num[64];
    int n = snprintf(num, sizeof num, "%" JSON_INTEGER_FORMAT ",", (json_int_t)r->seq);
    bool ok = csv_field(e, r->decision_id ? r->decision_id : "", false) &&
              buf_put(e, num, (size_t)n); /* a number: never a formula */
    const char *const before_toxicity[] = {r->created_at,    r->item_id, r->request_id, r->model_name,
                                           r->model_version, r->label,   r->decision};
    for (size_t i = 0; ok && i < sizeof before_toxicity / sizeof before_toxicity[0]; i++)
        ok = csv_field(e, before_toxicity[i] ? before_toxicity[i] : "", false);
    if (ok && r->toxicity.present) {
        n = snprintf(num, sizeof num, "%.9g,", r->toxicity.value);
        ok = buf_put(e, num, (size_t)n);
    } else if (ok) {
        ok = csv_field(e, "", false);
    }
    return ok && csv_field(e, r->contest_status ? r->contest_status : "", false);
}

bool pgcl_export_put_row(pgcl_export *e, const pgcl_decision_summary *row, const char *probabilities,
                         const unsigned char *vector, size_t vector_bytes) {
    /* The stored probabilities, parsed and written again as the answers write them. */
    json_t *probs = probabilities ? json_loads(probabilities, JSON_DECODE_ANY, NULL) : NULL;
    char *ptext = json_dumps(probs ? probs : json_null(), JSON_COMPACT | JSON_REAL_PRECISION(9) | JSON_ENCODE_ANY);
    bool ok = false;
    if (!ptext) goto done;
    if (e->fmt == PGCL_EXPORT_NDJSON) {
        /* {summary…,"probabilities":{…},"vector":[…]} */
        ok = put_summary_json(e, row) && buf_put(e, ",\"probabilities\":", 17) && buf_put(e, ptext, strlen(ptext)) &&
             buf_put(e, ",\"vector\":", 10) && put_vector(e, vector, vector_bytes) && buf_put(e, "}\n", 2);
        goto done;
    }
    ok = put_summary_csv(e, row);
    /* The vector's text has commas: quoted, and it holds no quote to double. */
    ok = ok && csv_field(e, ptext, false) && buf_put(e, "\"", 1) && put_vector(e, vector, vector_bytes) &&
         buf_put(e, "\"\r\n", 3);
done:
    free(ptext);
    json_decref(probs);
    if (!ok) return false;
    /* the keyset only moves forward */
    int order = strcmp(row->created_at, e->last_ts);
    PGCL_ASSERT(order > 0 || (order == 0 && row->seq > e->last_seq));
    snprintf(e->last_ts, sizeof e->last_ts, "%s", row->created_at);
    e->last_seq = row->seq;
    e->chunk_rows++;
    return true;
}

static bool export_row(pgcl_export *e, sqlite3_stmt *s) {
    pgcl_row_arena a = {0};
    pgcl_decision_summary row;
    pgcl_read_summary(&a, s, &row);
    bool ok = !a.failed && pgcl_export_put_row(e, &row, (const char *)sqlite3_column_text(s, 11),
                                               sqlite3_column_blob(s, 12), (size_t)sqlite3_column_bytes(s, 12));
    pgcl_row_arena_release(&a);
    return ok;
}

/* The SQLite store's chunks (pgcl_export_chunk_fn; ctx: its reader pool). */
static int sqlite_chunk(void *ctx, pgcl_export *e, const pgcl_export_position *at, char *err, int cap) {
    pgcl_qpool *pool = ctx;
    qbuild *q = calloc(1, sizeof *q);
    sqlite3 *db = NULL;
    sqlite3_stmt *s = NULL;
    int result = -1;
    if (!q) {
        pgcl_errorf(err, cap, "out of memory");
        goto done;
    }
    /* Keyset on (created_at, seq), the order of the created_at index: the lower bound is the later
     * of `since` and the last row sent, and rows at that same instant up to the last seq are skipped. */
    const char *lower = at->since && strcmp(at->since, at->last_ts) > 0 ? at->since : at->last_ts;
    qb_sql(q, "SELECT " SUMMARY_COLS ", d.probabilities, d.vector FROM decisions d WHERE d.created_at >= ");
    qb_text(q, lower);
    if (at->until) {
        qb_sql(q, " AND d.created_at < ");
        qb_text(q, at->until);
    }
    qb_sql(q, " AND d.seq <= ");
    qb_int(q, at->max_seq);
    qb_sql(q, " AND NOT (d.created_at = ");
    qb_text(q, at->last_ts);
    qb_sql(q, " AND d.seq <= ");
    qb_int(q, at->last_seq);
    qb_sql(q, ") ORDER BY d.created_at, d.seq LIMIT ");
    qb_int(q, PGCL_EXPORT_CHUNK_ROWS);
    if (pgcl_qpool_acquire(pool, &db, err, cap) != PGCL_OK || qb_prepare(db, q, NULL, &s, err, cap) != PGCL_OK)
        goto done;
    int rc;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        if (!export_row(e, s)) {
            pgcl_errorf(err, cap, "out of memory");
            goto done;
        }
    }
    if (rc != SQLITE_DONE) {
        pgcl_read_step_error(db, rc, err, cap);
        goto done;
    }
    result = 0;
done:
    sqlite3_finalize(s);
    if (db) pgcl_qpool_release(pool, db);
    free(q);
    return result;
}

/* Reads and formats the next chunk of rows into e->buf. Returns 0, or -1 (logged). */
static int export_fill(pgcl_export *e) {
    char err[PGCL_READ_ERR_CAP];
    e->len = e->off = 0;
    if (!e->header_sent) {
        e->header_sent = true;
        if (e->fmt == PGCL_EXPORT_CSV && !buf_put(e, CSV_HEADER, sizeof CSV_HEADER - 1)) return -1;
    }
    /* a copy of the last row's created_at: pgcl_export_put_row moves e's while the chunk's
     * statement, which may hold that text bound without a copy, still runs */
    char last_ts[sizeof e->last_ts];
    memcpy(last_ts, e->last_ts, sizeof last_ts);
    const pgcl_export_position at = {.since = e->has_since ? e->since : NULL,
                                     .until = e->has_until ? e->until : NULL,
                                     .max_seq = e->max_seq,
                                     .last_ts = last_ts,
                                     .last_seq = e->last_seq};
    e->chunk_rows = 0;
    if (e->chunk(e->chunk_ctx, e, &at, err, sizeof err) != 0) {
        pgcl_log_error("export: %s", err);
        return -1;
    }
    if (e->chunk_rows < PGCL_EXPORT_CHUNK_ROWS) e->done = true;
    return 0;
}

pgcl_status pgcl_export_create(pgcl_qpool *p, const char *since, const char *until, pgcl_export_format fmt,
                               pgcl_export **out, char *err, int cap) {
    *out = NULL;
    int64_t max_seq = 0;
    sqlite3 *db = NULL;
    pgcl_status st = pgcl_qpool_acquire(p, &db, err, cap);
    if (st != PGCL_OK) return st;
    qbuild *q = calloc(1, sizeof *q);
    if (!q) {
        pgcl_errorf(err, cap, "out of memory");
        st = PGCL_ERR_NOMEM;
    } else {
        qb_sql(q, "SELECT coalesce(max(seq), 0) FROM decisions");
        st = pgcl_read_scalar_int(db, q, &max_seq, NULL, err, cap);
        free(q);
    }
    pgcl_qpool_release(p, db);
    return st == PGCL_OK ? pgcl_export_create_from(sqlite_chunk, p, since, until, max_seq, fmt, out, err, cap) : st;
}

pgcl_status pgcl_export_create_from(pgcl_export_chunk_fn chunk, void *ctx, const char *since, const char *until,
                                    int64_t max_seq, pgcl_export_format fmt, pgcl_export **out, char *err, int cap) {
    *out = NULL;
    pgcl_export *e = calloc(1, sizeof *e);
    if (!e) {
        pgcl_errorf(err, cap, "out of memory");
        return PGCL_ERR_NOMEM;
    }
    e->chunk = chunk;
    e->chunk_ctx = ctx;
    e->fmt = fmt;
    if ((e->has_since = since != NULL)) snprintf(e->since, sizeof e->since, "%s", since);
    if ((e->has_until = until != NULL)) snprintf(e->until, sizeof e->until, "%s", until);
    e->max_seq = max_seq;
    *out = e;
    return PGCL_OK;
}

long pgcl_export_read(pgcl_export *e, char *buf, size_t max) {
    while (e->off == e->len) {
        if (e->done) return 0;
        if (export_fill(e) != 0) return -1;
    }
    size_t n = e->len - e->off;
    if (n > max) n = max;
    memcpy(buf, e->buf + e->off, n);
    e->off += n;
    return (long)n;
}

void pgcl_export_destroy(pgcl_export *e) {
    if (!e) return;
    free(e->buf);
    free(e);
}
