/* The audit chain's verifier (see chain.h; the format is in docs/audit.md): one streaming walk
 * over audit_chain in a single read snapshot, then the checks that need the whole chain: the rows
 * that predate it, rows that no entry refers to, duplicate references and signed checkpoints. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chain.h"
#include "chain_encoding.h"
#include "chain_proof.h"
#include "db.h"
#include "merkle.h"
#include "signing.h"

#define ERR_CAP 512
#define LEGACY_SEARCH_MAX 100000 /* rows tried per table when diagnosing a genesis mismatch */

/* ---- the verifier ---- */

typedef struct verifier {
    const char *path;
    sqlite3 *db;
    sqlite3_stmt *row_select[PGCL_CHAIN_TABLES];
    pgcl_chain_report *rep;
    int64_t n_entries; /* the walk's last good seq, or the chain length when it went through */
    bool walk_clean;   /* the walk found nothing wrong */
    bool genesis_ok;   /* entry 1 is a well-formed genesis entry */
    char genesis_payload[PGCL_CHAIN_HEX_LEN + 1];
    int64_t per_kind[PGCL_CHAIN_TABLES]; /* rows of each kind chained (valid when walk_clean) */
    bool has_commits;                    /* the schema has encoding version 2's columns (migration 0007) */
    sqlite3_stmt *runs;                  /* a commit entry's runs, in leaf order */
    bool has_log_nodes;                  /* the schema has the log tree's stored subtrees (migration 0009) */
    int64_t cut_seq;                     /* the latest archive cut's entry (0: none): rows up to it are archived */
    int64_t cut_through[PGCL_CHAIN_TABLES]; /* its per-table maxima */
    const char *public_key_hex;          /* the expected signer of checkpoints and cuts, or NULL */
    char *err;
    int cap;
} verifier;

/* Records a finding at seq unless an earlier one is already recorded. */
__attribute__((format(printf, 3, 4))) static void note_bad(pgcl_chain_report *r, int64_t seq, const char *fmt, ...);

static void note_bad(pgcl_chain_report *r, int64_t seq, const char *fmt, ...) {
    if (!r->intact && r->first_bad_seq <= seq) return;
    r->intact = false;
    r->first_bad_seq = seq;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->reason, sizeof r->reason, fmt, ap);
    va_end(ap);
}

static pgcl_status db_error(verifier *v, const char *what) {
    pgcl_errorf(v->err, v->cap, "%s: %s: %s", v->path, what, sqlite3_errmsg(v->db));
    return PGCL_ERR_DB;
}

/* Runs a query that returns one integer (NULL → *is_null). Binds ?1 = a (if a_set), ?2 = text b. */
static pgcl_status query_int(verifier *v, const char *sql, bool a_set, int64_t a, const char *b, int64_t *out,
                             bool *is_null) {
    sqlite3_stmt *s = NULL;
    if (sqlite3_prepare_v2(v->db, sql, -1, &s, NULL) != SQLITE_OK) return db_error(v, "query");
    if (a_set) sqlite3_bind_int64(s, 1, a);
    if (b) sqlite3_bind_text(s, 2, b, -1, SQLITE_STATIC);
    int rc = sqlite3_step(s);
    *out = 0;
    if (is_null) *is_null = true;
    if (rc == SQLITE_ROW && sqlite3_column_type(s, 0) != SQLITE_NULL) {
        *out = sqlite3_column_int64(s, 0);
        if (is_null) *is_null = false;
    }
    sqlite3_finalize(s);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE) return db_error(v, "query");
    return PGCL_OK;
}

static bool text_is(const unsigned char *z, int n, const char *want, int want_len) {
    return z && n == want_len && memcmp(z, want, (size_t)want_len) == 0;
}

/* A commit entry (encoding version 2): its stored leaves give its root, its runs cover each leaf
 * once, and each leaf is the hash of its row as stored now. *ok false: a finding was noted. */
