/* RFC 9162 Merkle trees (core/audit/merkle.c) against two independent references:
 *  - the published RFC 6962 test tree (eight leaves; its roots for every size, and inclusion and
 *    consistency proofs from the Certificate Transparency test data), and
 *  - a naive oracle here: the RFC's recursive definitions of MTH, PATH and SUBPROOF transcribed
 *    literally, compared with the iterative builders for every tree size up to 70 and every index.
 * Every proof must verify, and must stop verifying when any hash, the leaf, the index or the path's
 * length is changed. (A tree size with the same path shape verifies too, in every RFC 9162
 * implementation: the size is authenticated by the signed tree head that carries it with the root.) */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "merkle.h"
#include "test_util.h"

/* ---- the naive oracle: RFC 9162 §2.1.1, §2.1.3.1, §2.1.4.1 as written ---- */

static uint64_t oracle_k(uint64_t n) { /* largest power of two smaller than n */
    uint64_t k = 1;
    while (k * 2 < n) k *= 2;
    return k;
}

static pgcl_merkle_hash oracle_mth(const pgcl_merkle_hash *d, uint64_t n) {
    if (n == 0) return pgcl_merkle_root(d, 0); /* SHA-256() — checked against its literal below */
    if (n == 1) return d[0];
    uint64_t k = oracle_k(n);
    pgcl_merkle_hash l = oracle_mth(d, k), r = oracle_mth(d + k, n - k);
    return pgcl_merkle_node_hash(&l, &r);
}

static int oracle_path(uint64_t m, const pgcl_merkle_hash *d, uint64_t n, pgcl_merkle_hash *out) {
    if (n == 1) return 0;
    uint64_t k = oracle_k(n);
    int len;
    if (m < k) {
        len = oracle_path(m, d, k, out);
        out[len++] = oracle_mth(d + k, n - k);
    } else {
        len = oracle_path(m - k, d + k, n - k, out);
        out[len++] = oracle_mth(d, k);
    }
    return len;
}

static int oracle_subproof(uint64_t m, const pgcl_merkle_hash *d, uint64_t n, int b, pgcl_merkle_hash *out) {
    if (m == n) {
        if (b) return 0;
        out[0] = oracle_mth(d, n);
        return 1;
    }
    uint64_t k = oracle_k(n);
    int len;
    if (m <= k) {
        len = oracle_subproof(m, d, k, b, out);
        out[len++] = oracle_mth(d + k, n - k);
    } else {
        len = oracle_subproof(m - k, d + k, n - k, 0, out);
        out[len++] = oracle_mth(d, k);
    }
    return len;
}

/* ---- helpers ---- */

static pgcl_merkle_hash H(const char *hex) {
    pgcl_merkle_hash h;
    if (!pgcl_merkle_from_hex(hex, &h)) {
        fprintf(stderr, "bad hex literal %s\n", hex);
        memset(&h, 0, sizeof h);
    }
    return h;
}

static int same(const pgcl_merkle_hash *a, const pgcl_merkle_hash *b) { return memcmp(a->b, b->b, 32) == 0; }

static int same_list(const pgcl_merkle_hash *a, int na, const pgcl_merkle_hash *b, int nb) {
    if (na != nb) return 0;
    for (int i = 0; i < na; i++)
        if (!same(&a[i], &b[i])) return 0;
    return 1;
}

/* ---- the RFC 6962 test tree ---- */

static const char *const CT_LEAF_HEX[8] = {"", "00", "10", "2021", "3031", "40414243", "5051525354555657",
                                           "606162636465666768696a6b6c6d6e6f"};
static const char *const CT_ROOT[9] = {
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
    "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
    "fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125",
    "aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77",
    "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
    "4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4",
    "76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef",
    "ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c",
    "5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328",
};

static void ct_leaves(pgcl_merkle_hash leaves[8]) {
    for (int i = 0; i < 8; i++) {
        unsigned char data[16];
        size_t n = strlen(CT_LEAF_HEX[i]) / 2;
        for (size_t j = 0; j < n; j++) sscanf(CT_LEAF_HEX[i] + 2 * j, "%2hhx", &data[j]);
        leaves[i] = pgcl_merkle_leaf_hash(data, n);
    }
}

static void test_known_roots(void) {
    pgcl_merkle_hash leaves[8];
    ct_leaves(leaves);
    for (int n = 0; n <= 8; n++) {
        pgcl_merkle_hash want = H(CT_ROOT[n]), got = pgcl_merkle_root(leaves, (uint64_t)n);
        char hex[65];
        pgcl_merkle_to_hex(&got, hex);
        CHECK(same(&got, &want), "root of the first %d leaves: %s, RFC 6962 test data says %s", n, hex, CT_ROOT[n]);
        pgcl_merkle_hash o = oracle_mth(leaves, (uint64_t)n);
        CHECK(same(&o, &want), "the oracle's root of %d leaves", n);
    }
}

