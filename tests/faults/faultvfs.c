/* The fault-injecting, power-loss-recording SQLite VFS of tests/faults (see faultvfs.h). */
#include "faultvfs.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* ------------------------------------------------------------------------------------------------
 * The control file */

enum { MODE_OK, MODE_EIO, MODE_FULL, MODE_EIO_SYNC, MODE_STALL };
enum { OP_WRITE, OP_SYNC, OP_TRUNCATE };

static pthread_mutex_t g_ctl_lock = PTHREAD_MUTEX_INITIALIZER;
static const char *g_ctl_path;
static struct stat g_ctl_seen; /* the control file's identity when last read */
static bool g_ctl_present;
static int g_mode = MODE_OK;
static long long g_after = -1; /* writes still let through before the mode applies; -1: applies now */

static atomic_llong g_eio_write, g_eio_fsync, g_eio_truncate, g_full_write, g_mode_changes, g_stalled;
static const char *g_stats_path;

static bool same_stat(const struct stat *a, const struct stat *b) {
    return a->st_ino == b->st_ino && a->st_dev == b->st_dev && a->st_size == b->st_size &&
           a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec;
}

/* Caller holds g_ctl_lock. */
static void ctl_parse(const char *text) {
    char word[32] = "";
    long long n = -1;
    int got = sscanf(text, "%31s %lld", word, &n);
    int mode = MODE_OK;
    long long after = -1;
    if (got < 1 || strcmp(word, "ok") == 0) {
        mode = MODE_OK;
    } else if (strcmp(word, "eio") == 0) {
        mode = MODE_EIO;
    } else if (strcmp(word, "full") == 0) {
        mode = MODE_FULL;
    } else if (strcmp(word, "eio-sync") == 0) {
        mode = MODE_EIO_SYNC;
    } else if (strcmp(word, "stall") == 0) {
        mode = MODE_STALL;
    } else if ((strcmp(word, "eio-after") == 0 || strcmp(word, "full-after") == 0) && got == 2 && n >= 0) {
        mode = word[0] == 'e' ? MODE_EIO : MODE_FULL;
        after = n;
    } else {
        fprintf(stderr, "pgcld_faults: unknown fault mode '%s' in %s; using ok\n", word, g_ctl_path);
    }
    g_mode = mode;
    g_after = after;
    atomic_fetch_add(&g_mode_changes, 1);
    fprintf(stderr, "pgcld_faults: fault mode now '%s'%s\n", got >= 1 ? word : "ok",
            after >= 0 ? " (counting down)" : "");
}

/* Re-reads the control file when it changed. Caller holds g_ctl_lock. */
static void ctl_refresh(void) {
    if (!g_ctl_path) return;
    struct stat st;
    if (stat(g_ctl_path, &st) != 0) {
        if (g_ctl_present) ctl_parse("ok");
        g_ctl_present = false;
        return;
    }
    if (g_ctl_present && same_stat(&st, &g_ctl_seen)) return;
    char text[128] = "";
    int fd = open(g_ctl_path, O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        ssize_t n = read(fd, text, sizeof text - 1);
        text[n > 0 ? n : 0] = 0;
        close(fd);
    }
    g_ctl_seen = st;
    g_ctl_present = true;
    ctl_parse(text);
}

/* In stall mode: holds the calling thread (a write or sync of a database file) until the mode
 * changes, as a hung disk would; the control file is re-read every 5 ms meanwhile. Caller holds
 * g_ctl_lock, which is released while waiting. */
static void stall_while_requested(void) {
    if (g_mode != MODE_STALL) return;
    atomic_fetch_add(&g_stalled, 1);
    while (g_mode == MODE_STALL) {
        pthread_mutex_unlock(&g_ctl_lock);
        nanosleep(&(struct timespec){.tv_nsec = 5000000}, NULL);
        pthread_mutex_lock(&g_ctl_lock);
        ctl_refresh();
    }
}