static pgcl_status check_commit(verifier *v, int64_t seq, int64_t leaf_count, const char *root_hex,
                                const void *leaves_blob, int leaves_bytes, bool *ok) {
    pgcl_chain_report *r = v->rep;
    *ok = false;
    pgcl_merkle_hash root;
    if (leaf_count < 1 || !v->runs || leaves_bytes != leaf_count * PGCL_MERKLE_HASH_BYTES ||
        !pgcl_merkle_from_hex(root_hex, &root)) {
        note_bad(r, seq, "entry %lld: a commit entry's leaf_count, leaves or root is malformed", (long long)seq);
        return PGCL_OK;
    }
    pgcl_merkle_hash *leaves = malloc((size_t)leaves_bytes);
    if (!leaves) {
        pgcl_errorf(v->err, v->cap, "out of memory");
        return PGCL_ERR_NOMEM;
    }
    memcpy(leaves, leaves_blob, (size_t)leaves_bytes);
    pgcl_merkle_hash computed = pgcl_merkle_root(leaves, (uint64_t)leaf_count);
    if (memcmp(computed.b, root.b, PGCL_MERKLE_HASH_BYTES) != 0) {
        note_bad(r, seq, "entry %lld: its %lld stored leaf hashes do not give its Merkle root", (long long)seq,
                 (long long)leaf_count);
        free(leaves);
        return PGCL_OK;
    }
    sqlite3_stmt *s = v->runs;
    sqlite3_reset(s);
    sqlite3_bind_int64(s, 1, seq);
    int64_t next_leaf = 0, chained[PGCL_CHAIN_TABLES] = {0};
    int rc;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        const unsigned char *kind = sqlite3_column_text(s, 0);
        int t = kind ? pgcl_chain_table_index((const char *)kind, (size_t)sqlite3_column_bytes(s, 0)) : -1;
        int64_t first_row = sqlite3_column_int64(s, 1), n = sqlite3_column_int64(s, 2);
        int64_t first_leaf = sqlite3_column_int64(s, 3);
        if (t < 0 || n < 1 || first_leaf != next_leaf || n > leaf_count - first_leaf) {
            note_bad(r, seq, "entry %lld: its runs in audit_chain_runs do not cover leaves 0..%lld once each, in order",
                     (long long)seq, (long long)(leaf_count - 1));
            goto done;
        }
        for (int64_t i = 0; i < n; i++) {
            if (seq <= v->cut_seq && first_row + i <= v->cut_through[t]) continue; /* archived: not compared */
            chained[t]++;
            pgcl_merkle_hash leaf;
            int hrc = pgcl_chain_leaf_of_row(t, v->row_select[t], first_row + i, &leaf);
            if (hrc == SQLITE_DONE) {
                note_bad(r, seq, "entry %lld, leaf %lld: %s row %lld is missing", (long long)seq,
                         (long long)(first_leaf + i), pgcl_chain_tables[t].name, (long long)(first_row + i));
                goto done;
            }
            if (hrc != SQLITE_ROW) {
                free(leaves);
                sqlite3_reset(s);
                return db_error(v, pgcl_chain_tables[t].name);
            }
            if (memcmp(leaf.b, leaves[first_leaf + i].b, PGCL_MERKLE_HASH_BYTES) != 0) {
                note_bad(r, seq,
                         "entry %lld, leaf %lld of %lld: %s row %lld: payload differs (the row was changed after it "
                         "was chained)",
                         (long long)seq, (long long)(first_leaf + i), (long long)leaf_count, pgcl_chain_tables[t].name,
                         (long long)(first_row + i));
                goto done;
            }
        }
        next_leaf += n;
    }
    if (rc != SQLITE_DONE) {
        free(leaves);
        sqlite3_reset(s);
        return db_error(v, "audit_chain_runs");
    }
    if (next_leaf != leaf_count) {
        note_bad(r, seq, "entry %lld: its runs cover %lld of its %lld leaves", (long long)seq, (long long)next_leaf,
                 (long long)leaf_count);
        goto done;
    }
    for (int t = 0; t < PGCL_CHAIN_TABLES; t++)
        v->per_kind[t] += chained[t];
    *ok = true;
done:
    sqlite3_reset(s);
    free(leaves);
    return PGCL_OK;
}

/* The streaming walk: entries 1..N in order, each checked against the previous one and its row.
 * Stops at the first bad entry (recorded in the report). Constant memory. */
static pgcl_status walk(verifier *v) {
    sqlite3_stmt *s = NULL;
    pgcl_chain_report *r = v->rep;
    if (sqlite3_prepare_v2(v->db,
                           v->has_commits ? "SELECT seq, kind, row_seq, payload_sha256, prev_hash, hash, leaf_count,"
                                            " leaves FROM audit_chain ORDER BY seq"
                                          : "SELECT seq, kind, row_seq, payload_sha256, prev_hash, hash, NULL, NULL"
                                            " FROM audit_chain ORDER BY seq",
                           -1, &s, NULL) != SQLITE_OK)
        return db_error(v, "audit_chain");
    char prev[PGCL_CHAIN_HEX_LEN + 1], computed[PGCL_CHAIN_HEX_LEN + 1];
    memcpy(prev, pgcl_chain_zero_hash, sizeof prev);
    int64_t expected = 1;
    int rc;
    v->walk_clean = false;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        int64_t seq = sqlite3_column_int64(s, 0);
        if (seq != expected) {
            if (expected == 1)
                note_bad(r, 1, "entry 1 missing (the chain starts at entry %lld)", (long long)seq);
            else
                note_bad(r, expected, "entry %lld missing (sequence jumps from %lld to %lld)", (long long)expected,
                         (long long)(expected - 1), (long long)seq);
            goto stop;
        }
        r->events++;
        const unsigned char *kind = sqlite3_column_text(s, 1);
        int kind_len = sqlite3_column_bytes(s, 1);
        bool row_seq_int = sqlite3_column_type(s, 2) == SQLITE_INTEGER;
        int64_t row_seq = sqlite3_column_int64(s, 2);
        const unsigned char *payload = sqlite3_column_text(s, 3);
        int payload_len = sqlite3_column_bytes(s, 3);
        const unsigned char *prev_hash = sqlite3_column_text(s, 4);
        int prev_len = sqlite3_column_bytes(s, 4);
        const unsigned char *hash = sqlite3_column_text(s, 5);
        int hash_len = sqlite3_column_bytes(s, 5);
        if (!text_is(prev_hash, prev_len, prev, PGCL_CHAIN_HEX_LEN)) {
            if (seq == 1)
                note_bad(r, 1, "entry 1: the genesis entry's prev_hash is not 64 zeros");
            else
                note_bad(r, seq, "entry %lld: prev_hash does not match entry %lld", (long long)seq,
                         (long long)(seq - 1));
            goto stop;
        }
        if (!kind || !payload || !hash || !row_seq_int) {
            note_bad(r, seq, "entry %lld: a field is NULL or row_seq is not an integer", (long long)seq);
            goto stop;
        }
        bool is_commit = text_is(kind, kind_len, PGCL_CHAIN_COMMIT_KIND, (int)strlen(PGCL_CHAIN_COMMIT_KIND));
        int64_t leaf_count = sqlite3_column_int64(s, 6);
        if (is_commit && (sqlite3_column_type(s, 6) != SQLITE_INTEGER || row_seq != seq)) {
            note_bad(r, seq, "entry %lld: a commit entry needs its leaf_count and row_seq = seq", (long long)seq);
            goto stop;
        }
        pgcl_chain_entry_hash(seq, (const char *)kind, (size_t)kind_len, is_commit ? leaf_count : row_seq,
                              (const char *)payload, (size_t)payload_len, (const char *)prev_hash, (size_t)prev_len,
                              computed);
        if (!text_is(hash, hash_len, computed, PGCL_CHAIN_HEX_LEN)) {
            note_bad(r, seq, "entry %lld: hash does not match the entry's contents", (long long)seq);
            goto stop;
        }
        if (is_commit && seq > 1) {
            bool ok = false;
            pgcl_status st = check_commit(v, seq, leaf_count, (const char *)payload, sqlite3_column_blob(s, 7),
                                          sqlite3_column_bytes(s, 7), &ok);
            if (st != PGCL_OK) {
                sqlite3_finalize(s);
                return st;
            }
            if (!ok) goto stop;
        } else if (seq == 1) {
            if (!text_is(kind, kind_len, "genesis", 7) || row_seq != 0 || payload_len != PGCL_CHAIN_HEX_LEN) {
                note_bad(r, 1, "entry 1 is not a genesis entry (kind '%.32s', row_seq %lld)", (const char *)kind,
                         (long long)row_seq);
                goto stop;
            }
            memcpy(v->genesis_payload, payload, PGCL_CHAIN_HEX_LEN + 1);
            v->genesis_ok = true;
        } else {
            int t = pgcl_chain_table_index((const char *)kind, (size_t)kind_len);
            if (t < 0) {
                note_bad(r, seq, "entry %lld: unknown kind '%.32s'", (long long)seq, (const char *)kind);
                goto stop;
            }
            if (seq <= v->cut_seq && row_seq <= v->cut_through[t]) goto next; /* its row was archived */
            int hrc = pgcl_chain_hash_row(t, v->row_select[t], row_seq, computed);
            if (hrc == SQLITE_DONE) {
                note_bad(r, seq, "entry %lld: %s row %lld is missing", (long long)seq, pgcl_chain_tables[t].name,
                         (long long)row_seq);
                goto stop;
            }
            if (hrc != SQLITE_ROW) {
                sqlite3_finalize(s);
                return db_error(v, pgcl_chain_tables[t].name);
            }
            if (!text_is(payload, payload_len, computed, PGCL_CHAIN_HEX_LEN)) {
                note_bad(r, seq, "entry %lld: %s row %lld: payload differs (the row was changed after it was chained)",
                         (long long)seq, pgcl_chain_tables[t].name, (long long)row_seq);
                goto stop;
            }
            v->per_kind[t]++;
        }
    next:
        memcpy(prev, hash, PGCL_CHAIN_HEX_LEN + 1);
        v->n_entries = seq;
        expected++;
    }
    if (rc != SQLITE_DONE) {
        sqlite3_finalize(s);
        return db_error(v, "audit_chain");
    }
    v->walk_clean = true;
