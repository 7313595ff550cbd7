/* Signed notes, checkpoints and cosignatures (core/audit/log/note.h).
 *
 * Known answers made by other implementations: the keys and signatures of Go's
 * golang.org/x/mod/sumdb/note documentation and tests (PeterNeumann, EnochRoot) and the example of
 * c2sp.org/signed-note; C must sign them byte for byte (Ed25519 is deterministic) and open them as
 * Go's note.Open does, case by case (unknown keys ignored, repeated lines dropped, ambiguous keys,
 * 101 signatures, the malformed messages of Go's TestOpen). Then the parsers' strictness: every
 * substring and every byte bump of a key string is refused (as Go's TestNewVerifier), UTF-8 against
 * a second decoder over every 1- to 3-byte sequence, key names against Unicode's White_Space, the
 * checkpoint's lines; cosignatures/v1 and witness quorums; pgcld's signing key file as a note key.
 * Go itself, at test time, checks C and C checks Go: tests/integration/test_note_stock_verifier.py. */
#include <inttypes.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "note.h"
#include "signing.h"
#include "test_util.h"

/* Go's x/mod/sumdb/note: note.go's documentation and note_test.go */
#define PETER_SKEY "PRIVATE+KEY+PeterNeumann+c74f20a3+AYEKFALVFGyNhPJEMzD1QIDr+Y7hfZx09iUvxdXHKDFz"
#define PETER_VKEY "PeterNeumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW"
#define ENOCH_VKEY "EnochRoot+af0cfe78+ATtqJ7zOtqQtYqOo0CpvDXNlMhV3HeJDpjrASKGLWdop"
#define TEXT "If you think cryptography is the answer to your problem,\nthen you don't know what your problem is.\n"
#define EM "\xe2\x80\x94 " /* U+2014 and a space */
#define PETER_B64 "x08go/ZJkuBS9UG/SffcvIAQxVBtiFupLLr8pAcElZInNIuGUgYN1FFYC2pZSNXgKvqfqdngotpRZb6KE6RyyBwJnAM="
#define PETER_SIG EM "PeterNeumann " PETER_B64 "\n"
#define ENOCH_SIG                                                                                                      \
    "\xe2\x80\x94 EnochRoot "                                                                                          \
    "rwz+eBzmZa0SO3NbfRGzPCpDckykFXSdeX+MNtCOXm2/5n2tiOHp+vAF1aGrQ5ovTG01oOTGwnWLox33WWd1RvMc+QQ=\n"
/* c2sp.org/signed-note's example */
#define C2SP_VKEY "example.com/foo+530d903a+AekyeRrm56hApGFkyQR4ZCbV54Id2LKaANYcrnKv3U2k"
#define C2SP_NOTE                                                                                                      \
    "This is an example message.\n\n\xe2\x80\x94 example.com/foo "                                                     \
    "Uw2QOkn8srV1yJGh2VYRlL1Tnagv1YEq6TfXppzi2ONncAlTgK7Ztg1ERYNZXsYjOBH3mFXmRKuwHjG1Yu72IneyaQM=\n"

static char g_err[512];
static char g_dir[] = "/tmp/pgcld-test-note-XXXXXX";

static pgcl_note_verifier vkey(const char *s) {
    pgcl_note_verifier v;
    pgcl_status st = pgcl_note_verifier_parse(s, &v, g_err, sizeof g_err);
    CHECK(st == PGCL_OK, "verifier key %s: %s", s, g_err);
    return v;
}

/* Opens msg (a C string) with keys; returns the status, and *n_sigs / *n_verified of the note. */
static pgcl_status open_str(const char *msg, const pgcl_note_verifier *keys, int n_keys, int *n_sigs, int *n_verified) {
    pgcl_status st;
    pgcl_note *n = pgcl_note_open(msg, strlen(msg), keys, n_keys, &st, g_err, sizeof g_err);
    CHECK((n != NULL) == (st == PGCL_OK), "a note exactly when PGCL_OK");
    if (n_sigs) *n_sigs = n ? n->n_sigs : -1;
    if (n_verified) *n_verified = n ? n->n_verified : -1;
    pgcl_note_destroy(n);
    return st;
}

