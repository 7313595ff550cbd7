/* A helper of tests/integration/test_tlog_stock_verifier.py (not a test by itself, not installed):
 * writes a C2SP tlog-tiles log of generated entries into a directory through core/audit/log/tiles.h,
 * laid out as the spec serves it, so that a stock client (tests/tlog/verify_tiles, Go's sumdb/tlog)
 * can check what pgcld's tile code writes:
 *
 *   tlog_fixture DIR N [--origin ORIGIN] [--seed S] [--checkpoint-at M FILE]...
 *
 * DIR/tile/<L>/<N>[.p/<W>] and DIR/tile/entries/<N>[.p/<W>]: the tiles of N entries, appended in
 * commits of varying sizes (1 to a few thousand entries, from the seed), each commit's tiles written
 * as the store would write them (every tile kept, the superseded partial ones too: a file store with
 * rows keyed by path). DIR/checkpoint: the UNSIGNED checkpoint body of the tree of N entries,
 * "<origin>\n<size>\n<base64 root>\n" (C2SP tlog-checkpoint; signing is core/audit/log/note.h's).
 * --checkpoint-at M FILE: a commit also ends at size M, and FILE gets that tree's checkpoint body.
 *
 * Entry i is "pgcld tlog fixture entry <i>\n" and 0..200 bytes from the seed; every 1000th is
 * longer (2,000 bytes), entry 5 is empty and entry 7 is 65,535 bytes, the largest a bundle holds.
 * Before each commit the old tree's partial tiles are checked against the root of the commit
 * before (pgcl_tiles_append's expected_root), and at the end the root is read back from the files.
 * Prints one line: entries, commits, tiles written, root. Exit 0, 1 (failure: the reason on stderr)
 * or 2 (usage). */
#include <errno.h>
#include <sodium.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "merkle.h"
#include "note.h"
#include "tiles.h"

enum { MAX_CHECKPOINTS = 16 };

typedef struct file_store {
    const char *dir;
    unsigned char *buf; /* the last tile read, for the callback's answer */
    size_t cap;
} file_store;

/* pgcl_tile_read_fn over DIR/<path>: the file of exactly that tile. */
static pgcl_status file_read(void *ctx, const pgcl_tile_id *id, const unsigned char **data, size_t *len, char *err,
                             int cap) {
    file_store *s = ctx;
    char rel[PGCL_TILE_PATH_MAX], path[4096];
    pgcl_tile_path(id, rel);
    snprintf(path, sizeof path, "%s/%s", s->dir, rel);
    FILE *f = fopen(path, "rb");
    if (!f) {
        pgcl_errorf(err, cap, "%s: %s", path, strerror(errno));
        return errno == ENOENT ? PGCL_ERR_NOT_FOUND : PGCL_ERR_IO;
    }
    size_t n = 0;
    for (;;) {
        if (n == s->cap) {
            size_t cap2 = s->cap ? 2 * s->cap : 1 << 16;
            unsigned char *b = realloc(s->buf, cap2);
            if (!b) {
                fclose(f);
                return PGCL_ERR_NOMEM;
            }
            s->buf = b;
            s->cap = cap2;
        }
        size_t got = fread(s->buf + n, 1, s->cap - n, f);
        n += got;
        if (got == 0) break;
    }
    bool bad = ferror(f);
    fclose(f);
    if (bad) {
        pgcl_errorf(err, cap, "%s: read error", path);
        return PGCL_ERR_IO;
    }
    *data = s->buf;
    *len = n;
    return PGCL_OK;
}

/* mkdir -p of path's parent directories. */
static bool make_parents(char *path) {
    for (char *p = strchr(path + 1, '/'); p; p = strchr(p + 1, '/')) {
        *p = 0;
        bool ok = mkdir(path, 0755) == 0 || errno == EEXIST;
        *p = '/';
        if (!ok) return false;
    }
    return true;
}

static bool write_file(const char *path, const void *data, size_t len) {
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "wb");
    if (!f) return false;
    bool ok = fwrite(data, 1, len, f) == len;
    ok = fclose(f) == 0 && ok;
    return ok && rename(tmp, path) == 0;
}

/* The commit's tiles, each to DIR/<path>. */
static bool write_tiles(const file_store *s, const pgcl_tiles_batch *b) {
    for (size_t i = 0; i < b->n_tiles; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", s->dir, b->tiles[i].path);
        if (!make_parents(path) || !write_file(path, b->tiles[i].data, b->tiles[i].len)) {
            fprintf(stderr, "tlog_fixture: cannot write %s: %s\n", path, strerror(errno));
            return false;
        }
    }
    return true;
}

