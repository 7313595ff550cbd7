/* Signed notes, checkpoints and cosignatures of a transparency log, as the C2SP specifications
 * define them, so that stock verifiers (Go's golang.org/x/mod/sumdb/note, witnesses, monitors) check
 * pgcld's log with their own code. Store-neutral: text in, text out; no files but the key file
 * conversion, no clock, no network.
 *
 * c2sp.org/signed-note — a note is a text (valid UTF-8, no control characters but newline, ending
 * in a newline), a blank line, then one or more signature lines
 *     "— <key name> <base64(4-byte big-endian key ID ‖ signature)>\n"   (U+2014 EM DASH, a space)
 * Key names are non-empty UTF-8 without Unicode white space or '+'. A key ID is
 *     SHA-256(key name ‖ 0x0A ‖ algorithm byte ‖ 32-byte Ed25519 public key)[0:4]
 * Keys are written as Go's note package writes them:
 *     verifier key  "<name>+<hex8 key ID>+<base64(alg ‖ 32-byte public key)>"
 *     signer key    "PRIVATE+KEY+<name>+<hex8 key ID>+<base64(alg ‖ 32-byte Ed25519 seed)>"
 * Two algorithms, both Ed25519:
 *     0x01  a note signature: Ed25519 over the note text (the log's key);
 *     0x04  a cosignature/v1 (c2sp.org/tlog-cosignature; a witness's key): the signature bytes are
 *           an 8-byte big-endian POSIX timestamp T (at most 2^63 - 1) ‖ Ed25519 over
 *               "cosignature/v1\ntime <T>\n" ‖ <the checkpoint text>
 *           A signer key of algorithm 0x04 has the same shape as Go's (which only knows 0x01).
 *
 * c2sp.org/tlog-checkpoint — a note text of at least three non-empty lines: the origin, the tree
 * size in decimal (no leading zeros; "0" for the empty tree), the base64 of the 32-byte RFC 6962
 * root hash, then optional non-empty extension lines.
 *
 * Strictness: parsers here face the network. Base64 must be canonical (padded, unused bits zero; Go
 * also accepts non-zero unused bits), a key name may not hold control characters (Go's key parsers
 * allow those a note can never carry), and a note is at most PGCL_NOTE_MAX_BYTES with at most
 * PGCL_NOTE_MAX_SIGS signature lines (Go's limit). Everything else is accepted or refused as Go's
 * note.Open, note.Sign, note.NewVerifier and note.NewSigner do (tests/tlog/verify_note checks
 * this against Go's package).
 *
 * Every function is thread-safe (no shared state) and needs sodium_init() first. */
#ifndef PGCL_NOTE_H
#define PGCL_NOTE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "merkle.h"
#include "status.h"

#define PGCL_NOTE_ALG_ED25519 0x01        /* a note signature (c2sp.org/signed-note) */
#define PGCL_NOTE_ALG_COSIGNATURE_V1 0x04 /* a timestamped witness cosignature (c2sp.org/tlog-cosignature) */

#define PGCL_NOTE_NAME_MAX 255           /* bytes of a key name (ours; the specification sets none) */
#define PGCL_NOTE_MAX_BYTES (256 * 1024) /* a whole signed note */
#define PGCL_NOTE_MAX_SIGS 100           /* signature lines in a note, as Go's note.Open */
#define PGCL_NOTE_PUBLIC_KEY_BYTES 32
/* "<name>+<8 hex>+<base64 of 33 bytes: 44>" and its NUL; a signer key adds "PRIVATE+KEY+" */
#define PGCL_NOTE_VKEY_MAX (PGCL_NOTE_NAME_MAX + 1 + 8 + 1 + 44 + 1)
#define PGCL_NOTE_SKEY_MAX (12 + PGCL_NOTE_VKEY_MAX)
/* "— " (4 bytes), a name, a space, base64 of at most 4 + 8 + 64 bytes (104), "\n" and a NUL */
#define PGCL_NOTE_SIG_LINE_MAX (4 + PGCL_NOTE_NAME_MAX + 1 + 104 + 1 + 1)

/* ---- keys ---- */

/* A public key as a verifier key names it. Plain data: copy it, compare it, keep it in tables. */
typedef struct pgcl_note_verifier {
    char name[PGCL_NOTE_NAME_MAX + 1];
    uint32_t key_id;
    uint8_t alg; /* PGCL_NOTE_ALG_ED25519 or PGCL_NOTE_ALG_COSIGNATURE_V1 */
    unsigned char public_key[PGCL_NOTE_PUBLIC_KEY_BYTES];
} pgcl_note_verifier;

/* A secret key and its name: opaque, made by one of the pgcl_note_signer_* constructors below,
 * wiped and freed by pgcl_note_signer_destroy. May be shared by threads (it is only read). */
