#!/usr/bin/python3
"""SQL only through bound parameters: a static scan of core/*.c and server/*.c.

Every SQL text handed to SQLite (sqlite3_prepare*, sqlite3_exec), to libpq (PQexec*, PQprepare,
PQsend*: the PostgreSQL store) and to the project's wrappers around them (found automatically: a
function that passes one of its parameters straight on as the SQL becomes a sink itself, and its
callers are checked instead) must be built only from constants. Values — anything a request, a
file or the database can influence — go through sqlite3_bind_* (a '?' in the text) or libpq's
parameters ($1, $2, ...), never into the text.

What counts as constant, checked expression by expression:

  * string literals and their concatenation, NULL, and UPPER_CASE macros that expand to those
    (e.g. INSERT_SQL, SUMMARY_COLS);
  * `cond ? A : B` where A and B are constant (`const char *sync = full ? "PRAGMA ..=FULL" : ..`);
  * a local `const char *x = CONSTANT` / `x = CONSTANT`; a file-scope `static const char X[] = "..."`;
  * an element of a `static const char *const NAME[] = {"...", ...}` array of literals;
  * a parameter of the enclosing function, when every call of that function passes a constant
    there (checked at each call site, recursively);
  * a local char buffer written only by snprintf(buf, sizeof buf, FORMAT, ARGS...) whose FORMAT is
    constant and whose arguments are
      - for %s: a constant, or one of IDENTIFIER_WHITELIST below — internal table and identifier
        names (SQL has no parameters for identifiers, so a table name must be in the text);
      - for integer conversions (%d, %ld, %lld, %u, %zu, %" PRId64 "): anything — an integer
        formatted in decimal cannot carry SQL syntax;
    any other conversion, or any other function writing into the buffer (strcpy, strcat, memcpy,
    sprintf...), fails the test;
  * CONSTANT_SOURCES below: fields of static const tables and the compiled-in migrations, each
    verified by its own check here (the table's initialiser holds only literals);
  * the query builder of core/review/read_sql.c (qb_sql / qb_text / qb_int / qb_prepare), used by the
    reviewer reads (BUILDER_FILES below): its text is
    appended only by qb_sql(q, X), and every X must be constant (a literal, or the literal column
    of the static `eq` table); values go through qb_text / qb_int, which append '?' and bind.

Anything the scan cannot classify fails, naming FILE:LINE and the expression, so a new way of
building SQL has to be either rewritten with bound parameters or explained here.

Run: /usr/bin/python3 tests/integration/test_sql_params.py
"""

import glob
import os
import re
import sys
import unittest

ROOT = os.path.abspath(os.environ.get("PGCLD_SOURCE_ROOT") or
                       os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, os.pardir))

SINKS = {  # function -> index of its SQL argument
    "sqlite3_prepare": 1, "sqlite3_prepare_v2": 1, "sqlite3_prepare_v3": 1,
    "sqlite3_prepare16": 1, "sqlite3_prepare16_v2": 1, "sqlite3_prepare16_v3": 1,
    "sqlite3_exec": 1,
    # libpq (the PostgreSQL store, core/audit/pg/): values go through the $n parameters
    "PQexec": 1, "PQexecParams": 1, "PQprepare": 2, "PQsendQuery": 1, "PQsendQueryParams": 1,
    "PQsendPrepare": 2,
}

# %s arguments allowed in snprintf-built SQL: internal names of tables, never data.
IDENTIFIER_WHITELIST = {
    # core/audit/chain_encoding.c: the four chained tables ("decisions", "admin_events", "contests",
    # "resolutions") of the const pgcl_chain_tables[] (checked below to hold only literals).
    "pgcl_chain_tables[t].name",
}

# Non-literal expressions that are nevertheless constant, with the check that proves it.
CONSTANT_SOURCES = {
    # core/audit/chain_encoding.c: the per-table row SELECTs of the same const table.
    "pgcl_chain_tables[t].select_sql": "chain_tables",
    "pgcl_chain_tables[t].select_sql_before_0011": "chain_tables",
    "pgcl_chain_tables[t].select_sql_before_0008": "chain_tables",
    # core/audit/audit_sqlite.c: the migrations compiled into the binary from migrations/*.sql at build time.
    "mig->sql": "migrations",
    # core/audit/pg/audit_pg.c: the PostgreSQL migrations compiled in from migrations/pg/*.sql.
    "m->sql": "migrations",
    # core/review/decision_lists.c: the literal column of qb_filters' static `eq` table.
    "eq[i].sql": "queries_eq",
    # core/review/read_sql.c: qb_prepare's text: a constant prefix + the builder's buffer (see the builder check).
    "text ? text : q->sql": "query_builder",
    # core/audit/pg/pg_log.c: a log statement's text (pgcl_pg_log_stmt.sql), sent by the writer and by
    # the log's first transaction: every `.sql = X` there names a file-scope literal constant.
    "stmt.sql": "pg_log_statements",
}

