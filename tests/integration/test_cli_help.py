#!/usr/bin/python3
"""pgcld's command-line conventions (issue 19, item 6; docs/operations.md, "Command line"):

- `--help` and `-h` work at every level: pgcld itself, every command (serve, check-model, keys,
  audit, migrate) and every subcommand (keys create, audit verify, ...), anywhere an option may
  stand. Each prints that command's own help (a usage line naming it, its options) to stdout,
  nothing to stderr, and exits 0. The commands and subcommands are read from the help itself (the
  "Commands:" lists), and must include the ones the docs name, so a new one is covered as it comes.
- An unknown option exits 2 with a message on stderr that names it and points at that command's
  --help; stdout stays empty.
- The man page pgcld.1, built from the option tables, exists next to the binary, is valid roff
  (groff -man -ww: no warning; without groff its structure is checked), lists every option of
  serve's table (read from `pgcld serve --print-config`, the table's own dump) with its environment
  variable, and every subcommand with its options; `meson install --destdir` puts it in
  share/man/man1.

Run: PGCLD_BIN=build/server/pgcld /usr/bin/python3 tests/integration/test_cli_help.py
"""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import harness as H  # noqa: E402
import skips  # noqa: E402

# What the docs name; the help may list more (each is then covered too), never fewer.
EXPECTED = {
    "serve": set(), "check-model": set(),
    "keys": {"create", "import", "list", "revoke"},
    "audit": {"verify", "checkpoint", "keygen", "archive", "verify-proof", "verify-consistency"},
    "migrate": set(),
}
MAN_PAGE = os.environ.get("PGCLD_MANPAGE") or os.path.join(os.path.dirname(H.PGCLD_BIN), "pgcld.1")
BUILD_DIR = os.path.dirname(os.path.dirname(os.path.abspath(H.PGCLD_BIN)))  # build/server/pgcld


def clean_env():
    """The environment without PGCLD_ variables (they would change --print-config's values)."""
    return {k: v for k, v in os.environ.items() if not k.startswith("PGCLD_")}


def run(*args, cwd=None):
    """`pgcld ARGS...` without PGCLD_ variables, in cwd (the test's temporary directory), or without
    one in harness.run_pgcld's empty directory, which must stay empty."""
    if cwd is None:
        return H.run_pgcld(*args, timeout=60, env=clean_env())
    return subprocess.run([H.PGCLD_BIN, *args], capture_output=True, text=True, timeout=60,
                          stdin=subprocess.DEVNULL, env=clean_env(), cwd=cwd)


def listed_commands(help_text):
    """The names in a help's "Commands:" list (two blanks, a name, blanks, its summary)."""
    block = help_text.split("\nCommands:\n", 1)[1]
    names = []
    for line in block.split("\n"):
        m = re.match(r"^  ([a-z][a-z-]*)\s{2,}\S", line)
        if m:
            names.append(m.group(1))
        elif not line.startswith(" ") or not line.strip():
            break
    return names


def help_options(help_text):
    """The option names of a help's option lines ("  --name META   text")."""
    return re.findall(r"^  --([a-z][a-z0-9-]*)[ ,]", help_text, re.M)


def table_options():
    """Every row of serve's option table, as --print-config dumps it ("name = value  # source";
    the config row itself is commented out)."""
    p = run("serve", "--print-config")
    assert p.returncode == 0, p.stderr
    names = re.findall(r"^(?:# )?([a-z][a-z0-9-]*) = ", p.stdout, re.M)
    assert len(names) > 30, names
    return names


class HelpAtEveryLevelTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        H.require_binary()
        cls.tmp = tempfile.mkdtemp(prefix="pgcld-cli-help-")  # a command wrongly run writes here, not in the tree
        top = run("--help", cwd=cls.tmp)
        assert top.returncode == 0, top.stderr
        cls.commands = {}
        for command in listed_commands(top.stdout):
            p = run(command, "--help", cwd=cls.tmp)
            subs = listed_commands(p.stdout) if "\nCommands:\n" in p.stdout else []
            cls.commands[command] = subs

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, True)

    def assert_help(self, args, names):
        """pgcld ARGS prints the help of `names` (e.g. "pgcld keys create") and exits 0."""
        p = run(*args, cwd=self.tmp)
        self.assertEqual(p.returncode, 0, (args, p.stderr))
        self.assertEqual(p.stderr, "", args)
        self.assertRegex(p.stdout, r"(?m)^usage: " + re.escape(names) + r"( |$)", args)
        self.assertIn("--help, -h", p.stdout, args)
        self.assertEqual(os.listdir(self.tmp), [], f"pgcld {' '.join(args)} wrote files")
        return p.stdout

    def test_commands_listed(self):
        for command, subs in EXPECTED.items():
            self.assertIn(command, self.commands)
            self.assertLessEqual(subs, set(self.commands[command]), command)

    def test_top_level(self):
        for flag in ("--help", "-h", "help"):
            with self.subTest(flag=flag):
                p = run(flag, cwd=self.tmp)
                self.assertEqual((p.returncode, p.stderr), (0, ""))
                self.assertIn("usage: pgcld COMMAND", p.stdout)
                for command in EXPECTED:
                    self.assertRegex(p.stdout, rf"(?m)^  {command}\s")

    def test_every_command_and_subcommand(self):
        for command, subs in self.commands.items():
            for flag in ("--help", "-h"):
                with self.subTest(command=command, flag=flag):
                    text = self.assert_help([command, flag], f"pgcld {command}")
                    for sub in subs:  # the group's help shows every subcommand's usage line
                        self.assertRegex(text, rf"(?m)^(usage: |       )pgcld {command} {sub}( |$)")
                for sub in subs:
                    with self.subTest(command=command, sub=sub, flag=flag):
                        text = self.assert_help([command, sub, flag], f"pgcld {command} {sub}")
                        # its own help: no other subcommand's usage line
                        for other in subs:
                            if other != sub:
                                self.assertNotRegex(text, rf"(?m)^usage: pgcld {command} {other}( |$)")

    def test_help_after_other_options(self):
        """--help where an option may stand, after other options, still wins (and runs nothing)."""
        db = os.path.join(self.tmp, "never.db")
        self.assert_help(["keys", "create", "--db", db, "--role", "admin", "-h"], "pgcld keys create")
        self.assert_help(["audit", "verify", "--db", db, "--help"], "pgcld audit verify")
        self.assert_help(["audit", "verify-proof", "proof.json", "--help"], "pgcld audit verify-proof")
        self.assert_help(["migrate", "--db", db, "--help"], "pgcld migrate")
        self.assert_help(["serve", "--db", db, "--listen", "127.0.0.1:0", "-h"], "pgcld serve")
        self.assert_help(["check-model", "some-dir", "--help"], "pgcld check-model")

    def test_help_shows_options_with_defaults(self):
        serve = self.assert_help(["serve", "--help"], "pgcld serve")
        for name in table_options():
            self.assertRegex(serve, rf"(?m)^  --{re.escape(name)} \S+ ", name)
        self.assertIn("(default: 127.0.0.1:8080)", serve)
        create = self.assert_help(["keys", "create", "--help"], "pgcld keys create")
        self.assertEqual(help_options(create), ["db", "role", "name", "writer-id", "help"])
        self.assertIn('(default: "<host name>/cli")', create)
        archive = self.assert_help(["audit", "archive", "--help"], "pgcld audit archive")
        self.assertIn("(default: 50000)", archive)
        self.assertNotIn("--entry-hash", archive)  # another subcommand's option

    def test_unknown_options_exit_2(self):
        cases = [
            ([], "pgcld", "--bogus"),
            (["serve"], "pgcld serve", "--bogus"),
            (["serve"], "pgcld serve", "-x"),
            (["check-model"], "pgcld check-model", "--bogus"),
            (["migrate"], "pgcld migrate", "--bogus"),
            (["keys"], "pgcld keys", "--bogus"),
        ]
        for command, subs in self.commands.items():
            for sub in subs:
                cases.append(([command, sub] + (["proof.json"] if sub.startswith("verify-") else []),
                              f"pgcld {command} {sub}", "--bogus"))
        for args, name, option in cases:
            with self.subTest(args=args, option=option):
                p = run(*args, option, cwd=self.tmp)
                self.assertEqual(p.returncode, 2, p.stderr)
                self.assertEqual(p.stdout, "")
                first = p.stderr.splitlines()[0]
                self.assertIn(f"unknown option '{option}'", first)
                self.assertIn(f"(see {name} --help)", first)  # that command's own help
        self.assertEqual(os.listdir(self.tmp), [])


class ManPageTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        H.require_binary()
        if not os.path.isfile(MAN_PAGE):
            raise AssertionError(f"the man page is not built: {MAN_PAGE}")
        with open(MAN_PAGE, encoding="ascii") as f:
            cls.roff = f.read()
        # roff's \- is a hyphen-minus: the text as a reader sees it, for the name checks
        cls.text = cls.roff.replace("\\-", "-")

    def section(self, title):
        m = re.search(rf"(?ms)^\.SH {title}\n(.*?)(?=^\.SH |\Z)", self.text)
        self.assertIsNotNone(m, title)
        return m.group(1)

    def test_structure(self):
        self.assertRegex(self.roff, r'(?m)^\.TH PGCLD 1 ')
        for title in ("NAME", "SYNOPSIS", "DESCRIPTION", "OPTIONS", "CONFIGURATION", "SIGNALS", "COMMANDS",
                      "EXIT STATUS"):
            self.assertRegex(self.roff, rf"(?m)^\.SH {title}$")
        self.assertRegex(self.roff, r"(?m)^\.SH NAME\npgcld \\- \S")  # what whatis and apropos read

    def test_every_serve_option_of_the_table(self):
        options = self.section("OPTIONS")
        for name in table_options():
            env = "PGCLD_" + name.upper().replace("-", "_")
            with self.subTest(option=name):
                self.assertRegex(options, rf"(?m)^\\fB--{re.escape(name)}\\fR( \\fI|$)")
                self.assertIn(f"Environment: {env}.", options.replace("\n", " "))
        self.assertIn("--print-config", options)

    def test_every_subcommand_with_its_options(self):
        synopsis, commands = self.section("SYNOPSIS"), self.section("COMMANDS")
        for command, subs in EXPECTED.items():
            if command == "serve":
                self.assertIn("\\fBpgcld serve\\fR", synopsis)
                continue
            for sub in sorted(subs) or [None]:
                name = f"pgcld {command}" + (f" {sub}" if sub else "")
                with self.subTest(command=name):
                    self.assertIn(f"\\fB{name}\\fR", synopsis)
                    m = re.search(rf"(?ms)^\.SS {re.escape(name)}\n(.*?)(?=^\.SS |\Z)", commands)
                    self.assertIsNotNone(m, name)
                    help_text = run(*name.split()[1:], "--help").stdout
                    for option in help_options(help_text):
                        if option != "help":
                            self.assertRegex(m.group(1), rf"(?m)^\\fB--{re.escape(option)}\\fR", option)

    @skips.needs(shutil.which("groff") is not None, "groff (Debian's groff-base)")
    def test_valid_roff(self):
        """groff with every warning on (-ww) formats it without one."""
        p = subprocess.run(["groff", "-man", "-Tutf8", "-ww", "-z", MAN_PAGE], capture_output=True, text=True,
                           timeout=60)
        self.assertEqual((p.returncode, p.stderr), (0, ""))
        p = subprocess.run(["groff", "-man", "-Tascii", "-P-c", "-ww", MAN_PAGE], capture_output=True, text=True,
                           timeout=60, env={**os.environ, "MANWIDTH": "100"})
        self.assertEqual(p.returncode, 0, p.stderr)
        rendered = re.sub(r".\x08", "", p.stdout)
        self.assertIn("pgcld keys create", rendered)
        self.assertIn("--max-batch", rendered)

    @skips.needs(shutil.which("meson") is not None, "meson")
    def test_meson_install_puts_it_in_man1(self):
        if not os.path.isdir(os.path.join(BUILD_DIR, "meson-private")):
            self.skipTest(f"{BUILD_DIR} is not the meson build directory of PGCLD_BIN")
        installed = json.loads(subprocess.run(["meson", "introspect", "--installed", BUILD_DIR], capture_output=True,
                                              text=True, timeout=120, check=True).stdout)
        target = installed.get(os.path.abspath(MAN_PAGE))
        self.assertIsNotNone(target, "pgcld.1 is not installed")
        self.assertTrue(target.endswith("/share/man/man1/pgcld.1"), target)
        with tempfile.TemporaryDirectory(prefix="pgcld-install-") as dest:
            p = subprocess.run(["meson", "install", "-C", BUILD_DIR, "--no-rebuild", "--destdir", dest,
                                "--tags", "man"], capture_output=True, text=True, timeout=300)
            self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
            path = dest + target
            self.assertTrue(os.path.isfile(path), path)
            with open(path, encoding="ascii") as f:
                self.assertEqual(f.read(), self.roff)


if __name__ == "__main__":
    unittest.main(verbosity=2)
