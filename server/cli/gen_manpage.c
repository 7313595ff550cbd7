/* pgcld-manpage: prints pgcld(1) in roff to stdout. Run by the build (server/meson.build) to make
 * pgcld.1 from the same tables that drive pgcld's parsing and --help; not installed. Exit 0, or 1
 * when stdout cannot be written. */
#include <stdio.h>

#include "cli_man.h"

#ifndef PGCLD_VERSION
#define PGCLD_VERSION "dev"
#endif

int main(void) {
    if (pgcld_cli_write_man(stdout, PGCLD_VERSION) != 0 || fflush(stdout) != 0) {
        fprintf(stderr, "pgcld-manpage: cannot write the man page\n");
        return 1;
    }
    return 0;
}
