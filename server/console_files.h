/* The web console's static files, compiled into the binary from console/ (see
 * server/embed_console.py) and served by routes_console.c. */
#ifndef PGCLD_CONSOLE_FILES_H
#define PGCLD_CONSOLE_FILES_H

#include <stddef.h>

typedef struct pgcld_console_file {
    const char *name;         /* base name, e.g. "app.js" */
    const char *content_type; /* e.g. "text/javascript; charset=utf-8" */
    const unsigned char *data;
    size_t len;
} pgcld_console_file;

extern const pgcld_console_file pgcld_console_files[];
extern const int pgcld_console_file_count;

#endif