static void test_known_answers(void) {
    pgcl_status st;
    pgcl_note_signer *peter = pgcl_note_signer_parse(PETER_SKEY, &st, g_err, sizeof g_err);
    CHECK(peter != NULL, "Go's PeterNeumann signer key: %s", g_err);
    if (!peter) return;
    char buf[PGCL_NOTE_SKEY_MAX];
    CHECK(pgcl_note_verifier_format(pgcl_note_signer_verifier(peter), buf, sizeof buf) > 0 &&
              strcmp(buf, PETER_VKEY) == 0,
          "its verifier key is Go's: %s", buf);
    CHECK(pgcl_note_signer_format(peter, buf, sizeof buf) > 0 && strcmp(buf, PETER_SKEY) == 0, "and back: %s", buf);
    CHECK(pgcl_note_signer_format(peter, buf, 20) == -1 && buf[0] == 0, "a short buffer is wiped");

    size_t len = 0;
    const pgcl_note_signer *one[] = {peter};
    char *msg = pgcl_note_sign(TEXT, strlen(TEXT), one, 1, 0, &len, &st, g_err, sizeof g_err);
    CHECK(msg && strcmp(msg, TEXT "\n" PETER_SIG) == 0 && len == strlen(msg), "Go's signed note, byte for byte: %s",
          msg ? msg : g_err);
    free(msg);
    CHECK(!pgcl_note_sign("abc", 3, one, 1, 0, &len, &st, g_err, sizeof g_err) && st == PGCL_ERR_INVALID,
          "a text without its final newline is not signed");
    CHECK(!pgcl_note_sign(TEXT, strlen(TEXT), one, 0, 0, &len, &st, g_err, sizeof g_err) && st == PGCL_ERR_INVALID,
          "no signers");
    CHECK(!pgcl_note_sign("a\tb\n", 4, one, 1, 0, &len, &st, g_err, sizeof g_err) && st == PGCL_ERR_INVALID,
          "a text a note cannot carry");
    pgcl_note_signer_destroy(peter);

    pgcl_note_verifier p = vkey(PETER_VKEY), e = vkey(ENOCH_VKEY), c2sp = vkey(C2SP_VKEY);
    CHECK(p.key_id == 0xc74f20a3 && p.alg == 1 && strcmp(p.name, "PeterNeumann") == 0, "PeterNeumann's key");
    CHECK(open_str(C2SP_NOTE, &c2sp, 1, NULL, NULL) == PGCL_OK, "the specification's example: %s", g_err);

    /* Go's TestOpen, case by case */
    pgcl_note *n = pgcl_note_open(TEXT "\n" PETER_SIG ENOCH_SIG, strlen(TEXT "\n" PETER_SIG ENOCH_SIG), &p, 1, &st,
                                  g_err, sizeof g_err);
    CHECK(n && n->text_len == strlen(TEXT) && strcmp(n->text, TEXT) == 0, "one verified, one unknown: %s", g_err);
    CHECK(n && n->n_sigs == 2 && n->n_verified == 1, "two signatures, one verified");
    if (n && n->n_sigs == 2) {
        CHECK(n->sigs[0].verifier == 0 && strcmp(n->sigs[0].name, "PeterNeumann") == 0 &&
                  n->sigs[0].key_id == 0xc74f20a3 && n->sigs[0].sig_len == 64 && n->sigs[0].timestamp == 0,
              "PeterNeumann's verified");
        CHECK(n->sigs[1].verifier == -1 && strcmp(n->sigs[1].name, "EnochRoot") == 0 &&
                  n->sigs[1].key_id == 0xaf0cfe78 && strncmp(n->sigs[1].base64, "rwz+eBzm", 8) == 0,
              "EnochRoot's unknown");
    }
    pgcl_note_destroy(n);
    pgcl_note_verifier pe[] = {p, e}, epe[] = {e, p, e};
    int n_sigs = 0, n_verified = 0;
    CHECK(open_str(TEXT "\n" PETER_SIG ENOCH_SIG, pe, 2, &n_sigs, &n_verified) == PGCL_OK && n_verified == 2,
          "both verified");
    CHECK(open_str(TEXT "\n" PETER_SIG ENOCH_SIG, NULL, 0, NULL, NULL) == PGCL_ERR_NOT_FOUND &&
              strstr(g_err, "EnochRoot+af0cfe78"),
          "both unknown: %s", g_err);
    CHECK(open_str(TEXT "\n" ENOCH_SIG, epe, 3, NULL, NULL) == PGCL_ERR_INVALID, "an ambiguous key");
    CHECK(open_str(TEXT "\n" PETER_SIG, epe, 3, NULL, NULL) == PGCL_OK, "an ambiguous key no line names");

    char *many = malloc(strlen(TEXT) + 1 + 101 * strlen(PETER_SIG) + 1);
    strcpy(many, TEXT "\n");
    for (int i = 0; i < 100; i++)
        strcat(many, PETER_SIG);
    CHECK(open_str(many, &p, 1, &n_sigs, NULL) == PGCL_OK && n_sigs == 1, "100 signature lines (one kept)");
    strcat(many, PETER_SIG);
    CHECK(open_str(many, &p, 1, NULL, NULL) == PGCL_ERR_FORMAT, "101 signature lines");
    CHECK(open_str(many, NULL, 0, NULL, NULL) == PGCL_ERR_FORMAT, "101 unknown signature lines");
    free(many);

    char bad[1024];
    snprintf(bad, sizeof bad, "%s\n%.60sABCD%s", TEXT, PETER_SIG, PETER_SIG + 60);
    CHECK(open_str(bad, &p, 1, NULL, NULL) == PGCL_ERR_MISMATCH && strstr(g_err, "PeterNeumann+c74f20a3"),
          "an invalid signature: %s", g_err);
    CHECK(open_str(bad, pe, 2, NULL, NULL) == PGCL_ERR_MISMATCH, "refused even beside a valid one");
    snprintf(bad, sizeof bad, "%s\n%s%s%s%s%.60sABCD%s", TEXT, PETER_SIG, PETER_SIG, ENOCH_SIG, ENOCH_SIG, ENOCH_SIG,
             ENOCH_SIG + 60);
    CHECK(open_str(bad, &p, 1, &n_sigs, &n_verified) == PGCL_OK && n_sigs == 3 && n_verified == 1,
          "repeated lines: one of each distinct line kept (%d)", n_sigs);
    /* a known key's second line is dropped unread, even when it would not verify */
    snprintf(bad, sizeof bad, "%s\n%s%.60sABCD%s", TEXT, PETER_SIG, PETER_SIG, PETER_SIG + 60);
    CHECK(open_str(bad, &p, 1, &n_sigs, NULL) == PGCL_OK && n_sigs == 1, "a known key's repeated line");

    /* clang-format off */
    static const char *const bad_msgs[] = {
        TEXT,
        TEXT "\n",
        TEXT "\n" EM "PeterNeumann " PETER_B64,            /* no final newline */
        "\x01" TEXT "\n" PETER_SIG,
        "\xff" TEXT "\n" PETER_SIG,
        TEXT "\n" EM "Bad Name " PETER_B64,
        TEXT "\n" PETER_SIG "Unexpected line.\n",
        /* and more of ours */
        "",
        "\n\n",
        TEXT "\n" "- PeterNeumann " PETER_B64 "\n",         /* a hyphen */
        TEXT "\n" EM "PeterNeumann\n",
        TEXT "\n" EM "PeterNeumann \n",
        TEXT "\n" EM " x08g\n",
        TEXT "\n" EM "Peter+Neumann " PETER_B64 "\n",
        TEXT "\n" EM "Peter\xc2\xa0Neumann " PETER_B64 "\n",
        TEXT "\n" EM "PeterNeumann x08go/9=\n",              /* 5 bytes, but not canonical base64 */
        TEXT "\n" EM "PeterNeumann x08g\n",                  /* 3 bytes */
        TEXT "\n" EM "PeterNeumann x08go/Y\n",               /* no padding */
        TEXT "\n" EM "PeterNeumann x08go/Y= \n",             /* a trailing space */
        "a\rb\n\n" PETER_SIG,
        "a\tb\n\n" PETER_SIG,
        "a\xc0\x80\n\n" PETER_SIG,                           /* overlong */
        "a\xed\xa0\x80\n\n" PETER_SIG,                       /* a surrogate */
        "a\xf4\x90\x80\x80\n\n" PETER_SIG,                   /* beyond U+10FFFF */
        "a\xe2\x80\n\n" PETER_SIG,                           /* cut short */
        TEXT "\n" PETER_SIG "\nX\n",                        /* the last blank line leaves a bad "signature" */
    };
    /* clang-format on */
    for (size_t i = 0; i < sizeof bad_msgs / sizeof bad_msgs[0]; i++)
        CHECK(open_str(bad_msgs[i], &p, 1, NULL, NULL) == PGCL_ERR_FORMAT, "malformed message %zu: %s", i, g_err);
    /* accepted: Go accepts them too */
    CHECK(open_str(TEXT "\n"
                        "\xe2\x80\x94 Bad\xe1\xa0\x8eName AAAAAAAA\n" PETER_SIG,
                   &p, 1, &n_sigs, NULL) == PGCL_OK &&
              n_sigs == 2,
          "U+180E is no longer white space; an unknown key's line of 6 bytes");
    CHECK(open_str(TEXT "\n"
                        "\xe2\x80\x94 PeterNeumann AAAAAAAA\n" PETER_SIG,
                   &p, 1, NULL, NULL) == PGCL_OK,
          "a known name with another key ID is an unknown key");
    CHECK(
        open_str(
            TEXT
            "\n"
            "\xe2\x80\x94 PeterNeuman "
            "x08go/ZJkuBS9UG/SffcvIAQxVBtiFupLLr8pAcElZInNIuGUgYN1FFYC2pZSNXgKvqfqdngotpRZb6KE6RyyBwJnAM=\n" PETER_SIG,
            &p, 1, NULL, NULL) == PGCL_OK,
        "a known key ID with another name is an unknown key");
}

