/* The audit hash chain's encoding (core/audit/chain.c, encoding version 1 of docs/audit.md), pinned by an
 * independent implementation of it: every entry of the base database (chain_fixture.h), genesis,
 * decisions with and without a stored input, admin events, contests and a resolution, is derived
 * again from its stored row; and rows whose every value is written out here are chained by the real
 * writer and their payloads and hashes derived from the literals alone. Tampering is test_chain.c's. */
#include "chain_fixture.h"

/* ---- an independent implementation of encoding version 1 (docs/audit.md), for known answers ---- */

typedef struct kbuf {
    unsigned char b[4096];
    size_t n;
} kbuf;

static void kb_be(kbuf *k, uint64_t v, int bytes) {
    for (int i = bytes - 1; i >= 0; i--) k->b[k->n++] = (unsigned char)(v >> (8 * i));
}
static void kb_int(kbuf *k, int64_t v) {
    k->b[k->n++] = 1;
    kb_be(k, (uint64_t)v, 8);
}
static void kb_real(kbuf *k, double v) {
    uint64_t u;
    memcpy(&u, &v, 8);
    k->b[k->n++] = 2;
    kb_be(k, u, 8);
}
static void kb_text(kbuf *k, const char *s) {
    size_t n = strlen(s);
    k->b[k->n++] = 3;
    kb_be(k, n, 4);
    memcpy(k->b + k->n, s, n);
    k->n += n;
}
static void kb_blob(kbuf *k, const void *p, size_t n) {
    k->b[k->n++] = 4;
    kb_be(k, n, 4);
    memcpy(k->b + k->n, p, n);
    k->n += n;
}
static void kb_null(kbuf *k) { k->b[k->n++] = 0; }
static void kb_sha(const kbuf *k, char out[65]) { pgcl_sha256_hex(k->b, k->n, out); }

/* A nullable column as documented: NULL, or the given type read back from the row. */
static void kb_text_or_null(kbuf *k, sqlite3_stmt *r, int i) {
    if (sqlite3_column_type(r, i) == SQLITE_NULL) kb_null(k);
    else kb_text(k, (const char *)sqlite3_column_text(r, i));
}
static void kb_real_or_null(kbuf *k, sqlite3_stmt *r, int i) {
    if (sqlite3_column_type(r, i) == SQLITE_NULL) kb_null(k);
    else kb_real(k, sqlite3_column_double(r, i));
}

/* Re-derives entry `seq` of path (any kind: genesis, decisions, admin_events, contests or
 * resolutions) from its row with the independent encoder and compares payload and hash with what
 * is stored. The column lists and types are docs/audit.md's, written out here. */