stop:
    sqlite3_finalize(s);
    return PGCL_OK;
}

/* The rows that predate the chain: for each table, the largest seq below the first row any entry
 * refers to (or the largest seq, when none does) must hash to the genesis payload. On a mismatch,
 * looks for the cause: rows inserted at the top of one table without entries (reported as the first
 * unchained row), else reports entry 1. Sets legacy[] and *ok when the maxima are known. */
static pgcl_status check_legacy(verifier *v, int64_t legacy[PGCL_CHAIN_TABLES], bool *ok) {
    *ok = false;
    int64_t first_chained[PGCL_CHAIN_TABLES];
    bool has_chained[PGCL_CHAIN_TABLES];
    pgcl_status st;
    for (int t = 0; t < PGCL_CHAIN_TABLES; t++) {
        bool is_null;
        if ((st = query_int(v,
                            v->has_commits ? "SELECT min(x) FROM (SELECT min(row_seq) AS x FROM audit_chain WHERE kind"
                                             " = ?2 UNION ALL SELECT min(first_row_seq) FROM audit_chain_runs WHERE"
                                             " kind = ?2)"
                                           : "SELECT min(row_seq) FROM audit_chain WHERE kind = ?2",
                            false, 0, pgcl_chain_tables[t].name, &first_chained[t], &is_null)) != PGCL_OK)
            return st;
        has_chained[t] = !is_null;
        char sql[160];
        snprintf(sql, sizeof sql, "SELECT coalesce(max(seq), 0) FROM %s%s", pgcl_chain_tables[t].name,
                 has_chained[t] ? " WHERE seq < ?1" : "");
        if ((st = query_int(v, sql, has_chained[t], first_chained[t], NULL, &legacy[t], NULL)) != PGCL_OK) return st;
    }
    char computed[PGCL_CHAIN_HEX_LEN + 1];
    pgcl_chain_genesis_payload(legacy, computed);
    if (strcmp(computed, v->genesis_payload) == 0) {
        *ok = true;
        return PGCL_OK;
    }
    /* Diagnose: try lower maxima for one table at a time. */
    for (int t = 0; t < PGCL_CHAIN_TABLES; t++) {
        char sql[160];
        snprintf(sql, sizeof sql, "SELECT seq FROM %s WHERE seq < ?1 ORDER BY seq DESC LIMIT %d",
                 pgcl_chain_tables[t].name, LEGACY_SEARCH_MAX);
        sqlite3_stmt *s = NULL;
        if (sqlite3_prepare_v2(v->db, sql, -1, &s, NULL) != SQLITE_OK) return db_error(v, pgcl_chain_tables[t].name);
        sqlite3_bind_int64(s, 1, legacy[t]);
        int64_t trial[PGCL_CHAIN_TABLES];
        memcpy(trial, legacy, sizeof trial);
        bool found = false, more = true;
        while (!found && more) {
            int rc = sqlite3_step(s);
            if (rc == SQLITE_ROW) {
                trial[t] = sqlite3_column_int64(s, 0);
            } else if (rc == SQLITE_DONE) {
                trial[t] = 0;
                more = false;
            } else {
                sqlite3_finalize(s);
                return db_error(v, pgcl_chain_tables[t].name);
            }
            pgcl_chain_genesis_payload(trial, computed);
            found = strcmp(computed, v->genesis_payload) == 0;
        }
        sqlite3_finalize(s);
        if (found) {
            int64_t first = 0;
            snprintf(sql, sizeof sql, "SELECT min(seq) FROM %s WHERE seq > ?1", pgcl_chain_tables[t].name);
            if ((st = query_int(v, sql, true, trial[t], NULL, &first, NULL)) != PGCL_OK) return st;
            note_bad(v->rep, v->n_entries + 1, "%s row %lld is not in the chain (no entry refers to it)",
                     pgcl_chain_tables[t].name, (long long)first);
            memcpy(legacy, trial, sizeof trial);
            *ok = true;
            return PGCL_OK;
        }
    }
    note_bad(v->rep, 1,
             "entry 1 (genesis): the rows that predate the chain do not match it (now decisions up to seq %lld, "
             "admin_events %lld, contests %lld, resolutions %lld): earlier rows were deleted or rows were inserted "
             "without chain entries",
             (long long)legacy[0], (long long)legacy[1], (long long)legacy[2], (long long)legacy[3]);
    return PGCL_OK;
}