/* Every proper substring and every byte bumped by one of a key string is refused (Go's
 * TestNewVerifier and TestNewSigner); the string itself is accepted. */
static void test_key_manglings(const char *key, bool signer) {
    size_t n = strlen(key);
    char *s = malloc(n + 1);
    int accepted = 0;
    for (size_t i = 0; i <= n; i++)
        for (size_t j = i + 1; j <= n; j++) {
            if (i == 0 && j == n) continue;
            memcpy(s, key + i, j - i);
            s[j - i] = 0;
            pgcl_status st;
            pgcl_note_verifier v;
            pgcl_note_signer *sg = signer ? pgcl_note_signer_parse(s, &st, g_err, sizeof g_err) : NULL;
            if (!signer) st = pgcl_note_verifier_parse(s, &v, g_err, sizeof g_err);
            accepted += st == PGCL_OK;
            CHECK(st != PGCL_OK, "substring [%zu,%zu) of %s accepted", i, j, key);
            pgcl_note_signer_destroy(sg);
        }
    memcpy(s, key, n + 1);
    for (size_t i = 0; i < n; i++) {
        s[i]++;
        pgcl_status st;
        pgcl_note_verifier v;
        pgcl_note_signer *sg = signer ? pgcl_note_signer_parse(s, &st, g_err, sizeof g_err) : NULL;
        if (!signer) st = pgcl_note_verifier_parse(s, &v, g_err, sizeof g_err);
        CHECK(st != PGCL_OK, "byte %zu of %s bumped: accepted", i, key);
        pgcl_note_signer_destroy(sg);
        s[i]--;
    }
    free(s);
    CHECK(accepted == 0, "%d manglings accepted", accepted);
}

