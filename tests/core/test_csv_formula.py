"""The CSV export's formula rule (core/review/export.c, pgcl_csv_formula_trigger; docs/audit.md,
"CSV exports and spreadsheets") over every Unicode code point, against the same rule computed with
Python's unicodedata as the oracle: an independent implementation of NFKC and of the character
tables (utf8proc in the daemon, CPython's own tables here).

The rule: a cell is a formula when its first character is a tab, CR or LF, or when, each character
folded by NFKC and the invisible ones skipped (whitespace as str.isspace() says, and the format
characters, category Cf), the first remaining character is = + - @ or U+2212 MINUS SIGN.

The C side (tests/core/csv_formula_table.c, PGCLD_CSV_FORMULA_TABLE) prints, for every code point
c, whether the cells c "x", c "=" and U+3000 c "x" are formulas. When utf8proc's Unicode is newer
than Python's, the code points Python does not know (category Cn) are left out of the comparison:
the oracle cannot judge them.

Run: PGCLD_CSV_FORMULA_TABLE=build/tests/csv_formula_table /usr/bin/python3 tests/core/test_csv_formula.py
"""
import os
import subprocess
import sys
import unicodedata
import unittest

FORMULA_START = "=+-@\u2212"


def invisible(ch):
    return ch.isspace() or unicodedata.category(ch) == "Cf"


def formula(text):
    """The rule, written from its definition with Python's Unicode tables."""
    if text[:1] in ("\t", "\r", "\n"):
        return True
    for ch in text:
        for folded in unicodedata.normalize("NFKC", ch):
            if not invisible(folded):
                return folded in FORMULA_START
    return False


def oracle_bits(c):
    ch = chr(c)
    return "".join("1" if formula(t) else "0" for t in (ch + "x", ch + "=", "\u3000" + ch + "x"))


class CsvFormulaRuleTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        program = os.environ.get("PGCLD_CSV_FORMULA_TABLE")
        if not program:
            raise unittest.SkipTest("PGCLD_CSV_FORMULA_TABLE is not set (meson sets it)")
        out = subprocess.run([program], check=True, capture_output=True, text=True).stdout.splitlines()
        cls.c_unicode = out[0].split()[1]
        cls.c_bits = {int(cp, 16): bits for cp, bits in (line.split() for line in out[1:])}

    def test_every_code_point_agrees_with_unicodedata(self):
        same_tables = self.c_unicode == unicodedata.unidata_version
        disagree, left_out = [], 0
        for c in range(1, 0x110000):
            if 0xD800 <= c <= 0xDFFF:
                continue
            if not same_tables and unicodedata.category(chr(c)) == "Cn":
                left_out += 1
                continue
            want, got = oracle_bits(c), self.c_bits.get(c, "000")
            if want != got:
                disagree.append(f"U+{c:04X} {unicodedata.name(chr(c), '?')}: C {got}, unicodedata {want}")
        print(f"utf8proc Unicode {self.c_unicode}, Python's {unicodedata.unidata_version}: "
              f"{left_out} code points unknown to Python left out", file=sys.stderr)
        self.assertEqual(disagree, [], "\n".join(disagree[:50]))

    def test_the_classes_the_rule_covers(self):
        """What the comparison must have seen: every compatibility form of = + - @, the superscript
        and subscript forms, U+2212, and formulas behind every kind of invisible character."""
        for ch in "=+-@\uff1d\uff0b\uff0d\uff20\ufe62\ufe63\ufe66\ufe6b\u207a\u207b\u207c\u208a\u208b\u208c" \
                  "\u2212\ufb29\u2a75":
            self.assertEqual(self.c_bits.get(ord(ch)), "111", f"U+{ord(ch):04X}")
        for ch in " \u00a0\u1680\u2000\u2007\u200a\u2028\u2029\u202f\u205f\u3000\u0085\u000b\u000c\u001c" \
                  "\u200b\u200d\u2060\ufeff\u00ad\u202e":
            self.assertEqual(self.c_bits.get(ord(ch)), "010", f"U+{ord(ch):04X}")
        for ch in "\t\r\n":
            self.assertEqual(self.c_bits.get(ord(ch)), "110", f"U+{ord(ch):04X}")
        for ch in "\u2010\u2013\u00a8\u2260a1'":
            self.assertNotIn(ord(ch), self.c_bits, f"U+{ord(ch):04X}")


if __name__ == "__main__":
    unittest.main(verbosity=2)
