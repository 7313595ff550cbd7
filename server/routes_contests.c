/* Contests, resolutions and re-scoring. (Being written.) */
#include "server.h"

void pgcld_handle_contest_file(pgcld_server *srv, const pgcld_request *req, pgcld_reply *reply) {
    pgcld_reply_error(reply, 501, "not_implemented", -1, NULL, "not implemented yet");
}

void pgcld_handle_resolution(pgcld_server *srv, const pgcld_request *req, pgcld_reply *reply) {
    pgcld_reply_error(reply, 501, "not_implemented", -1, NULL, "not implemented yet");
}

void pgcld_handle_rescore(pgcld_server *srv, const pgcld_request *req, pgcld_reply *reply) {
    pgcld_reply_error(reply, 501, "not_implemented", -1, NULL, "not implemented yet");
}
