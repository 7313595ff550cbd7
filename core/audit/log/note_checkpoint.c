/* Checkpoint texts (C2SP tlog-checkpoint), signed checkpoints with their witnesses' cosignatures,
 * and the texts of the witness protocol (C2SP tlog-witness); see note.h. Signed notes: note.c. */
#include "note.h"

#include <inttypes.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base64.h"

#define ROOT_B64_LEN 44    /* base64 of 32 bytes */
#define SIZE_DIGITS_MAX 19 /* INT64_MAX = 9223372036854775807 */
#define EM_DASH_SPACE "\xe2\x80\x94 "

_Static_assert(PGCL_MERKLE_HASH_BYTES == 32, "a checkpoint's root is 32 bytes");
_Static_assert(PGCL_TLOG_ORIGIN_MAX <= PGCL_NOTE_NAME_MAX, "a log's own origin is a key name");

/* s[0:len) as canonical decimal ("0", or digits without a leading zero) up to PGCL_TLOG_SIZE_MAX. */
static bool parse_size(const char *s, size_t len, uint64_t *out) {
    uint64_t v = 0;
    if (len == 0 || len > SIZE_DIGITS_MAX || (len > 1 && s[0] == '0')) return false;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9') return false;
        uint64_t d = (uint64_t)(s[i] - '0');
        if (v > ((uint64_t)PGCL_TLOG_SIZE_MAX - d) / 10) return false;
        v = v * 10 + d;
    }
    *out = v;
    return true;
}

/* ---- checkpoints ---- */

pgcl_status pgcl_tlog_checkpoint_format(const pgcl_tlog_checkpoint *cp, char buf[PGCL_TLOG_CHECKPOINT_MAX], size_t *len,
                                        char *err, int cap) {
    char root[ROOT_B64_LEN + 1];
    buf[0] = 0;
    *len = 0;
    size_t origin_len = strnlen(cp->origin, sizeof cp->origin);
    if (origin_len > PGCL_TLOG_ORIGIN_MAX || !pgcl_note_name_valid(cp->origin, origin_len)) {
        pgcl_errorf(err, cap,
                    "checkpoint origin \"%.80s\": must be 1 to %d bytes of UTF-8 without spaces, '+' or "
                    "control characters",
                    cp->origin, PGCL_TLOG_ORIGIN_MAX);
        return PGCL_ERR_INVALID;
    }
    if (cp->size > (uint64_t)PGCL_TLOG_SIZE_MAX) {
        pgcl_errorf(err, cap, "checkpoint tree size %" PRIu64 ": over 2^63 - 1", cp->size);
        return PGCL_ERR_INVALID;
    }
    sodium_bin2base64(root, sizeof root, cp->root.b, sizeof cp->root.b, sodium_base64_VARIANT_ORIGINAL);
    int n = snprintf(buf, PGCL_TLOG_CHECKPOINT_MAX, "%s\n%" PRIu64 "\n%s\n", cp->origin, cp->size, root);
    PGCL_ASSERT(n > 0 && n < PGCL_TLOG_CHECKPOINT_MAX); /* sized by the longest origin and size */
    *len = (size_t)n;
    return PGCL_OK;
}

pgcl_status pgcl_tlog_checkpoint_parse(const char *text, size_t len, pgcl_tlog_checkpoint *out, char *err, int cap) {
    static const char *const what[3] = {"origin", "tree size", "root hash"};
    const char *line[3], *p = text, *end = text + len;
    size_t line_len[3];
    memset(out, 0, sizeof *out);
    if (!pgcl_note_text_valid(text, len)) {
        pgcl_errorf(err, cap,
                    "checkpoint: not a note text (valid UTF-8 without control characters but newlines, "
                    "ending in a newline)");
        return PGCL_ERR_FORMAT;
    }
    for (int i = 0; i < 3; i++) {
        if (p == end) {
            pgcl_errorf(err, cap, "checkpoint: no %s line (an origin, a tree size and a root hash are required)",
                        what[i]);
            return PGCL_ERR_FORMAT;
        }
        const char *eol = memchr(p, '\n', (size_t)(end - p)); /* found: the text ends in '\n' */
        line[i] = p;
        line_len[i] = (size_t)(eol - p);
        p = eol + 1;
        if (line_len[i] == 0) {
            pgcl_errorf(err, cap, "checkpoint: the %s line is empty", what[i]);
            return PGCL_ERR_FORMAT;
        }
    }
    pgcl_status st = PGCL_ERR_FORMAT;
    if (line_len[0] > PGCL_TLOG_ORIGIN_MAX) {
        pgcl_errorf(err, cap, "checkpoint: the origin is %zu bytes, over %d", line_len[0], PGCL_TLOG_ORIGIN_MAX);
    } else if (!parse_size(line[1], line_len[1], &out->size)) {
        pgcl_errorf(err, cap,
                    "checkpoint: the tree size \"%.*s\" is not a decimal number from 0 to 2^63 - 1 without "
                    "leading zeros",
                    (int)(line_len[1] > 40 ? 40 : line_len[1]), line[1]);
    } else if (line_len[2] != ROOT_B64_LEN || !pgcl_base64_decode_exact(line[2], ROOT_B64_LEN, out->root.b, 32)) {
        pgcl_errorf(err, cap, "checkpoint: the root hash is not the canonical base64 of 32 bytes");
    } else if (p < end && (p[0] == '\n' || memmem(p, (size_t)(end - p), "\n\n", 2))) {
        pgcl_errorf(err, cap, "checkpoint: an empty extension line");
    } else {
        memcpy(out->origin, line[0], line_len[0]);
        out->ext_at = (size_t)(p - text);
        out->ext_len = (size_t)(end - p);
        return PGCL_OK;
    }
    memset(out, 0, sizeof *out);
    return st;
}