/* The signer of every checkpoint written (--sign), or NULL: then the body alone is written. */
static pgcl_note_signer *g_signer;

/* The C2SP tlog-checkpoint body "origin\nsize\nbase64(root)\n" into path, as a signed note when
 * --sign gave a key (pgcld's own signing: core/audit/log/note.c). */
static bool write_checkpoint(const char *path, const char *origin, uint64_t size, const pgcl_merkle_hash *root) {
    pgcl_tlog_checkpoint cp = {.size = size, .root = *root};
    char body[PGCL_TLOG_CHECKPOINT_MAX], err[256] = "the origin is too long";
    size_t n = 0;
    bool fits = strlen(origin) <= PGCL_TLOG_ORIGIN_MAX;
    if (fits) memcpy(cp.origin, origin, strlen(origin) + 1);
    if (!fits || pgcl_tlog_checkpoint_format(&cp, body, &n, err, sizeof err) != PGCL_OK) {
        fprintf(stderr, "tlog_fixture: the checkpoint of origin %s cannot be formatted: %s\n", origin, err);
        return false;
    }
    char *signed_note = NULL;
    size_t signed_len = 0;
    if (g_signer) {
        pgcl_status st;
        const pgcl_note_signer *const signers[] = {g_signer};
        signed_note = pgcl_note_sign(body, n, signers, 1, 0, &signed_len, &st, err, sizeof err);
        if (!signed_note) {
            fprintf(stderr, "tlog_fixture: signing the checkpoint: %s: %s\n", pgcl_status_str(st), err);
            return false;
        }
    }
    bool ok = signed_note ? write_file(path, signed_note, signed_len) : write_file(path, body, n);
    free(signed_note);
    if (!ok) fprintf(stderr, "tlog_fixture: cannot write %s: %s\n", path, strerror(errno));
    return ok;
}

static uint64_t g_rng;
static uint64_t next_random(void) { /* xorshift64 */
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return g_rng;
}

/* Entry i into buf (PGCL_TILE_ENTRY_MAX bytes); returns its length. */
static size_t make_entry(uint64_t i, unsigned char *buf) {
    if (i == 5) return 0;
    size_t n = (size_t)snprintf((char *)buf, 64, "pgcld tlog fixture entry %llu\n", (unsigned long long)i);
    size_t extra = i == 7 ? PGCL_TILE_ENTRY_MAX - n : i % 1000 == 999 ? 2000 : next_random() % 201;
    for (size_t k = 0; k < extra; k++)
        buf[n + k] = (unsigned char)next_random();
    return n + extra;
}

/* The next batch's size: mostly small, sometimes large, now and then a single entry. */
static uint64_t next_batch(void) {
    switch (next_random() % 8) {
    case 0:
        return 1;
    case 1:
        return 1000 + next_random() % 3000;
    case 2:
    case 3:
        return 100 + next_random() % 600;
    default:
        return 1 + next_random() % 60;
    }
}

static int usage(void) {
    fprintf(stderr, "usage: tlog_fixture DIR N [--origin ORIGIN] [--seed S] [--sign PRIVATE+KEY+...] "
                    "[--checkpoint-at M FILE]...\n");
    return 2;
}

static bool parse_u64(const char *s, uint64_t *out) {
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s || *end || s[0] == '-') return false;
    *out = v;
    return true;
}