/* The error to inject for op on a database file, or SQLITE_OK. */
static int fault_for(int op) {
    if (!g_ctl_path) return SQLITE_OK;
    pthread_mutex_lock(&g_ctl_lock);
    ctl_refresh();
    if (op != OP_TRUNCATE) stall_while_requested();
    int mode = g_mode;
    if (mode != MODE_OK && g_after > 0) {
        if (op == OP_WRITE) g_after--;
        mode = MODE_OK;
    }
    pthread_mutex_unlock(&g_ctl_lock);
    if (mode == MODE_EIO) {
        switch (op) {
        case OP_WRITE:
            atomic_fetch_add(&g_eio_write, 1);
            return SQLITE_IOERR_WRITE;
        case OP_SYNC:
            atomic_fetch_add(&g_eio_fsync, 1);
            return SQLITE_IOERR_FSYNC;
        default:
            atomic_fetch_add(&g_eio_truncate, 1);
            return SQLITE_IOERR_TRUNCATE;
        }
    }
    if (mode == MODE_EIO_SYNC && op == OP_SYNC) {
        atomic_fetch_add(&g_eio_fsync, 1);
        return SQLITE_IOERR_FSYNC;
    }
    if (mode == MODE_FULL && op == OP_WRITE) {
        atomic_fetch_add(&g_full_write, 1);
        return SQLITE_FULL;
    }
    return SQLITE_OK;
}

static void write_stats(void) {
    if (!g_stats_path) return;
    FILE *f = fopen(g_stats_path, "w");
    if (!f) return;
    fprintf(f,
            "{\"eio_write\": %lld, \"eio_fsync\": %lld, \"eio_truncate\": %lld, \"full_write\": %lld, "
            "\"mode_changes\": %lld, \"stalled\": %lld}\n",
            (long long)atomic_load(&g_eio_write), (long long)atomic_load(&g_eio_fsync),
            (long long)atomic_load(&g_eio_truncate), (long long)atomic_load(&g_full_write),
            (long long)atomic_load(&g_mode_changes), (long long)atomic_load(&g_stalled));
    fclose(f);
}

/* ------------------------------------------------------------------------------------------------
 * The power-loss undo logs: one per database file, shared by every connection of the process. */

#define UNDO_SUFFIX "-plundo"
static const char UNDO_MAGIC[8] = {'P', 'L', 'U', 'N', 'D', 'O', '0', '1'};
#define UNDO_HEADER 16 /* magic, int64 size at the last sync */
#define UNDO_RECORD 16 /* int64 offset, int32 length, int32 zero; then the bytes */

typedef struct track {
    char path[PATH_MAX];
    pthread_mutex_t lock;
    int fd; /* the undo log; -1 before the first open or after a delete */
    int64_t synced_size;
    int64_t undo_len;
    struct track *next;
} track;

static bool g_powerloss;
static pthread_mutex_t g_tracks_lock = PTHREAD_MUTEX_INITIALIZER;
static track *g_tracks;

static int write_all_at(int fd, const void *buf, size_t n, off_t off) {
    const char *p = buf;
    while (n) {
        ssize_t w = pwrite(fd, p, n, off);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return -1;
        p += w;
        n -= (size_t)w;
        off += w;
    }
    return 0;
}

/* Empties the log and records size as the synced size. Caller holds t->lock. The truncation comes
 * first: a kill in between leaves an empty log, which means "all synced" — true, the sync returned. */
static int undo_reset(track *t, int64_t size) {
    unsigned char hdr[UNDO_HEADER];
    memcpy(hdr, UNDO_MAGIC, 8);
    memcpy(hdr + 8, &size, 8);
    if (ftruncate(t->fd, 0) != 0 || write_all_at(t->fd, hdr, sizeof hdr, 0) != 0) return -1;
    t->synced_size = size;
    t->undo_len = UNDO_HEADER;
    return 0;
}

