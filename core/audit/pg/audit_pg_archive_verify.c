/* Archival of the PostgreSQL store (audit_pg_archive.h; docs/audit.md, "Archival on PostgreSQL"):
 * the offline verification of an archive file (pgcl_pg_archive_is_fleet, pgcl_pg_archive_verify),
 * which reads only the file and fleet checkpoints. Writing archives is audit_pg_archive.c. */
#include "audit_pg_archive.h"

#include <jansson.h>
#include <sodium.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "archive.h"
#include "audit_pg.h"
#include "clock.h"
#include "db.h"
#include "files.h"
#include "merkle.h"
#include "sha256.h"
#include "time_cursor.h"

#define ERR_CAP 512

/* ---- offline verification of an archive file ---- */

static const char META_SQL[] =
    "SELECT format, checkpoint, decisions_previous, admin_events_previous, contests_previous, resolutions_previous,"
    " decisions_through, admin_events_through, contests_through, resolutions_through FROM fleet_archive WHERE id = 1";
static const char ARCHIVE_ENTRIES_SQL[] =
    "SELECT seq, kind, row_seq, payload_sha256, prev_hash, hash, leaf_count, leaves FROM audit_chain WHERE writer_id"
    " = ?1 ORDER BY seq";
static const char ARCHIVE_WRITERS_SQL[] = "SELECT DISTINCT writer_id FROM audit_chain ORDER BY writer_id";
static const char RUN_OF_ROW_SQL[] =
    "SELECT writer_id, entry_seq, first_leaf, first_row_seq, n FROM audit_chain_runs WHERE kind = ?1 AND"
    " first_row_seq <= ?2 ORDER BY first_row_seq DESC LIMIT 1";
static const char ENTRY_LEAVES_SQL[] = "SELECT leaf_count, leaves FROM audit_chain WHERE writer_id = ?1 AND seq = ?2";
static const char *const ARCHIVE_ROWS_SQL[PGCL_CHAIN_TABLES] = {
    "SELECT seq FROM decisions ORDER BY seq", "SELECT seq FROM admin_events ORDER BY seq",
    "SELECT seq FROM contests ORDER BY seq", "SELECT seq FROM resolutions ORDER BY seq"};

bool pgcl_pg_archive_is_fleet(const char *path) {
    char ignored[256];
    sqlite3 *db = pgcl_db_open_untouched(path, ignored, sizeof ignored); /* never written */
    bool yes = false;
    if (db) {
        sqlite3_stmt *s = NULL;
        yes = sqlite3_prepare_v2(db, "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'fleet_archive'", -1,
                                 &s, NULL) == SQLITE_OK &&
              sqlite3_step(s) == SQLITE_ROW;
        sqlite3_finalize(s);
    }
    sqlite3_close(db);
    return yes;
}

typedef struct archive_check {
    sqlite3 *db;
    pgcl_chain_report *rep;
    const char *writer; /* the chain being walked ("" outside) */
} archive_check;

__attribute__((format(printf, 3, 4))) static void archive_bad(archive_check *c, int64_t seq, const char *fmt, ...);

/* The first finding is the report's. */
static void archive_bad(archive_check *c, int64_t seq, const char *fmt, ...) {
    pgcl_chain_report *r = c->rep;
    if (!r->intact) return;
    r->intact = false;
    r->first_bad_seq = seq;
    snprintf(r->bad_writer_id, sizeof r->bad_writer_id, "%s", c->writer);
    char what[sizeof r->reason];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    if (c->writer[0])
        snprintf(r->reason, sizeof r->reason, "writer '%.128s': %.370s", c->writer, what);
    else
        snprintf(r->reason, sizeof r->reason, "%s", what);
}

static bool text_is(sqlite3_stmt *s, int col, const char *want) {
    const char *t = (const char *)sqlite3_column_text(s, col);
    return t && strcmp(t, want) == 0;
}

