/* Fleet checkpoint statements (core/audit/fleet_checkpoint.c): pgcl_fleet_checkpoint_parse_statement
 * is the inverse of pgcl_fleet_checkpoint_statement — every statement made of valid heads reads back
 * to the same created_at and heads, and so to the same bytes — and refuses text that is not such a
 * statement (another magic, a head line cut short, bytes after the last head, a count that
 * disagrees with the lines). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fleet_checkpoint.h"
#include "test_util.h"

static void fill_head(pgcl_fleet_head *h, const char *id, int64_t seq, char digit) {
    snprintf(h->writer_id, sizeof h->writer_id, "%s", id);
    h->head_seq = seq;
    memset(h->head_hash, digit, 64);
    h->head_hash[64] = 0;
    memset(h->log_root, 'a' + (digit - '0') % 6, 64);
    h->log_root[64] = 0;
}

static void test_round_trip(int n_heads) {
    static const char *const ids[] = {"a", "replica 2", "w-9", "z~longer writer id"};
    pgcl_fleet_head heads[4];
    pgcl_fleet_checkpoint cp = {.n_heads = n_heads, .heads = heads};
    snprintf(cp.created_at, sizeof cp.created_at, "2026-11-26T05:00:00.123456Z");
    for (int i = 0; i < n_heads; i++)
        fill_head(&heads[i], ids[i], 1 + 1000 * (int64_t)i, (char)('0' + i));
    size_t len = 0, again_len = 0;
    char *statement = pgcl_fleet_checkpoint_statement(&cp, &len);
    CHECK(statement != NULL, "a statement of %d heads", n_heads);
    if (!statement) return;
    pgcl_fleet_checkpoint back;
    CHECK(pgcl_fleet_checkpoint_parse_statement(statement, &back), "reads back: %s", statement);
    CHECK(back.n_heads == n_heads && strcmp(back.created_at, cp.created_at) == 0, "%d heads, created_at %s",
          back.n_heads, back.created_at);
    for (int i = 0; i < back.n_heads && i < n_heads; i++)
        CHECK(memcmp(&back.heads[i], &heads[i], sizeof heads[i]) == 0, "head %d: %s %lld", i, back.heads[i].writer_id,
              (long long)back.heads[i].head_seq);
    char *again = pgcl_fleet_checkpoint_statement(&back, &again_len);
    CHECK(again && again_len == len && memcmp(again, statement, len) == 0, "the same bytes again");
    free(again);
    pgcl_fleet_checkpoint_release(&back);

    /* not statements: each must be refused (and leave nothing to free) */
    char *bad = malloc(len + 8);
    memcpy(bad, statement, len + 1);
    bad[5] = 'X'; /* another magic */
    CHECK(!pgcl_fleet_checkpoint_parse_statement(bad, &back) && !back.heads, "another magic");
    memcpy(bad, statement, len + 1);
    bad[len - 10] = 0; /* the last head line cut short */
    CHECK(!pgcl_fleet_checkpoint_parse_statement(bad, &back) && !back.heads, "a cut head line");
    memcpy(bad, statement, len + 1);
    memcpy(bad + len, "x\n", 3); /* bytes after the last head */
    CHECK(!pgcl_fleet_checkpoint_parse_statement(bad, &back) && !back.heads, "trailing bytes");
    free(bad);
    CHECK(!pgcl_fleet_checkpoint_parse_statement(NULL, &back), "NULL");
    free(statement);
}

int main(void) {
    for (int n = 1; n <= 4; n++)
        test_round_trip(n);
    return test_finish("test_fleet_checkpoint");
}
