/* The state file of the incremental log verifier (log_verify.h): the last verified size and root
 * of each writer's log, kept beside the store. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log_verify.h"
#include "store_registry.h"

#define STATE_HEADER "pgcld-log-verify-state 1"

/* Parses one "<writer_id> <size> <root hex>" line (no newline) into *e. */
static bool parse_line(const char *line, pgcl_log_verify_state_entry *e) {
    char id[PGCL_LOG_WRITER_ID_MAX + 2], hex[80];
    unsigned long long size = 0;
    int used = 0;
    if (sscanf(line, "%129s %llu %79s%n", id, &size, hex, &used) != 3 || line[used] != '\0') return false;
    if (strlen(id) > PGCL_LOG_WRITER_ID_MAX || !pgcl_merkle_from_hex(hex, &e->root)) return false;
    memcpy(e->writer_id, id, strlen(id) + 1);
    e->size = (uint64_t)size;
    return true;
}

pgcl_status pgcl_log_verify_state_load(const char *path, pgcl_log_verify_state_entry *out, int cap, int *n, char *err,
                                       int err_cap) {
    *n = 0;
    FILE *f = fopen(path, "r");
    if (!f) {
        if (errno == ENOENT) return PGCL_OK;
        pgcl_errorf(err, err_cap, "%s: cannot read the verify state: %s", path, strerror(errno));
        return PGCL_ERR_IO;
    }
    char line[512];
    pgcl_status st = PGCL_OK;
    for (int lineno = 1; fgets(line, sizeof line, f); lineno++) {
        size_t len = strlen(line);
        if (len == 0 || line[len - 1] != '\n') {
            st = PGCL_ERR_FORMAT;
        } else {
            line[len - 1] = '\0';
            if (lineno == 1)
                st = strcmp(line, STATE_HEADER) == 0 ? PGCL_OK : PGCL_ERR_FORMAT;
            else if (*n >= cap || !parse_line(line, &out[*n]))
                st = PGCL_ERR_FORMAT;
            else
                (*n)++;
        }
        if (st != PGCL_OK) {
            pgcl_errorf(err, err_cap, "%s: line %d is not a verify state line (%s)", path, lineno,
                        lineno == 1 ? "expected \"" STATE_HEADER "\"" : "<writer_id> <size> <root hex>");
            break;
        }
    }
    if (st == PGCL_OK && ferror(f)) {
        pgcl_errorf(err, err_cap, "%s: cannot read the verify state", path);
        st = PGCL_ERR_IO;
    }
    fclose(f);
    if (st != PGCL_OK) *n = 0;
    return st;
}

pgcl_status pgcl_log_verify_state_save(const char *path, const pgcl_log_verify_state_entry *entries, int n, char *err,
                                       int cap) {
    char tmp[4096];
    if (snprintf(tmp, sizeof tmp, "%s.tmp", path) >= (int)sizeof tmp) {
        pgcl_errorf(err, cap, "%s: path too long", path);
        return PGCL_ERR_IO;
    }
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (!f) {
        pgcl_errorf(err, cap, "%s: cannot write the verify state: %s", tmp, strerror(errno));
        if (fd >= 0) close(fd);
        return PGCL_ERR_IO;
    }
    bool ok = fprintf(f, "%s\n", STATE_HEADER) > 0;
    for (int i = 0; ok && i < n; i++) {
        char hex[2 * PGCL_MERKLE_HASH_BYTES + 1];
        pgcl_merkle_to_hex(&entries[i].root, hex);
        ok = fprintf(f, "%s %" PRIu64 " %s\n", entries[i].writer_id, entries[i].size, hex) > 0;
    }
    ok = ok && fflush(f) == 0 && fsync(fileno(f)) == 0;
    ok = (fclose(f) == 0) && ok;
    if (!ok || rename(tmp, path) != 0) {
        pgcl_errorf(err, cap, "%s: cannot write the verify state: %s", path, strerror(errno));
        unlink(tmp);
        return PGCL_ERR_IO;
    }
    return PGCL_OK;
}

void pgcl_log_verify_default_state(const char *db, char *out, int cap) {
    /* A store with writers (PostgreSQL) has no file of its own to stand beside: --state names one. */
    if (pgcl_store_has_writers(db))
        out[0] = '\0';
    else
        snprintf(out, (size_t)cap, "%s.verify-state", db);
}