typedef struct pgcl_note_signer pgcl_note_signer;

/* True when name[0:len) is a valid key name: non-empty, at most PGCL_NOTE_NAME_MAX bytes, valid
 * UTF-8, no Unicode white space, no '+', no control character. */
bool pgcl_note_name_valid(const char *name, size_t len);

/* SHA-256(name ‖ 0x0A ‖ alg ‖ public_key)[0:4], big-endian. name need not be valid. */
uint32_t pgcl_note_key_id(const char *name, size_t name_len, uint8_t alg,
                          const unsigned char public_key[PGCL_NOTE_PUBLIC_KEY_BYTES]);

/* Fills out for name, alg (0x01 or 0x04) and an Ed25519 public key, computing its key ID (Go's
 * NewEd25519VerifierKey for 0x01). PGCL_ERR_INVALID: a bad name or algorithm. */
pgcl_status pgcl_note_verifier_make(const char *name, uint8_t alg,
                                    const unsigned char public_key[PGCL_NOTE_PUBLIC_KEY_BYTES], pgcl_note_verifier *out,
                                    char *err, int cap);

/* Parses a verifier key (NUL-terminated): three '+'-separated parts, a valid name, 8 hex digits
 * (either case), canonical base64 of the algorithm byte and a 32-byte key, and a key ID equal to
 * the one computed. PGCL_ERR_FORMAT (malformed), PGCL_ERR_UNSUPPORTED (another algorithm),
 * PGCL_ERR_MISMATCH (the key ID is not this name's and key's). *out is zeroed on error. */
pgcl_status pgcl_note_verifier_parse(const char *vkey, pgcl_note_verifier *out, char *err, int cap);

/* Writes v's verifier key into buf (cap bytes, PGCL_NOTE_VKEY_MAX is enough). Returns its length,
 * or -1 when v is not a valid key (name, algorithm) or buf is too small. */
int pgcl_note_verifier_format(const pgcl_note_verifier *v, char *buf, size_t cap);

/* A signer of algorithm alg (0x01 or 0x04) named name from a 32-byte Ed25519 seed. NULL with *st and
 * err set: PGCL_ERR_INVALID (name, algorithm), PGCL_ERR_NOMEM. */
pgcl_note_signer *pgcl_note_signer_from_seed(const char *name, uint8_t alg, const unsigned char seed[32],
                                             pgcl_status *st, char *err, int cap);

/* A new random key pair (Go's GenerateKey for 0x01). Errors as pgcl_note_signer_from_seed. */
pgcl_note_signer *pgcl_note_signer_generate(const char *name, uint8_t alg, pgcl_status *st, char *err, int cap);

/* Parses a signer key (NUL-terminated; secret: err never quotes it). The key ID must be the one of
 * the public key derived from the seed. Errors as pgcl_note_verifier_parse, and PGCL_ERR_NOMEM. */
pgcl_note_signer *pgcl_note_signer_parse(const char *skey, pgcl_status *st, char *err, int cap);

/* pgcld's signing key file (pgcl_signing_keygen's, see signing.h: the hex of seed ‖ public key,
 * mode 0600) as a note signer of algorithm 0x01 named name, without a new key: the checkpoints
 * signed so far and the note signatures made from now on verify with the same public key.
 * Errors: those of pgcl_signing_secret_key (PGCL_ERR_IO, PGCL_ERR_INVALID, PGCL_ERR_FORMAT), and
 * PGCL_ERR_INVALID for a bad name. */
pgcl_note_signer *pgcl_note_signer_from_key_file(const char *path, const char *name, pgcl_status *st, char *err,
                                                 int cap);

/* Wipes and frees s; NULL is allowed. */
void pgcl_note_signer_destroy(pgcl_note_signer *s);

/* The public half of s: its name, key ID, algorithm and public key. Valid while s lives. */
const pgcl_note_verifier *pgcl_note_signer_verifier(const pgcl_note_signer *s);

/* Writes s's signer key (a secret) into buf (cap bytes; PGCL_NOTE_SKEY_MAX is enough). Returns its
 * length, or -1 when buf is too small (buf is then wiped). */
int pgcl_note_signer_format(const pgcl_note_signer *s, char *buf, size_t cap);

/* ---- notes ---- */

/* True when text[0:len) may be a note's text: non-empty, valid UTF-8, no control character but
 * '\n', ending in '\n'. */
bool pgcl_note_text_valid(const char *text, size_t len);

/* Signs text[0:len) (a valid note text) with signers[0:n) (1 to PGCL_NOTE_MAX_SIGS), in order, and
 * returns the signed note (malloc'd, NUL-terminated; its length in *out_len) for the caller to free.
 * Cosigners (algorithm 0x04) sign with the timestamp given (at most 2^63 - 1); they need text to be
 * a checkpoint (pgcl_tlog_checkpoint_parse). timestamp is unused when every signer is 0x01.
 * NULL with *st and err set: PGCL_ERR_INVALID (the text, no signers, a timestamp or a text a
 * cosigner refuses, a note over PGCL_NOTE_MAX_BYTES), PGCL_ERR_NOMEM. */