/* Every row after the genesis maxima is referred to by an entry: the walk counted the entries of
 * each kind (each one names an existing, distinct row above the maxima), so a table with more such
 * rows than entries holds an unchained row; the first one is reported at seq N + 1. A row with a seq
 * below 1 was never made by SQLite (rowids start at 1): it counts as after the chain began, not as
 * a legacy row. */
static pgcl_status check_unchained(verifier *v, const int64_t legacy[PGCL_CHAIN_TABLES]) {
    for (int t = 0; t < PGCL_CHAIN_TABLES; t++) {
        char sql[512];
        int64_t rows = 0, first = 0;
        bool is_null;
        pgcl_status st;
        snprintf(sql, sizeof sql, "SELECT count(*) FROM %s WHERE seq > ?1 OR seq < 1", pgcl_chain_tables[t].name);
        if ((st = query_int(v, sql, true, legacy[t], NULL, &rows, NULL)) != PGCL_OK) return st;
        if (rows == v->per_kind[t]) continue;
        snprintf(sql, sizeof sql,
                 "SELECT min(seq) FROM %s AS r WHERE (seq > ?1 OR seq < 1) AND NOT EXISTS"
                 " (SELECT 1 FROM audit_chain AS c WHERE c.kind = ?2 AND c.row_seq = r.seq)%s",
                 pgcl_chain_tables[t].name,
                 v->has_commits ? " AND NOT EXISTS (SELECT 1 FROM audit_chain_runs AS u WHERE u.kind = ?2 AND"
                                  " u.first_row_seq <= r.seq AND r.seq < u.first_row_seq + u.n)"
                                : "");
        if ((st = query_int(v, sql, true, legacy[t], pgcl_chain_tables[t].name, &first, &is_null)) != PGCL_OK)
            return st;
        if (!is_null) {
            note_bad(v->rep, v->n_entries + 1, "%s row %lld is not in the chain (no entry refers to it)",
                     pgcl_chain_tables[t].name, (long long)first);
            return PGCL_OK;
        }
        if (rows < v->per_kind[t] && v->has_commits) {
            /* More references than rows: two commit runs (or a run and a version-1 entry) share a row;
             * the later commit entry is reported. */
            int64_t entry = 0;
            if ((st = query_int(v,
                                "SELECT min(b.entry_seq) FROM audit_chain_runs AS b WHERE b.kind = ?2 AND"
                                " (EXISTS (SELECT 1 FROM audit_chain_runs AS a WHERE a.kind = b.kind AND"
                                " (a.entry_seq < b.entry_seq OR (a.entry_seq = b.entry_seq AND a.first_leaf <"
                                " b.first_leaf)) AND a.first_row_seq < b.first_row_seq + b.n AND b.first_row_seq <"
                                " a.first_row_seq + a.n) OR EXISTS (SELECT 1 FROM audit_chain AS c WHERE c.kind ="
                                " b.kind AND c.row_seq >= b.first_row_seq AND c.row_seq < b.first_row_seq + b.n))",
                                false, 0, pgcl_chain_tables[t].name, &entry, &is_null)) != PGCL_OK)
                return st;
            note_bad(v->rep, is_null ? v->n_entries + 1 : entry,
                     "entry %lld refers to %s rows an earlier entry already refers to",
                     (long long)(is_null ? v->n_entries + 1 : entry), pgcl_chain_tables[t].name);
            return PGCL_OK;
        }
    }
    return PGCL_OK;
}

/* Two entries naming the same row: impossible while the unique index audit_chain_row stands; when
 * it was dropped or replaced, the later entry of the first such pair is reported. */
