/* pgcld audit verify|checkpoint|keygen|note-key|verify-proof|verify-consistency: checks the tamper-evident
 * chain of an audit database (optionally against signed checkpoints), exports signed checkpoints of
 * its head, makes Ed25519 signing keys, and checks a decision's inclusion proof and a consistency
 * proof between two checkpoints offline. Works on the file a running daemon uses (verification reads one snapshot).
 * See cli_audit.h and docs/audit.md. */
#include "cli_audit.h"

#include <jansson.h>
#include <math.h>
#include <sodium.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "archive.h"
#include "chain.h"
#include "chain_proof.h"
#include "cli_proof_tlog.h"
#include "cli_audit_log.h"
#include "cli_options.h"
#include "config.h"
#include "fleet_checkpoint.h"
#include "note.h"
#include "review_json.h"
#include "signing.h"
#include "store_registry.h"
#include "time_cursor.h"
#include "witness.h"
#include "witness_quorum.h"

#define MAX_CHECKPOINTS 1024
#define MAX_LOG_KEYS 64
#define MAX_LOGS 1024 /* logs reported by --witness-quorum (a fleet's writers) */

typedef struct cli_opts {
    const char *db, *signing_key, *out, *public_key, *entry_hash, *before, *older_than_days, *checkpoint_dir;
    const char *max_decisions, *contest_window_days, *origin, *key, *decision, *full, *state, *log_origin;
    const char *checkpoints[MAX_CHECKPOINTS];
    int n_checkpoints;
    const char *witness_quorum;
    const char *witnesses[PGCL_WITNESS_MAX + 1]; /* one more than allowed: parse_all names "too many" */
    int n_witnesses;
    const char *log_keys[MAX_LOG_KEYS];
    int n_log_keys;
} cli_opts;

enum {
    OPT_DB = 1,
    OPT_SIGNING_KEY = 2,
    OPT_OUT = 4,
    OPT_PUBLIC_KEY = 8,
    OPT_CHECKPOINT = 16,
    OPT_ENTRY_HASH = 32,
    OPT_BEFORE = 64,
    OPT_OLDER_THAN_DAYS = 128,
    OPT_CHECKPOINT_DIR = 256,
    OPT_MAX_DECISIONS = 512,
    OPT_CONTEST_WINDOW_DAYS = 1024,
    OPT_ORIGIN = 2048,
    OPT_WITNESS_QUORUM = 4096,
    OPT_WITNESS = 8192,
    OPT_LOG_KEY = 16384,
    OPT_KEY = 32768,
    OPT_DECISION = 65536,
    OPT_FULL = 131072,
    OPT_STATE = 262144,
    OPT_LOG_ORIGIN = 524288
};

// clang-format off
static const pgcld_cli_option OPTIONS[] = {
    {.name = "db", .bit = OPT_DB, .offset = offsetof(cli_opts, db), .meta = "FILE|URI",
     .help = "the audit database (the --db of pgcld serve): a SQLite file or a PostgreSQL URI postgresql://..."},
    {.name = "signing-key", .bit = OPT_SIGNING_KEY, .offset = offsetof(cli_opts, signing_key), .meta = "FILE",
     .help = "the Ed25519 secret key file that signs checkpoints (made by pgcld audit keygen)"},
    {.name = "out", .bit = OPT_OUT, .offset = offsetof(cli_opts, out), .meta = "FILE",
     .help = "the file written: the checkpoint (checkpoint), the secret key (keygen), the new archive database "
             "(archive)"},
    {.name = "public-key", .bit = OPT_PUBLIC_KEY, .offset = offsetof(cli_opts, public_key), .meta = "HEX",
     .help = "64 hex digits: every checkpoint must be signed by this Ed25519 key"},
    {.name = "entry-hash", .bit = OPT_ENTRY_HASH, .offset = offsetof(cli_opts, entry_hash), .meta = "HEX",
     .help = "the chain entry's hash the proof must lead to"},
    {.name = "before", .bit = OPT_BEFORE, .offset = offsetof(cli_opts, before), .meta = "RFC3339",
     .help = "the horizon: events before this time are archived"},
    {.name = "older-than-days", .bit = OPT_OLDER_THAN_DAYS, .offset = offsetof(cli_opts, older_than_days),
     .meta = "N", .help = "the horizon as an age: events older than N days (decimals allowed) are archived"},
    {.name = "checkpoint-dir", .bit = OPT_CHECKPOINT_DIR, .offset = offsetof(cli_opts, checkpoint_dir), .meta = "DIR",
     .def = "the database's directory", .help = "where the checkpoint at the cut is written"},
    {.name = "max-decisions", .bit = OPT_MAX_DECISIONS, .offset = offsetof(cli_opts, max_decisions), .meta = "N",
     .def = "50000", .help = "most decisions archived in one run (0: all)"},
    {.name = "contest-window-days", .bit = OPT_CONTEST_WINDOW_DAYS,
     .offset = offsetof(cli_opts, contest_window_days), .meta = "N", .def = "180",
     .help = "PostgreSQL --db only: days after a decision during which it may be contested (not archived before)"},
    {.name = "origin", .bit = OPT_ORIGIN, .offset = offsetof(cli_opts, origin), .meta = "NAME",
     .help = "the log's origin, which names its note key (C2SP tlog-checkpoint): no spaces, no '+'"},
    {.name = "witness-quorum", .bit = OPT_WITNESS_QUORUM, .offset = offsetof(cli_opts, witness_quorum), .meta = "N",
     .help = "each log's latest checkpoint must carry valid cosignatures of at least N distinct --witness"},
    {.name = "witness", .bit = OPT_WITNESS, .offset = offsetof(cli_opts, witnesses), .list_cap = PGCL_WITNESS_MAX + 1,
     .count_offset = offsetof(cli_opts, n_witnesses), .list_noun = "witnesses", .meta = "NAME=URL,KEY",
     .help = "a witness whose cosignatures count, as pgcld serve --witness gives it"},
    {.name = "log-key", .bit = OPT_LOG_KEY, .offset = offsetof(cli_opts, log_keys), .list_cap = MAX_LOG_KEYS,
     .count_offset = offsetof(cli_opts, n_log_keys), .list_noun = "log keys", .meta = "VKEY",
     .help = "a log's note verifier key (GET /log/ lists them; pgcld audit note-key prints one): the checkpoint of "
             "the log whose origin is its name must be signed by it"},
    {.name = "key", .bit = OPT_KEY, .offset = offsetof(cli_opts, key), .meta = "VKEY",
     .help = "the log's note verifier key (NAME+KEYHASH+BASE64, as GET /log/ lists it): a tlog proof's checkpoint "
             "must be signed by it"},
    {.name = "decision", .bit = OPT_DECISION, .offset = offsetof(cli_opts, decision), .meta = "ID",
     .help = "the event the proof was handed to you for: its record's id field (read by position) must be ID"},
    {.name = "full", .bit = OPT_FULL, .offset = offsetof(cli_opts, full), .meta = "", .flag = true,
     .help = "verify every leaf of every log, not only those after the last verified state"},
    {.name = "state", .bit = OPT_STATE, .offset = offsetof(cli_opts, state), .meta = "FILE",
     .def = "FILE.verify-state beside a SQLite file; none for a PostgreSQL URI (every run is full)",
     .help = "the incremental verifier's state: the last verified size and root of each log"},
    {.name = "log-origin", .bit = OPT_LOG_ORIGIN, .offset = offsetof(cli_opts, log_origin), .meta = "PREFIX",
     .def = "pgcld", .help = "the --log-origin of pgcld serve: a log's origin is PREFIX/WRITER_ID"},
    {.name = "checkpoint", .bit = OPT_CHECKPOINT, .offset = offsetof(cli_opts, checkpoints),
     .list_cap = MAX_CHECKPOINTS, .count_offset = offsetof(cli_opts, n_checkpoints), .list_noun = "checkpoints",
     .meta = "FILE", .help = "a signed checkpoint file to check against"}};

