/* SQLite helpers shared by the C tests that inspect an audit database directly. */
#ifndef PGCL_TEST_SQLITE_H
#define PGCL_TEST_SQLITE_H

#include <sqlite3.h>
#include <stdio.h>

/* The first column of the first row of sql on the database at path, or -1. */
static inline long long query_int(const char *path, const char *sql) {
    sqlite3 *db;
    sqlite3_stmt *s;
    long long v = -1;
    if (sqlite3_open(path, &db) == SQLITE_OK && sqlite3_prepare_v2(db, sql, -1, &s, NULL) == SQLITE_OK) {
        if (sqlite3_step(s) == SQLITE_ROW) v = sqlite3_column_int64(s, 0);
        sqlite3_finalize(s);
    }
    sqlite3_close(db);
    return v;
}

/* The first column of the first row of sql as text, copied into a static buffer ("" if none). */
static inline const char *query_text(const char *path, const char *sql) {
    static char text[256];
    sqlite3 *db;
    sqlite3_stmt *s;
    text[0] = 0;
    if (sqlite3_open(path, &db) == SQLITE_OK && sqlite3_prepare_v2(db, sql, -1, &s, NULL) == SQLITE_OK) {
        if (sqlite3_step(s) == SQLITE_ROW && sqlite3_column_text(s, 0))
            snprintf(text, sizeof text, "%s", (const char *)sqlite3_column_text(s, 0));
        sqlite3_finalize(s);
    }
    sqlite3_close(db);
    return text;
}

#endif
