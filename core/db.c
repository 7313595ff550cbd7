/* SQLite helpers; see db.h. */
#include "db.h"

#include <stddef.h>

#include "status.h"

int pgcl_db_exec(sqlite3 *db, const char *sql, char *err, int cap) {
    char *msg = NULL;
    int rc = sqlite3_exec(db, sql, NULL, NULL, &msg);
    if (rc != SQLITE_OK) {
        pgcl_errorf(err, cap, "%s", msg ? msg : sqlite3_errstr(rc));
        sqlite3_free(msg);
    }
    return rc;
}

sqlite3 *pgcl_db_open_reader(const char *path, char *err, int cap) {
    sqlite3 *db = NULL;
    int rc = sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL);
    if (rc != SQLITE_OK) {
        pgcl_errorf(err, cap, "%s: %s", path, db ? sqlite3_errmsg(db) : sqlite3_errstr(rc));
        sqlite3_close(db);
        return NULL;
    }
    sqlite3_extended_result_codes(db, 1);
    sqlite3_busy_timeout(db, PGCL_DB_BUSY_TIMEOUT_MS);
    return db;
}