static void test_keys(void) {
    test_key_manglings(PETER_VKEY, false);
    test_key_manglings(PETER_SKEY, true);
    pgcl_note_verifier v;
    pgcl_status st;
    /* Go's: a key of the wrong length and one of an unknown algorithm, each with its key ID adjusted */
    CHECK(pgcl_note_verifier_parse("PeterNeumann+cc469956+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TWBADKEY==", &v,
                                   g_err, sizeof g_err) == PGCL_ERR_FORMAT,
          "a key of 40 bytes: %s", g_err);
    CHECK(pgcl_note_verifier_parse("PeterNeumann+173116ae+ZRpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW", &v, g_err,
                                   sizeof g_err) == PGCL_ERR_UNSUPPORTED,
          "algorithm 0x65: %s", g_err);
    CHECK(pgcl_note_verifier_parse("PeterNeumann+C74F20A3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW", &v, g_err,
                                   sizeof g_err) == PGCL_OK,
          "an upper-case key ID, as Go's strconv reads it");
    CHECK(pgcl_note_verifier_parse("PeterNeumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TX", &v, g_err,
                                   sizeof g_err) == PGCL_ERR_MISMATCH,
          "another key");
    CHECK(pgcl_note_verifier_parse("PeterNeumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW==", &v, g_err,
                                   sizeof g_err) == PGCL_ERR_FORMAT,
          "padding where none belongs");
    CHECK(pgcl_note_verifier_parse("PeterNeumann+c74f20a4+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW", &v, g_err,
                                   sizeof g_err) == PGCL_ERR_MISMATCH,
          "another key ID");

    /* the same public key as a witness's (0x04): another key ID, and a vkey whose key starts 0x04 */
    pgcl_note_verifier p = vkey(PETER_VKEY), w;
    CHECK(pgcl_note_verifier_make("PeterNeumann", PGCL_NOTE_ALG_COSIGNATURE_V1, p.public_key, &w, g_err,
                                  sizeof g_err) == PGCL_OK &&
              w.key_id != p.key_id,
          "a cosigner key ID");
    char buf[PGCL_NOTE_VKEY_MAX], want[PGCL_NOTE_VKEY_MAX];
    CHECK(pgcl_note_verifier_format(&w, buf, sizeof buf) > 0 && strncmp(buf, "PeterNeumann+", 13) == 0 &&
              strncmp(buf + 22, "BBpc2Q", 6) == 0,
          "its vkey: %s", buf);
    pgcl_note_verifier back = vkey(buf);
    CHECK(memcmp(&back, &w, sizeof w) == 0, "read back");
    CHECK(pgcl_note_verifier_make("PeterNeumann", 0x02, p.public_key, &w, g_err, sizeof g_err) == PGCL_ERR_INVALID,
          "algorithm 0x02 is not made");
    snprintf(want, sizeof want, "%s", PETER_VKEY);
    CHECK(pgcl_note_verifier_format(&p, buf, strlen(want)) == -1, "a buffer one byte short");

    static const char *const bad_names[] = {"",
                                            "a b",
                                            "a+b",
                                            "a\tb",
                                            "a\nb",
                                            "a\x01"
                                            "b",
                                            "a\xc2\x85"
                                            "b",
                                            "a\xc2\xa0"
                                            "b",
                                            "a\xe1\x9a\x80"
                                            "b",
                                            "a\xe2\x80\x80"
                                            "b",
                                            "a\xe2\x80\x8a"
                                            "b",
                                            "a\xe2\x80\xa8"
                                            "b",
                                            "a\xe2\x80\xa9"
                                            "b",
                                            "a\xe2\x80\xaf"
                                            "b",
                                            "a\xe2\x81\x9f"
                                            "b",
                                            "a\xe3\x80\x80"
                                            "b",
                                            "a\xff",
                                            "a\xc0\xae"};
    for (size_t i = 0; i < sizeof bad_names / sizeof bad_names[0]; i++)
        CHECK(!pgcl_note_name_valid(bad_names[i], strlen(bad_names[i])), "bad name %zu accepted", i);
    static const char *const good_names[] = {
        "a", "example.com/log", "a\x7f", "\xe2\x80\x8b", "\xf0\x9f\x94\x91", "\xe1\xa0\x8e"};
    for (size_t i = 0; i < sizeof good_names / sizeof good_names[0]; i++)
        CHECK(pgcl_note_name_valid(good_names[i], strlen(good_names[i])), "good name %zu refused", i);
    char long_name[PGCL_NOTE_NAME_MAX + 2];
    memset(long_name, 'n', sizeof long_name - 1);
    long_name[PGCL_NOTE_NAME_MAX + 1] = 0;
    CHECK(!pgcl_note_name_valid(long_name, PGCL_NOTE_NAME_MAX + 1) &&
              pgcl_note_name_valid(long_name, PGCL_NOTE_NAME_MAX),
          "names of up to %d bytes", PGCL_NOTE_NAME_MAX);
    pgcl_note_signer *s = pgcl_note_signer_generate(long_name, 1, &st, g_err, sizeof g_err);
    CHECK(!s && st == PGCL_ERR_INVALID, "no signer of a long name");
    long_name[PGCL_NOTE_NAME_MAX] = 0;
    s = pgcl_note_signer_generate(long_name, PGCL_NOTE_ALG_COSIGNATURE_V1, &st, g_err, sizeof g_err);
    char skey[PGCL_NOTE_SKEY_MAX];
    CHECK(s && pgcl_note_signer_format(s, skey, sizeof skey) == PGCL_NOTE_SKEY_MAX - 1, "the longest signer key fits");
    pgcl_note_signer *again = s ? pgcl_note_signer_parse(skey, &st, g_err, sizeof g_err) : NULL;
    CHECK(again &&
              memcmp(pgcl_note_signer_verifier(again), pgcl_note_signer_verifier(s), sizeof(pgcl_note_verifier)) == 0,
          "a cosigner's signer key read back: %s", g_err);
    pgcl_note_signer_destroy(again);
    pgcl_note_signer_destroy(s);
}

/* A second UTF-8 decoder: lead byte, continuation bytes, then the decoded value's range. */
static bool utf8_reference(const unsigned char *s, size_t n) {
    for (size_t i = 0; i < n;) {
        unsigned b = s[i];
        size_t k = b < 0x80 ? 1 : (b & 0xE0) == 0xC0 ? 2 : (b & 0xF0) == 0xE0 ? 3 : (b & 0xF8) == 0xF0 ? 4 : 0;
        if (k == 0 || i + k > n) return false;
        uint32_t c = k == 1 ? b : b & (0x7Fu >> k);
        for (size_t j = 1; j < k; j++) {
            if ((s[i + j] & 0xC0) != 0x80) return false;
            c = c << 6 | (s[i + j] & 0x3Fu);
        }
        static const uint32_t min[] = {0, 0, 0x80, 0x800, 0x10000};
        if (c < min[k] || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF) || (c < 0x20 && c != '\n')) return false;
        i += k;
    }
    return true;
}

