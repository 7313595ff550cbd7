/* Reviewer reads: decisions, lists with cursor paging, statements of reasons, exports, figures,
 * the contest queue. (Being written.) */
#include "server.h"

#define NOT_YET(fn)                                                                                        \
    void fn(pgcld_server *srv, const pgcld_request *req, pgcld_reply *reply) {                            \
        pgcld_reply_error(reply, 501, "not_implemented", -1, NULL, "not implemented yet");               \
    }
NOT_YET(pgcld_handle_decision_get)
NOT_YET(pgcld_handle_decisions_list)
NOT_YET(pgcld_handle_decision_statement)
NOT_YET(pgcld_handle_audit_export)
NOT_YET(pgcld_handle_audit_stats)
NOT_YET(pgcld_handle_contests_list)
