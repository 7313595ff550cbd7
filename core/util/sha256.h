/* SHA-256 through OpenSSL's libcrypto, which uses the CPU's SHA extensions (SHA-NI) or AVX2 where
 * present: about 1.2 GB/s per core on this project's machines against 0.2 GB/s for libsodium's
 * portable code. Every row of the audit log and every scored input is hashed, so this is on the
 * hot path (see bench/RESULTS.md). */
#ifndef PGCL_SHA256_H
#define PGCL_SHA256_H

#include <stddef.h>

#define PGCL_SHA256_BYTES 32

/* One message in one call. Thread-safe. */
void pgcl_sha256(const void *data, size_t len, unsigned char out[PGCL_SHA256_BYTES]);

/* SHA-256(prefix ‖ data[0:len)): the leaf and node hashes of RFC 9162 Merkle trees (merkle.h). */
void pgcl_sha256_prefixed(unsigned char prefix, const void *data, size_t len, unsigned char out[PGCL_SHA256_BYTES]);

/* out = lowercase hex of the 32 bytes, NUL-terminated. */
void pgcl_sha256_to_hex(const unsigned char digest[PGCL_SHA256_BYTES], char out[2 * PGCL_SHA256_BYTES + 1]);

#endif
