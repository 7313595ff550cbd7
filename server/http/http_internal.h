/* libmicrohttpd glue, inside (http.c describes it): what http.c (a request's life) and http_listen.c
 * (connection admission, start and stop) share. Nothing here is for other files. */
#ifndef PGCLD_HTTP_INTERNAL_H
#define PGCLD_HTTP_INTERNAL_H

#include <microhttpd.h>
#include <stdbool.h>

#include "reaper.h"
#include "server.h"

/* MHD_OPTION_URI_LOG_CALLBACK: a request's context, made right after its request line. */
void *pgcld_http_on_request_line(void *cls, const char *uri, struct MHD_Connection *conn);
/* libmicrohttpd's access handler (cls: the server). */
enum MHD_Result pgcld_http_on_request(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
                                      const char *version, const char *upload_data, size_t *upload_data_size,
                                      void **con_cls);
/* MHD_OPTION_NOTIFY_COMPLETED: a request's end (metrics, access log, its context freed). */
void pgcld_http_on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                             enum MHD_RequestTerminationCode toe);
/* Closes the handlers' gate if no access handler call runs, no connection is suspended and no
 * deferred answer is open; true when closed (pgcld_server_stop, before MHD_stop_daemon). */
bool pgcld_http_close_handlers_when_idle(pgcld_server *srv);
/* The connection's request-deadline entry (set by on_connection, http_listen.c), or NULL. */
pgcld_reaper_conn *pgcld_http_connection_watch(struct MHD_Connection *conn);

#endif
