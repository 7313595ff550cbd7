/* Audit chain verification and signed checkpoints over HTTP. (Being written.) */
#include "server.h"

void pgcld_handle_audit_verify(pgcld_server *srv, const pgcld_request *req, pgcld_reply *reply) {
    pgcld_reply_error(reply, 501, "not_implemented", -1, NULL, "not implemented yet");
}

void pgcld_handle_audit_checkpoint(pgcld_server *srv, const pgcld_request *req, pgcld_reply *reply) {
    pgcld_reply_error(reply, 501, "not_implemented", -1, NULL, "not implemented yet");
}