static track *track_open(const char *path) {
    pthread_mutex_lock(&g_tracks_lock);
    track *t = g_tracks;
    while (t && strcmp(t->path, path) != 0)
        t = t->next;
    if (!t) {
        t = calloc(1, sizeof *t);
        if (!t || strlen(path) >= sizeof t->path) {
            free(t);
            pthread_mutex_unlock(&g_tracks_lock);
            return NULL;
        }
        snprintf(t->path, sizeof t->path, "%s", path);
        pthread_mutex_init(&t->lock, NULL);
        t->fd = -1;
        t->next = g_tracks;
        g_tracks = t;
    }
    pthread_mutex_lock(&t->lock);
    if (t->fd < 0) { /* first open (or reopened after a delete): what is on disk now is the synced state */
        char undo[PATH_MAX + sizeof UNDO_SUFFIX];
        snprintf(undo, sizeof undo, "%s%s", path, UNDO_SUFFIX);
        struct stat st;
        int64_t size = stat(path, &st) == 0 ? (int64_t)st.st_size : 0;
        if (stat(undo, &st) == 0 && st.st_size > UNDO_HEADER)
            fprintf(stderr, "pgcld_faults: %s holds records of a run that was not reverted; starting afresh\n", undo);
        t->fd = open(undo, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
        if (t->fd < 0 || undo_reset(t, size) != 0) {
            fprintf(stderr, "pgcld_faults: cannot write %s: %s\n", undo, strerror(errno));
            abort(); /* the power-loss model would silently be wrong */
        }
    }
    pthread_mutex_unlock(&t->lock);
    pthread_mutex_unlock(&g_tracks_lock);
    return t;
}

/* Saves the bytes [off, off + amt) of the file that lie below the synced size. Caller holds t->lock. */
static void undo_save(track *t, sqlite3_file *real, int64_t off, int64_t amt) {
    if (off >= t->synced_size || amt <= 0) return;
    int64_t end = off + amt < t->synced_size ? off + amt : t->synced_size, n = end - off;
    unsigned char *rec = malloc(UNDO_RECORD + (size_t)n);
    if (!rec) abort();
    int32_t len = (int32_t)n, zero = 0;
    memcpy(rec, &off, 8);
    memcpy(rec + 8, &len, 4);
    memcpy(rec + 12, &zero, 4);
    /* Below the synced size, but the file may be shorter now (a truncate saved its tail already):
     * a short read fills zeros, and the earlier record restores the real bytes on revert. */
    int rc = real->pMethods->xRead(real, rec + UNDO_RECORD, (int)n, off);
    if (rc != SQLITE_OK && rc != SQLITE_IOERR_SHORT_READ) abort();
    /* One write() per record: a SIGKILL never leaves half of one. */
    if (write_all_at(t->fd, rec, UNDO_RECORD + (size_t)n, t->undo_len) != 0) abort();
    t->undo_len += UNDO_RECORD + n;
    free(rec);
}

/* ------------------------------------------------------------------------------------------------
 * The VFS */

typedef struct fv_file {
    sqlite3_file base;
    sqlite3_file *real; /* the unix VFS's file, allocated right after this struct */
    bool faults;        /* a database, WAL or journal file: faults apply */
    track *track;       /* power-loss log, or NULL */
} fv_file;

static sqlite3_vfs *g_real;

static int fv_close(sqlite3_file *f) {
    fv_file *p = (fv_file *)f;
    return p->real->pMethods->xClose(p->real);
}

static int fv_read(sqlite3_file *f, void *buf, int amt, sqlite3_int64 off) {
    fv_file *p = (fv_file *)f;
    return p->real->pMethods->xRead(p->real, buf, amt, off);
}

static int fv_write(sqlite3_file *f, const void *buf, int amt, sqlite3_int64 off) {
    fv_file *p = (fv_file *)f;
    if (p->faults) {
        int rc = fault_for(OP_WRITE);
        if (rc != SQLITE_OK) return rc;
    }
    if (!p->track) return p->real->pMethods->xWrite(p->real, buf, amt, off);
    pthread_mutex_lock(&p->track->lock);
    undo_save(p->track, p->real, off, amt);
    int rc = p->real->pMethods->xWrite(p->real, buf, amt, off);
    pthread_mutex_unlock(&p->track->lock);
    return rc;
}

static int fv_truncate(sqlite3_file *f, sqlite3_int64 size) {
    fv_file *p = (fv_file *)f;
    if (p->faults) {
        int rc = fault_for(OP_TRUNCATE);
        if (rc != SQLITE_OK) return rc;
    }
    if (!p->track) return p->real->pMethods->xTruncate(p->real, size);
    pthread_mutex_lock(&p->track->lock);
    undo_save(p->track, p->real, size, p->track->synced_size - size);
    int rc = p->real->pMethods->xTruncate(p->real, size);
    pthread_mutex_unlock(&p->track->lock);
    return rc;
}

static int fv_sync(sqlite3_file *f, int flags) {
    fv_file *p = (fv_file *)f;
    if (p->faults) {
        int rc = fault_for(OP_SYNC);
        if (rc != SQLITE_OK) return rc;
    }
    if (!p->track) return p->real->pMethods->xSync(p->real, flags);
    pthread_mutex_lock(&p->track->lock);
    int rc = p->real->pMethods->xSync(p->real, flags);
    sqlite3_int64 size = 0;
    if (rc == SQLITE_OK && p->real->pMethods->xFileSize(p->real, &size) == SQLITE_OK && undo_reset(p->track, size) != 0)
        abort();
    pthread_mutex_unlock(&p->track->lock);
    return rc;
}

static int fv_file_size(sqlite3_file *f, sqlite3_int64 *size) {
    fv_file *p = (fv_file *)f;
    return p->real->pMethods->xFileSize(p->real, size);
}

static int fv_lock(sqlite3_file *f, int level) {
    fv_file *p = (fv_file *)f;
    return p->real->pMethods->xLock(p->real, level);
}

static int fv_unlock(sqlite3_file *f, int level) {
    fv_file *p = (fv_file *)f;
    return p->real->pMethods->xUnlock(p->real, level);
}

static int fv_check_reserved(sqlite3_file *f, int *out) {
    fv_file *p = (fv_file *)f;
    return p->real->pMethods->xCheckReservedLock(p->real, out);
}

static int fv_file_control(sqlite3_file *f, int op, void *arg) {
    fv_file *p = (fv_file *)f;
    return p->real->pMethods->xFileControl(p->real, op, arg);
}

static int fv_sector_size(sqlite3_file *f) {
    fv_file *p = (fv_file *)f;
    return p->real->pMethods->xSectorSize(p->real);
}

static int fv_device_characteristics(sqlite3_file *f) {
    fv_file *p = (fv_file *)f;
    return p->real->pMethods->xDeviceCharacteristics(p->real);
}

static int fv_shm_map(sqlite3_file *f, int region, int size, int extend, void volatile **out) {
    fv_file *p = (fv_file *)f;
    return p->real->pMethods->xShmMap(p->real, region, size, extend, out);
}

static int fv_shm_lock(sqlite3_file *f, int offset, int n, int flags) {
    fv_file *p = (fv_file *)f;
    return p->real->pMethods->xShmLock(p->real, offset, n, flags);
}

static void fv_shm_barrier(sqlite3_file *f) {
    fv_file *p = (fv_file *)f;
    p->real->pMethods->xShmBarrier(p->real);
}

static int fv_shm_unmap(sqlite3_file *f, int delete_flag) {
    fv_file *p = (fv_file *)f;
    return p->real->pMethods->xShmUnmap(p->real, delete_flag);
}

static int fv_fetch(sqlite3_file *f, sqlite3_int64 off, int amt, void **out) {
    fv_file *p = (fv_file *)f;
    return p->real->pMethods->xFetch(p->real, off, amt, out);
}

static int fv_unfetch(sqlite3_file *f, sqlite3_int64 off, void *ptr) {
    fv_file *p = (fv_file *)f;
    return p->real->pMethods->xUnfetch(p->real, off, ptr);
}

static const sqlite3_io_methods fv_methods = {
    .iVersion = 3,
    .xClose = fv_close,
    .xRead = fv_read,
    .xWrite = fv_write,
    .xTruncate = fv_truncate,
    .xSync = fv_sync,
    .xFileSize = fv_file_size,
    .xLock = fv_lock,
    .xUnlock = fv_unlock,
    .xCheckReservedLock = fv_check_reserved,
    .xFileControl = fv_file_control,
    .xSectorSize = fv_sector_size,
    .xDeviceCharacteristics = fv_device_characteristics,
    .xShmMap = fv_shm_map,
    .xShmLock = fv_shm_lock,
    .xShmBarrier = fv_shm_barrier,
    .xShmUnmap = fv_shm_unmap,
    .xFetch = fv_fetch,
    .xUnfetch = fv_unfetch,
};

static int fv_open(sqlite3_vfs *vfs, const char *name, sqlite3_file *f, int flags, int *out_flags) {
    fv_file *p = (fv_file *)f;
    memset(p, 0, sizeof *p);
    p->real = (sqlite3_file *)(p + 1);
    int rc = g_real->xOpen(g_real, name, p->real, flags, out_flags);
    if (rc != SQLITE_OK) {
        if (p->real->pMethods) p->real->pMethods->xClose(p->real);
        p->base.pMethods = NULL;
        return rc;
    }
    if (p->real->pMethods->iVersion < 3) { /* the unix VFS has had version 3 since SQLite 3.7.17 */
        p->real->pMethods->xClose(p->real);
        p->base.pMethods = NULL;
        return SQLITE_CANTOPEN;
    }
    p->faults = name && (flags & (SQLITE_OPEN_MAIN_DB | SQLITE_OPEN_WAL | SQLITE_OPEN_MAIN_JOURNAL)) &&
                (flags & SQLITE_OPEN_READWRITE);
    if (p->faults && g_powerloss) p->track = track_open(name);
    p->base.pMethods = &fv_methods;
    return SQLITE_OK;
}

static int fv_delete(sqlite3_vfs *vfs, const char *name, int dir_sync) {
    if (g_powerloss) {
        pthread_mutex_lock(&g_tracks_lock);
        for (track *t = g_tracks; t; t = t->next) {
            if (strcmp(t->path, name) != 0) continue;
            pthread_mutex_lock(&t->lock);
            if (t->fd >= 0) close(t->fd);
            t->fd = -1;
            char undo[PATH_MAX + sizeof UNDO_SUFFIX];
            snprintf(undo, sizeof undo, "%s%s", name, UNDO_SUFFIX);
            unlink(undo);
            pthread_mutex_unlock(&t->lock);
        }
        pthread_mutex_unlock(&g_tracks_lock);
    }
    return g_real->xDelete(g_real, name, dir_sync);
}

static int fv_access(sqlite3_vfs *vfs, const char *name, int flags, int *out) {
    return g_real->xAccess(g_real, name, flags, out);
}

static int fv_full_pathname(sqlite3_vfs *vfs, const char *name, int n, char *out) {
    return g_real->xFullPathname(g_real, name, n, out);
}

static void *fv_dlopen(sqlite3_vfs *vfs, const char *name) {
    return g_real->xDlOpen(g_real, name);
}

static void fv_dlerror(sqlite3_vfs *vfs, int n, char *out) {
    g_real->xDlError(g_real, n, out);
}

static void (*fv_dlsym(sqlite3_vfs *vfs, void *h, const char *sym))(void) {
    return g_real->xDlSym(g_real, h, sym);
}

static void fv_dlclose(sqlite3_vfs *vfs, void *h) {
    g_real->xDlClose(g_real, h);
}

static int fv_randomness(sqlite3_vfs *vfs, int n, char *out) {
    return g_real->xRandomness(g_real, n, out);
}

static int fv_sleep(sqlite3_vfs *vfs, int us) {
    return g_real->xSleep(g_real, us);
}

static int fv_current_time(sqlite3_vfs *vfs, double *out) {
    return g_real->xCurrentTime(g_real, out);
}

static int fv_get_last_error(sqlite3_vfs *vfs, int n, char *out) {
    return g_real->xGetLastError(g_real, n, out);
}

static int fv_current_time_int64(sqlite3_vfs *vfs, sqlite3_int64 *out) {
    return g_real->xCurrentTimeInt64(g_real, out);
}

static sqlite3_vfs g_vfs = {
    .iVersion = 2,
    .zName = "pgcld-faults",
    .xOpen = fv_open,
    .xDelete = fv_delete,
    .xAccess = fv_access,
    .xFullPathname = fv_full_pathname,
    .xDlOpen = fv_dlopen,
    .xDlError = fv_dlerror,
    .xDlSym = fv_dlsym,
    .xDlClose = fv_dlclose,
    .xRandomness = fv_randomness,
    .xSleep = fv_sleep,
    .xCurrentTime = fv_current_time,
    .xGetLastError = fv_get_last_error,
    .xCurrentTimeInt64 = fv_current_time_int64,
};

int pgcld_faultvfs_register(void) {
    g_real = sqlite3_vfs_find("unix");
    if (!g_real || g_real->iVersion < 2) return SQLITE_ERROR;
    g_vfs.szOsFile = (int)sizeof(fv_file) + g_real->szOsFile;
    g_vfs.mxPathname = g_real->mxPathname;
    const char *ctl = getenv("PGCLD_FAULTS_CONTROL");
    g_ctl_path = ctl && *ctl ? ctl : NULL;
    const char *stats = getenv("PGCLD_FAULTS_STATS");
    g_stats_path = stats && *stats ? stats : NULL;
    const char *pl = getenv("PGCLD_FAULTS_POWERLOSS");
    g_powerloss = pl && strcmp(pl, "1") == 0;
    if (g_stats_path) atexit(write_stats);
    fprintf(stderr, "pgcld_faults: SQLite VFS '%s' over 'unix' (control file %s, power-loss log %s)\n", g_vfs.zName,
            g_ctl_path ? g_ctl_path : "none", g_powerloss ? "on" : "off");
    return sqlite3_vfs_register(&g_vfs, 1);
}

/* ------------------------------------------------------------------------------------------------
 * powerloss-revert */

typedef struct revert_totals {
    long long files, records, bytes_restored, bytes_cut;
} revert_totals;

/* Rewinds path with its undo log (if any) and removes the log. 0, or -1 with a message. */
static int revert_file(const char *path, revert_totals *tot) {
    char undo[PATH_MAX + sizeof UNDO_SUFFIX];
    snprintf(undo, sizeof undo, "%s%s", path, UNDO_SUFFIX);
    int ufd = open(undo, O_RDONLY | O_CLOEXEC);
    if (ufd < 0) {
        if (errno == ENOENT) return 0;
        fprintf(stderr, "powerloss-revert: %s: %s\n", undo, strerror(errno));
        return -1;
    }
    struct stat st;
    if (fstat(ufd, &st) != 0) {
        close(ufd);
        return -1;
    }
    size_t len = (size_t)st.st_size;
    unsigned char *log = malloc(len ? len : 1);
    size_t got = 0;
    while (log && got < len) {
        ssize_t r = pread(ufd, log + got, len - got, (off_t)got);
        if (r <= 0) break;
        got += (size_t)r;
    }
    close(ufd);
    if (!log || got != len) {
        fprintf(stderr, "powerloss-revert: cannot read %s\n", undo);
        free(log);
        return -1;
    }
    int rc = 0;
    if (len >= UNDO_HEADER && memcmp(log, UNDO_MAGIC, 8) == 0) { /* an empty log: the last sync returned */
        int64_t synced;
        memcpy(&synced, log + 8, 8);
        size_t n_rec = 0, cap = 64;
        size_t *at = malloc(cap * sizeof *at);
        for (size_t pos = UNDO_HEADER; at && pos + UNDO_RECORD <= len;) {
            int32_t rlen;
            memcpy(&rlen, log + pos + 8, 4);
            if (rlen < 0 || pos + UNDO_RECORD + (size_t)rlen > len) break; /* never happens: one write() each */
            if (n_rec == cap) {
                size_t *grown = realloc(at, 2 * cap * sizeof *at);
                if (!grown) break;
                at = grown;
                cap *= 2;
            }
            at[n_rec++] = pos;
            pos += UNDO_RECORD + (size_t)rlen;
        }
        int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
        if (fd < 0 || !at) {
            fprintf(stderr, "powerloss-revert: %s: %s\n", path, strerror(errno));
            rc = -1;
        } else {
            for (size_t i = n_rec; i-- > 0;) { /* newest first: ends at the content of the last sync */
                int64_t off;
                int32_t rlen;
                memcpy(&off, log + at[i], 8);
                memcpy(&rlen, log + at[i] + 8, 4);
                if (write_all_at(fd, log + at[i] + UNDO_RECORD, (size_t)rlen, (off_t)off) != 0) rc = -1;
                tot->bytes_restored += rlen;
            }
            struct stat now;
            if (fstat(fd, &now) == 0 && now.st_size > synced) tot->bytes_cut += now.st_size - synced;
            if (ftruncate(fd, (off_t)synced) != 0 || fsync(fd) != 0) rc = -1;
            tot->records += (long long)n_rec;
            tot->files++;
        }
        if (fd >= 0) close(fd);
        free(at);
    }
    free(log);
    if (rc == 0)
        unlink(undo);
    else
        fprintf(stderr, "powerloss-revert: failed to rewind %s\n", path);
    return rc;
}

int pgcld_faultvfs_revert_main(int argc, char **argv) {
    if (argc < 1) {
        fprintf(stderr, "usage: pgcld_faults powerloss-revert DB...\n");
        return 2;
    }
    revert_totals tot = {0};
    int rc = 0;
    for (int i = 0; i < argc; i++) {
        static const char *const suffixes[] = {"", "-wal", "-journal"};
        for (int s = 0; s < 3; s++) {
            char path[PATH_MAX];
            snprintf(path, sizeof path, "%s%s", argv[i], suffixes[s]);
            if (revert_file(path, &tot) != 0) rc = 1;
        }
        char shm[PATH_MAX];
        snprintf(shm, sizeof shm, "%s-shm", argv[i]);
        unlink(shm); /* shared memory does not survive a power cut (SQLite rebuilds it from the WAL) */
    }
    printf("{\"files\": %lld, \"records\": %lld, \"bytes_restored\": %lld, \"bytes_cut\": %lld}\n", tot.files,
           tot.records, tot.bytes_restored, tot.bytes_cut);
    return rc;
}