pgcl_note *pgcl_tlog_checkpoint_open(const char *msg, size_t len, const pgcl_note_verifier *log_key, const char *origin,
                                     const pgcl_note_verifier *witnesses, int n_witnesses, int quorum,
                                     pgcl_tlog_checkpoint *cp, pgcl_status *st, char *err, int cap) {
    memset(cp, 0, sizeof *cp);
    if (!log_key || log_key->alg != PGCL_NOTE_ALG_ED25519 || n_witnesses < 0 || n_witnesses >= PGCL_NOTE_MAX_SIGS ||
        (n_witnesses > 0 && !witnesses) || quorum < 0 || quorum > n_witnesses) {
        pgcl_errorf(err, cap,
                    "checkpoint: a log key of algorithm 0x01, 0 to %d witnesses and a quorum from 0 to "
                    "their number are required",
                    PGCL_NOTE_MAX_SIGS - 1);
        *st = PGCL_ERR_INVALID;
        return NULL;
    }
    for (int i = 0; i < n_witnesses; i++)
        if (witnesses[i].alg != PGCL_NOTE_ALG_COSIGNATURE_V1) {
            pgcl_errorf(err, cap, "checkpoint: witness key %.80s is of algorithm 0x%02x, not 0x04 (cosignature/v1)",
                        witnesses[i].name, witnesses[i].alg);
            *st = PGCL_ERR_INVALID;
            return NULL;
        }
    pgcl_note_verifier *keys = malloc((size_t)(1 + n_witnesses) * sizeof *keys);
    if (!keys) {
        pgcl_errorf(err, cap, "out of memory for %d keys", 1 + n_witnesses);
        *st = PGCL_ERR_NOMEM;
        return NULL;
    }
    keys[0] = *log_key;
    if (n_witnesses > 0) memcpy(keys + 1, witnesses, (size_t)n_witnesses * sizeof *keys);
    pgcl_note *n = pgcl_note_open(msg, len, keys, 1 + n_witnesses, st, err, cap);
    free(keys);
    if (!n) return NULL;

    bool log_signed = false;
    int cosigners = 0; /* distinct public keys among the witnesses' valid cosignatures */
    for (int i = 0; i < n->n_sigs; i++) {
        int k = n->sigs[i].verifier;
        log_signed |= k == 0;
        if (k < 1) continue;
        bool counted = false;
        for (int j = 0; j < i && !counted; j++)
            counted = n->sigs[j].verifier >= 1 && memcmp(witnesses[n->sigs[j].verifier - 1].public_key,
                                                         witnesses[k - 1].public_key, PGCL_NOTE_PUBLIC_KEY_BYTES) == 0;
        cosigners += !counted;
    }
    const char *want = origin ? origin : log_key->name;
    if (!log_signed) {
        pgcl_errorf(err, cap, "checkpoint: not signed by the log's key %.80s+%08" PRIx32, log_key->name,
                    log_key->key_id);
        *st = PGCL_ERR_NOT_FOUND;
    } else if ((*st = pgcl_tlog_checkpoint_parse(n->text, n->text_len, cp, err, cap)) != PGCL_OK) {
        /* err says why */
    } else if (strcmp(cp->origin, want) != 0) {
        pgcl_errorf(err, cap, "checkpoint: its origin is \"%.80s\", not \"%.80s\"", cp->origin, want);
        *st = PGCL_ERR_MISMATCH;
    } else if (cosigners < quorum) {
        pgcl_errorf(err, cap, "checkpoint: cosigned by %d of the %d witnesses known, fewer than the quorum of %d",
                    cosigners, n_witnesses, quorum);
        *st = PGCL_ERR_NOT_FOUND;
    }
    if (*st != PGCL_OK) {
        memset(cp, 0, sizeof *cp);
        pgcl_note_destroy(n);
        return NULL;
    }
    return n;
}

/* ---- the witness protocol ---- */

