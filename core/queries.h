/* The reviewer reads of the audit database, one header per concern (this one only gathers them,
 * for the callers that use several):
 *   reader_pool.h      the pool of read-only connections (and the process-wide pools)
 *   time_cursor.h      RFC 3339 times, listing filters and their keyset cursors
 *   decision_record.h  one decision in full, with contests and the outcome in force
 *   decision_lists.h   filtered decision lists and the plan behind them
 *   contest_reads.h    the contest queue
 *   stats_reads.h      the transparency figures
 *   export.h           the NDJSON / CSV export stream
 * Reads return plain structs in a row arena (row_arena.h); the JSON answers are built in server/. */
#ifndef PGCL_QUERIES_H
#define PGCL_QUERIES_H

#include "contest_reads.h"
#include "decision_lists.h"
#include "decision_record.h"
#include "export.h"
#include "reader_pool.h"
#include "stats_reads.h"
#include "time_cursor.h"

#endif