static void test_utf8(void) {
    unsigned char t[6];
    long disagree = 0;
    for (uint32_t v = 0; v < (1u << 24); v++) { /* every sequence of 1, 2 and 3 bytes, then a newline */
        for (size_t k = 1; k <= 3; k++) {
            if (k < 3 && v >= (1u << (8 * k))) continue;
            for (size_t j = 0; j < k; j++)
                t[j] = (unsigned char)(v >> (8 * (k - 1 - j)));
            t[k] = '\n';
            disagree += pgcl_note_text_valid((const char *)t, k + 1) != utf8_reference(t, k + 1);
        }
    }
    for (uint32_t lead = 0xF0; lead <= 0xFF; lead++) /* 4 bytes: every lead and second byte */
        for (uint32_t b1 = 0; b1 < 256; b1++)
            for (uint32_t b2 = 0x7F; b2 <= 0xC0; b2 += 0x41) {
                const unsigned char q[5] = {(unsigned char)lead, (unsigned char)b1, (unsigned char)b2, 0x80, '\n'};
                disagree += pgcl_note_text_valid((const char *)q, 5) != utf8_reference(q, 5);
            }
    CHECK(disagree == 0, "%ld sequences judged otherwise than the reference decoder", disagree);
    CHECK(pgcl_note_text_valid("\xef\xbf\xbd\n", 4) && pgcl_note_text_valid("\x7f\n", 2) &&
              pgcl_note_text_valid("\n", 1),
          "U+FFFD, DEL, an empty line");
    CHECK(!pgcl_note_text_valid("", 0) && !pgcl_note_text_valid("a", 1) && !pgcl_note_text_valid("a\0\n", 3),
          "empty, no newline, NUL");
}

static pgcl_note_signer *gen(const char *name, uint8_t alg) {
    pgcl_status st;
    pgcl_note_signer *s = pgcl_note_signer_generate(name, alg, &st, g_err, sizeof g_err);
    CHECK(s != NULL, "a key %s: %s", name, g_err);
    if (!s) exit(1);
    return s;
}

static void test_checkpoints(void) {
    pgcl_tlog_checkpoint cp = {.origin = "example.com/pgcld/w1", .size = 20852163}, back;
    for (int i = 0; i < 32; i++)
        cp.root.b[i] = (unsigned char)(i * 7 + 1);
    char text[PGCL_TLOG_CHECKPOINT_MAX];
    size_t len = 0;
    CHECK(pgcl_tlog_checkpoint_format(&cp, text, &len, g_err, sizeof g_err) == PGCL_OK &&
              strcmp(text, "example.com/pgcld/w1\n20852163\nAQgPFh0kKzI5QEdOVVxjanF4f4aNlJuiqbC3vsXM09o=\n") == 0 &&
              len == strlen(text),
          "formatted (the root's base64 from Python's): %s", text);
    CHECK(pgcl_tlog_checkpoint_parse(text, len, &back, g_err, sizeof g_err) == PGCL_OK &&
              strcmp(back.origin, cp.origin) == 0 && back.size == cp.size && memcmp(&back.root, &cp.root, 32) == 0 &&
              back.ext_len == 0 && back.ext_at == len,
          "read back: %s", g_err);
    /* the specification's example, with an extension line */
    const char *ex = "example.com/behind-the-sofa\n20852163\nCsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\nextension\n";
    CHECK(pgcl_tlog_checkpoint_parse(ex, strlen(ex), &back, g_err, sizeof g_err) == PGCL_OK && back.size == 20852163 &&
              back.root.b[0] == 0x0a && back.root.b[31] == 0x62 && back.ext_len == 10 &&
              memcmp(ex + back.ext_at, "extension\n", 10) == 0,
          "the specification's example: %s", g_err);
    static const char *const good[] = {"o\n0\n47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=\n",
                                       "o r+igin\n9223372036854775807\n47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=\n",
                                       "o\n1\n47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=\na\nb\n"};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++)
        CHECK(pgcl_tlog_checkpoint_parse(good[i], strlen(good[i]), &back, g_err, sizeof g_err) == PGCL_OK,
              "good checkpoint %zu: %s", i, g_err);
    static const char *const bad[] = {"",
                                      "o\n",
                                      "o\n1\n",
                                      "o\n1\n47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=",
                                      "\n1\n47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=\n",
                                      "o\n\n47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=\n",
                                      "o\n01\n47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=\n",
                                      "o\n00\n47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=\n",
                                      "o\n-1\n47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=\n",
                                      "o\n+1\n47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=\n",
                                      "o\n 1\n47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=\n",
                                      "o\n1a\n47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=\n",
                                      "o\n9223372036854775808\n47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=\n",
                                      "o\n18446744073709551616\n47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=\n",
                                      "o\n1\n47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFV=\n",
                                      "o\n1\n47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuF=\n",
                                      "o\n1\n47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU\n",
                                      "o\n1\n47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU= \n",
                                      "o\n1\n47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=\n\n",
                                      "o\n1\n47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=\na\n\nb\n",
                                      "o\t\n1\n47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=\n"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        CHECK(pgcl_tlog_checkpoint_parse(bad[i], strlen(bad[i]), &back, g_err, sizeof g_err) == PGCL_ERR_FORMAT &&
                  back.origin[0] == 0,
              "bad checkpoint %zu accepted", i);
    pgcl_tlog_checkpoint odd = cp;
    snprintf(odd.origin, sizeof odd.origin, "has space");
    CHECK(pgcl_tlog_checkpoint_format(&odd, text, &len, g_err, sizeof g_err) == PGCL_ERR_INVALID,
          "an origin with a space");
    odd = cp;
    odd.size = (uint64_t)INT64_MAX + 1;
    CHECK(pgcl_tlog_checkpoint_format(&odd, text, &len, g_err, sizeof g_err) == PGCL_ERR_INVALID,
          "a size over 2^63 - 1");
}

