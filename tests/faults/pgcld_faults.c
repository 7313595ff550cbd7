/* pgcld_faults: the real pgcld (server/main.c compiled a second time with main renamed to
 * pgcld_main) over the fault-injecting SQLite VFS of faultvfs.c. Test-only: never installed.
 *
 *   pgcld_faults serve ...              pgcld serve, with the VFS registered as SQLite's default
 *   pgcld_faults keys|audit ...         the same CLI, over the VFS
 *   pgcld_faults powerloss-revert DB    rewind DB and its WAL to their last synced content */
#include <stdio.h>
#include <string.h>

#include <sqlite3.h>

#include "faultvfs.h"

int pgcld_main(int argc, char **argv); /* server/main.c's main() */

int main(int argc, char **argv) {
    if (argc >= 2 && strcmp(argv[1], "powerloss-revert") == 0) return pgcld_faultvfs_revert_main(argc - 2, argv + 2);
    int rc = pgcld_faultvfs_register();
    if (rc != SQLITE_OK) {
        fprintf(stderr, "pgcld_faults: cannot register the fault VFS: %s\n", sqlite3_errstr(rc));
        return 1;
    }
    return pgcld_main(argc, argv);
}