static void check_known_answer(const char *path, long long seq) {
    sqlite3 *db;
    sqlite3_stmt *e = NULL, *r = NULL;
    sqlite3_open(path, &db);
    sqlite3_prepare_v2(db, "SELECT kind, row_seq, payload_sha256, prev_hash, hash FROM audit_chain WHERE seq = ?",
                       -1, &e, NULL);
    sqlite3_bind_int64(e, 1, seq);
    CHECK(sqlite3_step(e) == SQLITE_ROW, "entry %lld", seq);
    const char *kind = (const char *)sqlite3_column_text(e, 0);
    long long row_seq = sqlite3_column_int64(e, 1);
    kbuf *k = calloc(1, sizeof *k);
    char want[65];
    if (strcmp(kind, "genesis") == 0) {
        for (int i = 0; i < 4; i++) kb_int(k, 0); /* a new database: no row predates the chain */
    } else if (strcmp(kind, "admin_events") == 0) {
        sqlite3_prepare_v2(db, "SELECT event_id, created_at, actor, action, target, details FROM admin_events"
                               " WHERE seq = ?", -1, &r, NULL);
        sqlite3_bind_int64(r, 1, row_seq);
        CHECK(sqlite3_step(r) == SQLITE_ROW, "admin_events row");
        kb_int(k, row_seq);
        for (int i = 0; i < 6; i++) kb_text(k, (const char *)sqlite3_column_text(r, i));
    } else if (strcmp(kind, "contests") == 0) {
        sqlite3_prepare_v2(db, "SELECT contest_id, decision_id, filed_at, filed_by, filer_key_id, reason FROM contests"
                               " WHERE seq = ?", -1, &r, NULL);
        sqlite3_bind_int64(r, 1, row_seq);
        CHECK(sqlite3_step(r) == SQLITE_ROW, "contests row");
        kb_int(k, row_seq);
        for (int i = 0; i < 4; i++) kb_text(k, (const char *)sqlite3_column_text(r, i));
        kb_text_or_null(k, r, 4);
        kb_text(k, (const char *)sqlite3_column_text(r, 5));
    } else if (strcmp(kind, "resolutions") == 0) {
        sqlite3_prepare_v2(db, "SELECT contest_id, resolved_at, resolved_by, resolver_key_id, outcome, corrected_label,"
                               " note FROM resolutions WHERE seq = ?", -1, &r, NULL);
        sqlite3_bind_int64(r, 1, row_seq);
        CHECK(sqlite3_step(r) == SQLITE_ROW, "resolutions row");
        kb_int(k, row_seq);
        for (int i = 0; i < 3; i++) kb_text(k, (const char *)sqlite3_column_text(r, i));
        kb_text_or_null(k, r, 3);
        kb_text(k, (const char *)sqlite3_column_text(r, 4));
        kb_text_or_null(k, r, 5);
        kb_text(k, (const char *)sqlite3_column_text(r, 6));
    } else {
        /* decisions: every column in the documented order, with their stored types */
        sqlite3_prepare_v2(db, "SELECT decision_id, created_at, request_id, item_id, model_name, model_version,"
                               " model_sha256, label, label_index, probabilities, toxicity, decision, policy, t_review,"
                               " t_block, vector, input_sha256, latency_us, input, input_dtype FROM decisions"
                               " WHERE seq = ?", -1, &r, NULL);
        sqlite3_bind_int64(r, 1, row_seq);
        CHECK(sqlite3_step(r) == SQLITE_ROW, "decisions row");
        kb_int(k, row_seq);
        for (int i = 0; i < 8; i++) kb_text(k, (const char *)sqlite3_column_text(r, i));
        kb_int(k, sqlite3_column_int64(r, 8));
        kb_text(k, (const char *)sqlite3_column_text(r, 9));
        kb_real_or_null(k, r, 10);
        kb_text(k, (const char *)sqlite3_column_text(r, 11));
        kb_text(k, (const char *)sqlite3_column_text(r, 12));
        kb_real_or_null(k, r, 13);
        kb_real_or_null(k, r, 14);
        kb_blob(k, sqlite3_column_blob(r, 15), (size_t)sqlite3_column_bytes(r, 15));
        kb_text(k, (const char *)sqlite3_column_text(r, 16));
        kb_int(k, sqlite3_column_int64(r, 17));
        if (sqlite3_column_type(r, 18) == SQLITE_NULL) {
            kb_null(k);
            kb_null(k);
        } else {
            kb_blob(k, sqlite3_column_blob(r, 18), (size_t)sqlite3_column_bytes(r, 18));
            kb_text(k, (const char *)sqlite3_column_text(r, 19));
        }
    }
    kb_sha(k, want);
    CHECK(strcmp(want, (const char *)sqlite3_column_text(e, 2)) == 0, "entry %lld (%s): payload %s, independent %s",
          seq, kind, sqlite3_column_text(e, 2), want);
    k->n = 0;
    kb_int(k, seq);
    kb_text(k, kind);
    kb_int(k, row_seq);
    kb_text(k, (const char *)sqlite3_column_text(e, 2));
    kb_text(k, (const char *)sqlite3_column_text(e, 3));
    kb_sha(k, want);
    CHECK(strcmp(want, (const char *)sqlite3_column_text(e, 4)) == 0, "entry %lld: hash differs from the independent "
          "encoding", seq);
    free(k);
    sqlite3_finalize(r);
    sqlite3_finalize(e);
    sqlite3_close(db);
}

/* ---- the cases ---- */