static void test_known_inclusion(void) {
    pgcl_merkle_hash leaves[8];
    ct_leaves(leaves);
    struct {
        uint64_t index, size;
        int len;
        const char *path[3];
    } cases[] = {
        {0, 8, 3,
         {"96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
          "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
          "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4"}},
        {5, 8, 3,
         {"bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
          "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
          "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7"}},
        {2, 3, 1, {"fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125"}},
        {1, 5, 3,
         {"6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
          "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
          "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b"}},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        pgcl_merkle_hash want[3], got[PGCL_MERKLE_MAX_PATH];
        for (int i = 0; i < cases[c].len; i++) want[i] = H(cases[c].path[i]);
        int len = pgcl_merkle_inclusion_path(leaves, cases[c].size, cases[c].index, got);
        CHECK(same_list(got, len, want, cases[c].len), "inclusion path of leaf %llu in a tree of %llu",
              (unsigned long long)cases[c].index, (unsigned long long)cases[c].size);
        pgcl_merkle_hash root = H(CT_ROOT[cases[c].size]);
        CHECK(pgcl_merkle_verify_inclusion(&leaves[cases[c].index], cases[c].index, cases[c].size, want,
                                           cases[c].len, &root),
              "the published path of leaf %llu verifies", (unsigned long long)cases[c].index);
    }
}

static void test_known_consistency(void) {
    pgcl_merkle_hash leaves[8];
    ct_leaves(leaves);
    struct {
        uint64_t first, second;
        int len;
        const char *proof[3];
    } cases[] = {
        {1, 1, 0, {0}},
        {1, 8, 3,
         {"96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
          "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
          "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4"}},
        {6, 8, 3,
         {"0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a",
          "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
          "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7"}},
        {2, 5, 2,
         {"5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
          "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b"}},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        pgcl_merkle_hash want[3], got[PGCL_MERKLE_MAX_PATH];
        for (int i = 0; i < cases[c].len; i++) want[i] = H(cases[c].proof[i]);
        int len = pgcl_merkle_consistency_proof(leaves, cases[c].first, cases[c].second, got);
        CHECK(same_list(got, len, want, cases[c].len), "consistency proof %llu -> %llu",
              (unsigned long long)cases[c].first, (unsigned long long)cases[c].second);
        pgcl_merkle_hash r1 = H(CT_ROOT[cases[c].first]), r2 = H(CT_ROOT[cases[c].second]);
        CHECK(pgcl_merkle_verify_consistency(cases[c].first, cases[c].second, &r1, &r2, want, cases[c].len),
              "the published consistency proof %llu -> %llu verifies", (unsigned long long)cases[c].first,
              (unsigned long long)cases[c].second);
    }
}

/* ---- every size, every index, against the oracle; every tampering refused ---- */

#define MAX_N 70

static void make_leaves(pgcl_merkle_hash *leaves, int n) {
    for (int i = 0; i < n; i++) {
        unsigned char data[3] = {(unsigned char)i, (unsigned char)(i * 7), 0x5a};
        leaves[i] = pgcl_merkle_leaf_hash(data, i == 0 ? 0 : (size_t)(1 + i % 3)); /* distinct; leaf 0 empty */
    }
}

