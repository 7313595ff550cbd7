/* Signed notes, their keys and cosignatures (C2SP signed-note, tlog-cosignature); see note.h for the
 * formats and the rules. Checkpoint texts: note_checkpoint.c. */
#include "note.h"

#include <inttypes.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base64.h"
#include "signing.h"

#define EM_DASH_SPACE "\xe2\x80\x94 " /* U+2014 and a space: how every signature line starts */
#define EM_DASH_SPACE_LEN 4
#define SKEY_PREFIX "PRIVATE+KEY+"
#define SKEY_PREFIX_LEN 12
#define COSIG_HEADER "cosignature/v1\ntime "
#define COSIG_PREFIX_MAX (sizeof COSIG_HEADER - 1 + 20 + 1) /* the header, a uint64 in decimal, '\n' */
#define ED25519_SIG_BYTES 64
#define COSIG_SIG_BYTES (8 + ED25519_SIG_BYTES)    /* big-endian timestamp ‖ Ed25519 signature */
#define SIG_BYTES_MAX (4 + COSIG_SIG_BYTES)        /* key ID ‖ the longest signature made here */
#define KEY_BYTES (1 + PGCL_NOTE_PUBLIC_KEY_BYTES) /* alg ‖ public key (or seed) */
#define RAW_KEY_MAX 128                            /* decoded key bytes read from a key string */
#define UNKNOWN_LISTED 4                           /* unknown signers named in an error */

_Static_assert(crypto_sign_SEEDBYTES == 32 && crypto_sign_PUBLICKEYBYTES == PGCL_NOTE_PUBLIC_KEY_BYTES, "Ed25519");
_Static_assert(crypto_sign_BYTES == ED25519_SIG_BYTES, "Ed25519 signatures");
_Static_assert(PGCL_NOTE_SIG_LINE_MAX == EM_DASH_SPACE_LEN + PGCL_NOTE_NAME_MAX + 1 + (SIG_BYTES_MAX + 2) / 3 * 4 + 2,
               "a signature line's size");

struct pgcl_note_signer {
    pgcl_note_verifier pub;
    unsigned char sk[crypto_sign_SECRETKEYBYTES]; /* libsodium's: seed ‖ public key */
};

/* ---- text: UTF-8, names, base64, big-endian ---- */

/* The length of the well-formed UTF-8 sequence at s[0:n) (n >= 1) with its code point in *cp, or 0
 * when ill-formed: a stray or truncated byte, an overlong form, a surrogate, beyond U+10FFFF (the
 * Unicode standard's table 3-7; Go's utf8.DecodeRune refuses the same). */
static size_t utf8_next(const unsigned char *s, size_t n, uint32_t *cp) {
    unsigned char b = s[0], lo = 0x80, hi = 0xBF;
    size_t len;
    uint32_t c;
    if (b < 0x80) {
        *cp = b;
        return 1;
    }
    if (b >= 0xC2 && b <= 0xDF) {
        len = 2;
        c = b & 0x1Fu;
    } else if (b >= 0xE0 && b <= 0xEF) {
        len = 3;
        c = b & 0x0Fu;
        if (b == 0xE0) lo = 0xA0; /* overlong below U+0800 */
        if (b == 0xED) hi = 0x9F; /* surrogates U+D800..DFFF */
    } else if (b >= 0xF0 && b <= 0xF4) {
        len = 4;
        c = b & 0x07u;
        if (b == 0xF0) lo = 0x90; /* overlong below U+10000 */
        if (b == 0xF4) hi = 0x8F; /* beyond U+10FFFF */
    } else {
        return 0;
    }
    if (n < len) return 0;
    for (size_t i = 1; i < len; i++) {
        unsigned char t = s[i];
        if (t < (i == 1 ? lo : 0x80) || t > (i == 1 ? hi : 0xBF)) return 0;
        c = c << 6 | (t & 0x3Fu);
    }
    *cp = c;
    return len;
}