/* Walks one writer's entries 1..head in the archive against the checkpoint's head. */
static pgcl_status check_archive_chain(archive_check *c, const pgcl_fleet_head *head, char *err, int cap) {
    sqlite3_stmt *s = NULL;
    if (sqlite3_prepare_v2(c->db, ARCHIVE_ENTRIES_SQL, -1, &s, NULL) != SQLITE_OK) {
        pgcl_errorf(err, cap, "audit_chain: %s", sqlite3_errmsg(c->db));
        return PGCL_ERR_DB;
    }
    sqlite3_bind_text(s, 1, head->writer_id, -1, SQLITE_STATIC);
    char prev[PGCL_CHAIN_HEX_LEN + 1], hash[PGCL_CHAIN_HEX_LEN + 1] = "";
    memcpy(prev, pgcl_chain_zero_hash, sizeof prev);
    pgcl_merkle_hash *log_leaves = NULL;
    int64_t expected = 1, log_cap = 0;
    int rc = SQLITE_DONE;
    pgcl_status st = PGCL_OK;
    while (c->rep->intact && (rc = sqlite3_step(s)) == SQLITE_ROW) {
        int64_t seq = sqlite3_column_int64(s, 0), row_seq = sqlite3_column_int64(s, 2);
        const char *kind = (const char *)sqlite3_column_text(s, 1), *payload = (const char *)sqlite3_column_text(s, 3);
        const char *link = (const char *)sqlite3_column_text(s, 4), *stored = (const char *)sqlite3_column_text(s, 5);
        if (seq != expected || seq > head->head_seq) {
            archive_bad(c, expected, "entry %lld missing or beyond the checkpoint's head %lld (found entry %lld)",
                        (long long)expected, (long long)head->head_seq, (long long)seq);
            break;
        }
        if (!kind || !payload || !link || !stored || strcmp(link, prev) != 0) {
            archive_bad(c, seq, "entry %lld: prev_hash does not match entry %lld", (long long)seq, (long long)seq - 1);
            break;
        }
        pgcl_chain_entry_hash(seq, kind, strlen(kind), row_seq, payload, strlen(payload), link, strlen(link), hash);
        if (strcmp(hash, stored) != 0) {
            archive_bad(c, seq, "entry %lld: hash does not match the entry's contents", (long long)seq);
            break;
        }
        if (seq == 1) {
            char want[PGCL_CHAIN_HEX_LEN + 1];
            pgcl_chain_writer_genesis_payload(head->writer_id, want);
            if (strcmp(kind, "genesis") != 0 || row_seq != 0 || strcmp(payload, want) != 0) {
                archive_bad(c, 1, "entry 1 is not this writer's genesis entry");
                break;
            }
        } else {
            int64_t leaf_count = sqlite3_column_type(s, 6) == SQLITE_NULL ? -1 : sqlite3_column_int64(s, 6);
            const void *leaves = sqlite3_column_blob(s, 7);
            pgcl_merkle_hash root;
            if (strcmp(kind, PGCL_CHAIN_COMMIT_KIND) != 0 || leaf_count < 1 || row_seq != leaf_count || !leaves ||
                sqlite3_column_bytes(s, 7) != leaf_count * PGCL_MERKLE_HASH_BYTES ||
                !pgcl_merkle_from_hex(payload, &root)) {
                archive_bad(c, seq, "entry %lld: not a well-formed commit entry", (long long)seq);
                break;
            }
            pgcl_merkle_hash computed = pgcl_merkle_root((const pgcl_merkle_hash *)leaves, (uint64_t)leaf_count);
            if (memcmp(computed.b, root.b, PGCL_MERKLE_HASH_BYTES) != 0) {
                archive_bad(c, seq, "entry %lld: its stored leaf hashes do not give its Merkle root", (long long)seq);
                break;
            }
        }
        if (seq > log_cap) { /* doubling: one realloc per power of two */
            int64_t want = log_cap ? 2 * log_cap : 1024;
            pgcl_merkle_hash *grown = realloc(log_leaves, (size_t)want * sizeof *grown);
            if (!grown) {
                pgcl_errorf(err, cap, "out of memory");
                st = PGCL_ERR_NOMEM;
                break;
            }
            log_leaves = grown;
            log_cap = want;
        }
        pgcl_merkle_hash entry;
        PGCL_ASSERT(pgcl_merkle_from_hex(hash, &entry));
        log_leaves[seq - 1] = pgcl_merkle_leaf_hash(entry.b, sizeof entry.b);
        memcpy(prev, hash, sizeof prev);
        expected++;
        c->rep->events++;
    }
    if (st == PGCL_OK && rc != SQLITE_ROW && rc != SQLITE_DONE) {
        pgcl_errorf(err, cap, "audit_chain: %s", sqlite3_errmsg(c->db));
        st = PGCL_ERR_DB;
    }
    sqlite3_finalize(s);
    if (st == PGCL_OK && c->rep->intact) {
        char root_hex[PGCL_CHAIN_HEX_LEN + 1] = "";
        if (expected > 1) {
            pgcl_merkle_hash root = pgcl_merkle_root(log_leaves, (uint64_t)(expected - 1));
            pgcl_merkle_to_hex(&root, root_hex);
        }
        if (expected - 1 != head->head_seq || strcmp(prev, head->head_hash) != 0)
            archive_bad(c, expected, "the chain ends at entry %lld, the checkpoint signs entry %lld with another hash",
                        (long long)(expected - 1), (long long)head->head_seq);
        else if (strcmp(root_hex, head->log_root) != 0)
            archive_bad(c, head->head_seq, "the log root over entries 1..%lld is not the checkpoint's",
                        (long long)head->head_seq);
    }
    free(log_leaves);
    return st;
}

