/* Strict decoding of standard padded base64 (RFC 4648 §4) of a known byte length: the embeddings of
 * /v1/score's embedding_b64 items. libsodium's constant-time decoder ran at 145 MB/s here and was
 * the top symbol of a base64 batch-64 profile (18 % of the daemon's CPU, bench/RESULTS.md); this
 * table-driven one decodes at about 1.5 GB/s. Secrets are not decoded with it (API keys keep
 * libsodium's constant-time code). */
#ifndef PGCL_BASE64_H
#define PGCL_BASE64_H

#include <stdbool.h>
#include <stddef.h>

/* The length of the padded encoding of n bytes. */
static inline size_t pgcl_base64_encoded_len(size_t n) { return (n + 2) / 3 * 4; }

/* Decodes text[0..len) into out[0..want) and returns true only when text is exactly the canonical
 * padded encoding of want bytes: len == pgcl_base64_encoded_len(want), only A-Z a-z 0-9 + /, '='
 * only as the required padding, unused bits of the last group zero. No whitespace. On false, out
 * may be partly written. */
bool pgcl_base64_decode_exact(const char *text, size_t len, void *out, size_t want);

#endif
