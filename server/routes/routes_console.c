/* The web console: static files embedded at build time (console_files.c, generated from console/
 * by embed_console.py), served under /console/ to anyone. The pages hold no secret and no data:
 * the browser calls the public API with the API key the user signs in with, and each API route
 * checks that key as it does for any client.
 *
 * Every console answer carries a strict Content-Security-Policy (scripts, styles and connections
 * from this origin only; no inline script or style, no framing, no forms posting elsewhere), nosniff
 * and no-referrer, and Cache-Control: no-cache (a browser revalidates, so an upgraded daemon's
 * pages are used at once). */
#include <string.h>

#include "console_files.h"
#include "server.h"

#define CSP                                                                                                   \
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " \
    "form-action 'none'; frame-ancestors 'none'; base-uri 'none'"

static const char *const FILE_HEADERS[] = {
    "Content-Security-Policy", CSP,
    "X-Content-Type-Options", "nosniff",
    "Referrer-Policy", "no-referrer",
    "X-Frame-Options", "DENY",
    "Cache-Control", "no-cache",
    NULL,
};

/* The embedded file called `name`, or NULL. */
static const pgcld_console_file *find_file(const char *name) {
    for (int i = 0; i < pgcld_console_file_count; i++)
        if (strcmp(pgcld_console_files[i].name, name) == 0) return &pgcld_console_files[i];
    return NULL;
}

/* Sets reply to the file (200) with the console headers, or to 404 not_found. */
static void serve(const char *name, pgcld_reply *reply) {
    const pgcld_console_file *f = find_file(name);
    if (!f) {
        pgcld_reply_error(reply, 404, "not_found", -1, NULL, "no console file '%.128s'", name);
        return;
    }
    reply->status = 200;
    reply->content_type = f->content_type;
    reply->data = f->data;
    reply->data_len = f->len;
    reply->headers = FILE_HEADERS;
}

/* GET /console and GET /console/: the console's page (its URLs are absolute, so both work). */
void pgcld_handle_console_index(pgcld_server *srv, const pgcld_request *req, pgcld_reply *reply) {
    (void)srv;
    (void)req;
    serve("index.html", reply);
}

/* GET /console/{file}: one embedded file by its base name; 404 not_found for any other name. */
void pgcld_handle_console_file(pgcld_server *srv, const pgcld_request *req, pgcld_reply *reply) {
    (void)srv;
    serve(req->params[0], reply);
}