# The files that build SQL with the query builder (its definition in core/review/read_sql.c, and its users).
BUILDER_FILES = ["core/review/read_sql.c", "core/review/decision_lists.c", "core/review/stats_reads.c", "core/review/export.c"]

INT_CONV = re.compile(r"%[-+ 0#]*\d*(?:hh|h|ll|l|z|j|t)?[diu]")
ANY_CONV = re.compile(r"%[-+ 0#]*(?:\d+|\*)?(?:\.\d+|\.\*)?(?:hh|h|ll|l|z|j|t|L)?[a-zA-Z%]")


def strip_comments(src):
    """Comments become spaces (newlines kept, so line numbers stay right); strings are kept."""
    out, i, n = [], 0, len(src)
    while i < n:
        c = src[i]
        if c == '"' or c == "'":
            j = i + 1
            while j < n and src[j] != c:
                j += 2 if src[j] == "\\" else 1
            out.append(src[i:j + 1])
            i = j + 1
        elif src.startswith("/*", i):
            j = src.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", src[i:j]))
            i = j
        elif src.startswith("//", i):
            j = src.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


def mask_strings(src):
    """Same length, string and char literal contents replaced by 'x' (for bracket matching)."""
    return re.sub(r'"(?:\\.|[^"\\])*"|\'(?:\\.|[^\'\\])*\'',
                  lambda m: m.group(0)[0] + "x" * (len(m.group(0)) - 2) + m.group(0)[-1], src)


def split_args(text):
    """Top-level comma split of an argument list (text inside the call's parentheses)."""
    masked = mask_strings(text)
    args, depth, start = [], 0, 0
    for i, c in enumerate(masked):
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        elif c == "," and depth == 0:
            args.append(text[start:i].strip())
            start = i + 1
    args.append(text[start:].strip())
    return args


def call_args(src, masked, open_paren):
    """Arguments of the call whose '(' is at open_paren, and the index after its ')'."""
    depth = 0
    for i in range(open_paren, len(masked)):
        if masked[i] == "(":
            depth += 1
        elif masked[i] == ")":
            depth -= 1
            if depth == 0:
                return split_args(src[open_paren + 1:i]), i + 1
    raise ValueError("unbalanced parentheses")


class Source:
    def __init__(self, path):
        self.path = path
        self.rel = os.path.relpath(path, ROOT)
        with open(path, encoding="utf-8") as f:
            self.src = strip_comments(f.read())
        self.masked = mask_strings(self.src)
        self.macros = {}
        # Macros of the file, then of the project headers it includes from its own folder (e.g.
        # core/review/read_sql.h: SUMMARY_COLS, shared by the reviewer reads); the file's own win.
        headers = [os.path.join(os.path.dirname(path), h)
                   for h in re.findall(r'^[ \t]*#[ \t]*include[ \t]+"([^"/]+\.h)"', self.src, re.M)]
        texts = [self.src]
        for h in headers:
            if os.path.isfile(h):
                with open(h, encoding="utf-8") as f:
                    texts.append(strip_comments(f.read()))
        for text in texts:
            for m in re.finditer(r"^[ \t]*#[ \t]*define[ \t]+([A-Z_][A-Z0-9_]*)[ \t]+((?:.*\\\n)*.*)$", text, re.M):
                self.macros.setdefault(m.group(1), m.group(2).replace("\\\n", " ").strip())
        self.functions = self._functions()
        # File-scope `static const char NAME[] = "..." ...;` behave like macros, and so do the
        # definitions `const char NAME[] = "...";` that an internal header declares extern (the PG
        # writer's prepared statements, shared by its files).
        for m in re.finditer(r"^(?:static )?const char ([A-Za-z_]\w*)\[\]\s*=([^;]*);", self.src, re.M):
            self.macros[m.group(1)] = m.group(2).strip()

    def _functions(self):
        """(name, params, body_start, body_end) of every top-level function definition."""
        out = []
        for m in re.finditer(r"^[A-Za-z_][^;{}()]*?\b([A-Za-z_]\w*)\s*\(([^;{}]*?)\)\s*\{", self.masked, re.M):
            start = m.end() - 1
            depth = 0
            for i in range(start, len(self.masked)):
                if self.masked[i] == "{":
                    depth += 1
                elif self.masked[i] == "}":
                    depth -= 1
                    if depth == 0:
                        break
            params = []
            for p in split_args(self.src[m.start(2):m.end(2)]):
                pm = re.search(r"(\w+)\s*(?:\[[^\]]*\])?$", p)
                params.append(pm.group(1) if pm else "")
            out.append((m.group(1), params, start, i))
        return out

    def function_at(self, pos):
        for f in self.functions:
            if f[2] <= pos <= f[3]:
                return f
        return None

    def line(self, pos):
        return self.src.count("\n", 0, pos) + 1


