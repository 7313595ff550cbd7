/* Witnesses of pgcld's transparency logs (issue 28), as c2sp.org/tlog-witness and
 * c2sp.org/tlog-cosignature define them: a witness is a third party that, shown a signed checkpoint
 * and a consistency proof from the last checkpoint of the same log it cosigned, checks that the log
 * only grew and answers a timestamped cosignature/v1 line. Once witnesses have cosigned, the log's
 * operator can no longer show two different histories (a split view) without a witness noticing.
 * Store-neutral: the checkpoint is a signed note text, the proof comes from a callback (the store's
 * tiles), the cosignature lines go back through a callback (the caller stores them with
 * pgcl_audit_log_add_cosignatures, core/audit/audit_log.h). The texts are note.h's; this file adds
 * the operator's configuration, the HTTP exchange (libcurl) and a manager thread that never blocks
 * its caller (scoring).
 *
 *   --witness NAME=URL,VERIFIER_KEY
 *     NAME           the operator's label for metrics and logs: 1 to PGCL_WITNESS_NAME_MAX of
 *                    [A-Za-z0-9._-]
 *     URL            the witness's submission prefix: http:// or https://, a host, an optional path,
 *                    no query, fragment, user information or blank; a trailing '/' is dropped; the
 *                    request goes to URL "/add-checkpoint"
 *     VERIFIER_KEY   the witness's note verifier key of algorithm 0x04 (cosignature/v1), as note.h
 *                    parses it: "<key name>+<hex8 key id>+<base64(0x04 ‖ Ed25519 public key)>"
 *
 * add-checkpoint, as the client sees it (c2sp.org/tlog-witness):
 *   200  the body is signature lines; the witness's cosignature line must verify against its key
 *   409  the witness's latest cosigned size S (text/x.tlog.size) is not the old size sent. S < ours:
 *        retried once with a proof from S (S = ours: with no proof, the witness compares the roots).
 *        S > ours, or a second conflict, or a proof from S the witness refuses: a CONFLICT — the
 *        witness holds a tree this checkpoint does not extend (a split view, or a stale checkpoint)
 *   422  the witness refuses the consistency proof
 *   400, 403, 404, other 4xx: the witness refuses the request (does not know this log or its key)
 *   anything else (connection refused, timeout, 5xx): unreachable; retried later by the manager */
#ifndef PGCL_WITNESS_H
#define PGCL_WITNESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "merkle.h"
#include "note.h"
#include "status.h"

#define PGCL_WITNESS_NAME_MAX 64
#define PGCL_WITNESS_URL_MAX 1024
#define PGCL_WITNESS_MAX 32           /* witnesses configured at most */
#define PGCL_WITNESS_ERROR_MAX 256    /* bytes of a last-error text, NUL included */
#define PGCL_WITNESS_ANSWER_MAX 65536 /* bytes of an answer read at most (longer: a bad answer) */

/* One configured witness. Plain data. */
typedef struct pgcl_witness {
    char name[PGCL_WITNESS_NAME_MAX + 1];
    char url[PGCL_WITNESS_URL_MAX + 1]; /* the prefix, without a trailing '/' */
    pgcl_note_verifier key;             /* algorithm PGCL_NOTE_ALG_COSIGNATURE_V1 */
} pgcl_witness;

/* Parses one --witness value (NUL-terminated) into *out, as the header says. PGCL_ERR_FORMAT with
 * err naming the part at fault (the name, the URL, the key) and what is wrong; PGCL_ERR_UNSUPPORTED
 * for a key of another algorithm than cosignature/v1. *out is zeroed on error. */
pgcl_status pgcl_witness_parse(const char *spec, pgcl_witness *out, char *err, int cap);

/* Parses specs[0:n) (0 to PGCL_WITNESS_MAX) into out[0:n): each as pgcl_witness_parse, then no two
 * with one name, one URL or one public key (a witness counted twice would fake a quorum).
 * PGCL_ERR_INVALID for a repeat or too many; err names the spec (its position and name). */
pgcl_status pgcl_witness_parse_all(const char *const *specs, int n, pgcl_witness *out, char *err, int cap);