static void test_inclusion_every_size(void) {
    pgcl_merkle_hash leaves[MAX_N];
    make_leaves(leaves, MAX_N);
    int bad = 0;
    for (int n = 1; n <= MAX_N; n++) {
        pgcl_merkle_hash root = pgcl_merkle_root(leaves, (uint64_t)n), oroot = oracle_mth(leaves, (uint64_t)n);
        CHECK(same(&root, &oroot), "root of %d leaves against the oracle", n);
        for (int m = 0; m < n; m++) {
            pgcl_merkle_hash path[PGCL_MERKLE_MAX_PATH], opath[PGCL_MERKLE_MAX_PATH];
            int len = pgcl_merkle_inclusion_path(leaves, (uint64_t)n, (uint64_t)m, path);
            int olen = oracle_path((uint64_t)m, leaves, (uint64_t)n, opath);
            if (!same_list(path, len, opath, olen)) bad++;
            if (!pgcl_merkle_verify_inclusion(&leaves[m], (uint64_t)m, (uint64_t)n, path, len, &root)) bad++;
            /* every change must be refused */
            for (int i = 0; i < len; i++) {
                pgcl_merkle_hash saved = path[i];
                path[i].b[i % 32] ^= 0x01;
                if (pgcl_merkle_verify_inclusion(&leaves[m], (uint64_t)m, (uint64_t)n, path, len, &root)) bad++;
                path[i] = saved;
            }
            pgcl_merkle_hash other = leaves[(m + 1) % n];
            if (n > 1 && pgcl_merkle_verify_inclusion(&other, (uint64_t)m, (uint64_t)n, path, len, &root)) bad++;
            if (n > 1 && pgcl_merkle_verify_inclusion(&leaves[m], (uint64_t)((m + 1) % n), (uint64_t)n, path, len,
                                                      &root))
                bad++;
            if (len > 0 && pgcl_merkle_verify_inclusion(&leaves[m], (uint64_t)m, (uint64_t)n, path, len - 1, &root))
                bad++;
            path[len] = root;
            if (pgcl_merkle_verify_inclusion(&leaves[m], (uint64_t)m, (uint64_t)n, path, len + 1, &root)) bad++;
            if (pgcl_merkle_verify_inclusion(&leaves[m], (uint64_t)n, (uint64_t)n, path, len, &root)) bad++;
        }
    }
    CHECK(bad == 0, "%d inclusion paths differ from the oracle, fail to verify, or verify after a change", bad);
}

static void test_consistency_every_size(void) {
    pgcl_merkle_hash leaves[MAX_N], roots[MAX_N + 1];
    make_leaves(leaves, MAX_N);
    for (int n = 0; n <= MAX_N; n++) roots[n] = pgcl_merkle_root(leaves, (uint64_t)n);
    int bad = 0;
    for (int second = 1; second <= MAX_N; second++) {
        for (int first = 1; first <= second; first++) {
            pgcl_merkle_hash proof[PGCL_MERKLE_MAX_PATH], oproof[PGCL_MERKLE_MAX_PATH];
            int len = pgcl_merkle_consistency_proof(leaves, (uint64_t)first, (uint64_t)second, proof);
            int olen = oracle_subproof((uint64_t)first, leaves, (uint64_t)second, 1, oproof);
            if (!same_list(proof, len, oproof, olen)) bad++;
            if (!pgcl_merkle_verify_consistency((uint64_t)first, (uint64_t)second, &roots[first], &roots[second],
                                                proof, len))
                bad++;
            for (int i = 0; i < len; i++) {
                pgcl_merkle_hash saved = proof[i];
                proof[i].b[31 - i % 32] ^= 0x80;
                if (pgcl_merkle_verify_consistency((uint64_t)first, (uint64_t)second, &roots[first], &roots[second],
                                                   proof, len))
                    bad++;
                proof[i] = saved;
            }
            if (first < second) {
                /* another old root, another new root (a size that gives the same path shape can verify:
                 * the size is bound by the signed head that carries it with the root, RFC 9162 §4.10) */
                if (pgcl_merkle_verify_consistency((uint64_t)first, (uint64_t)second, &roots[first - 1],
                                                   &roots[second], proof, len))
                    bad++;
                if (pgcl_merkle_verify_consistency((uint64_t)first, (uint64_t)second, &roots[first],
                                                   &roots[second - 1], proof, len))
                    bad++;
                if (len > 0 && pgcl_merkle_verify_consistency((uint64_t)first, (uint64_t)second, &roots[first],
                                                              &roots[second], proof, len - 1))
                    bad++;
            }
        }
    }
    CHECK(bad == 0, "%d consistency proofs differ from the oracle, fail to verify, or verify after a change", bad);
    CHECK(!pgcl_merkle_verify_consistency(0, 5, &roots[0], &roots[5], NULL, 0), "first = 0 is refused");
    CHECK(!pgcl_merkle_verify_consistency(5, 4, &roots[5], &roots[4], NULL, 0), "first > second is refused");
}

static void test_hex(void) {
    pgcl_merkle_hash h;
    CHECK(!pgcl_merkle_from_hex("00", &h), "short hex refused");
    CHECK(!pgcl_merkle_from_hex("zz3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855", &h),
          "non-hex refused");
    CHECK(pgcl_merkle_from_hex("E3B0C44298FC1C149AFBF4C8996FB92427AE41E4649B934CA495991B7852B855", &h),
          "upper case accepted");
    char hex[65];
    pgcl_merkle_to_hex(&h, hex);
    CHECK(strcmp(hex, CT_ROOT[0]) == 0, "round trip to lowercase: %s", hex);
}

int main(void) {
    test_known_roots();
    test_known_inclusion();
    test_known_consistency();
    test_inclusion_every_size();
    test_consistency_every_size();
    test_hex();
    return test_finish("test_merkle");
}
