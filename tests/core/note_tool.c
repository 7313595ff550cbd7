/* note_tool: pgcld's signed notes (core/audit/log/note.h) as a command, for
 * tests/integration/test_note_stock_verifier.py, which holds it against Go's golang.org/x/mod/sumdb/note
 * (tests/tlog/verify_note). Not a test itself, and not installed.
 *
 *   note_tool keygen NAME [ALG]               two lines: a new signer key, its verifier key (ALG 1 or 4)
 *   note_tool vkey SKEY                       the verifier key of a signer key
 *   note_tool sign [--time T] SKEY... <TEXT   the note signed by each key (cosigners at time T)
 *   note_tool verify VKEY... <NOTE            its text, when a known key signed it; each signature
 *                                             line's verdict on stderr
 *   note_tool verify-batch VKEY... <LINES     per line (a note in base64): "ok <base64 of its text>"
 *                                             or "refused <status>"
 *   note_tool checkpoint ORIGIN SIZE ROOTHEX  a checkpoint text
 *   note_tool parse-checkpoint <TEXT          "<origin> <size> <root hex> <extension lines>"
 *   note_tool open-checkpoint LOGVKEY QUORUM [WITNESSVKEY...] <NOTE
 *                                             "<origin> <size> <root hex> <cosigners>"
 *   note_tool key-file-vkey PATH NAME         the verifier key of a pgcld signing key file
 *   note_tool key-file-sign PATH NAME <TEXT   the text signed with that key file
 *   note_tool witness-answer VKEY TEXTFILE <ANSWER   the line kept from a witness's answer, and its time
 *
 * Exit status: 0 done, 1 refused (the reason on stderr), 2 usage or a broken pipe. */
#include <inttypes.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "note.h"

#define INPUT_MAX (8u << 20)

static char g_err[1024];

/* All of stdin (or the file at path), NUL-terminated, malloc'd; NULL when over INPUT_MAX. */
static char *read_all(const char *path, size_t *len) {
    FILE *f = path ? fopen(path, "rb") : stdin;
    size_t cap = 1 << 16, n = 0;
    char *buf = f ? malloc(cap + 1) : NULL;
    while (buf) {
        n += fread(buf + n, 1, cap - n, f);
        if (n < cap) break;
        if (cap >= INPUT_MAX) {
            free(buf);
            buf = NULL;
            break;
        }
        char *more = realloc(buf, 2 * cap + 1);
        if (!more) free(buf);
        buf = more;
        cap *= 2;
    }
    if (f && f != stdin) fclose(f);
    if (buf) buf[n] = 0;
    *len = n;
    return buf;
}

static int refused(const char *what, pgcl_status st) {
    fprintf(stderr, "note_tool %s: refused (%s): %s\n", what, pgcl_status_str(st), g_err);
    return 1;
}

static int usage(void) {
    fprintf(stderr, "usage: note_tool keygen|vkey|sign|verify|verify-batch|checkpoint|parse-checkpoint|open-checkpoint|"
                    "key-file-vkey|"
                    "key-file-sign|witness-answer ... (see tests/core/note_tool.c)\n");
    return 2;
}

static int print_vkey(const pgcl_note_verifier *v) {
    char vkey[PGCL_NOTE_VKEY_MAX];
    if (pgcl_note_verifier_format(v, vkey, sizeof vkey) < 0) return 1;
    printf("%s\n", vkey);
    return 0;
}

/* keys[0:n) parsed from verifier key strings; false (with a message) when one is refused. */
static bool parse_vkeys(char **args, int n, pgcl_note_verifier *keys) {
    for (int i = 0; i < n; i++) {
        pgcl_status st = pgcl_note_verifier_parse(args[i], &keys[i], g_err, sizeof g_err);
        if (st != PGCL_OK) {
            refused("verifier key", st);
            return false;
        }
    }
    return true;
}

static int cmd_sign(int argc, char **argv, const char *key_file, const char *key_name) {
    uint64_t ts = 0;
    int first = 0, rc = 1;
    if (argc >= 2 && strcmp(argv[0], "--time") == 0) {
        ts = strtoull(argv[1], NULL, 10);
        first = 2;
    }
    int n = key_file ? 1 : argc - first;
    if (n < 1) return usage();
    pgcl_note_signer **signers = calloc((size_t)n, sizeof *signers);
    size_t len = 0, out_len = 0;
    char *text = read_all(NULL, &len), *out = NULL;
    pgcl_status st = PGCL_ERR_NOMEM;
    for (int i = 0; i < n && signers; i++) {
        signers[i] = key_file ? pgcl_note_signer_from_key_file(key_file, key_name, &st, g_err, sizeof g_err)
                              : pgcl_note_signer_parse(argv[first + i], &st, g_err, sizeof g_err);
        if (!signers[i]) goto done;
    }
    if (text && signers)
        out = pgcl_note_sign(text, len, (const pgcl_note_signer *const *)signers, n, ts, &out_len, &st, g_err,
                             sizeof g_err);
    if (out) {
        fwrite(out, 1, out_len, stdout);
        rc = 0;
    }
done:
    if (rc) refused("sign", st);
    for (int i = 0; signers && i < n; i++)
        pgcl_note_signer_destroy(signers[i]);
    free(signers);
    free(text);
    free(out);
    return rc;
}