static pgcl_status check_duplicates(verifier *v) {
    int64_t unique_ok = 0, dup = 0;
    bool is_null;
    pgcl_status st = query_int(v,
                               "SELECT (SELECT \"unique\" FROM pragma_index_list('audit_chain')"
                               " WHERE name = 'audit_chain_row') = 1 AND (SELECT group_concat(name, ',')"
                               " FROM (SELECT name FROM pragma_index_info('audit_chain_row') ORDER BY seqno))"
                               " = 'kind,row_seq'",
                               false, 0, NULL, &unique_ok, NULL);
    if (st != PGCL_OK || unique_ok == 1) return st;
    st = query_int(v,
                   "SELECT min(c.seq) FROM audit_chain AS c WHERE c.seq > 1 AND EXISTS (SELECT 1 FROM audit_chain AS p"
                   " WHERE p.kind = c.kind AND p.row_seq = c.row_seq AND p.seq < c.seq)",
                   false, 0, NULL, &dup, &is_null);
    if (st == PGCL_OK && !is_null)
        note_bad(v->rep, dup, "entry %lld refers to a row an earlier entry already refers to", (long long)dup);
    return st;
}

/* The log tree's stored subtrees (log_tree.h) against the entries 1..n: each node of level >= 1
 * the entries complete is recomputed from their hashes as the walk goes (a stack of perfect
 * subtrees, O(log n) memory) and looked up; a node that differs or is missing is reported at the
 * last entry it covers, naming its level and index, and a node beyond the chain's end at n + 1. */
static pgcl_status check_log_nodes(verifier *v, int64_t n) {
    sqlite3_stmt *scan = NULL, *node = NULL;
    pgcl_merkle_stack tree;
    tree.top = 0;
    int64_t stored = 0, expected_nodes = n - __builtin_popcountll((unsigned long long)n);
    pgcl_status st = query_int(v, "SELECT count(*) FROM audit_log_nodes", false, 0, NULL, &stored, NULL);
    if (st != PGCL_OK) return st;
    if (sqlite3_prepare_v2(v->db, "SELECT seq, hash FROM audit_chain WHERE seq <= ?1 ORDER BY seq", -1, &scan, NULL) !=
            SQLITE_OK ||
        sqlite3_prepare_v2(v->db, "SELECT hash FROM audit_log_nodes WHERE level = ?1 AND idx = ?2", -1, &node, NULL) !=
            SQLITE_OK) {
        st = db_error(v, "audit_log_nodes");
        goto done;
    }
    sqlite3_bind_int64(scan, 1, n);
    int rc;
    while ((rc = sqlite3_step(scan)) == SQLITE_ROW) {
        int64_t seq = sqlite3_column_int64(scan, 0);
        pgcl_merkle_hash entry;
        if (!pgcl_merkle_from_hex((const char *)sqlite3_column_text(scan, 1), &entry)) break; /* the walk vouched */
        pgcl_merkle_hash leaf = pgcl_merkle_leaf_hash(entry.b, sizeof entry.b);
        pgcl_merkle_stack_push(&tree, &leaf);
        int level;
        while (pgcl_merkle_stack_merge(&tree, &level)) {
            int64_t idx = (seq - 1) >> level;
            sqlite3_bind_int(node, 1, level);
            sqlite3_bind_int64(node, 2, idx);
            int nrc = sqlite3_step(node);
            const pgcl_merkle_hash *made = &tree.node[tree.top - 1];
            bool same = nrc == SQLITE_ROW && sqlite3_column_bytes(node, 0) == PGCL_MERKLE_HASH_BYTES &&
                        memcmp(sqlite3_column_blob(node, 0), made->b, PGCL_MERKLE_HASH_BYTES) == 0;
            sqlite3_reset(node);
            if (nrc != SQLITE_ROW && nrc != SQLITE_DONE) {
                st = db_error(v, "audit_log_nodes");
                goto done;
            }
            if (!same) {
                note_bad(v->rep, seq,
                         "audit_log_nodes: the log tree node at level %d, index %lld (entries %lld..%lld) %s", level,
                         (long long)idx, (long long)((idx << level) + 1), (long long)seq,
                         nrc == SQLITE_DONE ? "is missing" : "does not match the entries' hashes");
                goto done;
            }
        }
    }
    if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
        st = db_error(v, "audit_chain");
        goto done;
    }
    if (stored > expected_nodes) { /* every node within the chain matched: the others lie beyond it */
        int64_t level = 0, idx = 0;
        if ((st = query_int(v,
                            "SELECT level FROM audit_log_nodes WHERE level > 62 OR ((idx + 1) << level) > ?1"
                            " ORDER BY level, idx LIMIT 1",
                            true, n, NULL, &level, NULL)) != PGCL_OK ||
            (st = query_int(v,
                            "SELECT idx FROM audit_log_nodes WHERE level > 62 OR ((idx + 1) << level) > ?1"
                            " ORDER BY level, idx LIMIT 1",
                            true, n, NULL, &idx, NULL)) != PGCL_OK)
            goto done;
        note_bad(v->rep, n + 1,
                 "audit_log_nodes: the log tree node at level %lld, index %lld covers entries beyond the chain's "
                 "end (%lld): entries were removed",
                 (long long)level, (long long)idx, (long long)n);
    }
    st = PGCL_OK;
done:
    sqlite3_finalize(scan);
    sqlite3_finalize(node);
    return st;
}

/* ---- archive cuts (audit_cuts, migration 0010; archive.h) ---- */

/* Present rows at or below the cut's maxima, per table (pgcl_chain_tables order); then stored inputs. */
static const char *const ARCHIVED_PRESENT_SQL[PGCL_CHAIN_TABLES + 1] = {
    "SELECT min(seq) FROM decisions WHERE seq <= ?1", "SELECT min(seq) FROM admin_events WHERE seq <= ?1",
    "SELECT min(seq) FROM contests WHERE seq <= ?1", "SELECT min(seq) FROM resolutions WHERE seq <= ?1",
    "SELECT min(decision_seq) FROM decision_inputs WHERE decision_seq <= ?1"};

