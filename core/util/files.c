/* Small files read whole; see files.h. */
#include "files.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

long pgcl_read_small_file(const char *path, const char *what, bool owner_only, char *buf, size_t max, pgcl_status *st,
                          char *err, int cap) {
    *st = PGCL_ERR_IO;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) {
        pgcl_errorf(err, cap, "%s: cannot open: %s", path, strerror(errno));
        return -1;
    }
    struct stat sb;
    long n = -1;
    if (fstat(fd, &sb) != 0) {
        pgcl_errorf(err, cap, "%s: %s", path, strerror(errno));
        goto done;
    }
    if (!S_ISREG(sb.st_mode)) {
        pgcl_errorf(err, cap, "%s: not a regular file", path);
        goto done;
    }
    if (owner_only && (sb.st_mode & 077)) {
        pgcl_errorf(err, cap, "%s: a %s must be readable by its owner only (mode %04o); chmod 600 %s", path, what,
                    (unsigned)(sb.st_mode & 07777), path);
        *st = PGCL_ERR_INVALID;
        goto done;
    }
    if ((size_t)sb.st_size > max) {
        pgcl_errorf(err, cap, "%s: more than %zu bytes (%lld), too long for a %s", path, max, (long long)sb.st_size,
                    what);
        *st = PGCL_ERR_FORMAT;
        goto done;
    }
    size_t used = 0;
    while (used < max) {
        ssize_t r = read(fd, buf + used, max - used);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            pgcl_errorf(err, cap, "%s: cannot read: %s", path, strerror(errno));
            goto done;
        }
        if (r == 0) break;
        used += (size_t)r;
    }
    buf[used] = 0;
    n = (long)used;
    *st = PGCL_OK;
done:
    close(fd);
    return n;
}

void pgcl_path_directory(const char *path, char *out, size_t cap) {
    if (cap == 0) return;
    const char *slash = strrchr(path, '/');
    if (!slash) snprintf(out, cap, ".");
    else if (slash == path) snprintf(out, cap, "/");
    else snprintf(out, cap, "%.*s", (int)(slash - path), path);
}