char *pgcl_note_sign(const char *text, size_t len, const pgcl_note_signer *const *signers, int n, uint64_t timestamp,
                     size_t *out_len, pgcl_status *st, char *err, int cap);

/* One signature line of text[0:len) by s ("— <name> <base64>\n", NUL-terminated) into
 * line[PGCL_NOTE_SIG_LINE_MAX]; *line_len its length. For a cosigner, timestamp is the
 * cosignature's time, as above. Errors as pgcl_note_sign's. A witness's answer to add-checkpoint is
 * made of such lines. */
pgcl_status pgcl_note_sign_line(const pgcl_note_signer *s, const char *text, size_t len, uint64_t timestamp,
                                char line[PGCL_NOTE_SIG_LINE_MAX], size_t *line_len, char *err, int cap);

/* A signature line of an opened note. The strings point into the note and live as long as it. */
typedef struct pgcl_note_sig {
    const char *name;         /* the key name, NUL-terminated */
    uint32_t key_id;          /* the first four bytes of the signature, big-endian */
    const char *base64;       /* the signature as its line writes it (key ID included), NUL-terminated */
    const unsigned char *sig; /* the bytes after the key ID, sig_len of them */
    size_t sig_len;
    int verifier;       /* the index in keys[] of the known key that verified it; -1: unknown key */
    uint64_t timestamp; /* a verified cosignature's time (its key's algorithm is 0x04); 0 otherwise */
} pgcl_note_sig;

/* An opened note: its text and every distinct signature line, in the order of the message. */
typedef struct pgcl_note {
    const char *text; /* the note text (its final newline included), NUL-terminated */
    size_t text_len;
    int n_sigs; /* verified and unknown; a known key's repeated lines and repeated unknown lines are dropped */
    pgcl_note_sig *sigs;
    int n_verified; /* sigs with verifier >= 0: at least 1 */
} pgcl_note;

/* Opens the signed note msg[0:len) with the known keys keys[0:n_keys) (n_keys >= 0), as Go's
 * note.Open does: the message must be a valid note; a signature whose name and key ID match no
 * known key is kept as unknown; one that matches a key is verified (only the first line of each
 * known key: later ones are dropped unread); at least one must verify. Returns the note, freed with
 * pgcl_note_destroy, or NULL with *st and err set:
 *   PGCL_ERR_FORMAT     not a signed note (characters, layout, a bad signature line, too large,
 *                       more than PGCL_NOTE_MAX_SIGS lines)
 *   PGCL_ERR_MISMATCH   a known key's signature does not verify (a cosignature's timestamp over
 *                       2^63 - 1 included): the whole note is refused
 *   PGCL_ERR_NOT_FOUND  no known key signed it (err names the keys that did)
 *   PGCL_ERR_INVALID    two of keys[] share a name and key ID that a line names
 *   PGCL_ERR_NOMEM */
pgcl_note *pgcl_note_open(const char *msg, size_t len, const pgcl_note_verifier *keys, int n_keys, pgcl_status *st,
                          char *err, int cap);

/* Frees n; NULL is allowed. */
void pgcl_note_destroy(pgcl_note *n);

/* ---- checkpoints (c2sp.org/tlog-checkpoint) ---- */

#define PGCL_TLOG_ORIGIN_MAX 255     /* bytes of an origin line (ours) */
#define PGCL_TLOG_SIZE_MAX INT64_MAX /* the largest tree size read or written (Go's tlog: int64) */
/* a checkpoint text without extension lines: origin, 19 digits, 44 base64 characters, 3 newlines, NUL */
#define PGCL_TLOG_CHECKPOINT_MAX (PGCL_TLOG_ORIGIN_MAX + 19 + 44 + 3 + 1)

typedef struct pgcl_tlog_checkpoint {
    char origin[PGCL_TLOG_ORIGIN_MAX + 1];
    uint64_t size;         /* leaves in the tree: at most PGCL_TLOG_SIZE_MAX */
    pgcl_merkle_hash root; /* RFC 6962 root of the first size leaves */
    /* as parsed: the extension lines (each non-empty, ending in '\n') are text[ext_at : ext_at + ext_len)
     * of the text parsed, ext_len 0 when none; unused by pgcl_tlog_checkpoint_format */
    size_t ext_at, ext_len;
} pgcl_tlog_checkpoint;

/* Writes cp's checkpoint text (no extension lines) into buf[PGCL_TLOG_CHECKPOINT_MAX], NUL-terminated,
 * its length in *len. The origin must be a valid key name (the specification's recommendation, which
 * a log's own origin follows), the size at most PGCL_TLOG_SIZE_MAX. PGCL_ERR_INVALID otherwise. */