static const pgcld_cli_command COMMANDS[] = {
    {.name = "verify",
     .allowed = OPT_DB | OPT_CHECKPOINT | OPT_PUBLIC_KEY | OPT_FULL | OPT_STATE | OPT_LOG_KEY | OPT_LOG_ORIGIN |
                OPT_SIGNING_KEY | OPT_WITNESS_QUORUM | OPT_WITNESS,
     .synopsis = "--db FILE|URI [--checkpoint FILE]... [--public-key HEX] [--full] [--state FILE] [--log-key VKEY]... "
                 "[--log-origin PREFIX] [--signing-key FILE] [--witness-quorum N --witness NAME=URL,KEY...]",
     .summary = "verify the tamper-evident hash chain of an audit database",
     .description =
        "Walks the hash chain over every decision, admin event, contest and resolution: entries numbered\n"
        "without gaps, each linked to the previous one, each row hashing to what its entry recorded, every\n"
        "row chained. With --checkpoint (repeatable), each signed checkpoint must verify and its head must\n"
        "still be in the chain with the same hash (this is what detects a truncated or rewritten history);\n"
        "with --public-key, every checkpoint must be signed by that key. A PostgreSQL URI: every writer's\n"
        "chain is verified. Prints one JSON line: intact, events, first_bad_seq, reason, head_seq,\n"
        "head_hash, checkpoints, archive_cut_seq, archived_rows.\n"
        "\n"
        "Then every writer's transparency log (issue 28): each record decodes and hashes to its leaf, each\n"
        "full tile has its children's root, the tree's root is the log's state, the latest checkpoint signs\n"
        "the tree's root at its size (its signature is checked with a --log-key named by the log's origin,\n"
        "or --public-key / --signing-key's public half), and a legacy first leaf binds the old chain's head.\n"
        "Incremental: --state (kept beside the store) remembers each log's verified size and root; the next\n"
        "run proves the tree consistent with it (else: history rewritten) and checks only the leaves after\n"
        "it; --full checks every leaf. The state is rewritten only when every log verified. The line adds\n"
        "log_intact, log_reason, log_bad_writer, log_bad_leaf, log_mode, log_leaves_checked, log_state and\n"
        "logs (writer_id, size, root, verified_from, checkpoint_size, checkpoint_signed, legacy_head).\n"
        "\n"
        "With --witness-quorum N, each log's latest checkpoint\n"
        "must be signed by the --log-key named its origin and cosigned by at least N distinct --witness\n"
        "(C2SP tlog-cosignature); the line then also has witness_quorum and witness_logs (writer_id, size,\n"
        "cosigners, ok), and a log short of the quorum makes the exit status 1, naming the log and\n"
        "its count.\n"},
    {.name = "checkpoint", .allowed = OPT_DB | OPT_SIGNING_KEY | OPT_OUT,
     .synopsis = "--db FILE|URI --signing-key FILE --out FILE",
     .summary = "sign the chain's current head and write the checkpoint file",
     .description =
        "Signs the chain's current head with the Ed25519 key in --signing-key and writes the checkpoint\n"
        "file --out atomically; prints it as one JSON line. A PostgreSQL URI gets a fleet checkpoint over\n"
        "every writer's head (docs/audit.md, \"A fleet on PostgreSQL\"). Keep the files away from the\n"
        "database (another machine, write-once storage).\n"},
    {.name = "keygen", .allowed = OPT_OUT | OPT_ORIGIN,
     .synopsis = "--out FILE [--origin NAME]",
     .summary = "make a new Ed25519 signing key",
     .description =
        "Writes a new secret signing key to --out (mode 0600, never overwritten) and prints its public key\n"
        "(64 hex digits) for verify --public-key. With --origin (a log's origin, PREFIX/WRITER_ID: see\n"
        "--log-origin of pgcld serve) a second line follows: the key's note verifier key named NAME, the\n"
        "key GET /log/ lists for that log (as note-key prints it).\n"},
    {.name = "note-key", .allowed = OPT_SIGNING_KEY | OPT_ORIGIN,
     .synopsis = "--signing-key FILE --origin NAME",
     .summary = "print a signing key's note verifier key (C2SP signed-note)",
     .description =
        "Prints the verifier key of --signing-key as a C2SP signed-note key named --origin:\n"
        "NAME+KEYHASH+BASE64, the form Go's golang.org/x/mod/sumdb/note and witnesses read. The key is\n"
        "the one checkpoints are signed with today (no new key is made), so the log's signed-note\n"
        "checkpoints (issue 28) will verify with it.\n"},
    {.name = "archive",
     .allowed = OPT_DB | OPT_SIGNING_KEY | OPT_OUT | OPT_BEFORE | OPT_OLDER_THAN_DAYS | OPT_CHECKPOINT_DIR |
                OPT_MAX_DECISIONS | OPT_CONTEST_WINDOW_DAYS,
     .synopsis = "--db FILE|URI (--before RFC3339 | --older-than-days N) --out ARCHIVE --signing-key FILE "
                 "[--checkpoint-dir DIR] [--max-decisions N] [--contest-window-days N]",
     .summary = "move the events older than a horizon to a new archive database",
     .description =
        "Moves the events older than the horizon (--before, or --older-than-days) to the new database\n"
        "--out, after signing a checkpoint at the cut into --checkpoint-dir; verify checks both files.\n"
        "Safe beside the daemon; at most --max-decisions per run. Prints one JSON line (entry_seq,\n"
        "rows_archived, archive, checkpoint, prune_ms...). Exit status 3: nothing to archive. See\n"
        "docs/audit.md.\n"},
    {.name = "verify-proof", .allowed = OPT_ENTRY_HASH | OPT_CHECKPOINT | OPT_PUBLIC_KEY | OPT_KEY | OPT_DECISION,
     .synopsis = "PROOF [--decision ID] [--key VKEY] [--entry-hash HEX] [--checkpoint FILE]... [--public-key HEX]",
     .summary = "check a decision's inclusion proof offline",
     .description =
        "Checks the inclusion proof PROOF (the answer of GET /v1/decisions/{id}/proof, a JSON file) without\n"
        "the database: the leaf is the decision as recorded, its path leads to the commit's root, and the\n"
        "root gives the chain entry's hash; with --entry-hash, that hash must be the one given; the entry\n"
        "must be in the log tree (over all entries) whose root the proof's signed checkpoint signs, and\n"
        "each --checkpoint file the holder has must sign that same tree (with --public-key, every\n"
        "checkpoint must be signed by that key). Prints one JSON line: valid, decision_id, entry_seq,\n"
        "entry_hash, log_size, checkpoint (whether one signed it).\n"
        "A proof in the transparency log's shape (\"format\": \"tlog\"; docs/audit.md, \"Proofs\") is checked\n"
        "against --key, the log's note verifier key: leaf_data hashes to the leaf, the inclusion hashes lead\n"
        "to root at leaf_index, the checkpoint (a signed note of that log) signs tree_size and root, and the\n"
        "record decodes by position; with --decision, its id field must be ID (a decision's decision_id, a\n"
        "contest's or resolution's contest_id). Prints one JSON line: valid, format, kind, id, writer_id,\n"
        "leaf_index, tree_size, origin.\n"},
    {.name = "verify-consistency", .allowed = OPT_CHECKPOINT | OPT_PUBLIC_KEY,
     .synopsis = "PROOF [--checkpoint OLD --checkpoint NEW] [--public-key HEX]",
     .summary = "check a consistency proof between two checkpoints offline",
     .description =
        "Checks the consistency proof PROOF (the answer of GET /v1/audit/consistency?first=N&second=M)\n"
        "without the database: the RFC 9162 path shows that the log tree of N entries with first_root is a\n"
        "prefix of the tree of M entries with second_root; with two --checkpoint files (older, newer), each\n"
        "must verify (with --public-key, be signed by that key) and sign those sizes and roots: the newer\n"
        "checkpoint extends the older. Prints one JSON line: valid, first, second, checkpoints.\n"},
};
// clang-format on