static int cmd_verify(int argc, char **argv) {
    pgcl_note_verifier *keys = calloc((size_t)argc + 1, sizeof *keys);
    size_t len = 0;
    char *msg = read_all(NULL, &len);
    int rc = 1;
    pgcl_status st = PGCL_ERR_NOMEM;
    if (keys && msg && parse_vkeys(argv, argc, keys)) {
        pgcl_note *n = pgcl_note_open(msg, len, keys, argc, &st, g_err, sizeof g_err);
        if (n) {
            for (int i = 0; i < n->n_sigs; i++)
                fprintf(stderr, "%s %s+%08" PRIx32 " %" PRIu64 "\n", n->sigs[i].verifier >= 0 ? "verified" : "unknown",
                        n->sigs[i].name, n->sigs[i].key_id, n->sigs[i].timestamp);
            fwrite(n->text, 1, n->text_len, stdout);
            rc = 0;
        } else {
            refused("verify", st);
        }
        pgcl_note_destroy(n);
    }
    free(keys);
    free(msg);
    return rc;
}

static int cmd_verify_batch(int argc, char **argv) {
    pgcl_note_verifier *keys = calloc((size_t)argc + 1, sizeof *keys);
    size_t len = 0;
    char *in = read_all(NULL, &len), *line = in;
    unsigned char *bin = malloc(len + 1);
    char *b64 = malloc(len * 2 + 16);
    int rc = 1;
    if (!keys || !in || !bin || !b64 || !parse_vkeys(argv, argc, keys)) goto done;
    for (char *eol; (eol = strchr(line, '\n')); line = eol + 1) {
        size_t n = 0;
        if (sodium_base642bin(bin, len, line, (size_t)(eol - line), NULL, &n, NULL, sodium_base64_VARIANT_ORIGINAL) !=
            0) {
            printf("bad-input\n");
            continue;
        }
        pgcl_status st;
        pgcl_note *note = pgcl_note_open((const char *)bin, n, keys, argc, &st, g_err, sizeof g_err);
        if (note) {
            sodium_bin2base64(b64, len * 2 + 16, (const unsigned char *)note->text, note->text_len,
                              sodium_base64_VARIANT_ORIGINAL);
            printf("ok %s\n", b64);
        } else {
            printf("refused %s %s\n", pgcl_status_str(st), g_err);
        }
        pgcl_note_destroy(note);
    }
    rc = 0;
done:
    free(keys);
    free(in);
    free(bin);
    free(b64);
    return rc;
}

static int cmd_checkpoint(char **argv) {
    pgcl_tlog_checkpoint cp = {.size = strtoull(argv[1], NULL, 10)};
    char text[PGCL_TLOG_CHECKPOINT_MAX];
    size_t len = 0;
    snprintf(cp.origin, sizeof cp.origin, "%s", argv[0]);
    if (sodium_hex2bin(cp.root.b, sizeof cp.root.b, argv[2], strlen(argv[2]), NULL, &len, NULL) != 0 || len != 32) {
        fprintf(stderr, "note_tool checkpoint: the root is 64 hex digits\n");
        return 2;
    }
    pgcl_status st = pgcl_tlog_checkpoint_format(&cp, text, &len, g_err, sizeof g_err);
    if (st != PGCL_OK) return refused("checkpoint", st);
    fwrite(text, 1, len, stdout);
    return 0;
}

static int cmd_parse_checkpoint(void) {
    pgcl_tlog_checkpoint cp;
    size_t len = 0;
    char *text = read_all(NULL, &len), root[65];
    pgcl_status st = text ? pgcl_tlog_checkpoint_parse(text, len, &cp, g_err, sizeof g_err) : PGCL_ERR_NOMEM;
    int ext = 0;
    for (size_t i = 0; st == PGCL_OK && i < cp.ext_len; i++)
        ext += text[cp.ext_at + i] == '\n';
    free(text);
    if (st != PGCL_OK) return refused("parse-checkpoint", st);
    sodium_bin2hex(root, sizeof root, cp.root.b, sizeof cp.root.b);
    printf("%s %" PRIu64 " %s %d\n", cp.origin, cp.size, root, ext);
    return 0;
}