int main(int argc, char **argv) {
    if (argc < 3 || sodium_init() < 0) return usage();
    const char *origin = "pgcld.test/tlog-fixture";
    uint64_t n_entries, seed = 1, at[MAX_CHECKPOINTS];
    const char *at_file[MAX_CHECKPOINTS];
    int n_at = 0;
    if (!parse_u64(argv[2], &n_entries)) return usage();
    for (int i = 3; i < argc; i++) {
        if (!strcmp(argv[i], "--origin") && i + 1 < argc) {
            origin = argv[++i];
        } else if (!strcmp(argv[i], "--sign") && i + 1 < argc && !g_signer) {
            pgcl_status st;
            char err[256];
            if (!(g_signer = pgcl_note_signer_parse(argv[++i], &st, err, sizeof err))) {
                fprintf(stderr, "tlog_fixture: --sign: %s: %s\n", pgcl_status_str(st), err);
                return 2;
            }
        } else if (!strcmp(argv[i], "--seed") && i + 1 < argc) {
            if (!parse_u64(argv[++i], &seed)) return usage();
        } else if (!strcmp(argv[i], "--checkpoint-at") && i + 2 < argc && n_at < MAX_CHECKPOINTS) {
            if (!parse_u64(argv[i + 1], &at[n_at]) || at[n_at] > n_entries) return usage();
            at_file[n_at++] = argv[i + 2];
            i += 2;
        } else {
            return usage();
        }
    }
    g_rng = seed * 0x9e3779b97f4a7c15ull + 0x2545f4914f6cdd1dull;
    if (mkdir(argv[1], 0755) != 0 && errno != EEXIST) {
        fprintf(stderr, "tlog_fixture: cannot make %s: %s\n", argv[1], strerror(errno));
        return 1;
    }

    int rc = 1;
    file_store store = {.dir = argv[1]};
    pgcl_tiles_reader *reader = pgcl_tiles_reader_create(file_read, &store);
    unsigned char *entry = malloc(PGCL_TILE_ENTRY_MAX), *bytes = NULL;
    size_t *offs = NULL, bytes_cap = 0;
    pgcl_tile_entry *batch = NULL;
    if (!reader || !entry) goto nomem;
    char err[1024] = "";
    uint64_t size = 0, commits = 0, tiles = 0;
    pgcl_merkle_hash root = pgcl_merkle_root(NULL, 0);
    for (int k = 0; k < n_at; k++) /* a checkpoint of the empty tree */
        if (at[k] == 0 && !write_checkpoint(at_file[k], origin, 0, &root)) goto done;
    while (size < n_entries) {
        /* the batch: its size capped at the next checkpoint size and at N */
        uint64_t count = next_batch(), end = size + count;
        for (int k = 0; k < n_at; k++)
            if (at[k] > size && at[k] < end) end = at[k];
        if (end > n_entries) end = n_entries;
        count = end - size;
        size_t used = 0;
        free(offs);
        free(batch);
        offs = malloc((count + 1) * sizeof *offs);
        batch = malloc(count * sizeof *batch);
        if (!offs || !batch) goto nomem;
        for (uint64_t i = 0; i < count; i++) {
            size_t len = make_entry(size + i, entry);
            if (used + len > bytes_cap) {
                bytes_cap = 2 * (used + len);
                unsigned char *b = realloc(bytes, bytes_cap);
                if (!b) goto nomem;
                bytes = b;
            }
            memcpy(bytes + used, entry, len);
            offs[i] = used;
            used += len;
        }
        offs[count] = used;
        for (uint64_t i = 0; i < count; i++) /* pointers once the buffer no longer moves */
            batch[i] = (pgcl_tile_entry){.data = bytes + offs[i], .len = offs[i + 1] - offs[i]};
        pgcl_tiles_batch *b = NULL;
        pgcl_status st = pgcl_tiles_append(file_read, &store, size, &root, batch, count, &b, err, sizeof err);
        if (st != PGCL_OK) {
            fprintf(stderr, "tlog_fixture: appending %llu entries to %llu: %s: %s\n", (unsigned long long)count,
                    (unsigned long long)size, pgcl_status_str(st), err);
            goto done;
        }
        bool ok = write_tiles(&store, b);
        tiles += b->n_tiles;
        root = b->new_root;
        size = b->new_size;
        pgcl_tiles_batch_destroy(b);
        if (!ok) goto done;
        commits++;
        for (int k = 0; k < n_at; k++)
            if (at[k] == size && !write_checkpoint(at_file[k], origin, size, &root)) goto done;
    }
    pgcl_merkle_hash read_back;
    pgcl_status st = pgcl_tiles_root(reader, size, &read_back, err, sizeof err);
    if (st != PGCL_OK || memcmp(read_back.b, root.b, PGCL_MERKLE_HASH_BYTES) != 0) {
        fprintf(stderr, "tlog_fixture: the root read back from %s differs: %s %s\n", argv[1], pgcl_status_str(st), err);
        goto done;
    }
    char path[4096], hex[2 * PGCL_MERKLE_HASH_BYTES + 1];
    snprintf(path, sizeof path, "%s/checkpoint", argv[1]);
    if (!write_checkpoint(path, origin, size, &root)) goto done;
    pgcl_merkle_to_hex(&root, hex);
    printf("tlog_fixture: %llu entries in %llu commits, %llu tiles written, root %s\n", (unsigned long long)size,
           (unsigned long long)commits, (unsigned long long)tiles, hex);
    rc = 0;
    goto done;
nomem:
    fprintf(stderr, "tlog_fixture: out of memory\n");
done:
    free(batch);
    free(offs);
    free(bytes);
    free(entry);
    free(store.buf);
    pgcl_tiles_reader_destroy(reader);
    pgcl_note_signer_destroy(g_signer);
    return rc;
}
