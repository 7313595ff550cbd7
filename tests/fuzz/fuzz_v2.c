/* libFuzzer harness: the KServe v2 infer body parser (server/routes/routes_v2.c), JSON and the binary
 * tensor extension, through the in-process server of fuzz_server.c (the parser reads its headers
 * from libmicrohttpd, so it runs behind a real connection). The input is one flag byte, two bytes
 * of Inference-Header-Content-Length (little-endian) and the body:
 *   flags bit 0: send Inference-Header-Content-Length (binary extension), else a JSON body
 *   flags bit 1: Content-Type application/octet-stream, else application/json
 *   flags bit 2: model tiny_multi, else tiny_binary
 * The request line, Host and Content-Length are always well-formed, so every input reaches the
 * handler. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_server.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    fuzz_server_start();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 3) return 0;
    unsigned flags = data[0], ihcl = (unsigned)data[1] | (unsigned)data[2] << 8;
    const uint8_t *body = data + 3;
    size_t len = size - 3;
    char head[512];
    int n = snprintf(head, sizeof head,
                     "POST /v2/models/%s/infer HTTP/1.1\r\nHost: fuzz\r\nContent-Type: %s\r\n"
                     "Content-Length: %zu\r\n",
                     flags & 4 ? "tiny_multi" : "tiny_binary",
                     flags & 2 ? "application/octet-stream" : "application/json", len);
    if (flags & 1) n += snprintf(head + n, sizeof head - (size_t)n, "Inference-Header-Content-Length: %u\r\n", ihcl);
    n += snprintf(head + n, sizeof head - (size_t)n, "Connection: close\r\n\r\n");
    uint8_t *req = malloc((size_t)n + len);
    if (!req) return 0;
    memcpy(req, head, (size_t)n);
    if (len) memcpy(req + n, body, len);
    fuzz_server_exchange(req, (size_t)n + len);
    free(req);
    return 0;
}