/* Each archived row of table t: its leaf is the one its run names; the rows are exactly
 * (previous, through]. */
static pgcl_status check_archive_rows(archive_check *c, int t, sqlite3_stmt *sel, int64_t previous, int64_t through,
                                      char *err, int cap) {
    sqlite3_stmt *rows = NULL, *run = NULL, *leaves = NULL;
    pgcl_status st = PGCL_ERR_DB;
    const char *table = pgcl_chain_tables[t].name;
    if (sqlite3_prepare_v2(c->db, ARCHIVE_ROWS_SQL[t], -1, &rows, NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(c->db, RUN_OF_ROW_SQL, -1, &run, NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(c->db, ENTRY_LEAVES_SQL, -1, &leaves, NULL) != SQLITE_OK) {
        pgcl_errorf(err, cap, "%s: %s", table, sqlite3_errmsg(c->db));
        goto done;
    }
    int64_t expected = previous + 1;
    int rc = SQLITE_DONE;
    while (c->rep->intact && (rc = sqlite3_step(rows)) == SQLITE_ROW) {
        int64_t seq = sqlite3_column_int64(rows, 0);
        if (seq != expected || seq > through) {
            archive_bad(c, 0, "%s: the archive holds rows %lld..%lld; row %lld is %s", table, (long long)(previous + 1),
                        (long long)through, (long long)(seq > expected ? expected : seq),
                        seq > expected ? "missing" : "not part of this cut");
            break;
        }
        expected++;
        sqlite3_reset(run);
        sqlite3_bind_text(run, 1, table, -1, SQLITE_STATIC);
        sqlite3_bind_int64(run, 2, seq);
        if (sqlite3_step(run) != SQLITE_ROW || seq >= sqlite3_column_int64(run, 3) + sqlite3_column_int64(run, 4)) {
            archive_bad(c, 0, "%s row %lld is not in any writer's chain up to the checkpoint (no run covers it)", table,
                        (long long)seq);
            break;
        }
        int64_t entry = sqlite3_column_int64(run, 1);
        int64_t leaf = sqlite3_column_int64(run, 2) + seq - sqlite3_column_int64(run, 3);
        sqlite3_reset(leaves);
        sqlite3_bind_text(leaves, 1, (const char *)sqlite3_column_text(run, 0), -1, SQLITE_TRANSIENT);
        sqlite3_bind_int64(leaves, 2, entry);
        pgcl_merkle_hash computed;
        int lrc = pgcl_chain_leaf_of_row(t, sel, seq, &computed);
        if (sqlite3_step(leaves) != SQLITE_ROW || leaf >= sqlite3_column_int64(leaves, 0) ||
            sqlite3_column_bytes(leaves, 1) < (leaf + 1) * PGCL_MERKLE_HASH_BYTES) {
            archive_bad(c, entry, "%s row %lld: its run names leaf %lld of entry %lld, which the archive lacks", table,
                        (long long)seq, (long long)leaf, (long long)entry);
            break;
        }
        const unsigned char *stored =
            (const unsigned char *)sqlite3_column_blob(leaves, 1) + leaf * PGCL_MERKLE_HASH_BYTES;
        if (lrc != SQLITE_ROW || memcmp(stored, computed.b, PGCL_MERKLE_HASH_BYTES) != 0) {
            archive_bad(c, entry,
                        "entry %lld, leaf %lld: %s row %lld: payload differs (the row was changed after it "
                        "was chained)",
                        (long long)entry, (long long)leaf, table, (long long)seq);
            break;
        }
        c->rep->archived_rows++;
    }
    if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
        pgcl_errorf(err, cap, "%s: %s", table, sqlite3_errmsg(c->db));
        goto done;
    }
    if (c->rep->intact && expected != through + 1)
        archive_bad(c, 0, "%s: the archive holds rows %lld..%lld; row %lld is missing", table,
                    (long long)(previous + 1), (long long)through, (long long)expected);
    st = PGCL_OK;
done:
    sqlite3_finalize(rows);
    sqlite3_finalize(run);
    sqlite3_finalize(leaves);
    return st;
}

/* Two checkpoints sign the same heads (their times may differ: a checkpoint file of the same heads
 * made later replaces the earlier one in a --checkpoint-dir, pgcl_fleet_checkpoint_write). */
static bool same_heads(const pgcl_fleet_checkpoint *a, const pgcl_fleet_checkpoint *b) {
    if (a->n_heads != b->n_heads) return false;
    for (int i = 0; i < a->n_heads; i++)
        if (memcmp(&a->heads[i], &b->heads[i], sizeof a->heads[i]) != 0) return false;
    return true;
}

pgcl_status pgcl_pg_archive_verify(const char *path, const char *const *checkpoint_files, int n_checkpoints,
                                   const char *public_key_hex, pgcl_chain_report *report, char *err, int cap) {
    memset(report, 0, sizeof *report);
    report->intact = true;
    report->has_writers = true;
    sqlite3 *db = NULL;
    sqlite3_stmt *meta = NULL, *writers = NULL, *sel[PGCL_CHAIN_TABLES] = {0};
    pgcl_fleet_checkpoint cp = {0};
    pgcl_status st = PGCL_ERR_FORMAT;
    archive_check c = {.rep = report, .writer = ""};
    char sub[ERR_CAP];
    char why[ERR_CAP] = "cannot open";
    if (!(db = pgcl_db_open_untouched(path, why, sizeof why)) ||
        sqlite3_prepare_v2(db, META_SQL, -1, &meta, NULL) != SQLITE_OK || sqlite3_step(meta) != SQLITE_ROW ||
        !text_is(meta, 0, PGCL_PG_ARCHIVE_FORMAT)) {
        pgcl_errorf(err, cap, "%s: not a fleet archive (%s)", path, db ? sqlite3_errmsg(db) : why);
        goto done;
    }
    c.db = db;
    json_error_t jerr;
    json_t *doc = json_loads((const char *)sqlite3_column_text(meta, 1), 0, &jerr);
    st = doc ? pgcl_fleet_checkpoint_from_json(doc, "the archive's checkpoint", &cp, err, cap) : PGCL_ERR_FORMAT;
    json_decref(doc);
    if (st != PGCL_OK) {
        if (!doc) pgcl_errorf(err, cap, "%s: the archive's checkpoint is not JSON: %s", path, jerr.text);
        goto done;
    }
    snprintf(cp.file, sizeof cp.file, "%s (its checkpoint)", path);
    if (pgcl_fleet_checkpoint_verify(&cp, public_key_hex, sub, sizeof sub) != PGCL_OK)
        archive_bad(&c, 0, "the archive's fleet checkpoint does not verify: %s", sub);
    for (int i = 0; i < n_checkpoints; i++) {
        pgcl_fleet_checkpoint held = {0};
        if ((st = pgcl_fleet_checkpoint_read(checkpoint_files[i], public_key_hex, &held, err, cap)) != PGCL_OK) {
            pgcl_fleet_checkpoint_release(&held);
            goto done;
        }
        if (!same_heads(&held, &cp))
            archive_bad(&c, 0, "%.200s is not the checkpoint the archive was cut at", checkpoint_files[i]);
        pgcl_fleet_checkpoint_release(&held);
    }
    /* every writer of the archive is in the checkpoint, and every head's chain checks */
    st = PGCL_ERR_DB;
    if (sqlite3_prepare_v2(db, ARCHIVE_WRITERS_SQL, -1, &writers, NULL) != SQLITE_OK) {
        pgcl_errorf(err, cap, "%s: %s", path, sqlite3_errmsg(db));
        goto done;
    }
    while (sqlite3_step(writers) == SQLITE_ROW) {
        const char *id = (const char *)sqlite3_column_text(writers, 0);
        if (!id || !pgcl_fleet_checkpoint_head(&cp, id))
            archive_bad(&c, 0, "the archive holds a chain of writer '%.128s', which the checkpoint does not sign",
                        id ? id : "");
    }
    if (!(report->writers = calloc((size_t)(cp.n_heads > 0 ? cp.n_heads : 1), sizeof *report->writers))) {
        pgcl_errorf(err, cap, "out of memory");
        st = PGCL_ERR_NOMEM;
        goto done;
    }
    for (int i = 0; i < cp.n_heads; i++) {
        const pgcl_fleet_head *h = &cp.heads[i];
        c.writer = h->writer_id;
        bool was_intact = report->intact;
        if ((st = check_archive_chain(&c, h, err, cap)) != PGCL_OK) goto done;
        pgcl_chain_writer_head *w = &report->writers[report->n_writers++];
        snprintf(w->writer_id, sizeof w->writer_id, "%s", h->writer_id);
        w->head_seq = h->head_seq;
        snprintf(w->head_hash, sizeof w->head_hash, "%s", h->head_hash);
        snprintf(w->log_root, sizeof w->log_root, "%s", h->log_root);
        w->intact = was_intact && report->intact;
        report->head_seq += h->head_seq;
    }
    c.writer = "";
    if (report->n_writers == 1) snprintf(report->head_hash, sizeof report->head_hash, "%s", cp.heads[0].head_hash);
    if (pgcl_chain_prepare_row_selects(db, sel, sub, sizeof sub) != SQLITE_OK) {
        pgcl_errorf(err, cap, "%s: %s", path, sub);
        goto done;
    }
    for (int t = 0; t < PGCL_CHAIN_TABLES && report->intact; t++)
        if ((st = check_archive_rows(&c, t, sel[t], sqlite3_column_int64(meta, 2 + t),
                                     sqlite3_column_int64(meta, 6 + t), err, cap)) != PGCL_OK)
            goto done;
    st = PGCL_OK;
done:
    for (int t = 0; t < PGCL_CHAIN_TABLES; t++)
        sqlite3_finalize(sel[t]);
    sqlite3_finalize(writers);
    sqlite3_finalize(meta);
    sqlite3_close(db);
    pgcl_fleet_checkpoint_release(&cp);
    if (st != PGCL_OK) pgcl_chain_report_release(report);
    return st;
}