static void test_intact(const char *base, const base_info *info) {
    pgcl_chain_report rep = verify(base, NULL, 0);
    CHECK(rep.intact, "base chain intact: %lld %s", (long long)rep.first_bad_seq, rep.reason);
    CHECK(rep.events == info->entries && rep.head_seq == info->entries, "events %lld head %lld", (long long)rep.events,
          (long long)rep.head_seq);
    CHECK(strcmp(rep.head_hash, info->head_hash) == 0, "head hash");
    CHECK(rep.first_bad_seq == 0 && rep.reason[0] == 0, "no finding");
    /* every entry: decisions with and without a stored input, admin events, contests (filer_key_id
     * NULL), a resolution (resolver_key_id NULL) */
    for (long long seq = 1; seq <= info->entries; seq++) check_known_answer(base, seq);
    CHECK(query_int(base, "SELECT count(*) FROM audit_chain WHERE kind = 'decisions'") == 40, "one entry per row");
}
/* ---- known answers from literal rows: every column of every chained table ----
 *
 * Rows whose every value is written out here (no two values of a row alike, every nullable column
 * both NULL and set) are inserted with docs/audit.md's column lists and chained by the real
 * writer; the payload and hash of each entry are then derived from these literals alone with the
 * independent encoder above, from genesis to head. Dropping, adding or reordering a column in any
 * table's encoding, or encoding a value with another type, changes a payload and fails here; the
 * check above (from the stored rows) cannot see what both the writer and the verifier leave out. */

typedef struct kval {
    char type; /* 'n' NULL, 'i' INTEGER, 'r' REAL, 't' TEXT, 'b' BLOB */
    int64_t i;
    double r;
    const char *p; /* TEXT (NUL-terminated) or BLOB bytes */
    size_t n;      /* BLOB length */
} kval;

#define KN {'n', 0, 0, NULL, 0}
#define KI(v) {'i', (v), 0, NULL, 0}
#define KR(v) {'r', 0, (v), NULL, 0}
#define KT(v) {'t', 0, 0, (v), 0}
#define KB(v, len) {'b', 0, 0, (const char *)(v), (len)}

typedef struct literal_row {
    const char *table; /* also the entry's kind */
    const kval *values; /* the documented columns, in order, the row's seq first */
    int n;
} literal_row;

static const char *const DECISION_COLUMNS =
    "seq, decision_id, created_at, request_id, item_id, model_name, model_version, model_sha256, label, label_index,"
    " probabilities, toxicity, decision, policy, t_review, t_block, vector, input_sha256, latency_us, input,"
    " input_dtype";
static const char *const ADMIN_EVENT_COLUMNS = "seq, event_id, created_at, actor, action, target, details";
static const char *const CONTEST_COLUMNS = "seq, contest_id, decision_id, filed_at, filed_by, filer_key_id, reason";
static const char *const RESOLUTION_COLUMNS =
    "seq, contest_id, resolved_at, resolved_by, resolver_key_id, outcome, corrected_label, note";

static const char *columns_of(const char *table) {
    return strcmp(table, "decisions") == 0      ? DECISION_COLUMNS
           : strcmp(table, "admin_events") == 0 ? ADMIN_EVENT_COLUMNS
           : strcmp(table, "contests") == 0     ? CONTEST_COLUMNS
                                                : RESOLUTION_COLUMNS;
}

static void kb_value(kbuf *k, const kval *v) {
    switch (v->type) {
    case 'i': kb_int(k, v->i); break;
    case 'r': kb_real(k, v->r); break;
    case 't': kb_text(k, v->p); break;
    case 'b': kb_blob(k, v->p, v->n); break;
    default: kb_null(k);
    }
}

static void bind_value(sqlite3_stmt *s, int i, const kval *v) {
    switch (v->type) {
    case 'i': sqlite3_bind_int64(s, i, v->i); break;
    case 'r': sqlite3_bind_double(s, i, v->r); break;
    case 't': sqlite3_bind_text(s, i, v->p, -1, SQLITE_STATIC); break;
    case 'b': sqlite3_bind_blob(s, i, v->p, (int)v->n, SQLITE_STATIC); break;
    default: sqlite3_bind_null(s, i);
    }
}

/* INSERTs row with its documented column list and chains it inside w's open transaction. */
static void insert_literal(writer *w, const literal_row *row) {
    char sql[1024], marks[128] = "";
    for (int i = 0; i < row->n; i++) strcat(marks, i ? ", ?" : "?");
    snprintf(sql, sizeof sql, "INSERT INTO %s (%s) VALUES (%s)", row->table, columns_of(row->table), marks);
    sqlite3_stmt *s = NULL;
    CHECK(sqlite3_prepare_v2(w->db, sql, -1, &s, NULL) == SQLITE_OK, "%s: %s", sql, sqlite3_errmsg(w->db));
    for (int i = 0; i < row->n; i++) bind_value(s, i + 1, &row->values[i]);
    CHECK(sqlite3_step(s) == SQLITE_DONE, "insert %s: %s", row->table, sqlite3_errmsg(w->db));
    sqlite3_finalize(s);
    char err[512] = "";
    CHECK(pgcl_chain_record(w->chain, row->table, row->values[0].i, err, sizeof err) == PGCL_OK, "record %s: %s",
          row->table, err);
}