pgcl_status pgcl_tlog_checkpoint_format(const pgcl_tlog_checkpoint *cp, char buf[PGCL_TLOG_CHECKPOINT_MAX], size_t *len,
                                        char *err, int cap);

/* Parses a checkpoint text (a note's text, e.g. pgcl_note's): a valid note text of at least three
 * lines, all non-empty; a non-empty origin of at most PGCL_TLOG_ORIGIN_MAX bytes (any text: the
 * specification lets origins be anything); a size in canonical decimal up to PGCL_TLOG_SIZE_MAX;
 * canonical base64 of 32 bytes; then extension lines. PGCL_ERR_FORMAT otherwise; *out is zeroed. */
pgcl_status pgcl_tlog_checkpoint_parse(const char *text, size_t len, pgcl_tlog_checkpoint *out, char *err, int cap);

/* Opens a signed checkpoint msg[0:len): a note that log_key (algorithm 0x01) signed, whose text is a
 * checkpoint with the origin given (NULL: log_key's name, the specification's recommendation),
 * and that carries valid cosignatures by at least quorum of witnesses[0:n_witnesses) (algorithm
 * 0x04; counted once per distinct public key: a cosignature/v1 does not sign its key's name).
 * Other signatures are ignored. Fills *cp; returns the opened note (keys[] of its sigs: 0 is
 * log_key, 1 + i is witnesses[i]) for pgcl_note_destroy, or NULL with *st and err set: the errors of
 * pgcl_note_open (PGCL_ERR_NOT_FOUND also when log_key did not sign it), of
 * pgcl_tlog_checkpoint_parse, PGCL_ERR_MISMATCH for another origin, PGCL_ERR_INVALID for bad
 * arguments, and PGCL_ERR_NOT_FOUND when fewer than quorum witnesses cosigned. */
pgcl_note *pgcl_tlog_checkpoint_open(const char *msg, size_t len, const pgcl_note_verifier *log_key, const char *origin,
                                     const pgcl_note_verifier *witnesses, int n_witnesses, int quorum,
                                     pgcl_tlog_checkpoint *cp, pgcl_status *st, char *err, int cap);

/* ---- the witness protocol (c2sp.org/tlog-witness): its texts, not its HTTP ---- */

#define PGCL_TLOG_WITNESS_PROOF_MAX 63 /* consistency proof lines a request may carry */

/* The body of an add-checkpoint request: "old <old_size>\n", the consistency proof from old_size to
 * the checkpoint's size (proof[0:n_proof), at most PGCL_TLOG_WITNESS_PROOF_MAX hashes, none when
 * old_size is 0) one base64 hash a line, a blank line, then the signed checkpoint msg[0:len) as it
 * is. Returns it malloc'd and NUL-terminated (*out_len its length) for the caller to free, or NULL
 * with *st and err set: PGCL_ERR_INVALID (old_size over PGCL_TLOG_SIZE_MAX, a proof count out of
 * range, msg not ending in a newline or over PGCL_NOTE_MAX_BYTES), PGCL_ERR_NOMEM. */
char *pgcl_tlog_witness_request(uint64_t old_size, const pgcl_merkle_hash *proof, int n_proof, const char *msg,
                                size_t len, size_t *out_len, pgcl_status *st, char *err, int cap);

/* The body of a 409 Conflict answer: the size of the witness's latest cosigned checkpoint, canonical
 * decimal and a newline, into *size. PGCL_ERR_FORMAT otherwise. */
pgcl_status pgcl_tlog_witness_parse_size(const char *body, size_t len, uint64_t *size, char *err, int cap);

/* The body of a 200 answer, body[0:len): one or more signature lines. Checks the line of witness
 * (algorithm 0x04) as a cosignature of checkpoint_text[0:text_len) (the text sent, without its
 * signatures) and copies it into line[PGCL_NOTE_SIG_LINE_MAX] (NUL-terminated, ending in '\n'), ready
 * to be stored and appended to the signed checkpoint; its time into *timestamp. Other keys' lines are
 * ignored. Errors as pgcl_note_open's: PGCL_ERR_FORMAT (not signature lines), PGCL_ERR_MISMATCH
 * (witness's line does not verify), PGCL_ERR_NOT_FOUND (no line of witness), PGCL_ERR_INVALID (a
 * witness key of another algorithm), PGCL_ERR_NOMEM. */
pgcl_status pgcl_tlog_witness_cosignature(const char *checkpoint_text, size_t text_len, const char *body, size_t len,
                                          const pgcl_note_verifier *witness, char line[PGCL_NOTE_SIG_LINE_MAX],
                                          uint64_t *timestamp, char *err, int cap);

#endif
