/* The PostgreSQL store's logs for the routes, checkpoints and proofs (audit_log.h). */
#include "audit_pg.h"