static void test_cosignatures(void) {
    pgcl_note_signer *log = gen("example.com/pgcld/w1", 1), *w1 = gen("witness.example/w1", 4),
                     *w2 = gen("witness.example/w2", 4), *other_log = gen("example.com/pgcld/w1", 1);
    pgcl_tlog_checkpoint cp = {.origin = "example.com/pgcld/w1", .size = 7};
    char text[PGCL_TLOG_CHECKPOINT_MAX], line[PGCL_NOTE_SIG_LINE_MAX];
    size_t len = 0, line_len = 0, msg_len = 0;
    pgcl_status st;
    CHECK(pgcl_tlog_checkpoint_format(&cp, text, &len, g_err, sizeof g_err) == PGCL_OK, "format: %s", g_err);
    const pgcl_note_signer *signers[] = {log, w1, w2};
    uint64_t t = 1679315147;
    char *msg = pgcl_note_sign(text, len, signers, 3, t, &msg_len, &st, g_err, sizeof g_err);
    CHECK(msg != NULL, "a checkpoint signed by the log and two witnesses: %s", g_err);
    if (!msg) return;
    pgcl_note_verifier keys[3] = {*pgcl_note_signer_verifier(log), *pgcl_note_signer_verifier(w1),
                                  *pgcl_note_signer_verifier(w2)};
    pgcl_note *n = pgcl_note_open(msg, msg_len, keys, 3, &st, g_err, sizeof g_err);
    CHECK(n && n->n_verified == 3 && n->sigs[0].timestamp == 0 && n->sigs[1].timestamp == t &&
              n->sigs[2].timestamp == t && n->sigs[1].sig_len == 72,
          "three verified, two at time %" PRIu64 ": %s", t, g_err);
    pgcl_note_destroy(n);

    /* a cosignature verifies over "cosignature/v1\ntime T\n" ‖ text, after its timestamp */
    CHECK(pgcl_note_sign_line(w1, text, len, t, line, &line_len, g_err, sizeof g_err) == PGCL_OK, "a line: %s", g_err);
    unsigned char raw[80];
    size_t raw_len = 0;
    const char *b64 = strchr(line + 4, ' ') + 1;
    CHECK(sodium_base642bin(raw, sizeof raw, b64, strlen(b64) - 1, NULL, &raw_len, NULL,
                            sodium_base64_VARIANT_ORIGINAL) == 0 &&
              raw_len == 76,
          "76 bytes");
    char signed_msg[512];
    int k = snprintf(signed_msg, sizeof signed_msg, "cosignature/v1\ntime %" PRIu64 "\n%s", t, text);
    CHECK(crypto_sign_verify_detached(raw + 12, (const unsigned char *)signed_msg, (size_t)k,
                                      pgcl_note_signer_verifier(w1)->public_key) == 0 &&
              raw[4] == 0 && raw[8] == (unsigned char)(t >> 24) && raw[11] == (unsigned char)t,
          "the signed message");

    /* a tampered timestamp, a timestamp over 2^63 - 1 */
    char *tampered = malloc(msg_len + 1);
    memcpy(tampered, msg, msg_len + 1);
    char *w1_line = strstr(tampered, "witness.example/w1 ") + 19;
    w1_line[7] = w1_line[7] == 'A' ? 'B' : 'A'; /* in the timestamp's bytes */
    CHECK(!pgcl_note_open(tampered, msg_len, keys, 3, &st, g_err, sizeof g_err) && st == PGCL_ERR_MISMATCH,
          "a changed timestamp: %s", g_err);
    n = pgcl_note_open(tampered, msg_len, keys, 1, &st, g_err, sizeof g_err);
    CHECK(n && n->n_verified == 1, "unread when its key is not known: %s", g_err);
    pgcl_note_destroy(n);
    free(tampered);
    CHECK(pgcl_note_sign_line(w1, text, len, (uint64_t)INT64_MAX + 1, line, &line_len, g_err, sizeof g_err) ==
              PGCL_ERR_INVALID,
          "no cosignature at 2^63");
    CHECK(pgcl_note_sign_line(w1, text, len, (uint64_t)INT64_MAX, line, &line_len, g_err, sizeof g_err) == PGCL_OK,
          "a cosignature at 2^63 - 1");
    CHECK(pgcl_note_sign_line(w1, "not a checkpoint\n", 17, t, line, &line_len, g_err, sizeof g_err) ==
              PGCL_ERR_INVALID,
          "a cosigner signs checkpoints only");
    raw[4] = 0x80; /* timestamp 2^63 + ..., re-signed so that only the bound refuses it */
    char big[1024];
    unsigned char sig[64];
    k = snprintf(signed_msg, sizeof signed_msg, "cosignature/v1\ntime %" PRIu64 "\n%s", (uint64_t)1 << 63 | t, text);
    {
        char skey[PGCL_NOTE_SKEY_MAX];
        unsigned char seed_key[33], sk[64], pk[32];
        size_t sn = 0;
        pgcl_note_signer_format(w1, skey, sizeof skey);
        sodium_base642bin(seed_key, sizeof seed_key, strrchr(skey, '+') + 1, strlen(strrchr(skey, '+') + 1), NULL, &sn,
                          NULL, sodium_base64_VARIANT_ORIGINAL);
        crypto_sign_seed_keypair(pk, sk, seed_key + 1);
        crypto_sign_detached(sig, NULL, (const unsigned char *)signed_msg, (size_t)k, sk);
        sodium_memzero(sk, sizeof sk);
    }
    memcpy(raw + 12, sig, 64);
    char b64big[120];
    sodium_bin2base64(b64big, sizeof b64big, raw, 76, sodium_base64_VARIANT_ORIGINAL);
    snprintf(big, sizeof big, "%s\n\xe2\x80\x94 witness.example/w1 %s\n", text, b64big);
    CHECK(!pgcl_note_open(big, strlen(big), &keys[1], 1, &st, g_err, sizeof g_err) && st == PGCL_ERR_MISMATCH,
          "a cosignature at 2^63 is refused: %s", g_err);

    /* quorums */
    pgcl_note_verifier log_key = keys[0], witnesses[3] = {keys[1], keys[2], keys[1]};
    pgcl_tlog_checkpoint got;
    snprintf(witnesses[2].name, sizeof witnesses[2].name, "witness.example/w1-again"); /* w1's key, another name */
    witnesses[2].key_id = pgcl_note_key_id(witnesses[2].name, strlen(witnesses[2].name), 4, witnesses[2].public_key);
    for (int q = 0; q <= 2; q++) {
        n = pgcl_tlog_checkpoint_open(msg, msg_len, &log_key, NULL, witnesses, 2, q, &got, &st, g_err, sizeof g_err);
        CHECK(n && got.size == 7 && strcmp(got.origin, cp.origin) == 0, "quorum %d of 2: %s", q, g_err);
        pgcl_note_destroy(n);
    }
    n = pgcl_tlog_checkpoint_open(msg, msg_len, &log_key, NULL, witnesses, 2, 3, &got, &st, g_err, sizeof g_err);
    CHECK(!n && st == PGCL_ERR_INVALID, "a quorum over the witnesses' number");
    n = pgcl_tlog_checkpoint_open(msg, msg_len, &log_key, NULL, witnesses + 1, 1, 1, &got, &st, g_err, sizeof g_err);
    CHECK(n != NULL, "w2 alone: %s", g_err);
    pgcl_note_destroy(n);
    /* w1's cosignature under two names (the signed message does not hold the name) counts once */
    const char *w1_b64 = strstr(msg, "\xe2\x80\x94 witness.example/w1 ") + 23;
    unsigned char again[76];
    size_t again_len = 0;
    CHECK(sodium_base642bin(again, sizeof again, w1_b64, 104, NULL, &again_len, NULL, sodium_base64_VARIANT_ORIGINAL) ==
                  0 &&
              again_len == 76,
          "w1's cosignature");
    again[0] = (unsigned char)(witnesses[2].key_id >> 24);
    again[1] = (unsigned char)(witnesses[2].key_id >> 16);
    again[2] = (unsigned char)(witnesses[2].key_id >> 8);
    again[3] = (unsigned char)witnesses[2].key_id;
    char again_b64[120];
    sodium_bin2base64(again_b64, sizeof again_b64, again, 76, sodium_base64_VARIANT_ORIGINAL);
    size_t with_len = msg_len + PGCL_NOTE_SIG_LINE_MAX;
    char *with_log = malloc(with_len);
    snprintf(with_log, with_len, "%s\xe2\x80\x94 witness.example/w1-again %s\n", msg, again_b64);
    pgcl_note_verifier both_w1[2] = {witnesses[0], witnesses[2]};
    n = pgcl_tlog_checkpoint_open(with_log, strlen(with_log), &log_key, NULL, both_w1, 2, 1, &got, &st, g_err,
                                  sizeof g_err);
    CHECK(n && n->n_verified == 3, "w1 under two names: %s", g_err);
    pgcl_note_destroy(n);
    n = pgcl_tlog_checkpoint_open(with_log, strlen(with_log), &log_key, NULL, both_w1, 2, 2, &got, &st, g_err,
                                  sizeof g_err);
    CHECK(!n && st == PGCL_ERR_NOT_FOUND, "counts once: %s", g_err);
    free(with_log);

    pgcl_note_verifier other = *pgcl_note_signer_verifier(other_log);
    n = pgcl_tlog_checkpoint_open(msg, msg_len, &other, NULL, witnesses, 2, 0, &got, &st, g_err, sizeof g_err);
    CHECK(!n && st == PGCL_ERR_NOT_FOUND, "the log's key did not sign it: %s", g_err);
    n = pgcl_tlog_checkpoint_open(msg, msg_len, &log_key, "example.com/pgcld/w2", witnesses, 2, 0, &got, &st, g_err,
                                  sizeof g_err);
    CHECK(!n && st == PGCL_ERR_MISMATCH, "another origin: %s", g_err);
    n = pgcl_tlog_checkpoint_open(msg, msg_len, &log_key, NULL, keys, 2, 0, &got, &st, g_err, sizeof g_err);
    CHECK(!n && st == PGCL_ERR_INVALID, "a witness key of algorithm 0x01");
    n = pgcl_tlog_checkpoint_open(msg, msg_len, &keys[1], NULL, NULL, 0, 0, &got, &st, g_err, sizeof g_err);
    CHECK(!n && st == PGCL_ERR_INVALID, "a log key of algorithm 0x04");

    /* the witness protocol's texts */
    pgcl_merkle_hash proof[2];
    memset(proof, 0, sizeof proof);
    proof[1].b[31] = 1;
    size_t req_len = 0;
    char *req = pgcl_tlog_witness_request(5, proof, 2, msg, msg_len, &req_len, &st, g_err, sizeof g_err);
    CHECK(req &&
              strncmp(req,
                      "old 5\nAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n"
                      "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAE=\n\n",
                      97) == 0 &&
              strcmp(req + 97, msg) == 0 && req_len == 97 + msg_len,
          "an add-checkpoint request: %s", req ? req : g_err);
    free(req);
    CHECK(!pgcl_tlog_witness_request(0, proof, 1, msg, msg_len, &req_len, &st, g_err, sizeof g_err) &&
              st == PGCL_ERR_INVALID,
          "no proof from size 0");
    req = pgcl_tlog_witness_request(0, NULL, 0, msg, msg_len, &req_len, &st, g_err, sizeof g_err);
    CHECK(req && strncmp(req, "old 0\n\n", 7) == 0, "from size 0");
    free(req);
    uint64_t size = 0;
    CHECK(pgcl_tlog_witness_parse_size("42\n", 3, &size, g_err, sizeof g_err) == PGCL_OK && size == 42, "a 409's size");
    CHECK(pgcl_tlog_witness_parse_size("042\n", 4, &size, g_err, sizeof g_err) == PGCL_ERR_FORMAT &&
              pgcl_tlog_witness_parse_size("42", 2, &size, g_err, sizeof g_err) == PGCL_ERR_FORMAT &&
              pgcl_tlog_witness_parse_size("\n", 1, &size, g_err, sizeof g_err) == PGCL_ERR_FORMAT,
          "not sizes");
    const char *answer = strstr(msg, "\xe2\x80\x94 witness.example/w1"); /* w1's and w2's lines */
    uint64_t ts = 0;
    CHECK(pgcl_tlog_witness_cosignature(text, len, answer, strlen(answer), &keys[2], line, &ts, g_err, sizeof g_err) ==
                  PGCL_OK &&
              ts == t && strstr(msg, line) && strncmp(line, "\xe2\x80\x94 witness.example/w2 ", 23) == 0,
          "w2's line kept: %s", g_err);
    CHECK(pgcl_tlog_witness_cosignature(text, len, answer, strlen(answer), &witnesses[2], line, &ts, g_err,
                                        sizeof g_err) == PGCL_ERR_NOT_FOUND,
          "no line of that witness");
    char two[1024];
    snprintf(two, sizeof two, "\n%s", answer);
    CHECK(pgcl_tlog_witness_cosignature(text, len, two, strlen(two), &keys[2], line, &ts, g_err, sizeof g_err) ==
              PGCL_ERR_FORMAT,
          "a blank line in the answer");
    CHECK(pgcl_tlog_witness_cosignature(text, len - 2, answer, strlen(answer), &keys[2], line, &ts, g_err,
                                        sizeof g_err) == PGCL_ERR_FORMAT,
          "a text without its newline");
    text[len - 3] ^= 1;
    CHECK(pgcl_tlog_witness_cosignature(text, len, answer, strlen(answer), &keys[2], line, &ts, g_err, sizeof g_err) ==
              PGCL_ERR_MISMATCH,
          "a cosignature of another checkpoint");
    CHECK(pgcl_tlog_witness_cosignature(text, len, answer, strlen(answer), &keys[0], line, &ts, g_err, sizeof g_err) ==
              PGCL_ERR_INVALID,
          "a witness key of algorithm 0x01");
    free(msg);
    pgcl_note_signer_destroy(log);
    pgcl_note_signer_destroy(w1);
    pgcl_note_signer_destroy(w2);
    pgcl_note_signer_destroy(other_log);
}