/* The latest cut's entry and maxima into v (none: cut_seq 0), and the rows all cuts archived. */
static pgcl_status load_cut(verifier *v) {
    int64_t has_cuts = 0;
    pgcl_status st = query_int(v, "SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = 'audit_cuts'",
                               false, 0, NULL, &has_cuts, NULL);
    if (st != PGCL_OK || has_cuts != 1) return st;
    sqlite3_stmt *s = NULL;
    if (sqlite3_prepare_v2(v->db,
                           "SELECT entry_seq, decisions_through, admin_events_through, contests_through,"
                           " resolutions_through, (SELECT sum(rows_archived) FROM audit_cuts) FROM audit_cuts"
                           " ORDER BY seq DESC LIMIT 1",
                           -1, &s, NULL) != SQLITE_OK)
        return db_error(v, "audit_cuts");
    int rc = sqlite3_step(s);
    if (rc == SQLITE_ROW) {
        v->cut_seq = sqlite3_column_int64(s, 0);
        for (int t = 0; t < PGCL_CHAIN_TABLES; t++)
            v->cut_through[t] = sqlite3_column_int64(s, 1 + t);
        v->rep->archive_cut_seq = v->cut_seq;
        v->rep->archived_rows = sqlite3_column_int64(s, 5);
        if (v->cut_seq < 1) v->cut_seq = 1; /* a malformed cut is reported by check_cuts */
    }
    sqlite3_finalize(s);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE) return db_error(v, "audit_cuts");
    return PGCL_OK;
}

/* Each cut: its entry is in the chain with its entry_hash, its log_root is the log tree's root over
 * entries 1..E, and its statement is that checkpoint's, signed by its key (and by the expected one). */
static pgcl_status check_cuts(verifier *v, int64_t chain_end) {
    sqlite3_stmt *s = NULL, *entry = NULL;
    pgcl_status st = PGCL_OK;
    if (sqlite3_prepare_v2(v->db,
                           "SELECT entry_seq, entry_hash, log_root, created_at, statement, public_key, signature"
                           " FROM audit_cuts ORDER BY seq",
                           -1, &s, NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(v->db, "SELECT hash FROM audit_chain WHERE seq = ?1", -1, &entry, NULL) != SQLITE_OK) {
        st = db_error(v, "audit_cuts");
        goto done;
    }
    int rc;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        int64_t e = sqlite3_column_int64(s, 0);
        const char *f[6];
        for (int i = 0; i < 6; i++)
            f[i] = sqlite3_column_text(s, 1 + i) ? (const char *)sqlite3_column_text(s, 1 + i) : "";
        if (e < 2 || e > chain_end) {
            note_bad(v->rep, e < 2 ? 1 : chain_end + 1,
                     "audit_cuts: the archive cut at entry %lld lies outside the chain (entries 1..%lld)", (long long)e,
                     (long long)chain_end);
            continue;
        }
        sqlite3_reset(entry);
        sqlite3_bind_int64(entry, 1, e);
        int erc = sqlite3_step(entry);
        bool same = erc == SQLITE_ROW && sqlite3_column_text(entry, 0) &&
                    strcmp((const char *)sqlite3_column_text(entry, 0), f[0]) == 0;
        if (erc != SQLITE_ROW && erc != SQLITE_DONE) {
            st = db_error(v, "audit_chain");
            goto done;
        }
        if (!same) {
            note_bad(v->rep, e, "audit_cuts: the archive cut at entry %lld: its entry_hash is not entry %lld's hash",
                     (long long)e, (long long)e);
            continue;
        }
        pgcl_merkle_hash root;
        char root_hex[PGCL_CHAIN_HEX_LEN + 1], sub[ERR_CAP];
        st = pgcl_chain_log_tree(v->db, e, -1, &root, NULL, NULL, sub, sizeof sub);
        if (st == PGCL_ERR_FORMAT) { /* entries below the cut are missing or malformed: the walk said where */
            note_bad(v->rep, e, "audit_cuts: the archive cut at entry %lld: the log tree over entries 1..%lld cannot "
                     "be computed (%.200s)", (long long)e, (long long)e, sub);
            st = PGCL_OK;
            continue;
        }
        if (st != PGCL_OK) {
            pgcl_errorf(v->err, v->cap, "%s: %s", v->path, sub);
            goto done;
        }
        pgcl_merkle_to_hex(&root, root_hex);
        if (strcmp(root_hex, f[1]) != 0) {
            note_bad(v->rep, e,
                     "audit_cuts: the archive cut at entry %lld: its log_root is not the root of the log tree over "
                     "entries 1..%lld",
                     (long long)e, (long long)e);
            continue;
        }
        pgcl_checkpoint cp = {.version = 2, .head_seq = e};
        snprintf(cp.head_hash, sizeof cp.head_hash, "%s", f[0]);
        snprintf(cp.log_root, sizeof cp.log_root, "%s", f[1]);
        snprintf(cp.created_at, sizeof cp.created_at, "%s", f[2]);
        snprintf(cp.public_key, sizeof cp.public_key, "%s", f[4]);
        snprintf(cp.signature, sizeof cp.signature, "%s", f[5]);
        snprintf(cp.file, sizeof cp.file, "audit_cuts (entry %lld)", (long long)e);
        char statement[1024];
        int n = pgcl_checkpoint_statement(&cp, statement, sizeof statement);
        bool signed_ok = n > 0 && strcmp(statement, f[3]) == 0 && strlen(f[2]) < sizeof cp.created_at &&
                         pgcl_checkpoint_verify(&cp, v->public_key_hex, sub, sizeof sub) == PGCL_OK;
        if (!signed_ok)
            note_bad(v->rep, e,
                     "audit_cuts: the archive cut at entry %lld: its signed checkpoint statement does not verify%s",
                     (long long)e, v->public_key_hex ? " (by the expected public key)" : "");
    }
    if (rc != SQLITE_DONE) st = db_error(v, "audit_cuts");
done:
    sqlite3_finalize(s);
    sqlite3_finalize(entry);
    return st;
}

