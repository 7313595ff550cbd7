/* The CSV export's formula rule (pgcl_csv_formula_trigger, core/review/export.c) over every Unicode
 * scalar value, for tests/core/test_csv_formula.py, which compares it with the same rule computed
 * from Python's unicodedata (an independent implementation of Unicode's tables).
 *
 * Output: "unicode <version>" (utf8proc's tables), then one line per code point c (U+0001 to
 * U+10FFFF, surrogates excepted) for which one of three cells is taken for a formula:
 *   <hex c> <A><B><C>      each 1 or 0:  A = c "x",  B = c "=",  C = U+3000 c "x"
 * A asks whether c starts a formula, B whether c is skipped (or starts one), C whether c starts
 * one after an invisible character. */
#include <stdio.h>
#include <utf8proc.h>

#include "export.h"

/* text = prefix, then c in UTF-8, then suffix (a NUL-terminated buffer of at least 16 bytes). */
static const char *cell(char *text, const char *prefix, utf8proc_int32_t c, char suffix) {
    size_t n = 0;
    while (*prefix)
        text[n++] = *prefix++;
    n += (size_t)utf8proc_encode_char(c, (utf8proc_uint8_t *)text + n);
    text[n++] = suffix;
    text[n] = '\0';
    return text;
}

int main(void) {
    printf("unicode %s\n", utf8proc_unicode_version());
    char text[16];
    for (utf8proc_int32_t c = 1; c <= 0x10ffff; c++) {
        if (c >= 0xd800 && c <= 0xdfff) continue;
        bool a = pgcl_csv_formula_trigger(cell(text, "", c, 'x'));
        bool b = pgcl_csv_formula_trigger(cell(text, "", c, '='));
        bool in_c = pgcl_csv_formula_trigger(cell(text, "\xe3\x80\x80", c, 'x'));
        if (a || b || in_c) printf("%x %d%d%d\n", (unsigned)c, a, b, in_c);
    }
    return ferror(stdout) ? 1 : 0;
}
