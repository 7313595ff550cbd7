/* libFuzzer harness: the whole daemon. Each input is the raw bytes a client sends on one
 * connection (any number of pipelined requests, any headers, any body) to the in-process pgcld
 * server of fuzz_server.c (--auth off, the tiny test models); the harness reads the answer until
 * the server closes the connection. Sanitizers catch memory errors in the server's threads; a
 * connection that is neither answered nor closed aborts (fuzz_server.c). */
#include <stddef.h>
#include <stdint.h>

#include "fuzz_server.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    fuzz_server_start();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fuzz_server_exchange(data, size);
    return 0;
}