def norm(expr):
    return re.sub(r"\s+", " ", expr).strip()


class Scanner:
    def __init__(self, files):
        self.sources = [Source(p) for p in files]
        self.problems = []
        self.sinks = dict(SINKS)
        self.checked = 0

    def is_constant(self, expr, src, func, depth=0):
        """True when expr is constant by the rules of the module docstring; problems are recorded."""
        e = norm(expr)
        while e.startswith("(") and e.endswith(")") and self._balanced(e[1:-1]):
            e = e[1:-1].strip()
        e = re.sub(r"^\((?:const )?char ?\*\)\s*", "", e)
        if e in ("NULL", "0"):
            return True
        if e in CONSTANT_SOURCES:
            return True
        tokens = re.findall(r'"(?:\\.|[^"\\])*"|[A-Za-z_]\w*|\S', e)
        if tokens and all(t.startswith('"') or (re.fullmatch(r"[A-Z_][A-Z0-9_]*", t) and
                                                 self._macro_constant(t, src, depth)) for t in tokens):
            return True
        am = re.fullmatch(r"([A-Za-z_]\w*)\s*\[[^\]]*\]", e)
        if am and self._literal_array(am.group(1), src):
            return True
        tern = self._ternary(e)
        if tern:
            return self.is_constant(tern[1], src, func, depth + 1) and self.is_constant(tern[2], src, func, depth + 1)
        if re.fullmatch(r"[A-Za-z_]\w*", e) and func is not None:
            if e in func[1] and e not in self._locals(src, func):
                return self._param_constant(func, func[1].index(e), depth)
            return self._local_constant(e, src, func, depth)
        return False

    @staticmethod
    def _literal_array(name, src):
        """`static const char *const NAME[] = {"...", ...};` holding string literals only."""
        m = re.search(r"static const char \*const " + re.escape(name) + r"\[[^\]]*\]\s*=\s*\{(.*?)\};", src.src, re.S)
        return bool(m) and re.fullmatch(r"[\s,]*", re.sub(r'"(?:\\.|[^"\\])*"', "", m.group(1))) is not None

    @staticmethod
    def _locals(src, func):
        return set(re.findall(r"\b(?:char|const char)\s*\*?\s*(\w+)\s*[\[=;]", src.masked[func[2]:func[3]]))

    def _param_constant(self, func, index, depth):
        """Every call of func (in any scanned file) passes a constant as argument index."""
        if depth > 6:
            return False
        ok, calls = True, 0
        for src in self.sources:
            for m in re.finditer(r"\b" + re.escape(func[0]) + r"\s*\(", src.masked):
                args, after = call_args(src.src, src.masked, m.end() - 1)
                if re.match(r"\s*\{", src.masked[after:after + 5]) or index >= len(args):
                    continue
                calls += 1
                caller = src.function_at(m.start())
                if not self.is_constant(args[index], src, caller, depth + 1):
                    self._problem(src, m.start(), f"{func[0]}() gets '{norm(args[index])}' for a parameter that "
                                                  f"ends up in SQL text: not a constant")
                    ok = False
        return ok and calls > 0

    @staticmethod
    def _balanced(s):
        d = 0
        for c in mask_strings(s):
            d += c == "("
            d -= c == ")"
            if d < 0:
                return False
        return d == 0

    @staticmethod
    def _ternary(e):
        m = mask_strings(e)
        depth, q = 0, -1
        for i, c in enumerate(m):
            if c in "([{":
                depth += 1
            elif c in ")]}":
                depth -= 1
            elif c == "?" and depth == 0 and q < 0:
                q = i
            elif c == ":" and depth == 0 and q >= 0:
                return e[:q].strip(), e[q + 1:i].strip(), e[i + 1:].strip()
        return None

    def _macro_constant(self, name, src, depth):
        if depth > 8:
            return False
        for s in [src] + self.sources:
            if name in s.macros:
                body = s.macros[name]
                toks = re.findall(r'"(?:\\.|[^"\\])*"|[A-Za-z_]\w*|\S', body)
                return bool(toks) and all(t.startswith('"') or (re.fullmatch(r"[A-Z_][A-Z0-9_]*", t) and
                                                                self._macro_constant(t, src, depth + 1))
                                          for t in toks)
        return False

    def _local_constant(self, name, src, func, depth):
        body_start, body_end = func[2], func[3]
        body, mbody = src.src[body_start:body_end], src.masked[body_start:body_end]
        ok, seen = True, False
        # Declarations and assignments: const char *name = EXPR; / name = EXPR;
        for m in re.finditer(r"(?<![\w.>])" + re.escape(name) + r"\s*=(?!=)", mbody):
            end = mbody.find(";", m.end())
            rhs = body[m.end():end]
            seen = True
            if not self.is_constant(rhs, src, func, depth + 1):
                self._problem(src, body_start + m.start(), f"'{name}' is assigned '{norm(rhs)}', not a constant")
                ok = False
        # A char buffer: every call that gets it as first argument must be a checked snprintf.
        if re.search(r"\bchar\s+" + re.escape(name) + r"\s*\[", mbody):
            for m in re.finditer(r"\b(\w+)\s*\(\s*" + re.escape(name) + r"\s*,", mbody):
                fn = m.group(1)
                if fn in self.sinks or fn in ("sizeof",):
                    continue
                seen = True
                pos = body_start + m.start()
                if fn != "snprintf":
                    self._problem(src, pos, f"'{name}' (SQL) is written by {fn}(): only a checked snprintf may build SQL")
                    ok = False
                    continue
                args, _ = call_args(src.src, src.masked, body_start + mbody.find("(", m.start()))
                ok = self._check_snprintf(args, src, func, pos) and ok
        if not seen:
            self._problem(src, body_start, f"cannot tell where the SQL in '{name}' comes from")
            return False
        return ok

    def _check_snprintf(self, args, src, func, pos):
        if len(args) < 3 or not self.is_constant(args[2], src, func):
            self._problem(src, pos, f"snprintf builds SQL from a non-constant format: {norm(', '.join(args[2:3]))}")
            return False
        fmt = "".join(re.findall(r'"((?:\\.|[^"\\])*)"', args[2]))
        convs = [c for c in ANY_CONV.findall(fmt) if c != "%%"]
        values = args[3:]
        if len(convs) != len(values):
            self._problem(src, pos, f"snprintf format has {len(convs)} conversions for {len(values)} arguments")
            return False
        ok = True
        for conv, value in zip(convs, values):
            v = norm(value)
            if INT_CONV.fullmatch(conv):
                continue
            if conv.endswith("s") and (v in IDENTIFIER_WHITELIST or self.is_constant(v, src, func)):
                continue
            self._problem(src, pos, f"SQL interpolates '{v}' with {conv}: not an internal identifier in "
                                    f"IDENTIFIER_WHITELIST (bind it as a parameter instead)")
            ok = False
        return ok

    def _problem(self, src, pos, msg):
        self.problems.append(f"{src.rel}:{src.line(pos)}: {msg}")

    def discover_wrappers(self):
        """A function passing one of its own parameters as the SQL of a sink becomes a sink."""
        changed = True
        while changed:
            changed = False
            for src in self.sources:
                for name, idx, pos, args in self._calls(src):
                    func = src.function_at(pos)
                    if func is None or idx >= len(args):
                        continue
                    arg = norm(args[idx])
                    if arg in func[1] and func[0] not in self.sinks:
                        self.sinks[func[0]] = func[1].index(arg)
                        changed = True

    def _calls(self, src):
        pat = re.compile(r"\b(" + "|".join(map(re.escape, sorted(self.sinks, key=len, reverse=True))) + r")\s*\(")
        for m in pat.finditer(src.masked):
            if src.function_at(m.start()) and src.function_at(m.start())[0] == m.group(1) and \
                    src.function_at(m.start())[2] > m.start():
                continue
            # Skip the definition itself: "name(" directly followed by its parameter list and '{'.
            args, after = call_args(src.src, src.masked, m.end() - 1)
            if re.match(r"\s*\{", src.masked[after:after + 5]):
                continue
            yield m.group(1), self.sinks[m.group(1)], m.start(), args

    def run(self):
        self.discover_wrappers()
        for src in self.sources:
            for name, idx, pos, args in self._calls(src):
                if idx >= len(args):
                    self._problem(src, pos, f"{name}() called with too few arguments")
                    continue
                func = src.function_at(pos)
                arg = norm(args[idx])
                self.checked += 1
                if func is not None and arg in func[1] and func[0] in self.sinks and \
                        self.sinks[func[0]] == func[1].index(arg):
                    continue  # a wrapper's own parameter: its callers are checked
                if not self.is_constant(arg, src, func):
                    self._problem(src, pos, f"{name}() gets SQL '{arg}' that is not built from constants only")
        return self