/* No row at or below the latest cut's maxima is present: they were archived; one that is (a row
 * put back, or one never deleted) is reported at the cut's entry. */
static pgcl_status check_archived_absent(verifier *v) {
    for (int t = 0; t <= PGCL_CHAIN_TABLES; t++) {
        int64_t through = v->cut_through[t < PGCL_CHAIN_TABLES ? t : 0], first = 0;
        bool is_null = true;
        pgcl_status st = query_int(v, ARCHIVED_PRESENT_SQL[t], true, through, NULL, &first, &is_null);
        if (st != PGCL_OK) return st;
        if (!is_null) {
            note_bad(v->rep, v->cut_seq, "%s row %lld is below the archive cut at entry %lld but present",
                     t < PGCL_CHAIN_TABLES ? pgcl_chain_tables[t].name : "decision_inputs", (long long)first,
                     (long long)v->cut_seq);
            return PGCL_OK;
        }
    }
    return PGCL_OK;
}

/* Each signed checkpoint's head must be in the chain with the same hash. */
/* The log tree's leaves over entries 1..size for the version-2 checkpoints (read once, however many
 * checkpoints there are): the largest head among those within the chain. *leaves stays NULL when
 * there is none or the entries could not be read as a tree (PGCL_ERR_FORMAT: each such checkpoint
 * is then reported); PGCL_ERR_DB is an error. */
static pgcl_status read_log_leaves(verifier *v, const pgcl_checkpoint *cps, int n, int64_t chain_end,
                                   pgcl_merkle_hash **leaves, int64_t *size) {
    *leaves = NULL;
    *size = 0;
    for (int i = 0; i < n; i++)
        if (cps[i].version >= 2 && cps[i].head_seq <= chain_end && cps[i].head_seq > *size) *size = cps[i].head_seq;
    if (*size == 0) return PGCL_OK;
    char sub[ERR_CAP];
    pgcl_status st = pgcl_chain_log_leaves(v->db, *size, leaves, sub, sizeof sub);
    if (st == PGCL_ERR_DB || st == PGCL_ERR_NOMEM) {
        pgcl_errorf(v->err, v->cap, "%s: %s", v->path, sub);
        return st;
    }
    return PGCL_OK;
}

static pgcl_status check_checkpoints(verifier *v, const pgcl_checkpoint *cps, int n, int64_t chain_end) {
    sqlite3_stmt *s = NULL;
    if (n == 0) return PGCL_OK;
    pgcl_merkle_hash *log_leaves;
    int64_t log_size;
    pgcl_status st = read_log_leaves(v, cps, n, chain_end, &log_leaves, &log_size);
    if (st != PGCL_OK) return st;
    if (sqlite3_prepare_v2(v->db, "SELECT hash FROM audit_chain WHERE seq = ?1", -1, &s, NULL) != SQLITE_OK) {
        free(log_leaves);
        return db_error(v, "audit_chain");
    }
    for (int i = 0; i < n; i++) {
        const pgcl_checkpoint *cp = &cps[i];
        if (cp->head_seq > chain_end) {
            note_bad(v->rep, chain_end + 1, "checkpoint at seq %lld but the chain ends at %lld (%.200s)",
                     (long long)cp->head_seq, (long long)chain_end, cp->file);
            continue;
        }
        sqlite3_reset(s);
        sqlite3_bind_int64(s, 1, cp->head_seq);
        int rc = sqlite3_step(s);
        if (rc == SQLITE_DONE) {
            note_bad(v->rep, cp->head_seq, "entry %lld missing (signed in checkpoint %.200s)", (long long)cp->head_seq,
                     cp->file);
        } else if (rc == SQLITE_ROW) {
            const unsigned char *hash = sqlite3_column_text(s, 0);
            if (!text_is(hash, sqlite3_column_bytes(s, 0), cp->head_hash, PGCL_CHAIN_HEX_LEN)) {
                note_bad(v->rep, cp->head_seq,
                         "entry %lld: hash differs from the signed checkpoint (%.200s): the history up to entry %lld "
                         "was rewritten",
                         (long long)cp->head_seq, cp->file, (long long)cp->head_seq);
            } else if (cp->version >= 2) {
                /* the log tree's root it signs, over the entries it covers */
                char root_hex[PGCL_CHAIN_HEX_LEN + 1] = "";
                if (log_leaves) {
                    PGCL_ASSERT(cp->head_seq <= log_size);
                    pgcl_merkle_hash root = pgcl_merkle_root(log_leaves, (uint64_t)cp->head_seq);
                    pgcl_merkle_to_hex(&root, root_hex);
                }
                if (!log_leaves || strcmp(root_hex, cp->log_root) != 0)
                    note_bad(v->rep, cp->head_seq,
                             "checkpoint %.200s: its log_root is not the root of the log tree over entries 1..%lld",
                             cp->file, (long long)cp->head_seq);
            }
        } else {
            sqlite3_finalize(s);
            free(log_leaves);
            return db_error(v, "audit_chain");
        }
    }
    sqlite3_finalize(s);
    free(log_leaves);
    return PGCL_OK;
}