static void test_known_answers_literal(void) {
    static const float vec[4] = {0.5f, -1.25f, 3.0f, 0.0625f};
    static const unsigned char input_f16[6] = {0x00, 0x3c, 0x00, 0xc0, 0x55, 0x35};
    const kval dec_full[] = {
        KI(1), KT("0190a5e0-1111-7000-8000-00000000d001"), KT("2026-11-21T10:00:00.000001Z"),
        KT("0190a5e0-2222-7000-8000-0000000000a1"), KT("item-full"), KT("toxicity"), KT("7"),
        KT("5e1ec7ed5e1ec7ed5e1ec7ed5e1ec7ed5e1ec7ed5e1ec7ed5e1ec7ed5e1ec7ed"), KT("toxic"), KI(3),
        KT("{\"non_toxic\":0.25,\"toxic\":0.75}"), KR(0.75), KT("review"),
        KT("{\"kind\":\"threshold\",\"label\":\"toxic\",\"t_block\":0.875,\"t_review\":0.5}"), KR(0.5), KR(0.875),
        KB(vec, sizeof vec), KT("c0ffeec0ffeec0ffeec0ffeec0ffeec0ffeec0ffeec0ffeec0ffeec0ffeec0ff"), KI(4242),
        KB(input_f16, sizeof input_f16), KT("f16")};
    const kval dec_nulls[] = {
        KI(2), KT("0190a5e0-1111-7000-8000-00000000d002"), KT("2026-11-21T10:00:00.000002Z"),
        KT("0190a5e0-2222-7000-8000-0000000000a2"), KT("item-nulls"), KT("emotions"), KT("3"),
        KT("0dd0dd0dd0dd0dd0dd0dd0dd0dd0dd0dd0dd0dd0dd0dd0dd0dd0dd0dd0dd0dd0"), KT("joy"), KI(0),
        KT("{\"joy\":0.5,\"anger\":0.3,\"fear\":0.2}"), KN, KT("allow"),
        KT("{\"actions\":{},\"kind\":\"label_map\"}"), KN, KN, KB(vec, 8),
        KT("feedfacefeedfacefeedfacefeedfacefeedfacefeedfacefeedfacefeedface"), KI(99), KN, KN};
    const kval event[] = {KI(1), KT("0190a5e0-3333-7000-8000-0000000000e1"), KT("2026-11-21T10:00:01.000000Z"),
                          KT("ops (pgcld_0a0a0a0a)"), KT("key.create"), KT("pgcld_0b0b0b0b"),
                          KT("{\"name\":\"reviewer two\",\"role\":\"reviewer\"}")};
    const kval contest_keyed[] = {KI(1), KT("0190a5e0-4444-7000-8000-0000000000c1"),
                                  KT("0190a5e0-1111-7000-8000-00000000d001"), KT("2026-11-21T10:00:02.000000Z"),
                                  KT("reviewer (pgcld_11111111)"), KT("pgcld_11111111"),
                                  KT("the comment quotes a slur to condemn it")};
    const kval contest_anonymous[] = {KI(2), KT("0190a5e0-4444-7000-8000-0000000000c2"),
                                      KT("0190a5e0-1111-7000-8000-00000000d002"), KT("2026-11-21T10:00:03.000000Z"),
                                      KT("anonymous"), KN, KT("sarcasm, not joy")};
    const kval resolution_keyed[] = {KI(1), KT("0190a5e0-4444-7000-8000-0000000000c1"),
                                     KT("2026-11-21T11:00:00.000000Z"), KT("senior (pgcld_22222222)"),
                                     KT("pgcld_22222222"), KT("overturned"), KT("non_toxic"),
                                     KT("context shows counter-speech")};
    const kval resolution_plain[] = {KI(2), KT("0190a5e0-4444-7000-8000-0000000000c2"),
                                     KT("2026-11-21T11:00:01.000000Z"), KT("anonymous"), KN, KT("upheld"), KN,
                                     KT("the decision stands")};
#define ROW(table, v) {table, v, (int)(sizeof v / sizeof v[0])}
    const literal_row rows[] = {
        ROW("decisions", dec_full),      ROW("decisions", dec_nulls),          ROW("admin_events", event),
        ROW("contests", contest_keyed),  ROW("contests", contest_anonymous),  ROW("resolutions", resolution_keyed),
        ROW("resolutions", resolution_plain),
    };
#undef ROW
    const int n_rows = (int)(sizeof rows / sizeof rows[0]);
    CHECK(rows[0].n == 21 && rows[1].n == 21 && rows[2].n == 7 && rows[3].n == 7 && rows[4].n == 7 &&
              rows[5].n == 8 && rows[6].n == 8,
          "every documented column has a value");

    const char *path = tmp_path("literal.db");
    writer w;
    if (writer_open(&w, path, true) != 0) return;
    txn_begin(&w); /* writes the genesis entry */
    for (int i = 0; i < n_rows; i++) insert_literal(&w, &rows[i]);
    txn_end(&w, true);
    writer_close(&w);

    /* the expected chain, from the literals alone */
    sqlite3 *db = NULL;
    sqlite3_stmt *e = NULL;
    sqlite3_open(path, &db);
    sqlite3_prepare_v2(db, "SELECT seq, kind, row_seq, payload_sha256, prev_hash, hash FROM audit_chain ORDER BY seq",
                       -1, &e, NULL);
    kbuf *k = calloc(1, sizeof *k);
    char prev[65], payload[65], hash[65];
    memset(prev, '0', 64);
    prev[64] = 0;
    int entries = 0;
    for (int i = -1; i < n_rows; i++) { /* -1: the genesis entry */
        const char *kind = i < 0 ? "genesis" : rows[i].table;
        int64_t row_seq = i < 0 ? 0 : rows[i].values[0].i, seq = i + 2;
        k->n = 0;
        if (i < 0) {
            for (int t = 0; t < 4; t++) kb_int(k, 0);
        } else {
            for (int c = 0; c < rows[i].n; c++) kb_value(k, &rows[i].values[c]);
        }
        kb_sha(k, payload);
        k->n = 0;
        kb_int(k, seq);
        kb_text(k, kind);
        kb_int(k, row_seq);
        kb_text(k, payload);
        kb_text(k, prev);
        kb_sha(k, hash);
        bool found = sqlite3_step(e) == SQLITE_ROW;
        CHECK(found, "entry %lld (%s row %lld) missing", (long long)seq, kind, (long long)row_seq);
        if (!found) break;
        entries++;
        CHECK(sqlite3_column_int64(e, 0) == seq && strcmp((const char *)sqlite3_column_text(e, 1), kind) == 0 &&
                  sqlite3_column_int64(e, 2) == row_seq,
              "entry %lld: %s row %lld, expected %s row %lld", (long long)seq, sqlite3_column_text(e, 1),
              (long long)sqlite3_column_int64(e, 2), kind, (long long)row_seq);
        CHECK(strcmp((const char *)sqlite3_column_text(e, 3), payload) == 0,
              "entry %lld (%s row %lld): payload %s, from the literals %s", (long long)seq, kind, (long long)row_seq,
              sqlite3_column_text(e, 3), payload);
        CHECK(strcmp((const char *)sqlite3_column_text(e, 4), prev) == 0, "entry %lld: prev_hash", (long long)seq);
        CHECK(strcmp((const char *)sqlite3_column_text(e, 5), hash) == 0, "entry %lld (%s): hash %s, from the literals %s",
              (long long)seq, kind, sqlite3_column_text(e, 5), hash);
        memcpy(prev, hash, sizeof prev);
    }
    CHECK(entries == n_rows + 1 && sqlite3_step(e) == SQLITE_DONE, "%d entries, expected %d", entries, n_rows + 1);
    free(k);
    sqlite3_finalize(e);
    sqlite3_close(db);
    pgcl_chain_report rep = verify(path, NULL, 0);
    CHECK(rep.intact && rep.events == n_rows + 1 && strcmp(rep.head_hash, prev) == 0,
          "literal chain verifies: intact %d events %lld %s", rep.intact, (long long)rep.events, rep.reason);
}

int main(void) {
    if (!chain_fixture_setup()) return 1;
    static char base[512];
    snprintf(base, sizeof base, "%s", tmp_path("base.db"));
    base_info info = {0};
    build_base(base, &info);
    if (info.entries == 0) return test_finish("test_chain_encoding");
    test_intact(base, &info);
    test_known_answers_literal();
    chain_fixture_cleanup();
    return test_finish("test_chain_encoding");
}