def source_files():
    return sorted(glob.glob(os.path.join(ROOT, "core", "**", "*.c"), recursive=True)
                  + glob.glob(os.path.join(ROOT, "server", "**", "*.c"), recursive=True))


def read(rel):
    with open(os.path.join(ROOT, rel), encoding="utf-8") as f:
        return strip_comments(f.read())


class SqlParameterTest(unittest.TestCase):
    def test_all_sql_is_constant_or_whitelisted(self):
        s = Scanner(source_files()).run()
        self.assertGreater(s.checked, 50, "the scan found suspiciously few SQLite calls")
        for wrapper in ("pgcl_db_exec",):
            self.assertIn(wrapper, s.sinks, "the wrapper discovery missed a known SQL wrapper")
        self.assertEqual(s.problems, [], "SQL built from non-constant text:\n" + "\n".join(s.problems))

    def test_constant_sources_hold_only_literals(self):
        # chain_tables: pgcl_chain_tables' initialiser is braces, commas, string literals and integer
        # literals (each table's digest column) only.
        chain = read("core/audit/chain_encoding.c")
        m = re.search(r"const pgcl_chain_table pgcl_chain_tables\[[^\]]*\]\s*=\s*\{(.*?)\n\};", chain, re.S)
        self.assertIsNotNone(m, "core/audit/chain_encoding.c: pgcl_chain_tables not found (update CONSTANT_SOURCES)")
        rest = re.sub(r'"(?:\\.|[^"\\])*"', "", m.group(1))
        rest = re.sub(r"\bNULL\b", "", rest)  # a table without a pre-0008 SELECT
        self.assertRegex(rest, r"^[\s{},0-9-]*$", "pgcl_chain_tables holds something other than literals")
        # migrations: a const array generated from migrations/*.sql.
        mig = read("core/audit/migrations.h")
        self.assertRegex(mig, r"extern const pgcl_migration pgcl_migrations\[")
        self.assertRegex(mig, r"extern const pgcl_migration pgcl_pg_migrations\[")
        # pg_log_statements: each `.sql = X` of pg_log.c is a `static const char X[]` of literals.
        log = strip_comments(read("core/audit/pg/pg_log.c"))
        names = re.findall(r"(?:\.|->)sql\s*=\s*([A-Za-z_]\w*)", log)
        self.assertTrue(names, "core/audit/pg/pg_log.c: no log statement found (update CONSTANT_SOURCES)")
        for name in names:
            m = re.search(r"static const char " + name + r"\[\]\s*=\s*((?:\s*\"(?:\\.|[^\"\\])*\")+)\s*;", log)
            self.assertIsNotNone(m, f"pg_log.c: .sql = {name}, which is not a static const char[] of literals")
        values = re.findall(r"(?:\.|->)sql\s*=\s*([^;,}\n]*)", log)
        self.assertEqual([v for v in values if not re.fullmatch(r"[A-Z_][A-Z0-9_]*\s*", v)], [],
                         "pg_log.c: a log statement's .sql is not an UPPER_CASE constant")
        # queries_eq: every row of qb_filters' eq table starts with a literal.
        q = read("core/review/decision_lists.c")
        m = re.search(r"\}\s*eq\[\]\s*=\s*\{(.*?)\};", q, re.S)
        self.assertIsNotNone(m, "core/review/decision_lists.c: eq table not found (update CONSTANT_SOURCES)")
        rows = re.findall(r"\{([^{}]*)\}", m.group(1))
        self.assertTrue(rows)
        for r in rows:
            self.assertRegex(r.strip(), r'^"[^"]*"\s*,', f"eq row {r!r} does not start with a literal")

    def test_query_builder_appends_only_constants(self):
        n = 0
        for rel in BUILDER_FILES:
            src = Source(os.path.join(ROOT, rel))
            s = Scanner([src.path])
            for m in re.finditer(r"\bqb_sql\s*\(", src.masked):
                args, after = call_args(src.src, src.masked, m.end() - 1)
                if re.match(r"\s*\{", src.masked[after:after + 5]):
                    continue  # the definition
                func = src.function_at(m.start())
                if func and func[0] == "qb_arg" and norm(args[1]) == '"?"':
                    n += 1
                    continue
                n += 1
                self.assertTrue(s.is_constant(args[1], src, func),
                                f"{rel}:{src.line(m.start())}: qb_sql appends '{norm(args[1])}'")
            for m in re.finditer(r"\bqb_prepare\s*\(", src.masked):
                args, after = call_args(src.src, src.masked, m.end() - 1)
                if re.match(r"\s*\{", src.masked[after:after + 5]):
                    continue
                self.assertTrue(s.is_constant(args[2], src, src.function_at(m.start())),
                                f"{rel}:{src.line(m.start())}: qb_prepare prefix '{norm(args[2])}'")
            # The buffer itself is written only inside qb_sql.
            writes = r"\b(?:memcpy|memmove|strcpy|strncpy|strcat|strncat|snprintf|sprintf|vsnprintf)\s*\(\s*(?:q->sql|text)\b" \
                     r"|\b(?:q->sql|text)\s*\[[^\]]*\]\s*=(?!=)"
            for m in re.finditer(writes, src.masked):
                f = src.function_at(m.start())
                self.assertIn(f[0] if f else None, ("qb_sql", "qb_prepare", "qb_range"),
                              f"{rel}:{src.line(m.start())}: the builder's buffer is used outside qb_sql/qb_prepare")
        # Every file that calls the builder is in BUILDER_FILES (a new user is checked too).
        for path in source_files():
            rel = os.path.relpath(path, ROOT)
            if re.search(r"\bqb_(?:sql|prepare)\s*\(", read(rel)):
                self.assertIn(rel, BUILDER_FILES, f"{rel} uses the query builder: add it to BUILDER_FILES")
        self.assertGreater(n, 10)

    def test_scanner_catches_interpolation(self):
        """The scanner itself: a value interpolated into SQL is reported; a table name is not."""
        import tempfile
        bad = r'''
static int f(sqlite3 *db, const char *user) {
    char sql[128];
    snprintf(sql, sizeof sql, "SELECT * FROM t WHERE name = '%s'", user);
    return sqlite3_exec(db, sql, NULL, NULL, NULL);
}
static int g(sqlite3 *db, int t) {
    char sql[128];
    snprintf(sql, sizeof sql, "SELECT count(*) FROM %s LIMIT %d", pgcl_chain_tables[t].name, 5);
    sqlite3_stmt *s;
    return sqlite3_prepare_v2(db, sql, -1, &s, NULL);
}
static int h(sqlite3 *db, const char *q) { return sqlite3_exec(db, q, NULL, NULL, NULL); }
static int k(sqlite3 *db, char *v) { const char *x = getenv(v); return h(db, x); }
static int m(sqlite3 *db) { return h(db, "COMMIT"); }
static int n(sqlite3 *db, const char *v) { char sql[64]; strcpy(sql, v); return h(db, sql); }
'''
        with tempfile.NamedTemporaryFile("w", suffix=".c", dir=os.path.join(ROOT, "tests"), delete=False) as f:
            f.write(bad)
        try:
            problems = Scanner([f.name]).run().problems
        finally:
            os.unlink(f.name)
        text = "\n".join(problems)
        self.assertIn("interpolates 'user'", text)
        self.assertNotIn("pgcl_chain_tables", text)
        self.assertRegex(text, r":14: .*'x' is assigned 'getenv\(v\)'")
        self.assertIn("written by strcpy()", text)
        self.assertNotRegex(text, r":(7|9|11|13|15): ")


if __name__ == "__main__":
    unittest.main(verbosity=2)