/* How many distinct witnesses of witnesses[0:n) validly cosigned the signed checkpoint note[0:len)
 * (a witness's cosignature/v1 line verifying over the note's text, which must be a checkpoint);
 * witnesses sharing one public key count once, lines of other keys are ignored. Returns the count
 * (0 when none of them signed), or -1 with err set when the note is not a signed checkpoint or when
 * a configured witness's line does not verify (a tampered cosignature is an error, not a zero). The
 * log's own signature is not checked here (pgcl_tlog_checkpoint_open does that). */
int pgcl_witness_count_cosignatures(const char *note, size_t len, const pgcl_witness *witnesses, int n, char *err,
                                    int cap);

/* ---- one add-checkpoint exchange ---- */

/* The consistency proof from old_size to new_size (0 < old_size < new_size) of the log whose
 * checkpoint is being sent, into proof[] with *n_proof its length. PGCL_OK, or an error with err set
 * (the exchange then fails with PGCL_WITNESS_NO_PROOF). Called on the caller's thread (the manager's:
 * it may read the store, never the writer's connection). */
typedef pgcl_status (*pgcl_witness_proof_fn)(void *ctx, uint64_t old_size, uint64_t new_size,
                                             pgcl_merkle_hash proof[PGCL_MERKLE_MAX_PATH], int *n_proof, char *err,
                                             int cap);

typedef enum pgcl_witness_outcome {
    PGCL_WITNESS_NONE = 0,    /* not tried yet */
    PGCL_WITNESS_COSIGNED,    /* 200 and a cosignature that verifies */
    PGCL_WITNESS_CONFLICT,    /* the witness holds a tree this checkpoint does not extend: refused */
    PGCL_WITNESS_BAD_PROOF,   /* 422 on the first request */
    PGCL_WITNESS_REFUSED,     /* 400, 403, 404 or another 4xx */
    PGCL_WITNESS_UNREACHABLE, /* no answer (refused connection, timeout, DNS) or a 5xx */
    PGCL_WITNESS_BAD_ANSWER,  /* an answer that breaks the protocol: no valid cosignature in a 200,
                               * a 409 without a size */
    PGCL_WITNESS_NO_PROOF,    /* the proof callback failed, or the checkpoint given is not one */
} pgcl_witness_outcome;

/* Stable lowercase name of an outcome ("cosigned", "conflict", ...), for metrics labels and logs. */
const char *pgcl_witness_outcome_str(pgcl_witness_outcome o);

typedef struct pgcl_witness_timeouts {
    int connect_ms; /* <= 0: 2000 */
    int total_ms;   /* one request, connection included; <= 0: 5000 */
} pgcl_witness_timeouts;

typedef struct pgcl_witness_result {
    pgcl_witness_outcome outcome;
    int http_status;                    /* of the last request (0: none answered) */
    int requests;                       /* made: 1, or 2 after a 409 */
    uint64_t witness_size;              /* the witness's size as known after the exchange: the checkpoint's when
                                         * cosigned, the 409's otherwise, else the old size given */
    char line[PGCL_NOTE_SIG_LINE_MAX];  /* COSIGNED: the witness's verified cosignature line ("— ...\n") */
    uint64_t timestamp;                 /* COSIGNED: its time */
    char error[PGCL_WITNESS_ERROR_MAX]; /* otherwise: why, for logs */
} pgcl_witness_result;

/* Calls curl_global_init once per process (thread-safe; the manager calls it itself). false when
 * libcurl could not be initialised. */
bool pgcl_witness_http_init(void);

/* Sends the signed checkpoint note[0:len) (a checkpoint signed by the log, as stored) to witness w
 * as add-checkpoint with old_size, the size of the last checkpoint of this log that w is known to
 * have cosigned (0: none), and a proof from proof_fn, as the header describes; blocks for at most
 * two requests of timeouts each. Fills *out; returns out->outcome. Thread-safe (one curl handle per
 * call); pgcl_witness_http_init first. old_size above the checkpoint's size is sent as 0. */
