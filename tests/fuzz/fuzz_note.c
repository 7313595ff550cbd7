/* libFuzzer harness: signed notes, checkpoints and a witness's answer (core/audit/log/note.h), the
 * parsers of issue 28 that face the network. The input is taken as a whole signed note and opened
 * with a log key and a witness key (their signer keys are below, so that the seed corpus carries
 * valid signatures: tests/fuzz/corpus/fuzz_note was signed with tests/core/note_tool); a note that
 * opens must hold together (its text a prefix ending in a newline, each signature's verifier in
 * range), a checkpoint text that parses must format back to the same bytes, and the same input is
 * read as a witness's answer to the checkpoint text below, as a verifier key and as a signer key. */
#include <sodium.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "note.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* test keys, for this harness and its corpus only */
#define LOG_VKEY "example.com/fuzz/log+0dc243b4+ASdNGuttPUJQfLf3mzcd6+lxkcUJfS9ePtDanlvT3jRB"
#define WITNESS_VKEY "witness.example/fuzz+6c9a408e+BO8S/xnf3KmTcmN2EYBOT+qGjAqeiKlun5kh590EmvMf"
/* their signer keys, for making corpus files with note_tool:
 *   PRIVATE+KEY+example.com/fuzz/log+0dc243b4+AfWUB/a8iEApD3yMgExA7koq78rUPq5NF0VY85cU74pi
 *   PRIVATE+KEY+witness.example/fuzz+6c9a408e+BLmUoP3WYaGmS9F0X9g85cdqWoMBitUEuvaBCa0WgW6Z */
#define CHECKPOINT "example.com/fuzz/log\n3\nq6urq6urq6urq6urq6urq6urq6urq6urq6urq6urq6s=\n"

static pgcl_note_verifier g_keys[2];

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    if (sodium_init() < 0 || pgcl_note_verifier_parse(LOG_VKEY, &g_keys[0], NULL, 0) != PGCL_OK ||
        pgcl_note_verifier_parse(WITNESS_VKEY, &g_keys[1], NULL, 0) != PGCL_OK)
        abort();
    return 0;
}

static void check_note(const pgcl_note *n, const uint8_t *data, size_t size) {
    if (n->text_len == 0 || n->text_len >= size || memcmp(n->text, data, n->text_len) != 0 ||
        n->text[n->text_len - 1] != '\n' || n->text[n->text_len] != 0 || n->n_verified < 1 ||
        n->n_sigs < n->n_verified || n->n_sigs > PGCL_NOTE_MAX_SIGS)
        abort();
    for (int i = 0; i < n->n_sigs; i++)
        if (n->sigs[i].verifier < -1 || n->sigs[i].verifier > 1 || n->sigs[i].name[0] == 0 || n->sigs[i].sig_len == 0 ||
            (n->sigs[i].verifier >= 0 && n->sigs[i].sig_len != (n->sigs[i].verifier == 0 ? 64u : 72u)) ||
            strchr(n->sigs[i].name, '+') || strchr(n->sigs[i].name, ' '))
            abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char err[256];
    pgcl_status st;
    /* an exact copy, so that ASan sees a read past its end */
    char *msg = malloc(size ? size : 1);
    if (!msg) abort();
    memcpy(msg, data, size);

    pgcl_note *n = pgcl_note_open(msg, size, g_keys, 2, &st, err, sizeof err);
    if ((n != NULL) != (st == PGCL_OK)) abort();
    if (n) {
        pgcl_tlog_checkpoint cp;
        check_note(n, data, size);
        if (pgcl_tlog_checkpoint_parse(n->text, n->text_len, &cp, err, sizeof err) == PGCL_OK && cp.ext_len == 0 &&
            pgcl_note_name_valid(cp.origin, strlen(cp.origin))) {
            char again[PGCL_TLOG_CHECKPOINT_MAX];
            size_t len = 0;
            if (pgcl_tlog_checkpoint_format(&cp, again, &len, err, sizeof err) != PGCL_OK || len != n->text_len ||
                memcmp(again, n->text, len) != 0)
                abort(); /* a canonical parser: one text per checkpoint */
        }
        pgcl_note_destroy(n);
        n = pgcl_tlog_checkpoint_open(msg, size, &g_keys[0], NULL, &g_keys[1], 1, 1, &cp, &st, err, sizeof err);
        if ((n != NULL) != (st == PGCL_OK) || (n && cp.size > (uint64_t)PGCL_TLOG_SIZE_MAX)) abort();
        pgcl_note_destroy(n);
    }

    char line[PGCL_NOTE_SIG_LINE_MAX];
    uint64_t ts = 0;
    st = pgcl_tlog_witness_cosignature(CHECKPOINT, strlen(CHECKPOINT), msg, size, &g_keys[1], line, &ts, err,
                                       sizeof err);
    if (st == PGCL_OK && (strncmp(line, "\xe2\x80\x94 witness.example/fuzz ", 25) != 0 || ts > (uint64_t)INT64_MAX))
        abort();

    char *z = malloc(size + 1); /* the input as a key string */
    if (!z) abort();
    memcpy(z, data, size);
    z[size] = 0;
    pgcl_note_verifier v;
    if (pgcl_note_verifier_parse(z, &v, err, sizeof err) == PGCL_OK) {
        char again[PGCL_NOTE_VKEY_MAX];
        if (pgcl_note_verifier_format(&v, again, sizeof again) < 0) abort();
    }
    pgcl_note_signer_destroy(pgcl_note_signer_parse(z, &st, err, sizeof err));
    free(z);
    free(msg);
    return 0;
}
