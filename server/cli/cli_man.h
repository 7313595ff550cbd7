/* pgcld(1), the man page, generated from the option tables (see cli_man.c). */
#ifndef PGCLD_CLI_MAN_H
#define PGCLD_CLI_MAN_H

#include <stdio.h>

/* Writes the whole man page in roff (man macros) to out, for pgcld `version`. 0, or -1 when
 * writing failed. */
int pgcld_cli_write_man(FILE *out, const char *version);

#endif