char *pgcl_tlog_witness_request(uint64_t old_size, const pgcl_merkle_hash *proof, int n_proof, const char *msg,
                                size_t len, size_t *out_len, pgcl_status *st, char *err, int cap) {
    *out_len = 0;
    *st = PGCL_ERR_INVALID;
    if (old_size > (uint64_t)PGCL_TLOG_SIZE_MAX || n_proof < 0 || n_proof > PGCL_TLOG_WITNESS_PROOF_MAX ||
        (n_proof > 0 && (!proof || old_size == 0))) {
        pgcl_errorf(err, cap, "add-checkpoint: an old size up to 2^63 - 1 and 0 to %d proof hashes (none from size 0)",
                    PGCL_TLOG_WITNESS_PROOF_MAX);
        return NULL;
    }
    if (!msg || len == 0 || len > PGCL_NOTE_MAX_BYTES || msg[len - 1] != '\n') {
        pgcl_errorf(err, cap, "add-checkpoint: the signed checkpoint must end in a newline and be at most %d bytes",
                    PGCL_NOTE_MAX_BYTES);
        return NULL;
    }
    size_t size = 4 + SIZE_DIGITS_MAX + 1 + (size_t)n_proof * (ROOT_B64_LEN + 1) + 1 + len + 1;
    char *out = malloc(size);
    if (!out) {
        pgcl_errorf(err, cap, "out of memory for an add-checkpoint request");
        *st = PGCL_ERR_NOMEM;
        return NULL;
    }
    int k = snprintf(out, size, "old %" PRIu64 "\n", old_size);
    PGCL_ASSERT(k > 0 && (size_t)k <= 4 + SIZE_DIGITS_MAX + 1);
    size_t used = (size_t)k;
    for (int i = 0; i < n_proof; i++) {
        sodium_bin2base64(out + used, ROOT_B64_LEN + 1, proof[i].b, sizeof proof[i].b, sodium_base64_VARIANT_ORIGINAL);
        used += ROOT_B64_LEN;
        out[used++] = '\n';
    }
    out[used++] = '\n';
    memcpy(out + used, msg, len);
    used += len;
    PGCL_ASSERT(used < size);
    out[used] = 0;
    *out_len = used;
    *st = PGCL_OK;
    return out;
}

pgcl_status pgcl_tlog_witness_parse_size(const char *body, size_t len, uint64_t *size, char *err, int cap) {
    *size = 0;
    if (!body || len < 2 || body[len - 1] != '\n' || !parse_size(body, len - 1, size)) {
        *size = 0;
        pgcl_errorf(err, cap, "add-checkpoint: a conflict's body is not a tree size (decimal, then a newline)");
        return PGCL_ERR_FORMAT;
    }
    return PGCL_OK;
}

pgcl_status pgcl_tlog_witness_cosignature(const char *checkpoint_text, size_t text_len, const char *body, size_t len,
                                          const pgcl_note_verifier *witness, char line[PGCL_NOTE_SIG_LINE_MAX],
                                          uint64_t *timestamp, char *err, int cap) {
    pgcl_status st = PGCL_ERR_FORMAT;
    line[0] = 0;
    *timestamp = 0;
    if (!witness || witness->alg != PGCL_NOTE_ALG_COSIGNATURE_V1) {
        pgcl_errorf(err, cap, "add-checkpoint: the witness key must be of algorithm 0x04 (cosignature/v1)");
        return PGCL_ERR_INVALID;
    }
    /* the answer must be signature lines only: with a blank line in it, the note's split would move */
    if (!body || len == 0 || body[0] == '\n' || memmem(body, len, "\n\n", 2) || text_len > PGCL_NOTE_MAX_BYTES ||
        len > PGCL_NOTE_MAX_BYTES || text_len + 1 + len > PGCL_NOTE_MAX_BYTES ||
        !pgcl_note_text_valid(checkpoint_text, text_len)) {
        pgcl_errorf(err, cap, "add-checkpoint: the answer is not signature lines after a checkpoint's text");
        return PGCL_ERR_FORMAT;
    }
    char *msg = malloc(text_len + 1 + len);
    if (!msg) {
        pgcl_errorf(err, cap, "out of memory for a cosigned note");
        return PGCL_ERR_NOMEM;
    }
    memcpy(msg, checkpoint_text, text_len);
    msg[text_len] = '\n';
    memcpy(msg + text_len + 1, body, len);
    pgcl_note *n = pgcl_note_open(msg, text_len + 1 + len, witness, 1, &st, err, cap);
    free(msg);
    if (!n) return st;
    PGCL_ASSERT(n->text_len == text_len); /* no blank line in body: the text is the checkpoint's */
    for (int i = 0; i < n->n_sigs; i++) {
        if (n->sigs[i].verifier != 0) continue;
        int k = snprintf(line, PGCL_NOTE_SIG_LINE_MAX, EM_DASH_SPACE "%s %s\n", n->sigs[i].name, n->sigs[i].base64);
        /* a verified line has the witness's name (at most PGCL_NOTE_NAME_MAX) and 4 + 72 bytes */
        PGCL_ASSERT(k > 0 && k < PGCL_NOTE_SIG_LINE_MAX);
        *timestamp = n->sigs[i].timestamp;
        break;
    }
    PGCL_ASSERT(line[0] != 0); /* pgcl_note_open returns a note only with a verified line */
    pgcl_note_destroy(n);
    return PGCL_OK;
}