/* Every value must be non-empty ("--db=" needs a value), checked before a repeat is refused. */
const pgcld_cli_spec pgcld_cli_audit_spec = {
    .command = "pgcld audit",
    .summary = "tamper evidence for the audit database: verify its chain, sign checkpoints, archive, check proofs",
    .description = "FILE is the audit database of pgcld serve. verify, checkpoint and archive also take a PostgreSQL\n"
                   "URI (postgresql://...): every writer's chain is verified, and checkpoints are fleet checkpoints\n"
                   "over every writer's head (docs/audit.md, \"A fleet on PostgreSQL\").\n",
    .exit_status = "0 done (verify: intact; verify-proof, verify-consistency: valid), 1 not intact, not valid or "
                   "failed (reason on stderr), 2 bad usage, 3 (archive) nothing to archive",
    .commands = COMMANDS,
    .n_commands = sizeof COMMANDS / sizeof COMMANDS[0],
    .options = OPTIONS,
    .n_options = sizeof OPTIONS / sizeof OPTIONS[0],
    .empty_value_ok = false,
    .duplicate_before_value = false};
static const pgcld_cli_spec *const CLI = &pgcld_cli_audit_spec;

/* Prints obj as one compact JSON line; returns 0, or 1 when stdout fails. */
static int print_line(json_t *obj, const char *cmd) {
    char *line = obj ? json_dumps(obj, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    int rc = 0;
    if (!line) {
        fprintf(stderr, "pgcld audit %s: out of memory\n", cmd);
        return 1;
    }
    printf("%s\n", line);
    free(line);
    if (fflush(stdout) != 0 || ferror(stdout)) {
        fprintf(stderr, "pgcld audit %s: cannot write to stdout\n", cmd);
        rc = 1;
    }
    return rc;
}

/* --witness-quorum: every log's latest checkpoint signed by its --log-key and cosigned by N of the
 * --witness (witness_quorum.h); adds "witness_quorum" and "logs" to out. 0 when every log meets
 * the quorum, 1 (with a message on stderr) otherwise, 2 for a usage error. */
static int check_witness_quorum(const cli_opts *o, json_t *out) {
    char err[1024];
    char *end = NULL;
    long quorum = strtol(o->witness_quorum, &end, 10);
    if (!*o->witness_quorum || *end || quorum < 1 || quorum > PGCL_WITNESS_MAX)
        return pgcld_cli_usage_error(CLI, "--witness-quorum must be an integer from 1 to %d", PGCL_WITNESS_MAX);
    if (o->n_log_keys == 0) return pgcld_cli_usage_error(CLI, "--witness-quorum needs the logs' keys: --log-key VKEY");
    pgcl_witness witnesses[PGCL_WITNESS_MAX];
    if (o->n_witnesses > 0 && pgcl_witness_parse_all(o->witnesses, o->n_witnesses, witnesses, err, sizeof err) != PGCL_OK)
        return pgcld_cli_usage_error(CLI, "--witness: %s", err);
    pgcl_note_verifier keys[MAX_LOG_KEYS];
    for (int i = 0; i < o->n_log_keys; i++)
        if (pgcl_note_verifier_parse(o->log_keys[i], &keys[i], err, sizeof err) != PGCL_OK ||
            keys[i].alg != PGCL_NOTE_ALG_ED25519)
            return pgcld_cli_usage_error(CLI, "--log-key '%s' is not an Ed25519 note verifier key%s%s", o->log_keys[i],
                                         *err ? ": " : "", err);
    pgcl_audit *a = NULL;
    pgcl_audit_options opts = {.path = o->db, .read_only = true, .busy_timeout_ms = 5000, .max_pending_rows = 16};
    if (pgcl_audit_open(&opts, &a, err, sizeof err) != PGCL_OK) {
        fprintf(stderr, "pgcld audit verify: %s\n", err);
        return 1;
    }
    static pgcl_log_quorum logs[MAX_LOGS];
    int n_logs = 0;
    bool all_ok = false;
    pgcl_status st = pgcl_log_witness_quorum(a, keys, o->n_log_keys, witnesses, o->n_witnesses, (int)quorum, logs,
                                             MAX_LOGS, &n_logs, &all_ok, err, sizeof err);
    pgcl_audit_close(a);
    if (st != PGCL_OK) {
        fprintf(stderr, "pgcld audit verify: the logs' checkpoints: %s\n", err);
        return 1;
    }
    json_t *arr = json_array();
    for (int i = 0; i < n_logs && i < MAX_LOGS; i++) {
        json_array_append_new(arr, json_pack("{s:s, s:I, s:o, s:b}", "writer_id", logs[i].writer_id, "size",
                                             (json_int_t)logs[i].size, "cosigners",
                                             logs[i].cosigners < 0 ? json_null() : json_integer(logs[i].cosigners),
                                             "ok", logs[i].ok));
        if (!logs[i].ok) fprintf(stderr, "pgcld audit verify: WITNESS QUORUM NOT MET: %s\n", logs[i].reason);
    }
    if (n_logs == 0) fprintf(stderr, "pgcld audit verify: WITNESS QUORUM NOT MET: the store has no log\n");
    json_object_set_new(out, "witness_quorum", json_pack("{s:i, s:b}", "required", (int)quorum, "met", all_ok));
    json_object_set_new(out, "witness_logs", arr);
    return all_ok ? 0 : 1;
}

/* The logs' part of verify (cli_audit_log.c): its exit status; *intact whether every log verified. */
static int verify_logs(const cli_opts *o, json_t *out, bool *intact) {
    pgcld_log_verify_args args = {.db = o->db,
                                  .full = o->full != NULL,
                                  .state = o->state,
                                  .log_origin = o->log_origin,
                                  .public_key_hex = o->public_key,
                                  .signing_key = o->signing_key,
                                  .log_keys = o->log_keys,
                                  .n_log_keys = o->n_log_keys};
    return pgcld_audit_verify_logs(&args, out, intact);
}

static int cmd_verify(const cli_opts *o) {
    pgcl_chain_report rep;
    char err[1024];
    bool per_writer = false; /* a store with writers, or a fleet archive: one chain per writer */
    pgcl_status st = pgcl_store_verify(o->db, o->checkpoints, o->n_checkpoints, o->public_key, &rep, &per_writer, err,
                                       sizeof err);
    if (st != PGCL_OK) {
        fprintf(stderr, "pgcld audit verify: %s\n", err);
        return 1;
    }
    json_t *out = json_pack("{s:b, s:I, s:o, s:o, s:I, s:o, s:i, s:o, s:I}", "intact", rep.intact, "events",
                            (json_int_t)rep.events, "first_bad_seq",
                            rep.intact ? json_null() : json_integer(rep.first_bad_seq), "reason",
                            rep.intact ? json_null() : json_string(rep.reason), "head_seq", (json_int_t)rep.head_seq,
                            "head_hash", rep.head_hash[0] ? json_string(rep.head_hash) : json_null(), "checkpoints",
                            o->n_checkpoints, "archive_cut_seq",
                            rep.archive_cut_seq ? json_integer(rep.archive_cut_seq) : json_null(), "archived_rows",
                            (json_int_t)rep.archived_rows);
    if (out && per_writer) {
        json_object_set_new(out, "writers", pgcld_chain_writers_json(&rep));
        json_object_set_new(out, "first_bad_writer", rep.intact ? json_null() : json_string(rep.bad_writer_id));
    }
    bool logs_intact = false;
    int rc = out ? verify_logs(o, out, &logs_intact) : 1;
    if (rc != 0) {
        json_decref(out);
        pgcl_chain_report_release(&rep);
        return rc;
    }
    int quorum_rc = 0;
    if (o->witness_quorum) quorum_rc = check_witness_quorum(o, out);
    else if (o->n_witnesses) quorum_rc = pgcld_cli_usage_error(CLI, "--witness goes with --witness-quorum N");
    if (quorum_rc == 2) {
        json_decref(out);
        pgcl_chain_report_release(&rep);
        return 2;
    }
    rc = print_line(out, "verify");
    bool printed = rc == 0;
    if (printed) rc = quorum_rc;
    if (printed && !rep.intact) {
        fprintf(stderr, "pgcld audit verify: NOT INTACT (first bad entry %lld): %s\n", (long long)rep.first_bad_seq,
                rep.reason);
        rc = 1;
    }
    if (printed && !logs_intact) {
        json_t *leaf = json_object_get(out, "log_bad_leaf");
        char where[32] = "-";
        if (json_is_integer(leaf)) snprintf(where, sizeof where, "%lld", (long long)json_integer_value(leaf));
        fprintf(stderr, "pgcld audit verify: LOG NOT INTACT (writer %s, leaf %s): %s\n",
                json_string_value(json_object_get(out, "log_bad_writer")), where,
                json_string_value(json_object_get(out, "log_reason")));
        rc = 1;
    }
    json_decref(out);
    pgcl_chain_report_release(&rep);
    return rc;
}

/* A checkpoint of the chain's head (SQLite), or a fleet checkpoint of every writer's head
 * (PostgreSQL), through the store driver of --db. */
static int cmd_checkpoint(const cli_opts *o) {
    pgcl_store_checkpoint *cp = calloc(1, sizeof *cp);
    char err[1024];
    if (!cp) {
        fprintf(stderr, "pgcld audit checkpoint: out of memory\n");
        return 1;
    }
    int rc = 1;
    if (pgcl_store_checkpoint_db(o->db, o->signing_key, o->out, cp, err, sizeof err) != PGCL_OK) {
        fprintf(stderr, "pgcld audit checkpoint: %s\n", err);
    } else {
        json_t *out = NULL;
        if (cp->is_fleet) {
            out = pgcl_fleet_checkpoint_to_json(&cp->fleet);
            if (out) json_object_set_new(out, "file", json_string(cp->fleet.file));
        } else {
            const pgcl_checkpoint *c = &cp->chain;
            out = json_pack("{s:I, s:s, s:s, s:s, s:s, s:s}", "head_seq", (json_int_t)c->head_seq, "head_hash",
                            c->head_hash, "created_at", c->created_at, "public_key", c->public_key, "signature",
                            c->signature, "file", c->file);
        }
        rc = print_line(out, "checkpoint");
        json_decref(out);
    }
    pgcl_store_checkpoint_release(cp);
    free(cp);
    return rc;
}

/* The horizon of --before (RFC 3339) or --older-than-days (a non-negative number of days) in the
 * audit columns' format; false with the reason printed as a usage error. */
static bool archive_horizon(const cli_opts *o, char out[PGCL_QTIME_LEN + 1]) {
    int64_t us = 0;
    if (o->before) {
        if (!pgcl_time_parse(o->before, &us)) {
            pgcld_cli_usage_error(CLI, "--before must be an RFC 3339 date-time, e.g. 2026-11-01T00:00:00Z");
            return false;
        }
    } else {
        double days;
        if (!pgcld_config_parse_days(o->older_than_days, &days)) {
            pgcld_cli_usage_error(CLI, "--older-than-days must be a number of days from 0 to %d (decimals allowed)",
                                  PGCLD_MAX_DAYS);
            return false;
        }
        us = pgcl_time_now_us() - llround(days * 86400e6); /* to the microsecond, as the audit columns */
    }
    pgcl_time_format(us, out);
    return true;
}

/* The archive run's JSON line: the chain's cut (SQLite) or the fleet's (PostgreSQL, with its fleet
 * checkpoint). */
static json_t *archive_json(const pgcl_store_archive_result *r, const char *horizon, const char *archive) {
    if (r->is_fleet) {
        const pgcl_pg_archive_result *res = &r->fleet;
        json_t *out = json_pack("{s:I, s:s, s:I, s:I, s:I, s:I, s:I, s:s, s:s, s:s, s:f}", "cut_seq",
                                (json_int_t)res->cut_seq, "before", horizon, "decisions_through",
                                (json_int_t)res->cut.through[0], "admin_events_through",
                                (json_int_t)res->cut.through[1], "contests_through", (json_int_t)res->cut.through[2],
                                "resolutions_through", (json_int_t)res->cut.through[3], "rows_archived",
                                (json_int_t)res->rows_archived, "archive", archive, "archive_sha256",
                                res->archive_sha256, "checkpoint", res->checkpoint.file, "prune_ms",
                                (double)res->prune_us / 1000.0);
        if (out) json_object_set_new(out, "fleet_checkpoint", pgcl_fleet_checkpoint_to_json(&res->checkpoint));
        return out;
    }
    const pgcl_archive_result *res = &r->chain;
    return json_pack("{s:I, s:s, s:s, s:s, s:I, s:I, s:I, s:I, s:I, s:s, s:s, s:s, s:f}", "entry_seq",
                     (json_int_t)res->cut.entry_seq, "entry_hash", res->cut.entry_hash, "log_root",
                     res->checkpoint.log_root, "before", horizon, "decisions_through", (json_int_t)res->cut.through[0],
                     "admin_events_through", (json_int_t)res->cut.through[1], "contests_through",
                     (json_int_t)res->cut.through[2], "resolutions_through", (json_int_t)res->cut.through[3],
                     "rows_archived", (json_int_t)res->rows_archived, "archive", archive, "archive_sha256",
                     res->archive_sha256, "checkpoint", res->checkpoint.file, "prune_ms",
                     (double)res->prune_us / 1000.0);
}

static int cmd_archive(const cli_opts *o) {
    char horizon[PGCL_QTIME_LEN + 1], err[1024];
    if (!archive_horizon(o, horizon)) return 2;
    int64_t max_decisions = PGCL_ARCHIVE_MAX_DECISIONS_DEFAULT;
    if (o->max_decisions) {
        char *end = NULL;
        long long v = strtoll(o->max_decisions, &end, 10);
        if (!end || *end || v < 0) {
            pgcld_cli_usage_error(CLI, "--max-decisions must be a whole number (0: no bound)");
            return 2;
        }
        max_decisions = v;
    }
    long window = 180; /* a store with writers: days during which a decision may be contested */
    if (o->contest_window_days && !pgcl_store_has_writers(o->db)) {
        pgcld_cli_usage_error(CLI, "--contest-window-days is for a PostgreSQL --db only");
        return 2;
    }
    if (o->contest_window_days) {
        char *end = NULL;
        window = strtol(o->contest_window_days, &end, 10);
        if (!end || *end || window < 0 || window > 36500) {
            pgcld_cli_usage_error(CLI, "--contest-window-days must be a whole number of days from 0 to 36500");
            return 2;
        }
    }
    pgcl_store_archive_result *res = calloc(1, sizeof *res);
    if (!res) {
        fprintf(stderr, "pgcld audit archive: out of memory\n");
        return 1;
    }
    pgcl_store_archive_params params = {.horizon = horizon,
                                        .contest_window_days = (int)window,
                                        .max_decisions = max_decisions,
                                        .key_path = o->signing_key,
                                        .archive_path = o->out,
                                        .checkpoint_dir = o->checkpoint_dir};
    int rc = 1;
    pgcl_status st = pgcl_store_archive(o->db, &params, res, err, sizeof err);
    if (st != PGCL_OK) {
        fprintf(stderr, "pgcld audit archive: %s\n", err);
        rc = st == PGCL_ERR_NOT_FOUND ? 3 : 1;
    } else {
        json_t *out = archive_json(res, horizon, o->out);
        rc = print_line(out, "archive");
        json_decref(out);
    }
    pgcl_store_archive_result_release(res);
    free(res);
    return rc;
}

static int cmd_keygen(const cli_opts *o) {
    char pub[PGCL_PUBLIC_KEY_HEX_LEN + 1], err[1024];
    if (o->origin && !pgcl_note_name_valid(o->origin, strlen(o->origin))) {
        fprintf(stderr, "pgcld audit keygen: --origin '%s' is not a note key name (no white space, '+' or control "
                        "characters)\n", o->origin);
        return 2;
    }
    if (pgcl_signing_keygen(o->out, pub, err, sizeof err) != PGCL_OK) {
        fprintf(stderr, "pgcld audit keygen: %s\n", err);
        return 1;
    }
    fprintf(stderr, "Wrote the secret signing key to %s (mode 0600): keep it secret. Its public key (for "
                    "pgcld audit verify --public-key) follows.\n", o->out);
    printf("%s\n", pub);
    if (o->origin) { /* the same key as a note verifier key (core/audit/log/note.h) */
        pgcl_status st;
        char vkey[PGCL_NOTE_VKEY_MAX];
        pgcl_note_signer *signer = pgcl_note_signer_from_key_file(o->out, o->origin, &st, err, sizeof err);
        if (!signer) {
            fprintf(stderr, "pgcld audit keygen: --origin: %s\n", err);
            return 1;
        }
        int n = pgcl_note_verifier_format(pgcl_note_signer_verifier(signer), vkey, sizeof vkey);
        pgcl_note_signer_destroy(signer);
        PGCL_ASSERT(n > 0);
        printf("%s\n", vkey);
    }
    if (fflush(stdout) != 0 || ferror(stdout)) {
        fprintf(stderr, "pgcld audit keygen: cannot write to stdout\n");
        return 1;
    }
    return 0;
}

/* The note verifier key of --signing-key, named --origin (core/audit/log/note.h). */
static int cmd_note_key(const cli_opts *o) {
    pgcl_status st;
    char err[1024], vkey[PGCL_NOTE_VKEY_MAX];
    pgcl_note_signer *signer = pgcl_note_signer_from_key_file(o->signing_key, o->origin, &st, err, sizeof err);
    if (!signer) {
        fprintf(stderr, "pgcld audit note-key: %s\n", err);
        return 1;
    }
    int n = pgcl_note_verifier_format(pgcl_note_signer_verifier(signer), vkey, sizeof vkey);
    pgcl_note_signer_destroy(signer);
    PGCL_ASSERT(n > 0); /* a signer made from a valid name formats */
    printf("%s\n", vkey);
    if (fflush(stdout) != 0 || ferror(stdout)) {
        fprintf(stderr, "pgcld audit note-key: cannot write to stdout\n");
        return 1;
    }
    return 0;
}

/* ---- verify-proof ---- */

/* A 64-hex-digit member of obj into *out; false when absent or malformed. */
static bool hash_member(json_t *obj, const char *name, pgcl_merkle_hash *out) {
    return pgcl_merkle_from_hex(json_string_value(json_object_get(obj, name)), out);
}

/* A JSON array of at most PGCL_MERKLE_MAX_PATH hashes (the caller checked its size) into out/len. */
static bool hash_array(json_t *arr, const char *name, pgcl_merkle_hash *out, int *len, char *why, int cap) {
    *len = (int)json_array_size(arr);
    for (int i = 0; i < *len; i++)
        if (!pgcl_merkle_from_hex(json_string_value(json_array_get(arr, (size_t)i)), &out[i])) {
            snprintf(why, (size_t)cap, "%s[%d] is not 64 hex digits", name, i);
            return false;
        }
    return true;
}

/* The proof file's members into p (leaf_data decoded into a malloc'd buffer); false with why set. */
static bool read_proof(json_t *doc, pgcl_chain_proof *p, const char **decision_id, char *why, int cap) {
    json_t *entry = json_object_get(doc, "chain_entry"), *path = json_object_get(doc, "path");
    const char *b64 = json_string_value(json_object_get(doc, "leaf_data"));
    const char *prev = json_string_value(json_object_get(entry, "prev_hash"));
    const char *hash = json_string_value(json_object_get(entry, "hash"));
    json_t *claimed = json_object_get(doc, "decision_id");
    *decision_id = json_string_value(claimed);
    /* the id compared is the whole claim: jansson refuses \u0000 without JSON_ALLOW_NUL; kept so all the same */
    if (*decision_id && strlen(*decision_id) != json_string_length(claimed)) *decision_id = NULL;
    if (!*decision_id || !b64 || !json_is_array(path) || json_array_size(path) > PGCL_MERKLE_MAX_PATH ||
        !json_is_integer(json_object_get(doc, "leaf_index")) || !json_is_integer(json_object_get(doc, "tree_size")) ||
        !json_is_integer(json_object_get(entry, "seq")) || !prev || strlen(prev) != 64 || !hash ||
        strlen(hash) != 64 || !hash_member(doc, "leaf_hash", &p->leaf_hash) || !hash_member(doc, "root", &p->root)) {
        snprintf(why, (size_t)cap, "not an inclusion proof: decision_id, leaf_data, leaf_hash, leaf_index, tree_size, "
                 "path, root and chain_entry {seq, prev_hash, hash} are required");
        return false;
    }
    json_t *encoding = json_object_get(doc, "encoding");
    if (!json_is_integer(encoding) || json_integer_value(encoding) != 2) {
        snprintf(why, (size_t)cap, "encoding must be 2: an inclusion proof's leaf is in audit chain encoding 2");
        return false;
    }
    p->leaf_index = json_integer_value(json_object_get(doc, "leaf_index"));
    p->tree_size = json_integer_value(json_object_get(doc, "tree_size"));
    p->entry_seq = json_integer_value(json_object_get(entry, "seq"));
    memcpy(p->prev_hash, prev, 65);
    memcpy(p->entry_hash, hash, 65);
    if (!hash_array(path, "path", p->path, &p->path_len, why, cap)) return false;
    json_t *log = json_object_get(doc, "log"), *log_path = json_object_get(log, "path");
    json_t *cp = json_object_get(log, "checkpoint");
    if (!json_is_integer(json_object_get(log, "leaf_index")) || !json_is_integer(json_object_get(log, "tree_size")) ||
        !json_is_array(log_path) || json_array_size(log_path) > PGCL_MERKLE_MAX_PATH ||
        !hash_member(log, "root", &p->log_root) || !(json_is_null(cp) || json_is_object(cp))) {
        snprintf(why, (size_t)cap, "not an inclusion proof: log {leaf_index, tree_size, path, root, checkpoint} is "
                 "required");
        return false;
    }
    p->log_index = json_integer_value(json_object_get(log, "leaf_index"));
    p->log_size = json_integer_value(json_object_get(log, "tree_size"));
    if (!hash_array(log_path, "log.path", p->log_path, &p->log_path_len, why, cap)) return false;
    const char *writer = json_string_value(json_object_get(doc, "writer_id"));
    if (writer) snprintf(p->writer_id, sizeof p->writer_id, "%s", writer);
    if (json_is_object(cp) && pgcl_fleet_checkpoint_json_is_fleet(cp)) { /* the PostgreSQL store */
        if (!writer || !(p->fleet = calloc(1, sizeof *p->fleet))) {
            snprintf(why, (size_t)cap, "a proof with a fleet checkpoint must name its writer_id");
            return false;
        }
        snprintf(p->fleet->file, sizeof p->fleet->file, "the proof's fleet checkpoint");
        if (pgcl_fleet_checkpoint_from_json(cp, p->fleet->file, p->fleet, why, cap) != PGCL_OK) return false;
    } else if (json_is_object(cp)) {
        snprintf(p->checkpoint.file, sizeof p->checkpoint.file, "the proof's checkpoint");
        if (pgcl_checkpoint_from_json(cp, p->checkpoint.file, &p->checkpoint, why, cap) != PGCL_OK) return false;
        p->has_checkpoint = true;
    }
    size_t cap_bytes = strlen(b64) / 4 * 3 + 3;
    if (!(p->leaf_data = malloc(cap_bytes)) ||
        sodium_base642bin(p->leaf_data, cap_bytes, b64, strlen(b64), NULL, &p->leaf_data_len, NULL,
                          sodium_base64_VARIANT_ORIGINAL) != 0) {
        snprintf(why, (size_t)cap, "leaf_data is not base64");
        return false;
    }
    return true;
}

/* The (size, log root) a held checkpoint file signs: of its one chain, or, when writer_id is not
 * empty, of that writer's log in a fleet checkpoint. False with why set (unreadable, altered, not
 * by --public-key, no head of that writer). */
static bool held_fleet_head(const char *path, const char *public_key, const char *writer_id, int64_t *size,
                            char root_hex[65], char *why, int cap) {
    pgcl_fleet_checkpoint cp;
    bool ok = pgcl_fleet_checkpoint_read(path, public_key, &cp, why, cap) == PGCL_OK;
    const pgcl_fleet_head *h = ok ? pgcl_fleet_checkpoint_head(&cp, writer_id) : NULL;
    if (ok && !h) snprintf(why, (size_t)cap, "%s signs no head of writer '%.128s'", path, writer_id);
    if (h) {
        *size = h->head_seq;
        memcpy(root_hex, h->log_root, 65);
    }
    pgcl_fleet_checkpoint_release(&cp);
    return h != NULL;
}

/* The checkpoints the holder has (--checkpoint, signed by --public-key when given) must sign the
 * log tree the proof leads to; so must the proof's own checkpoint be signed by --public-key. */
static bool held_checkpoints_agree(const pgcl_chain_proof *p, const cli_opts *o, char *why, int cap) {
    char root_hex[65];
    pgcl_merkle_to_hex(&p->log_root, root_hex);
    if (o->public_key && p->has_checkpoint && strcmp(p->checkpoint.public_key, o->public_key) != 0) {
        snprintf(why, (size_t)cap, "the proof's checkpoint is signed by %s, not by --public-key", p->checkpoint.public_key);
        return false;
    }
    if (o->public_key && p->fleet && strcmp(p->fleet->public_key, o->public_key) != 0) {
        snprintf(why, (size_t)cap, "the proof's fleet checkpoint is signed by %s, not by --public-key",
                 p->fleet->public_key);
        return false;
    }
    for (int i = 0; p->writer_id[0] && i < o->n_checkpoints; i++) {
        int64_t size = 0;
        char held_root[65];
        if (!held_fleet_head(o->checkpoints[i], o->public_key, p->writer_id, &size, held_root, why, cap)) return false;
        if (size != p->log_size || strcmp(held_root, root_hex) != 0) {
            snprintf(why, (size_t)cap, "%s signs writer '%.128s''s log tree of %lld entries with root %s; the proof "
                     "leads to the tree of %lld entries with root %s", o->checkpoints[i], p->writer_id,
                     (long long)size, held_root, (long long)p->log_size, root_hex);
            return false;
        }
    }
    for (int i = 0; !p->writer_id[0] && i < o->n_checkpoints; i++) {
        pgcl_checkpoint *held = malloc(sizeof *held);
        if (!held) {
            snprintf(why, (size_t)cap, "out of memory");
            return false;
        }
        bool ok = pgcl_checkpoint_read(o->checkpoints[i], o->public_key, held, why, cap) == PGCL_OK;
        if (ok && (held->version < 2 || held->head_seq != p->log_size || strcmp(held->log_root, root_hex) != 0)) {
            snprintf(why, (size_t)cap, "%s signs the log tree of %lld entries with root %s; the proof leads to the tree "
                     "of %lld entries with root %s", o->checkpoints[i], (long long)held->head_seq,
                     held->version < 2 ? "(none: format version 1)" : held->log_root, (long long)p->log_size, root_hex);
            ok = false;
        }
        free(held);
        if (!ok) return false;
    }
    return true;
}

static int cmd_verify_proof(const char *file, const cli_opts *o) {
    json_error_t jerr;
    json_t *doc = json_load_file(file, JSON_REJECT_DUPLICATES, &jerr);
    if (!doc) {
        fprintf(stderr, "pgcld audit verify-proof: %s: %s\n", file, jerr.text);
        return 1;
    }
    const char *format = json_string_value(json_object_get(doc, "format"));
    if (format && strcmp(format, "tlog") == 0) { /* the transparency log's shape: cli_proof_tlog.c */
        int rc = pgcld_cli_verify_tlog_proof(doc, file, o->key, o->decision);
        json_decref(doc);
        return rc;
    }
    pgcl_chain_proof p = {0};
    const char *decision_id = NULL;
    char why[512];
    bool valid = read_proof(doc, &p, &decision_id, why, sizeof why) &&
                 pgcl_chain_proof_check(&p, decision_id, o->entry_hash, why, sizeof why) &&
                 held_checkpoints_agree(&p, o, why, sizeof why);
    if (valid && o->decision && strcmp(decision_id, o->decision) != 0) {
        snprintf(why, sizeof why, "this is a proof of decision %s, not of %.64s", decision_id, o->decision);
        valid = false;
    }
    int rc = 1;
    if (valid) {
        json_t *out = json_pack("{s:b, s:s, s:I, s:s, s:I, s:b}", "valid", 1, "decision_id", decision_id, "entry_seq",
                                (json_int_t)p.entry_seq, "entry_hash", p.entry_hash, "log_size",
                                (json_int_t)p.log_size, "checkpoint", p.has_checkpoint);
        rc = print_line(out, "verify-proof");
        json_decref(out);
    } else {
        fprintf(stderr, "pgcld audit verify-proof: %s: NOT VALID: %s\n", file, why);
    }
    pgcl_chain_proof_release(&p);
    json_decref(doc);
    return rc;
}

/* ---- verify-consistency ---- */

/* The proof file's members; false with why set. */
static bool read_consistency(json_t *doc, pgcl_log_consistency *c, char *why, int cap) {
    json_t *path = json_object_get(doc, "path");
    if (!json_is_integer(json_object_get(doc, "first")) || !json_is_integer(json_object_get(doc, "second")) ||
        !hash_member(doc, "first_root", &c->first_root) || !hash_member(doc, "second_root", &c->second_root) ||
        !json_is_array(path) || json_array_size(path) > PGCL_MERKLE_MAX_PATH) {
        snprintf(why, (size_t)cap,
                 "not a consistency proof: first, second, first_root, second_root and path are "
                 "required");
        return false;
    }
    c->first = json_integer_value(json_object_get(doc, "first"));
    c->second = json_integer_value(json_object_get(doc, "second"));
    const char *writer = json_string_value(json_object_get(doc, "writer_id"));
    if (writer) snprintf(c->writer_id, sizeof c->writer_id, "%s", writer);
    return hash_array(path, "path", c->proof, &c->proof_len, why, cap);
}

/* The two checkpoints (older, newer) sign the proof's two trees, each verified (by --public-key). */
static bool checkpoints_sign_both(const pgcl_log_consistency *c, const cli_opts *o, char *why, int cap) {
    const int64_t size[2] = {c->first, c->second};
    const pgcl_merkle_hash *root[2] = {&c->first_root, &c->second_root};
    for (int i = 0; c->writer_id[0] && i < o->n_checkpoints; i++) { /* fleet checkpoints: the writer's head */
        int64_t held_size = 0;
        char root_hex[65], held_root[65];
        pgcl_merkle_to_hex(root[i], root_hex);
        if (!held_fleet_head(o->checkpoints[i], o->public_key, c->writer_id, &held_size, held_root, why, cap))
            return false;
        if (held_size != size[i] || strcmp(held_root, root_hex) != 0) {
            snprintf(why, (size_t)cap, "%s signs writer '%.128s''s log tree of %lld entries with root %s, not the "
                     "proof's %s tree of %lld entries with root %s", o->checkpoints[i], c->writer_id,
                     (long long)held_size, held_root, i ? "second" : "first", (long long)size[i], root_hex);
            return false;
        }
    }
    for (int i = 0; !c->writer_id[0] && i < o->n_checkpoints; i++) {
        pgcl_checkpoint *cp = malloc(sizeof *cp);
        char root_hex[65];
        pgcl_merkle_to_hex(root[i], root_hex);
        bool ok = cp && pgcl_checkpoint_read(o->checkpoints[i], o->public_key, cp, why, cap) == PGCL_OK;
        if (!cp) snprintf(why, (size_t)cap, "out of memory");
        if (ok && (cp->version < 2 || cp->head_seq != size[i] || strcmp(cp->log_root, root_hex) != 0)) {
            snprintf(why, (size_t)cap,
                     "%s signs the log tree of %lld entries with root %s, not the proof's %s tree of "
                     "%lld entries with root %s",
                     o->checkpoints[i], (long long)cp->head_seq,
                     cp->version < 2 ? "(none: format version 1)" : cp->log_root, i ? "second" : "first",
                     (long long)size[i], root_hex);
            ok = false;
        }
        free(cp);
        if (!ok) return false;
    }
    return true;
}

static int cmd_verify_consistency(const char *file, const cli_opts *o) {
    json_error_t jerr;
    json_t *doc = json_load_file(file, JSON_REJECT_DUPLICATES, &jerr);
    if (!doc) {
        fprintf(stderr, "pgcld audit verify-consistency: %s: %s\n", file, jerr.text);
        return 1;
    }
    pgcl_log_consistency *c = calloc(1, sizeof *c);
    char why[1024] = "out of memory";
    bool valid = c && read_consistency(doc, c, why, sizeof why);
    if (valid && !pgcl_merkle_verify_consistency((uint64_t)c->first, (uint64_t)c->second, &c->first_root,
                                                 &c->second_root, c->proof, c->proof_len)) {
        snprintf(why, sizeof why,
                 "the path does not show that the tree of %lld entries is a prefix of the tree of "
                 "%lld entries (RFC 9162 2.1.4.2)",
                 (long long)c->first, (long long)c->second);
        valid = false;
    }
    valid = valid && checkpoints_sign_both(c, o, why, sizeof why);
    int rc = 1;
    if (valid) {
        json_t *out = json_pack("{s:b, s:I, s:I, s:i}", "valid", 1, "first", (json_int_t)c->first, "second",
                                (json_int_t)c->second, "checkpoints", o->n_checkpoints);
        rc = print_line(out, "verify-consistency");
        json_decref(out);
    } else {
        fprintf(stderr, "pgcld audit verify-consistency: %s: NOT VALID: %s\n", file, why);
    }
    free(c);
    json_decref(doc);
    return rc;
}

/* Checks what the parser cannot (required options, one horizon, two checkpoints or none, the
 * public key's length), then runs the subcommand. The exit status. */
static int run_command(const pgcld_cli_command *command, const char *proof_file, const cli_opts *o) {
    const char *cmd = command->name;
    int allowed = command->allowed;
    if ((allowed & OPT_DB) && !o->db) return pgcld_cli_usage_error(CLI, "%s needs --db FILE", cmd);
    if ((allowed & OPT_SIGNING_KEY) && !o->signing_key && strcmp(cmd, "verify") != 0)
        return pgcld_cli_usage_error(CLI, "%s needs --signing-key FILE", cmd);
    if ((allowed & OPT_OUT) && !o->out) return pgcld_cli_usage_error(CLI, "%s needs --out FILE", cmd);
    if ((allowed & OPT_ORIGIN) && !o->origin && strcmp(cmd, "keygen") != 0) return pgcld_cli_usage_error(CLI, "%s needs --origin NAME", cmd);
    if (strcmp(cmd, "archive") == 0 && !o->before == !o->older_than_days)
        return pgcld_cli_usage_error(CLI, "%s", "archive needs one horizon: --before RFC3339 or --older-than-days N");
    if (strcmp(cmd, "verify-consistency") == 0 && o->n_checkpoints != 0 && o->n_checkpoints != 2)
        return pgcld_cli_usage_error(CLI, "%s",
                                     "verify-consistency takes no --checkpoint or two: the older, the newer");
    if (o->public_key && strlen(o->public_key) != PGCL_PUBLIC_KEY_HEX_LEN)
        return pgcld_cli_usage_error(CLI, "--public-key must be %d hex digits", PGCL_PUBLIC_KEY_HEX_LEN);
    if (sodium_init() < 0) {
        fprintf(stderr, "pgcld audit: libsodium failed to initialise\n");
        return 1;
    }
    if (proof_file && strcmp(cmd, "verify-consistency") == 0) return cmd_verify_consistency(proof_file, o);
    if (proof_file) return cmd_verify_proof(proof_file, o);
    if (strcmp(cmd, "verify") == 0) return cmd_verify(o);
    if (strcmp(cmd, "checkpoint") == 0) return cmd_checkpoint(o);
    if (strcmp(cmd, "archive") == 0) return cmd_archive(o);
    if (strcmp(cmd, "note-key") == 0) return cmd_note_key(o);
    return cmd_keygen(o);
}

int pgcld_cli_audit(int argc, char **argv) {
    const pgcld_cli_command *command = NULL;
    int rc = pgcld_cli_select(CLI, argc, argv, &command);
    if (rc != PGCLD_CLI_PROCEED) return rc;
    const char *cmd = command->name, *proof_file = NULL;
    if (strcmp(cmd, "verify-proof") == 0 || strcmp(cmd, "verify-consistency") == 0) {
        if (argc >= 2 && pgcld_cli_is_help_flag(argv[1])) {
            pgcld_cli_print_help(CLI, command, stdout);
            return 0;
        }
        if (argc < 2 || argv[1][0] == '-')
            return pgcld_cli_usage_error(CLI, "%s needs the proof file: %s PROOF", cmd, cmd);
        proof_file = argv[1];
        argc--;
        argv++;
    }
    cli_opts *o = calloc(1, sizeof *o);
    if (!o) {
        fprintf(stderr, "pgcld audit: out of memory\n");
        return 1;
    }
    rc = pgcld_cli_parse(CLI, command, argc - 1, argv + 1, o);
    if (rc == PGCLD_CLI_PROCEED) rc = run_command(command, proof_file, o);
    free(o);
    return rc;
}