static int cmd_open_checkpoint(int argc, char **argv) {
    pgcl_note_verifier log_key, *witnesses = calloc((size_t)argc, sizeof *witnesses);
    pgcl_tlog_checkpoint cp;
    size_t len = 0;
    char *msg = read_all(NULL, &len), root[65];
    int rc = 1;
    pgcl_status st = PGCL_ERR_NOMEM;
    if (witnesses && msg && parse_vkeys(argv, 1, &log_key) && parse_vkeys(argv + 2, argc - 2, witnesses)) {
        pgcl_note *n = pgcl_tlog_checkpoint_open(msg, len, &log_key, NULL, witnesses, argc - 2, atoi(argv[1]), &cp, &st,
                                                 g_err, sizeof g_err);
        if (n) {
            int cosigners = 0;
            for (int i = 0; i < n->n_sigs; i++)
                cosigners += n->sigs[i].verifier >= 1;
            sodium_bin2hex(root, sizeof root, cp.root.b, sizeof cp.root.b);
            printf("%s %" PRIu64 " %s %d\n", cp.origin, cp.size, root, cosigners);
            rc = 0;
        } else {
            refused("open-checkpoint", st);
        }
        pgcl_note_destroy(n);
    }
    free(witnesses);
    free(msg);
    return rc;
}

static int cmd_witness_answer(char **argv) {
    pgcl_note_verifier w;
    size_t text_len = 0, len = 0;
    char *text = read_all(argv[1], &text_len), *answer = read_all(NULL, &len), line[PGCL_NOTE_SIG_LINE_MAX];
    uint64_t ts = 0;
    int rc = 1;
    pgcl_status st = PGCL_ERR_NOMEM;
    if (text && answer && parse_vkeys(argv, 1, &w)) {
        st = pgcl_tlog_witness_cosignature(text, text_len, answer, len, &w, line, &ts, g_err, sizeof g_err);
        if (st == PGCL_OK) {
            printf("%" PRIu64 "\n%s", ts, line);
            rc = 0;
        } else {
            refused("witness-answer", st);
        }
    }
    free(text);
    free(answer);
    return rc;
}

int main(int argc, char **argv) {
    if (sodium_init() < 0) return 1;
    if (argc < 2) return usage();
    const char *cmd = argv[1];
    int rc = 2;
    pgcl_status st = PGCL_OK;
    if (strcmp(cmd, "keygen") == 0 && (argc == 3 || argc == 4)) {
        pgcl_note_signer *s =
            pgcl_note_signer_generate(argv[2], argc == 4 ? (uint8_t)atoi(argv[3]) : 1, &st, g_err, sizeof g_err);
        char skey[PGCL_NOTE_SKEY_MAX];
        if (!s || pgcl_note_signer_format(s, skey, sizeof skey) < 0) {
            rc = refused("keygen", st);
        } else {
            printf("%s\n", skey);
            rc = print_vkey(pgcl_note_signer_verifier(s));
        }
        pgcl_note_signer_destroy(s);
    } else if (strcmp(cmd, "vkey") == 0 && argc == 3) {
        pgcl_note_signer *s = pgcl_note_signer_parse(argv[2], &st, g_err, sizeof g_err);
        rc = s ? print_vkey(pgcl_note_signer_verifier(s)) : refused("vkey", st);
        pgcl_note_signer_destroy(s);
    } else if (strcmp(cmd, "sign") == 0) {
        rc = cmd_sign(argc - 2, argv + 2, NULL, NULL);
    } else if (strcmp(cmd, "verify") == 0) {
        rc = cmd_verify(argc - 2, argv + 2);
    } else if (strcmp(cmd, "verify-batch") == 0) {
        rc = cmd_verify_batch(argc - 2, argv + 2);
    } else if (strcmp(cmd, "checkpoint") == 0 && argc == 5) {
        rc = cmd_checkpoint(argv + 2);
    } else if (strcmp(cmd, "parse-checkpoint") == 0 && argc == 2) {
        rc = cmd_parse_checkpoint();
    } else if (strcmp(cmd, "open-checkpoint") == 0 && argc >= 4) {
        rc = cmd_open_checkpoint(argc - 2, argv + 2);
    } else if (strcmp(cmd, "key-file-vkey") == 0 && argc == 4) {
        pgcl_note_signer *s = pgcl_note_signer_from_key_file(argv[2], argv[3], &st, g_err, sizeof g_err);
        rc = s ? print_vkey(pgcl_note_signer_verifier(s)) : refused("key-file-vkey", st);
        pgcl_note_signer_destroy(s);
    } else if (strcmp(cmd, "key-file-sign") == 0 && argc == 4) {
        rc = cmd_sign(0, NULL, argv[2], argv[3]);
    } else if (strcmp(cmd, "witness-answer") == 0 && argc == 4) {
        rc = cmd_witness_answer(argv + 2);
    } else {
        return usage();
    }
    if (fflush(stdout) != 0 || ferror(stdout)) return 2;
    return rc;
}