/* Unicode's White_Space property (the code points Go's unicode.IsSpace reports). */
static bool is_white_space(uint32_t c) {
    return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

/* Valid UTF-8 without control characters (below U+0020) but '\n'. */
static bool text_chars_valid(const char *text, size_t len) {
    const unsigned char *s = (const unsigned char *)text;
    for (size_t i = 0; i < len;) {
        uint32_t c;
        size_t k = utf8_next(s + i, len - i, &c);
        if (k == 0 || (c < 0x20 && c != '\n')) return false;
        i += k;
    }
    return true;
}

/* A key name of any length: non-empty UTF-8 without white space, '+' or control characters (in a
 * note, whose characters are checked first, exactly Go's isValidName). */
static bool name_chars_valid(const char *name, size_t len) {
    const unsigned char *s = (const unsigned char *)name;
    if (len == 0) return false;
    for (size_t i = 0; i < len;) {
        uint32_t c;
        size_t k = utf8_next(s + i, len - i, &c);
        if (k == 0 || c < 0x20 || c == '+' || is_white_space(c)) return false;
        i += k;
    }
    return true;
}

bool pgcl_note_name_valid(const char *name, size_t len) {
    return name && len <= PGCL_NOTE_NAME_MAX && name_chars_valid(name, len);
}

bool pgcl_note_text_valid(const char *text, size_t len) {
    return text && len > 0 && text[len - 1] == '\n' && text_chars_valid(text, len);
}

/* Decodes canonical padded base64 text[0:len) of any length into out[0:cap). Returns the number of
 * bytes, or -1 when malformed, not canonical or longer than cap. */
static long b64_decode(const char *text, size_t len, unsigned char *out, size_t cap) {
    if (len < 4 || len % 4 != 0) return -1;
    size_t pad = text[len - 1] != '=' ? 0 : text[len - 2] != '=' ? 1 : 2;
    size_t n = len / 4 * 3 - pad;
    if (n > cap || !pgcl_base64_decode_exact(text, len, out, n)) return -1;
    return (long)n;
}

/* Standard padded base64 of bin[0:n) into out (cap bytes, NUL included); false when it does not fit. */
static bool b64_encode(const unsigned char *bin, size_t n, char *out, size_t cap) {
    if (cap < sodium_base64_ENCODED_LEN(n, sodium_base64_VARIANT_ORIGINAL)) return false;
    sodium_bin2base64(out, cap, bin, n, sodium_base64_VARIANT_ORIGINAL);
    return true;
}

static uint32_t get_be32(const unsigned char *p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static void put_be32(unsigned char *p, uint32_t v) {
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)(v >> (24 - 8 * i));
}

static uint64_t get_be64(const unsigned char *p) {
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = v << 8 | p[i];
    return v;
}

static void put_be64(unsigned char *p, uint64_t v) {
    for (int i = 0; i < 8; i++)
        p[i] = (unsigned char)(v >> (56 - 8 * i));
}

/* ---- keys ---- */

/* SHA-256(name ‖ 0x0A ‖ key[0:n))[0:4], big-endian: key is the algorithm byte and the public key. */
static uint32_t key_id_of(const char *name, size_t name_len, const unsigned char *key, size_t n) {
    crypto_hash_sha256_state h;
    unsigned char sum[crypto_hash_sha256_BYTES];
    crypto_hash_sha256_init(&h);
    crypto_hash_sha256_update(&h, (const unsigned char *)name, name_len);
    crypto_hash_sha256_update(&h, (const unsigned char *)"\n", 1);
    crypto_hash_sha256_update(&h, key, n);
    crypto_hash_sha256_final(&h, sum);
    return get_be32(sum);
}

uint32_t pgcl_note_key_id(const char *name, size_t name_len, uint8_t alg,
                          const unsigned char public_key[PGCL_NOTE_PUBLIC_KEY_BYTES]) {
    unsigned char key[KEY_BYTES];
    key[0] = alg;
    memcpy(key + 1, public_key, PGCL_NOTE_PUBLIC_KEY_BYTES);
    return key_id_of(name, name_len, key, sizeof key);
}

static bool alg_known(uint8_t alg) {
    return alg == PGCL_NOTE_ALG_ED25519 || alg == PGCL_NOTE_ALG_COSIGNATURE_V1;
}

/* PGCL_OK when a key may have this name (NUL-terminated) and algorithm, else PGCL_ERR_INVALID. */
static pgcl_status check_name_alg(const char *name, uint8_t alg, char *err, int cap) {
    if (!name || !pgcl_note_name_valid(name, strlen(name))) {
        pgcl_errorf(err, cap,
                    "key name \"%.80s\": must be 1 to %d bytes of UTF-8 without spaces, '+' or control "
                    "characters",
                    name ? name : "", PGCL_NOTE_NAME_MAX);
        return PGCL_ERR_INVALID;
    }
    if (!alg_known(alg)) {
        pgcl_errorf(err, cap, "key algorithm 0x%02x: only 0x01 (Ed25519) and 0x04 (cosignature/v1)", alg);
        return PGCL_ERR_INVALID;
    }
    return PGCL_OK;
}

pgcl_status pgcl_note_verifier_make(const char *name, uint8_t alg,
                                    const unsigned char public_key[PGCL_NOTE_PUBLIC_KEY_BYTES], pgcl_note_verifier *out,
                                    char *err, int cap) {
    memset(out, 0, sizeof *out);
    pgcl_status st = check_name_alg(name, alg, err, cap);
    if (st != PGCL_OK) return st;
    memcpy(out->name, name, strlen(name) + 1);
    out->alg = alg;
    memcpy(out->public_key, public_key, PGCL_NOTE_PUBLIC_KEY_BYTES);
    out->key_id = pgcl_note_key_id(name, strlen(name), alg, public_key);
    return PGCL_OK;
}

/* The parts of "<name>+<hex8>+<base64>" (a verifier key, or a signer key after its prefix): a valid
 * name into name[PGCL_NOTE_NAME_MAX + 1], the key ID, and the decoded key bytes into
 * raw[RAW_KEY_MAX] (*n of them, at least 1). false when malformed (err says which part, never
 * quoting the text: it may be secret). */
static bool split_key(const char *s, char *name, uint32_t *id, unsigned char *raw, size_t *n, const char *what,
                      char *err, int cap) {
    const char *plus1 = strchr(s, '+'), *plus2 = plus1 ? strchr(plus1 + 1, '+') : NULL;
    if (!plus2) {
        pgcl_errorf(err, cap, "%s: not <name>+<key ID>+<key> (two '+' expected)", what);
        return false;
    }
    size_t name_len = (size_t)(plus1 - s);
    if (!pgcl_note_name_valid(s, name_len)) {
        pgcl_errorf(err, cap,
                    "%s: the key name must be 1 to %d bytes of UTF-8 without spaces, '+' or control "
                    "characters",
                    what, PGCL_NOTE_NAME_MAX);
        return false;
    }
    uint32_t v = 0;
    if (plus2 - plus1 != 9) goto bad_id;
    for (int i = 1; i <= 8; i++) {
        char c = plus1[i];
        int d = c >= '0' && c <= '9'   ? c - '0'
                : c >= 'a' && c <= 'f' ? c - 'a' + 10
                : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                       : -1;
        if (d < 0) goto bad_id;
        v = v << 4 | (uint32_t)d;
    }
    long got = b64_decode(plus2 + 1, strlen(plus2 + 1), raw, RAW_KEY_MAX);
    if (got < 1) {
        pgcl_errorf(err, cap, "%s: the key is not canonical base64 of 1 to %d bytes", what, RAW_KEY_MAX);
        return false;
    }
    memcpy(name, s, name_len);
    name[name_len] = 0;
    *id = v;
    *n = (size_t)got;
    return true;
bad_id:
    pgcl_errorf(err, cap, "%s: the key ID must be 8 hex digits", what);
    return false;
}

pgcl_status pgcl_note_verifier_parse(const char *vkey, pgcl_note_verifier *out, char *err, int cap) {
    unsigned char raw[RAW_KEY_MAX];
    size_t n = 0;
    uint32_t id = 0;
    memset(out, 0, sizeof *out);
    if (!vkey || !split_key(vkey, out->name, &id, raw, &n, "verifier key", err, cap)) {
        if (!vkey) pgcl_errorf(err, cap, "verifier key: none");
        memset(out, 0, sizeof *out);
        return PGCL_ERR_FORMAT;
    }
    pgcl_status st = PGCL_OK;
    if (key_id_of(out->name, strlen(out->name), raw, n) != id) {
        pgcl_errorf(err, cap, "verifier key %.300s: its key ID is not the hash of its name and key", vkey);
        st = PGCL_ERR_MISMATCH;
    } else if (!alg_known(raw[0])) {
        pgcl_errorf(err, cap, "verifier key %.300s: algorithm 0x%02x (known: 0x01 Ed25519, 0x04 cosignature/v1)", vkey,
                    raw[0]);
        st = PGCL_ERR_UNSUPPORTED;
    } else if (n != KEY_BYTES) {
        pgcl_errorf(err, cap, "verifier key %.300s: an Ed25519 key is 32 bytes, not %zu", vkey, n - 1);
        st = PGCL_ERR_FORMAT;
    }
    if (st != PGCL_OK) {
        memset(out, 0, sizeof *out);
        return st;
    }
    out->key_id = id;
    out->alg = raw[0];
    memcpy(out->public_key, raw + 1, PGCL_NOTE_PUBLIC_KEY_BYTES);
    return PGCL_OK;
}

int pgcl_note_verifier_format(const pgcl_note_verifier *v, char *buf, size_t cap) {
    unsigned char key[KEY_BYTES];
    char b64[sodium_base64_ENCODED_LEN(KEY_BYTES, sodium_base64_VARIANT_ORIGINAL)];
    if (!pgcl_note_name_valid(v->name, strnlen(v->name, sizeof v->name)) || !alg_known(v->alg)) return -1;
    key[0] = v->alg;
    memcpy(key + 1, v->public_key, PGCL_NOTE_PUBLIC_KEY_BYTES);
    PGCL_ASSERT(b64_encode(key, sizeof key, b64, sizeof b64));
    int n = snprintf(buf, cap, "%s+%08" PRIx32 "+%s", v->name, v->key_id, b64);
    return n < 0 || (size_t)n >= cap ? -1 : n;
}

pgcl_note_signer *pgcl_note_signer_from_seed(const char *name, uint8_t alg, const unsigned char seed[32],
                                             pgcl_status *st, char *err, int cap) {
    unsigned char pk[PGCL_NOTE_PUBLIC_KEY_BYTES];
    if ((*st = check_name_alg(name, alg, err, cap)) != PGCL_OK) return NULL;
    pgcl_note_signer *s = malloc(sizeof *s);
    if (!s) {
        pgcl_errorf(err, cap, "out of memory for a note signer");
        *st = PGCL_ERR_NOMEM;
        return NULL;
    }
    crypto_sign_seed_keypair(pk, s->sk, seed);
    *st = pgcl_note_verifier_make(name, alg, pk, &s->pub, err, cap);
    PGCL_ASSERT(*st == PGCL_OK); /* the same name and algorithm passed above */
    return s;
}

pgcl_note_signer *pgcl_note_signer_generate(const char *name, uint8_t alg, pgcl_status *st, char *err, int cap) {
    unsigned char seed[crypto_sign_SEEDBYTES];
    randombytes_buf(seed, sizeof seed);
    pgcl_note_signer *s = pgcl_note_signer_from_seed(name, alg, seed, st, err, cap);
    sodium_memzero(seed, sizeof seed);
    return s;
}

pgcl_note_signer *pgcl_note_signer_parse(const char *skey, pgcl_status *st, char *err, int cap) {
    unsigned char raw[RAW_KEY_MAX];
    char name[PGCL_NOTE_NAME_MAX + 1];
    size_t n = 0;
    uint32_t id = 0;
    pgcl_note_signer *s = NULL;
    *st = PGCL_ERR_FORMAT;
    if (!skey || strncmp(skey, SKEY_PREFIX, SKEY_PREFIX_LEN) != 0) {
        pgcl_errorf(err, cap, "signer key: does not start with " SKEY_PREFIX);
        return NULL;
    }
    if (!split_key(skey + SKEY_PREFIX_LEN, name, &id, raw, &n, "signer key", err, cap)) goto done;
    if (!alg_known(raw[0])) {
        pgcl_errorf(err, cap, "signer key %s: algorithm 0x%02x (known: 0x01 Ed25519, 0x04 cosignature/v1)", name,
                    raw[0]);
        *st = PGCL_ERR_UNSUPPORTED;
        goto done;
    }
    if (n != KEY_BYTES) {
        pgcl_errorf(err, cap, "signer key %s: an Ed25519 seed is 32 bytes", name);
        goto done;
    }
    s = pgcl_note_signer_from_seed(name, raw[0], raw + 1, st, err, cap);
    if (s && s->pub.key_id != id) {
        pgcl_errorf(err, cap, "signer key %s: its key ID %08" PRIx32 " is not its public key's (%08" PRIx32 ")", name,
                    id, s->pub.key_id);
        pgcl_note_signer_destroy(s);
        s = NULL;
        *st = PGCL_ERR_MISMATCH;
    }
done:
    sodium_memzero(raw, sizeof raw);
    return s;
}

pgcl_note_signer *pgcl_note_signer_from_key_file(const char *path, const char *name, pgcl_status *st, char *err,
                                                 int cap) {
    unsigned char sk[crypto_sign_SECRETKEYBYTES];
    if ((*st = check_name_alg(name, PGCL_NOTE_ALG_ED25519, err, cap)) != PGCL_OK) return NULL;
    *st = pgcl_signing_secret_key(path, sk, err, cap);
    if (*st != PGCL_OK) return NULL;
    pgcl_note_signer *s =
        pgcl_note_signer_from_seed(name, PGCL_NOTE_ALG_ED25519, sk, st, err, cap); /* sk starts with the seed */
    /* the key file's public half was checked against its seed by pgcl_signing_secret_key */
    PGCL_ASSERT(!s || sodium_memcmp(s->pub.public_key, sk + crypto_sign_SEEDBYTES, PGCL_NOTE_PUBLIC_KEY_BYTES) == 0);
    sodium_memzero(sk, sizeof sk);
    return s;
}

void pgcl_note_signer_destroy(pgcl_note_signer *s) {
    if (!s) return;
    sodium_memzero(s, sizeof *s);
    free(s);
}

const pgcl_note_verifier *pgcl_note_signer_verifier(const pgcl_note_signer *s) {
    return &s->pub;
}

int pgcl_note_signer_format(const pgcl_note_signer *s, char *buf, size_t cap) {
    unsigned char key[KEY_BYTES];
    char b64[sodium_base64_ENCODED_LEN(KEY_BYTES, sodium_base64_VARIANT_ORIGINAL)];
    key[0] = s->pub.alg;
    memcpy(key + 1, s->sk, crypto_sign_SEEDBYTES);
    PGCL_ASSERT(b64_encode(key, sizeof key, b64, sizeof b64));
    int n = snprintf(buf, cap, SKEY_PREFIX "%s+%08" PRIx32 "+%s", s->pub.name, s->pub.key_id, b64);
    sodium_memzero(key, sizeof key);
    sodium_memzero(b64, sizeof b64);
    if (n < 0 || (size_t)n >= cap) {
        if (cap > 0) sodium_memzero(buf, cap);
        return -1;
    }
    return n;
}

/* ---- signing ---- */

/* Writes "cosignature/v1\ntime <ts>\n" so that it ends at prefix_end (COSIG_PREFIX_MAX bytes before
 * it are free) and returns where it starts: the text to sign follows at prefix_end. */
static unsigned char *cosig_prefix(unsigned char *prefix_end, uint64_t ts) {
    char head[COSIG_PREFIX_MAX + 1];
    int n = snprintf(head, sizeof head, COSIG_HEADER "%" PRIu64 "\n", ts);
    PGCL_ASSERT(n > 0 && (size_t)n <= COSIG_PREFIX_MAX);
    memcpy(prefix_end - n, head, (size_t)n);
    return prefix_end - n;
}

/* The signature bytes (key ID excluded) of text[0:len), a valid note text, by s into
 * out[COSIG_SIG_BYTES]; *n their number. */
static pgcl_status sign_bytes(const pgcl_note_signer *s, const char *text, size_t len, uint64_t ts, unsigned char *out,
                              size_t *n, char *err, int cap) {
    if (s->pub.alg == PGCL_NOTE_ALG_ED25519) {
        crypto_sign_detached(out, NULL, (const unsigned char *)text, len, s->sk);
        *n = ED25519_SIG_BYTES;
        return PGCL_OK;
    }
    PGCL_ASSERT(s->pub.alg == PGCL_NOTE_ALG_COSIGNATURE_V1);
    pgcl_tlog_checkpoint cp;
    if (ts > (uint64_t)INT64_MAX) {
        pgcl_errorf(err, cap, "a cosignature's timestamp is at most 2^63 - 1, not %" PRIu64, ts);
        return PGCL_ERR_INVALID;
    }
    if (pgcl_tlog_checkpoint_parse(text, len, &cp, err, cap) != PGCL_OK) return PGCL_ERR_INVALID;
    unsigned char *buf = malloc(COSIG_PREFIX_MAX + len);
    if (!buf) {
        pgcl_errorf(err, cap, "out of memory for a cosigned message of %zu bytes", len);
        return PGCL_ERR_NOMEM;
    }
    memcpy(buf + COSIG_PREFIX_MAX, text, len);
    unsigned char *msg = cosig_prefix(buf + COSIG_PREFIX_MAX, ts);
    put_be64(out, ts);
    crypto_sign_detached(out + 8, NULL, msg, (size_t)(buf + COSIG_PREFIX_MAX + len - msg), s->sk);
    free(buf);
    *n = COSIG_SIG_BYTES;
    return PGCL_OK;
}

/* PGCL_OK when text[0:len) may be signed: a valid note text of at most PGCL_NOTE_MAX_BYTES. */
static pgcl_status check_text(const char *text, size_t len, char *err, int cap) {
    if (len > PGCL_NOTE_MAX_BYTES || !pgcl_note_text_valid(text, len)) {
        pgcl_errorf(err, cap,
                    "not a note text (valid UTF-8 without control characters but newlines, ending in a "
                    "newline, at most %d bytes)",
                    PGCL_NOTE_MAX_BYTES);
        return PGCL_ERR_INVALID;
    }
    return PGCL_OK;
}

pgcl_status pgcl_note_sign_line(const pgcl_note_signer *s, const char *text, size_t len, uint64_t timestamp,
                                char line[PGCL_NOTE_SIG_LINE_MAX], size_t *line_len, char *err, int cap) {
    unsigned char raw[SIG_BYTES_MAX];
    char b64[sodium_base64_ENCODED_LEN(SIG_BYTES_MAX, sodium_base64_VARIANT_ORIGINAL)];
    size_t n = 0;
    line[0] = 0;
    *line_len = 0;
    pgcl_status st = check_text(text, len, err, cap);
    if (st != PGCL_OK) return st;
    put_be32(raw, s->pub.key_id);
    st = sign_bytes(s, text, len, timestamp, raw + 4, &n, err, cap);
    if (st != PGCL_OK) return st;
    PGCL_ASSERT(b64_encode(raw, 4 + n, b64, sizeof b64));
    int k = snprintf(line, PGCL_NOTE_SIG_LINE_MAX, EM_DASH_SPACE "%s %s\n", s->pub.name, b64);
    PGCL_ASSERT(k > 0 && k < PGCL_NOTE_SIG_LINE_MAX); /* sized by the longest name and signature */
    *line_len = (size_t)k;
    return PGCL_OK;
}

char *pgcl_note_sign(const char *text, size_t len, const pgcl_note_signer *const *signers, int n, uint64_t timestamp,
                     size_t *out_len, pgcl_status *st, char *err, int cap) {
    char line[PGCL_NOTE_SIG_LINE_MAX];
    *out_len = 0;
    if (n < 1 || n > PGCL_NOTE_MAX_SIGS) {
        pgcl_errorf(err, cap, "a note is signed by 1 to %d keys, not %d", PGCL_NOTE_MAX_SIGS, n);
        *st = PGCL_ERR_INVALID;
        return NULL;
    }
    if ((*st = check_text(text, len, err, cap)) != PGCL_OK) return NULL;
    size_t cap_out = len + 1 + (size_t)n * PGCL_NOTE_SIG_LINE_MAX + 1, used = 0;
    char *out = malloc(cap_out);
    if (!out) {
        pgcl_errorf(err, cap, "out of memory for a signed note");
        *st = PGCL_ERR_NOMEM;
        return NULL;
    }
    memcpy(out, text, len);
    out[len] = '\n';
    used = len + 1;
    for (int i = 0; i < n; i++) {
        size_t k = 0;
        *st = pgcl_note_sign_line(signers[i], text, len, timestamp, line, &k, err, cap);
        if (*st != PGCL_OK) {
            free(out);
            return NULL;
        }
        memcpy(out + used, line, k);
        used += k;
    }
    if (used > PGCL_NOTE_MAX_BYTES) {
        pgcl_errorf(err, cap, "the signed note would be %zu bytes, over the %d a note may have", used,
                    PGCL_NOTE_MAX_BYTES);
        free(out);
        *st = PGCL_ERR_INVALID;
        return NULL;
    }
    out[used] = 0;
    *out_len = used;
    *st = PGCL_OK;
    return out;
}

/* ---- opening ---- */

/* A note and its signatures in one allocation, followed by its characters: the text and a NUL, the
 * names and base64 of the lines each with a NUL, the decoded signature bytes. */
struct note_block {
    pgcl_note note;
    pgcl_note_sig sigs[];
};

/* The state of one pgcl_note_open: scratch for cosigned messages, made on first use. */
typedef struct open_ctx {
    const char *text;
    size_t text_len;
    unsigned char *cosig; /* COSIG_PREFIX_MAX free bytes, then the text */
} open_ctx;

/* Whether sig[0:n) is v's signature of the note text; a cosignature's time in *ts. -1: out of memory. */
static int verify_sig(open_ctx *c, const pgcl_note_verifier *v, const unsigned char *sig, size_t n, uint64_t *ts) {
    *ts = 0;
    if (v->alg == PGCL_NOTE_ALG_ED25519)
        return n == ED25519_SIG_BYTES &&
               crypto_sign_verify_detached(sig, (const unsigned char *)c->text, c->text_len, v->public_key) == 0;
    PGCL_ASSERT(v->alg == PGCL_NOTE_ALG_COSIGNATURE_V1); /* pgcl_note_open checked every key's */
    if (n != COSIG_SIG_BYTES || get_be64(sig) > (uint64_t)INT64_MAX) return 0;
    if (!c->cosig) {
        if (!(c->cosig = malloc(COSIG_PREFIX_MAX + c->text_len))) return -1;
        memcpy(c->cosig + COSIG_PREFIX_MAX, c->text, c->text_len);
    }
    unsigned char *end = c->cosig + COSIG_PREFIX_MAX, *msg = cosig_prefix(end, get_be64(sig));
    if (crypto_sign_verify_detached(sig + 8, msg, (size_t)(end + c->text_len - msg), v->public_key) != 0) return 0;
    *ts = get_be64(sig);
    return 1;
}

/* The index of the key among keys[0:n) named name[0:len) with key ID id: -1 when none, -2 when
 * several. */
static int find_key(const pgcl_note_verifier *keys, int n, const char *name, size_t len, uint32_t id) {
    int found = -1;
    for (int k = 0; k < n; k++) {
        if (keys[k].key_id != id || strnlen(keys[k].name, sizeof keys[k].name) != len ||
            memcmp(keys[k].name, name, len) != 0)
            continue;
        if (found >= 0) return -2;
        found = k;
    }
    return found;
}

static pgcl_note *open_fail(pgcl_note *n, open_ctx *c, pgcl_status *st, pgcl_status why) {
    free(n);
    free(c->cosig);
    *st = why;
    return NULL;
}

pgcl_note *pgcl_note_open(const char *msg, size_t len, const pgcl_note_verifier *keys, int n_keys, pgcl_status *st,
                          char *err, int cap) {
    open_ctx c = {0};
    if (n_keys < 0 || (n_keys > 0 && !keys)) {
        pgcl_errorf(err, cap, "no key table");
        return open_fail(NULL, &c, st, PGCL_ERR_INVALID);
    }
    for (int k = 0; k < n_keys; k++)
        if (!alg_known(keys[k].alg)) {
            pgcl_errorf(err, cap, "known key %d (%.80s): algorithm 0x%02x", k, keys[k].name, keys[k].alg);
            return open_fail(NULL, &c, st, PGCL_ERR_INVALID);
        }
    if (!msg || len > PGCL_NOTE_MAX_BYTES) {
        pgcl_errorf(err, cap, "malformed note: over %d bytes", PGCL_NOTE_MAX_BYTES);
        return open_fail(NULL, &c, st, PGCL_ERR_FORMAT);
    }
    if (!text_chars_valid(msg, len)) {
        pgcl_errorf(err, cap, "malformed note: not UTF-8, or a control character other than newline");
        return open_fail(NULL, &c, st, PGCL_ERR_FORMAT);
    }
    /* the text ends at the last blank line; the signature lines follow it, each ending in '\n' */
    size_t split = len;
    for (size_t i = len; i >= 2 && split == len; i--)
        if (msg[i - 2] == '\n' && msg[i - 1] == '\n') split = i - 2;
    if (split == len || split + 2 == len || msg[len - 1] != '\n') {
        pgcl_errorf(err, cap, "malformed note: no blank line followed by signature lines");
        return open_fail(NULL, &c, st, PGCL_ERR_FORMAT);
    }
    c.text_len = split + 1;
    const char *sigs = msg + split + 2;
    size_t sigs_len = len - split - 2;
    int n_lines = 0;
    for (size_t i = 0; i < sigs_len; i++)
        n_lines += sigs[i] == '\n';
    if (n_lines > PGCL_NOTE_MAX_SIGS) {
        pgcl_errorf(err, cap, "malformed note: %d signature lines, over %d", n_lines, PGCL_NOTE_MAX_SIGS);
        return open_fail(NULL, &c, st, PGCL_ERR_FORMAT);
    }
    size_t size =
        sizeof(struct note_block) + (size_t)n_lines * sizeof(pgcl_note_sig) + c.text_len + 1 + 2 * sigs_len + 1;
    struct note_block *b = malloc(size);
    if (!b) {
        pgcl_errorf(err, cap, "out of memory for a note of %zu bytes", len);
        return open_fail(NULL, &c, st, PGCL_ERR_NOMEM);
    }
    pgcl_note *n = &b->note;
    char *chars = (char *)&b->sigs[n_lines], *names = chars + c.text_len + 1;
    /* sigs_len bytes for the decoded signatures: a line's base64 decodes to fewer bytes than the line has */
    unsigned char *bytes = (unsigned char *)names + sigs_len + 1, *bytes_end = bytes + sigs_len;
    memcpy(chars, msg, c.text_len);
    chars[c.text_len] = 0;
    *n = (pgcl_note){.text = chars, .text_len = c.text_len, .sigs = b->sigs};
    c.text = chars;

    int at = 0; /* the signature line's number, for messages */
    for (const char *p = sigs; p < sigs + sigs_len;) {
        const char *eol = memchr(p, '\n', (size_t)(sigs + sigs_len - p)), *line = p;
        p = eol + 1;
        at++;
        if (eol - line < EM_DASH_SPACE_LEN || memcmp(line, EM_DASH_SPACE, EM_DASH_SPACE_LEN) != 0) {
            pgcl_errorf(err, cap, "malformed note: signature line %d does not start with an em dash and a space", at);
            return open_fail(n, &c, st, PGCL_ERR_FORMAT);
        }
        const char *name = line + EM_DASH_SPACE_LEN, *space = memchr(name, ' ', (size_t)(eol - name));
        const char *b64 = space ? space + 1 : eol;
        size_t name_len = (size_t)((space ? space : eol) - name), b64_len = (size_t)(eol - b64);
        long got = b64_len ? b64_decode(b64, b64_len, bytes, (size_t)(bytes_end - bytes)) : -1;
        if (!name_chars_valid(name, name_len) || got < 5) {
            pgcl_errorf(err, cap,
                        "malformed note: signature line %d is not \"— <key name> <base64 of 5 or more "
                        "bytes>\"",
                        at);
            return open_fail(n, &c, st, PGCL_ERR_FORMAT);
        }
        uint32_t id = get_be32(bytes);
        int k = find_key(keys, n_keys, name, name_len, id);
        if (k == -2) {
            pgcl_errorf(err, cap, "ambiguous key %.*s+%08" PRIx32 ": two known keys have that name and key ID",
                        (int)(name_len > 80 ? 80 : name_len), name, id);
            return open_fail(n, &c, st, PGCL_ERR_INVALID);
        }
        bool repeated = false; /* a known key's later lines, an unknown key's identical lines: dropped */
        for (int j = 0; j < n->n_sigs && !repeated; j++) {
            const pgcl_note_sig *o = &n->sigs[j];
            repeated = k >= 0
                           ? o->verifier == k
                           : o->verifier < 0 && strlen(o->name) == name_len && memcmp(o->name, name, name_len) == 0 &&
                                 strlen(o->base64) == b64_len && memcmp(o->base64, b64, b64_len) == 0;
        }
        if (repeated) continue;
        pgcl_note_sig *s = &n->sigs[n->n_sigs];
        *s = (pgcl_note_sig){.key_id = id, .sig = bytes + 4, .sig_len = (size_t)got - 4, .verifier = k};
        if (k >= 0) {
            int ok = verify_sig(&c, &keys[k], s->sig, s->sig_len, &s->timestamp);
            if (ok < 0) {
                pgcl_errorf(err, cap, "out of memory for a cosigned message");
                return open_fail(n, &c, st, PGCL_ERR_NOMEM);
            }
            if (!ok) {
                pgcl_errorf(err, cap, "invalid signature for key %s+%08" PRIx32 " (signature line %d)", keys[k].name,
                            id, at);
                return open_fail(n, &c, st, PGCL_ERR_MISMATCH);
            }
            n->n_verified++;
        }
        memcpy(names, name, name_len);
        names[name_len] = 0;
        s->name = names;
        names += name_len + 1;
        memcpy(names, b64, b64_len);
        names[b64_len] = 0;
        s->base64 = names;
        names += b64_len + 1;
        bytes += got;
        n->n_sigs++;
    }
    free(c.cosig);
    c.cosig = NULL;
    if (n->n_verified == 0) {
        char who[UNKNOWN_LISTED * 100] = "";
        for (int j = 0, w = 0; j < n->n_sigs && j < UNKNOWN_LISTED; j++)
            w += snprintf(who + w, sizeof who - (size_t)w, "%s%.80s+%08" PRIx32, j ? ", " : "", n->sigs[j].name,
                          n->sigs[j].key_id);
        pgcl_errorf(err, cap, "the note has no signature by a known key (signed by %s%s)", who,
                    n->n_sigs > UNKNOWN_LISTED ? ", ..." : "");
        return open_fail(n, &c, st, PGCL_ERR_NOT_FOUND);
    }
    *st = PGCL_OK;
    return n;
}

void pgcl_note_destroy(pgcl_note *n) {
    free(n); /* the note is the first member of its block */
}
