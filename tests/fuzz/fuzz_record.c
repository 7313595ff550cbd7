/* libFuzzer harness: the log record's decoder (core/audit/log/record.c; docs/log-record.md). The
 * input is one record. Whatever the decoder accepts must be canonical: it encodes back to exactly
 * the input, and decodes to an event equal to itself. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "record.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    /* a copy of exactly the input's size, so that ASan sees any read past it */
    uint8_t *copy = malloc(size ? size : 1);
    if (!copy) abort();
    memcpy(copy, data, size);
    pgcl_record r;
    char why[256];
    if (pgcl_record_decode(copy, size, &r, why, sizeof why) == PGCL_OK) {
        uint8_t *again = malloc(size);
        size_t len = 0;
        if (!again || pgcl_record_encode(&r, again, size, &len, why, sizeof why) != PGCL_OK || len != size ||
            memcmp(again, copy, size) != 0 || !pgcl_record_equal(&r, &r))
            abort(); /* accepted, but not the one encoding of the event it decodes to */
        free(again);
    }
    free(copy);
    return 0;
}
