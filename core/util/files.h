/* Small files read whole: signing keys, signed checkpoints, API key files. */
#ifndef PGCL_FILES_H
#define PGCL_FILES_H

#include <stdbool.h>
#include <stddef.h>

#include "status.h"

/* Reads the whole regular file at path into buf (max + 1 bytes; the text is NUL-terminated after
 * its last byte) and returns its length. `what` names the kind of file in messages ("signing key",
 * "key file"). With owner_only, a file that its group or others may read or write is refused.
 * Returns -1 with *st and err set (err names path and the rule, never the content):
 *   PGCL_ERR_IO      cannot open or read it, or not a regular file (a directory, a FIFO, ...)
 *   PGCL_ERR_INVALID owner_only and the mode lets others in
 *   PGCL_ERR_FORMAT  larger than max bytes */
long pgcl_read_small_file(const char *path, const char *what, bool owner_only, char *buf, size_t max, pgcl_status *st,
                          char *err, int cap);

/* The directory part of path into out (cap bytes): "." when path has no '/', "/" for a file at the
 * root, else everything before the last '/'. Cut to cap - 1 bytes. */
void pgcl_path_directory(const char *path, char *out, size_t cap);

#endif