static void test_key_file(void) {
    char path[256], pub[PGCL_PUBLIC_KEY_HEX_LEN + 1], sig_hex[PGCL_SIGNATURE_HEX_LEN + 1];
    snprintf(path, sizeof path, "%s/signing.key", g_dir);
    CHECK(pgcl_signing_keygen(path, pub, g_err, sizeof g_err) == PGCL_OK, "keygen: %s", g_err);
    pgcl_status st;
    pgcl_note_signer *s = pgcl_note_signer_from_key_file(path, "example.com/pgcld/w1", &st, g_err, sizeof g_err);
    CHECK(s != NULL, "the key file as a note signer: %s", g_err);
    if (!s) return;
    char hex[PGCL_PUBLIC_KEY_HEX_LEN + 1];
    sodium_bin2hex(hex, sizeof hex, pgcl_note_signer_verifier(s)->public_key, 32);
    CHECK(strcmp(hex, pub) == 0 && pgcl_note_signer_verifier(s)->alg == 1, "the same public key");
    const pgcl_note_signer *one[] = {s};
    size_t len = 0;
    char *msg = pgcl_note_sign("a\n", 2, one, 1, 0, &len, &st, g_err, sizeof g_err);
    pgcl_note_verifier v = *pgcl_note_signer_verifier(s);
    pgcl_note *n = msg ? pgcl_note_open(msg, len, &v, 1, &st, g_err, sizeof g_err) : NULL;
    CHECK(n != NULL, "opens: %s", g_err);
    if (n) {
        sodium_bin2hex(sig_hex, sizeof sig_hex, n->sigs[0].sig, 64);
        CHECK(pgcl_signing_verify(pub, sig_hex, "a\n", 2), "a note signature is the key file's Ed25519 signature");
    }
    pgcl_note_destroy(n);
    free(msg);
    pgcl_note_signer_destroy(s);
    CHECK(!pgcl_note_signer_from_key_file(path, "bad name", &st, g_err, sizeof g_err) && st == PGCL_ERR_INVALID,
          "a bad name");
    CHECK(chmod(path, 0644) == 0, "chmod");
    CHECK(!pgcl_note_signer_from_key_file(path, "n", &st, g_err, sizeof g_err) && st == PGCL_ERR_INVALID,
          "a key file others may read: %s", g_err);
    CHECK(unlink(path) == 0, "unlink");
    CHECK(!pgcl_note_signer_from_key_file(path, "n", &st, g_err, sizeof g_err) && st == PGCL_ERR_IO, "no key file");
}

int main(void) {
    if (sodium_init() < 0 || !mkdtemp(g_dir)) return 1;
    test_known_answers();
    test_keys();
    test_utf8();
    test_checkpoints();
    test_cosignatures();
    test_key_file();
    rmdir(g_dir);
    return test_finish("test_note");
}
