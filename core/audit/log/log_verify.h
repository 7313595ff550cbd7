/* `pgcld audit verify` for the transparency logs (issue 28 item 6): store-neutral, over the store
 * API (audit_log.h). For each writer's log, in one read snapshot of its rows:
 *
 *   - every record from `from` on decodes (pgcl_record_decode) and its stored leaf hash is
 *     SHA-256(0x00 ‖ record); a missing leaf is named;
 *   - every full tile completed from `from` on has the stored root of its children (level 0: the
 *     leaf hashes; level L: the roots of level L−1's full tiles);
 *   - the tree's root (from the tiles; a full run also from every leaf hash, the naive oracle)
 *     equals the log's stored state root;
 *   - the latest stored checkpoint: its root equals the tree's root at its size, and, when a key is
 *     given, its signature verifies as a C2SP tlog-checkpoint of origin "<prefix>/<writer_id>";
 *   - a legacy_head leaf 0 binds the old chain: its log root equals the old chain's log tree root
 *     over entries 1..head_seq (pgcl_audit_read_consistency), which the chain verifier checks.
 *
 * Incremental. A state file remembers the last verified (writer, size, root) of each log. The next
 * run checks that the tree's first `size` leaves still have that root and that a consistency proof
 * from the tiles (pgcl_tiles_consistency) leads from it to the new root — a shorter tree or another
 * root is "history rewritten" — and then decodes and hashes only the leaves after it: a day's check
 * costs a day's entries. `full` ignores the state and checks every leaf. The state is rewritten
 * (atomically) only when every log verified.
 *
 * State file format (text): a first line "pgcld-log-verify-state 1", then one line per writer:
 * "<writer_id> <size> <root as 64 hex digits>". */
#ifndef PGCL_LOG_VERIFY_H
#define PGCL_LOG_VERIFY_H

#include <stdbool.h>
#include <stdint.h>

#include "audit_log.h"
#include "merkle.h"
#include "note.h"
#include "status.h"

#define PGCL_LOG_VERIFY_MAX_WRITERS 256

/* What a run checks against. Every pointer is borrowed for the call. */
typedef struct pgcl_log_verify_options {
    bool full;                 /* re-verify every leaf, whatever the state remembers */
    const char *state_path;    /* the state file read and rewritten; NULL: none */
    const char *origin_prefix; /* a log's origin is "<origin_prefix>/<writer_id>" (NULL: "pgcld") */
    /* The checkpoints' key: a note verifier key named with the log's origin among keys[0..n_keys),
     * else public_key (32 bytes, Ed25519; NULL: none) named with the origin. Neither: a
     * checkpoint's root is checked, its signature is not (the writer's report says so). */
    const pgcl_note_verifier *keys;
    int n_keys;
    const unsigned char *public_key;
} pgcl_log_verify_options;

/* One writer's log as verified. */
typedef struct pgcl_log_verify_writer {
    char writer_id[PGCL_LOG_WRITER_ID_MAX + 1];
    uint64_t size; /* the tree verified */
    pgcl_merkle_hash root;
    uint64_t verified_from; /* leaves before it were verified by an earlier run (the state) */
    bool has_checkpoint;
    uint64_t checkpoint_size;
    bool checkpoint_signed; /* its signature was verified (a key was given) */
    bool legacy_head;       /* leaf 0 binds an old chain (checked when leaf 0 was verified) */
} pgcl_log_verify_writer;

typedef struct pgcl_log_verify_report {
    bool intact;
    char reason[768];                               /* when !intact: writer, leaf index, what broke */
    char bad_writer_id[PGCL_LOG_WRITER_ID_MAX + 1]; /* when !intact */
    int64_t bad_leaf;                               /* when !intact: the leaf, or -1 (a tile, the state) */
    uint64_t leaves_checked;                        /* records decoded and hashed, every log */
    bool state_saved;                               /* the state file was rewritten */
    int n_writers;
    pgcl_log_verify_writer *writers; /* (n_writers), malloc'd */
} pgcl_log_verify_report;

/* Verifies every log of the open store a (see above) and fills *report (zeroed by the callee;
 * release it with pgcl_log_verify_report_release in any case). PGCL_OK when the verification ran,
 * whatever it found (report->intact); an error (err set) when it could not run: the store cannot
 * be read (its status), an unreadable or malformed state file (PGCL_ERR_IO, PGCL_ERR_FORMAT), the
 * state cannot be written (PGCL_ERR_IO), PGCL_ERR_NOMEM. */
pgcl_status pgcl_log_verify(pgcl_audit *a, const pgcl_log_verify_options *o, pgcl_log_verify_report *report, char *err,
                            int cap);
void pgcl_log_verify_report_release(pgcl_log_verify_report *r); /* accepts NULL */

/* ---- the state file (log_verify_state.c) ---- */

typedef struct pgcl_log_verify_state_entry {
    char writer_id[PGCL_LOG_WRITER_ID_MAX + 1];
    uint64_t size;
    pgcl_merkle_hash root;
} pgcl_log_verify_state_entry;

/* Reads path into out[0..cap) and *n. A missing file is an empty state (*n = 0, PGCL_OK).
 * PGCL_ERR_IO (unreadable), PGCL_ERR_FORMAT (not this format: err names the line). */
pgcl_status pgcl_log_verify_state_load(const char *path, pgcl_log_verify_state_entry *out, int cap, int *n, char *err,
                                       int err_cap);
/* Writes entries[0..n) to path atomically (a temporary file renamed over it, fsync'd). PGCL_ERR_IO. */
pgcl_status pgcl_log_verify_state_save(const char *path, const pgcl_log_verify_state_entry *entries, int n, char *err,
                                       int cap);
/* The default state file of db into out: a SQLite file's "<db>.verify-state"; "" (none: every run
 * is a full one unless --state names a file) for a store with writers (a PostgreSQL URI). */
void pgcl_log_verify_default_state(const char *db, char *out, int cap);

#endif