pgcl_witness_outcome pgcl_witness_add_checkpoint(const pgcl_witness *w, const char *note, size_t len, uint64_t old_size,
                                                 pgcl_witness_proof_fn proof_fn, void *proof_ctx,
                                                 const pgcl_witness_timeouts *timeouts, pgcl_witness_result *out);

/* ---- the manager: a thread that keeps every witness up to date with the latest checkpoint ---- */

/* A cosignature line (NUL-terminated, ending in '\n') of witnesses[index] for the checkpoint of
 * `size` leaves: the caller stores it (pgcl_audit_log_add_cosignatures). Called on the manager's
 * thread, no lock held; it may block briefly (the manager's next request waits for it). */
typedef void (*pgcl_witness_cosigned_fn)(void *ctx, int index, const pgcl_witness *w, uint64_t size, const char *line);

typedef struct pgcl_witness_manager_config {
    const pgcl_witness *witnesses; /* [n], copied */
    int n;                         /* 1 to PGCL_WITNESS_MAX */
    const uint64_t *known_sizes;   /* [n] or NULL: the size each witness last cosigned, if known (0) */
    pgcl_witness_proof_fn proof_fn;
    void *proof_ctx;
    pgcl_witness_cosigned_fn on_cosigned; /* may be NULL */
    void *cosigned_ctx;
    pgcl_witness_timeouts timeouts;
    int backoff_min_ms; /* the wait after a first failure (<= 0: 1000); doubled per failure */
    int backoff_max_ms; /* up to this (<= 0: 60000) */
} pgcl_witness_manager_config;

/* One witness's state, for metrics and the operator. */
typedef struct pgcl_witness_state {
    char name[PGCL_WITNESS_NAME_MAX + 1];
    uint64_t cosigned_size;     /* the latest size it cosigned (or known_sizes' value) */
    uint64_t witness_size;      /* the latest size it said it holds (a 409's, or cosigned_size) */
    uint64_t pending_size;      /* the checkpoint waiting for it (0: up to date) */
    int64_t last_cosigned_unix; /* the cosignature's time (0: none this run) */
    uint64_t cosignatures;      /* received this run */
    uint64_t failures;          /* exchanges that failed this run */
    uint64_t conflicts;         /* of which CONFLICT: a possible split view */
    int consecutive_failures;   /* since the last cosignature */
    pgcl_witness_outcome last_outcome;
    int last_http_status;
    char last_error[PGCL_WITNESS_ERROR_MAX];
} pgcl_witness_state;

typedef struct pgcl_witness_manager pgcl_witness_manager;

/* Starts the manager's thread. NULL with *st and err set: PGCL_ERR_INVALID (no witness, too many,
 * no proof_fn), PGCL_ERR_NOMEM, PGCL_ERR_IO (libcurl or the thread could not start). */
pgcl_witness_manager *pgcl_witness_manager_create(const pgcl_witness_manager_config *cfg, pgcl_status *st, char *err,
                                                  int cap);

/* Hands the manager a new signed checkpoint note[0:len) of `size` leaves (copied). Never blocks on
 * the network: it replaces any checkpoint still waiting (the latest wins; an older or equal size
 * than the one waiting is ignored) and wakes the thread, which sends it to every witness that has
 * not cosigned that size yet, a failing witness after its backoff. PGCL_ERR_NOMEM, PGCL_ERR_INVALID
 * (len 0 or over PGCL_NOTE_MAX_BYTES), PGCL_ERR_CLOSED after destroy began. */
pgcl_status pgcl_witness_manager_submit(pgcl_witness_manager *m, const char *note, size_t len, uint64_t size);

/* Copies the witnesses' states into out[0:cap); returns how many witnesses there are. */
int pgcl_witness_manager_states(pgcl_witness_manager *m, pgcl_witness_state *out, int cap);

/* Waits up to timeout_ms for every witness to have had an attempt at the latest checkpoint
 * submitted since it was submitted (cosigned or failed). true when they all have. For tests and
 * for a shutdown that wants one last try. */
bool pgcl_witness_manager_wait(pgcl_witness_manager *m, int timeout_ms);

/* Stops the thread (an exchange in flight ends within its timeouts) and frees m; NULL is allowed. */
void pgcl_witness_manager_destroy(pgcl_witness_manager *m);

#endif
