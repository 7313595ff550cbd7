/* A test-only SQLite VFS that wraps the real "unix" VFS, for tests/faults/pgcld_faults (never linked
 * into the production pgcld). Two independent features, both driven by the environment:
 *
 * Fault injection (PGCLD_FAULTS_CONTROL=FILE): the first line of FILE is the mode, re-read whenever
 * the file's mtime, size or inode changes (one stat() per write, sync or truncate):
 *   ok            pass everything through (also when FILE is missing or empty)
 *   eio           xWrite / xSync / xTruncate of the main database, its WAL and its rollback journal
 *                 fail with SQLITE_IOERR_WRITE / SQLITE_IOERR_FSYNC / SQLITE_IOERR_TRUNCATE
 *   full          xWrite of those files fails with SQLITE_FULL (a disk with no space left)
 *   eio-sync      only xSync fails (SQLITE_IOERR_FSYNC): the writes reached the page cache, the
 *                 flush did not
 *   eio-after N   like eio once N more xWrite calls have gone through (the same for full-after N)
 *   stall         xWrite and xSync of those files wait (a hung disk) until the mode changes: the
 *                 writer holds its transaction, and rows queue behind it
 * PGCLD_FAULTS_STATS=FILE: at exit, the counts of injected faults as one JSON object.
 *
 * Power-loss model (PGCLD_FAULTS_POWERLOSS=1): for the main database, the WAL and the journal, every
 * byte range that is overwritten after the file's last xSync is first saved to an undo log
 * "<file>-plundo" (plain write(): it survives SIGKILL), together with the file's size at that xSync;
 * a successful xSync empties the log. After the process died, `pgcld_faults powerloss-revert DB`
 * rewinds each file to its content at its last xSync — what a power cut that loses every write not
 * yet synced would leave — and removes the -shm file (memory, lost with the power). */
#ifndef PGCLD_FAULTVFS_H
#define PGCLD_FAULTVFS_H

/* Registers the VFS "pgcld-faults" as the default; SQLITE_OK or an SQLite error code. */
int pgcld_faultvfs_register(void);

/* `powerloss-revert DB...`: rewinds DB, DB-wal and DB-journal; prints one JSON line; exit status. */
int pgcld_faultvfs_revert_main(int argc, char **argv);

#endif