pgcl_status pgcl_chain_verify_signed(const char *path, const char *const *checkpoint_files, int n_checkpoints,
                                     const char *public_key_hex, pgcl_chain_report *report, char *err, int cap) {
    memset(report, 0, sizeof *report);
    report->intact = true;
    verifier v = {.path = path, .rep = report, .public_key_hex = public_key_hex, .err = err, .cap = cap};
    pgcl_checkpoint *cps = NULL;
    pgcl_status st = PGCL_ERR_NOMEM;
    bool in_tx = false;
    if (n_checkpoints > 0) {
        if (!(cps = calloc((size_t)n_checkpoints, sizeof *cps))) {
            pgcl_errorf(err, cap, "out of memory");
            return PGCL_ERR_NOMEM;
        }
        for (int i = 0; i < n_checkpoints; i++)
            if ((st = pgcl_checkpoint_read(checkpoint_files[i], public_key_hex, &cps[i], err, cap)) != PGCL_OK)
                goto done;
    }
    st = PGCL_ERR_DB;
    /* Verify never writes; one read transaction: the whole verification sees one snapshot while a
     * writer goes on. */
    if (!(v.db = pgcl_db_open_untouched_snapshot(path, err, cap))) goto done;
    in_tx = true;
    char sub[ERR_CAP];
    sqlite3_stmt *head = NULL;
    if (sqlite3_prepare_v2(v.db, PGCL_CHAIN_HEAD_SQL, -1, &head, NULL) != SQLITE_OK) {
        const char *msg = sqlite3_errmsg(v.db);
        if (strstr(msg, "no such table")) {
            pgcl_errorf(err, cap,
                        "%s has no audit_chain table: it is not a pgcld audit database, or its schema is "
                        "older than migration 3 (run 'pgcld serve --db %s' once to upgrade it)",
                        path, path);
            st = PGCL_ERR_FORMAT;
        } else {
            pgcl_errorf(err, cap, "%s: %s", path, msg);
        }
        goto done;
    }
    int rc = sqlite3_step(head);
    if (rc == SQLITE_ROW) {
        report->head_seq = sqlite3_column_int64(head, 0);
        const unsigned char *h = sqlite3_column_text(head, 1);
        snprintf(report->head_hash, sizeof report->head_hash, "%s", h ? (const char *)h : "");
    }
    sqlite3_finalize(head);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
        db_error(&v, "audit_chain");
        goto done;
    }
    if (pgcl_chain_prepare_row_selects(v.db, v.row_select, sub, sizeof sub) != SQLITE_OK) {
        pgcl_errorf(err, cap, "%s: %s", path, sub);
        goto done;
    }
    int64_t has_commits = 0;
    if ((st = query_int(&v, "SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = 'audit_chain_runs'",
                        false, 0, NULL, &has_commits, NULL)) != PGCL_OK)
        goto done;
    st = PGCL_ERR_DB;
    v.has_commits = has_commits == 1;
    int64_t has_log_nodes = 0;
    if ((st = query_int(&v, "SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = 'audit_log_nodes'",
                        false, 0, NULL, &has_log_nodes, NULL)) != PGCL_OK)
        goto done;
    st = PGCL_ERR_DB;
    v.has_log_nodes = has_log_nodes == 1;
    if (v.has_commits && sqlite3_prepare_v2(v.db,
                                            "SELECT kind, first_row_seq, n, first_leaf FROM audit_chain_runs WHERE"
                                            " entry_seq = ?1 ORDER BY first_leaf",
                                            -1, &v.runs, NULL) != SQLITE_OK) {
        db_error(&v, "audit_chain_runs");
        goto done;
    }
    if ((st = load_cut(&v)) != PGCL_OK) goto done;
    st = PGCL_ERR_DB;
    if ((st = walk(&v)) != PGCL_OK) goto done;
    int64_t legacy[PGCL_CHAIN_TABLES];
    bool legacy_ok = false;
    if (v.cut_seq > 0) { /* the genesis entry's rows are archived: the cut's maxima take their place */
        memcpy(legacy, v.cut_through, sizeof legacy);
        legacy_ok = v.genesis_ok;
        if ((st = check_cuts(&v, v.walk_clean ? v.n_entries : report->head_seq)) != PGCL_OK) goto done;
        if ((st = check_archived_absent(&v)) != PGCL_OK) goto done;
    } else if (v.genesis_ok && (st = check_legacy(&v, legacy, &legacy_ok)) != PGCL_OK)
        goto done;
    if (report->head_seq > 0 && (st = check_duplicates(&v)) != PGCL_OK) goto done;
    if (v.walk_clean && legacy_ok && (st = check_unchained(&v, legacy)) != PGCL_OK) goto done;
    if (v.walk_clean && v.has_log_nodes && (st = check_log_nodes(&v, v.n_entries)) != PGCL_OK) goto done;
    /* A chain cut short ends at its last entry; one with a gap has already been reported. */
    if ((st = check_checkpoints(&v, cps, n_checkpoints, v.walk_clean ? v.n_entries : report->head_seq)) != PGCL_OK)
        goto done;
    st = PGCL_OK;
done:
    for (int t = 0; t < PGCL_CHAIN_TABLES; t++)
        sqlite3_finalize(v.row_select[t]);
    sqlite3_finalize(v.runs);
    if (in_tx) pgcl_db_exec(v.db, "COMMIT", NULL, 0);
    if (v.db) sqlite3_close(v.db);
    free(cps);
    if (st != PGCL_OK) {
        report->intact = false;
        report->first_bad_seq = 0;
        report->reason[0] = 0;
    }
    return st;
}

void pgcl_chain_report_release(pgcl_chain_report *report) {
    if (!report) return;
    free(report->writers);
    report->writers = NULL;
    report->n_writers = 0;
}

pgcl_status pgcl_chain_verify(const char *path, const char *const *checkpoint_files, int n_checkpoints,
                              pgcl_chain_report *report, char *err, int cap) {
    return pgcl_chain_verify_signed(path, checkpoint_files, n_checkpoints, NULL, report, err, cap);
}
