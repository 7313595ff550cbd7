/* Prints the SQL that pgcld runs for GET /v1/decisions with the given filters, and SQLite's
 * EXPLAIN QUERY PLAN for it, by calling core/review/decision_lists.c itself (so the plan shown is the plan
 * served). Used by bench/audit_queries/run.sh.
 *
 *   explain DB [model=M] [version=V] [label=L] [decision=D] [item_id=I] [request_id=R] [trace_id=T]
 *              [since=T] [until=T] [contest=open|resolved|contested|none] [before=SEQ] [limit=N]
 *
 * since/until are RFC 3339 date-times as on the HTTP API. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "decision_lists.h"

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s DB [key=value ...]\n", argv[0]);
        return 2;
    }
    pgcl_decision_filter f = {0};
    int64_t before = 0;
    int limit = 100;
    char since[PGCL_QTIME_LEN + 1], until[PGCL_QTIME_LEN + 1];
    for (int i = 2; i < argc; i++) {
        char *eq = strchr(argv[i], '=');
        if (!eq) {
            fprintf(stderr, "%s: expected key=value\n", argv[i]);
            return 2;
        }
        *eq = 0;
        const char *k = argv[i], *v = eq + 1;
        int64_t us;
        if (!strcmp(k, "model"))
            f.model = v;
        else if (!strcmp(k, "version"))
            f.version = v;
        else if (!strcmp(k, "label"))
            f.label = v;
        else if (!strcmp(k, "decision"))
            f.decision = v;
        else if (!strcmp(k, "item_id"))
            f.item_id = v;
        else if (!strcmp(k, "request_id"))
            f.request_id = v;
        else if (!strcmp(k, "trace_id"))
            f.trace_id = v;
        else if (!strcmp(k, "before"))
            before = atoll(v);
        else if (!strcmp(k, "limit"))
            limit = atoi(v);
        else if ((!strcmp(k, "since") || !strcmp(k, "until")) && pgcl_time_parse(v, &us)) {
            pgcl_time_format(us, k[0] == 's' ? since : until);
            if (k[0] == 's')
                f.since = since;
            else
                f.until = until;
        } else if (!strcmp(k, "contest")) {
            f.contest = !strcmp(v, "open")        ? PGCL_CONTEST_OPEN
                        : !strcmp(v, "resolved")  ? PGCL_CONTEST_RESOLVED
                        : !strcmp(v, "contested") ? PGCL_CONTEST_CONTESTED
                                                  : PGCL_CONTEST_NONE;
        } else {
            fprintf(stderr, "%s=%s: unknown or invalid\n", k, v);
            return 2;
        }
    }
    char err[512];
    pgcl_qpool *pool = pgcl_qpool_create(argv[1], 1, err, sizeof err);
    pgcl_row_arena arena = {0};
    pgcl_decisions_plan plan;
    if (!pool || pgcl_decisions_explain(pool, &f, before, limit, &arena, &plan, err, sizeof err) != PGCL_OK) {
        fprintf(stderr, "explain: %s\n", err);
        pgcl_row_arena_release(&arena);
        pgcl_qpool_destroy(pool);
        return 1;
    }
    printf("strategy: %s\n", plan.strategy);
    printf("sql: %s\n", plan.sql);
    printf("plan:\n");
    for (int i = 0; i < plan.n_lines; i++) printf("  %s\n", plan.lines[i]);
    pgcl_row_arena_release(&arena);
    pgcl_qpool_destroy(pool);
    return 0;
}
