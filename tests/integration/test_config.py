#!/usr/bin/python3
"""pgcld's configuration from its three sources — config file, environment (PGCLD_<NAME>) and
flags — with precedence flags > environment > file > defaults, checked through
``pgcld serve --print-config`` (which parses, prints and exits without opening the database, the
models or a socket), the error for every kind of bad input (exit 2, naming the source), the sample
deploy/pgcld.conf, and SIGHUP reload against a running daemon.

Run: /usr/bin/python3 tests/integration/test_config.py
Environment: PGCLD_BIN (default build/server/pgcld), PGCLD_SOURCE_ROOT (default: the repository).
"""

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import harness as H  # noqa: E402

USAGE_ERROR = 2
DEPLOY_CONF = os.path.join(H.SOURCE_ROOT, "deploy", "pgcld.conf")

# Every option with its default, as --print-config writes it (the config file's value format).
DEFAULTS = {
    "config": "",
    "listen": "127.0.0.1:8080",
    "models": "models",
    "db": "pgcld-audit.db",
    "writer-id": "",
    "default-model": "toxicity",
    "port-file": "",
    "synchronous": "FULL",
    "chain-encoding": "2",
    "log-level": "info",
    "log-format": "text",
    "access-log": "on",
    "auth": "required",
    "metrics": "on",
    "max-body-bytes": "67108864",
    "max-body-memory": "33554432",
    "max-batch": "1024",
    "max-upload-bytes": "268435456",
    "max-connections": "512",
    "http-threads": "0",
    "connection-timeout": "30",
    "max-connections-per-ip": "0",
    "request-timeout": "60",
    "max-score-in-flight": "128",
    "rate-limit-rps": "0",
    "rate-limit-burst": "0",
    "compute-workers": "0",
    "blas-threads": "1",
    "chunk-rows": "256",
    "max-pending-rows": "65536",
    "shadow-queue": "4096",
    "shutdown-grace": "10",
    "device": "auto",
    "device-precision": "fp32",
    "batch-max-rows": "256",
    "batch-max-wait-us": "0",
    "store-inputs": "float16",
    "contest-window-days": "180",
    "input-retention-days": "",
    "idempotency-ttl": "86400",
    "signing-key": "",
    "checkpoint-dir": "",
    "checkpoint-interval": "0",
    "log-checkpoint-interval": "5",
    "log-access": "reviewer",
    "log-origin": "pgcld",
    "witness": "",
    "tls-cert": "",
    "tls-key": "",
    "tls-min-version": "1.2",
}
RELOADABLE = ["log-level", "log-format", "access-log", "max-body-bytes", "max-body-memory", "max-batch", "request-timeout", "max-score-in-flight",
              "rate-limit-rps", "rate-limit-burst", "max-pending-rows", "shadow-queue"]

# name = value  # source      (the config row is printed commented out: "# config = ...")
LINE_RE = re.compile(r'^(?:# )?([a-z][a-z0-9-]*) = ("(?:[^"\\]|\\.)*"|[^ #]*)  # (.+)$')


def env_name(option):
    return "PGCLD_" + option.upper().replace("-", "_")


def unquote(text):
    if text.startswith('"'):
        return re.sub(r'\\(.)', r'\1', text[1:-1])
    return text


def parse_printed(text):
    """{option: (value, source)} from --print-config output."""
    out = {}
    for line in text.splitlines():
        m = LINE_RE.match(line)
        if m:
            out[m.group(1)] = (unquote(m.group(2)), m.group(3))
    return out


def clean_env(**extra):
    """The test's environment without PGCLD_ option variables (PGCLD_BIN and PGCLD_SOURCE_ROOT
    stay: they are not options and must be ignored), plus ``extra``."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("PGCLD_") or k in ("PGCLD_BIN", "PGCLD_SOURCE_ROOT")}
    env.update(extra)
    return env


def require_print_config():
    """Fail fast, with the reason, where the binary does not act on --print-config (it would start
    a server instead of printing and exiting)."""
    H.require_binary()
    tmp = tempfile.mkdtemp(prefix="pgcld-probe-")
    try:
        r = subprocess.run([H.PGCLD_BIN, "serve", "--print-config", "--listen", "127.0.0.1:0", "--db",
                            os.path.join(tmp, "probe.db"), "--models", os.path.join(tmp, "none")],
                           cwd=tmp, env=clean_env(), stdin=subprocess.DEVNULL, capture_output=True,
                           text=True, timeout=60)
    except subprocess.TimeoutExpired:
        raise AssertionError(f"{H.PGCLD_BIN} serve --print-config did not exit: main.c must print "
                             "the configuration and exit when cfg.print_config is set") from None
    finally:
        shutil.rmtree(tmp, True)
    if r.returncode != 0 or "max-batch = " not in r.stdout:
        raise AssertionError(f"serve --print-config: exit {r.returncode}\n{r.stdout}{r.stderr}")


class ConfigTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        require_print_config()

    def setUp(self):
        H.require_binary()
        self.tmp = tempfile.mkdtemp(prefix="pgcld-config-")
        self.addCleanup(shutil.rmtree, self.tmp, True)

    # -- helpers
    def write(self, name, text, mode="w"):
        path = os.path.join(self.tmp, name)
        with open(path, mode) as f:
            f.write(text)
        return path

    def pgcld(self, *args, env=None):
        return subprocess.run([H.PGCLD_BIN, "serve", *args], cwd=self.tmp, env=env or clean_env(),
                              stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)

    def print_config(self, *args, env=None):
        """Runs --print-config, expects exit 0, returns {option: (value, source)}."""
        r = self.pgcld(*args, "--print-config", env=env)
        self.assertEqual(r.returncode, 0, f"args {args}\nstderr: {r.stderr}")
        got = parse_printed(r.stdout)
        self.assertEqual(sorted(got), sorted(DEFAULTS), f"options printed:\n{r.stdout}")
        return got

    def assertUsageError(self, *args, env=None, want=()):
        """Exit 2 with every string of ``want`` in the message, and nothing on stdout."""
        r = self.pgcld(*args, "--print-config", env=env)
        self.assertEqual(r.returncode, USAGE_ERROR, f"args {args}\nstdout: {r.stdout}\nstderr: {r.stderr}")
        self.assertEqual(r.stdout, "", "--print-config must print nothing when the configuration is invalid")
        for w in want:
            self.assertIn(w, r.stderr)
        return r.stderr

    # -- defaults and the output format
    def test_defaults_every_option(self):
        db = os.path.join(self.tmp, "sub", "audit.db")
        got = self.print_config("--db", db, "--models", os.path.join(self.tmp, "no-such-models"))
        for name, value in DEFAULTS.items():
            if name != "db" and name != "models":
                self.assertEqual(got[name], (value, "default"), name)
        self.assertEqual(got["db"], (db, "flag --db"))
        # parse, print and exit: no database, no directory, no port file
        self.assertFalse(os.path.exists(os.path.dirname(db)))
        self.assertEqual(os.listdir(self.tmp), [])

    def test_new_options(self):
        got = self.print_config()
        self.assertEqual(got["auth"][0], "required")
        self.assertEqual(got["metrics"][0], "on")
        self.assertEqual(got["max-upload-bytes"][0], "268435456")
        self.assertEqual(got["shadow-queue"][0], "4096")
        got = self.print_config("--auth", "off", "--metrics=off", "--max-upload-bytes", "1024",
                                "--shadow-queue", "1")
        self.assertEqual(got["auth"], ("off", "flag --auth"))
        self.assertEqual(got["metrics"], ("off", "flag --metrics"))
        self.assertEqual(got["max-upload-bytes"], ("1024", "flag --max-upload-bytes"))
        self.assertEqual(got["shadow-queue"], ("1", "flag --shadow-queue"))
        self.assertUsageError("--auth", "maybe", want=["--auth", "maybe"])
        self.assertUsageError("--metrics", "yes", want=["--metrics"])
        self.assertUsageError("--max-upload-bytes", "1023", want=["--max-upload-bytes"])
        self.assertUsageError("--shadow-queue", "0", want=["--shadow-queue"])

    def test_output_is_a_config_file(self):
        """--print-config of a mixed configuration, read back as a file, gives the same values."""
        conf = self.write("a.conf", "max-batch = 7\ndb = \"quote\\\"d \\\\ #not a comment\"\n")
        first = self.print_config("--config", conf, "--port-file", "p # x",
                                  env=clean_env(PGCLD_SYNCHRONOUS="NORMAL"))
        self.assertEqual(first["db"], ('quote"d \\ #not a comment', f"file {conf}:2"))
        self.assertEqual(first["port-file"], ("p # x", "flag --port-file"))
        r = self.pgcld("--config", conf, "--port-file", "p # x", "--print-config",
                       env=clean_env(PGCLD_SYNCHRONOUS="NORMAL"))
        printed = self.write("printed.conf", r.stdout)
        again = self.print_config("--config", printed)
        for name in DEFAULTS:
            if name != "config":
                self.assertEqual(again[name][0], first[name][0], name)
                self.assertTrue(again[name][1].startswith(f"file {printed}:"), again[name])
        self.assertEqual(again["config"], (printed, "flag --config"))

    def test_help(self):
        r = H.run_pgcld("--help", timeout=60)
        self.assertEqual(r.returncode, 0)
        for needle in ["--config FILE", "PGCLD_CONFIG", "PGCLD_MAX_BATCH", "--print-config", "SIGHUP",
                       "name = value"]:
            self.assertIn(needle, r.stdout)
        for name in DEFAULTS:
            self.assertIn(f"--{name} ", r.stdout)
        self.assertRegex(r.stdout.replace("\n", " "), ", ".join(RELOADABLE))

    # -- precedence
    def test_precedence_flags_env_file_defaults(self):
        conf = self.write("p.conf", "\n".join([
            "# a comment", "max-batch = 100", "db = file.db", "", "log-level = debug",
            "shadow-queue = 10", "listen = 0.0.0.0:9000"]) + "\n")
        env = clean_env(PGCLD_MAX_BATCH="200", PGCLD_DB="env.db", PGCLD_LISTEN="127.0.0.1:9001")
        got = self.print_config("--config", conf, "--max-batch", "300", env=env)
        self.assertEqual(got["max-batch"], ("300", "flag --max-batch"))  # flag > env > file
        self.assertEqual(got["db"], ("env.db", "env PGCLD_DB"))  # env > file
        self.assertEqual(got["listen"], ("127.0.0.1:9001", "env PGCLD_LISTEN"))
        self.assertEqual(got["log-level"], ("debug", f"file {conf}:5"))  # file > default
        self.assertEqual(got["shadow-queue"], ("10", f"file {conf}:6"))
        self.assertEqual(got["metrics"], ("on", "default"))
        self.assertEqual(got["config"], (conf, "flag --config"))
        # without the flag, env wins; without env, the file
        got = self.print_config("--config", conf, env=env)
        self.assertEqual(got["max-batch"], ("200", "env PGCLD_MAX_BATCH"))
        got = self.print_config("--config", conf)
        self.assertEqual(got["max-batch"], ("100", f"file {conf}:2"))
        # the last of repeated flags wins
        got = self.print_config("--max-batch", "5", "--max-batch=6")
        self.assertEqual(got["max-batch"], ("6", "flag --max-batch"))

    def test_config_file_from_env(self):
        a = self.write("a.conf", "max-batch = 11\n")
        b = self.write("b.conf", "max-batch = 22\n")
        got = self.print_config(env=clean_env(PGCLD_CONFIG=a))
        self.assertEqual(got["max-batch"], ("11", f"file {a}:1"))
        self.assertEqual(got["config"], (a, "env PGCLD_CONFIG"))
        got = self.print_config("--config", b, env=clean_env(PGCLD_CONFIG=a))  # the flag wins
        self.assertEqual(got["max-batch"], ("22", f"file {b}:1"))
        got = self.print_config("--config", "", env=clean_env(PGCLD_CONFIG=a))  # "" = no file
        self.assertEqual(got["max-batch"], ("1024", "default"))

    def test_foreign_pgcld_variables_ignored(self):
        env = clean_env(PGCLD_NOT_AN_OPTION="1", PGCLD_BLAS_REEXEC="1", PGCLD_PRINT_CONFIG="x",
                        PGCLD_=" ", PGCLD_max_batch="0",
                        PGCLD_BIN=H.PGCLD_BIN, PGCLD_SOURCE_ROOT=H.SOURCE_ROOT)
        got = self.print_config(env=env)
        self.assertEqual(got["max-batch"], ("1024", "default"))

    # -- the file format
    def test_file_syntax(self):
        conf = self.write("s.conf", (
            "\ufeff# byte order mark, then a comment\r\n"
            "   # indented comment\n"
            "\t\n"
            "max-batch=12\r\n"
            "  listen   =   0.0.0.0:8080   \n"
            'db = "with space.db"   # trailing comment\n'
            "models = dir#1  # a '#' inside a word is kept\n"
            "port-file = # only a comment: empty\n"
            'default-model = ""\n'
            "synchronous = NORMAL\n"), mode="w")
        got = self.print_config("--config", conf)
        self.assertEqual(got["max-batch"], ("12", f"file {conf}:4"))
        self.assertEqual(got["listen"][0], "0.0.0.0:8080")
        self.assertEqual(got["db"][0], "with space.db")
        self.assertEqual(got["models"][0], "dir#1")
        self.assertEqual(got["port-file"], ("", f"file {conf}:8"))
        self.assertEqual(got["default-model"], ("", f"file {conf}:9"))
        self.assertEqual(got["synchronous"][0], "NORMAL")

    def test_file_errors_name_file_and_line(self):
        cases = [
            ("max-batch = 5\nno-such-option = 1\n", 2, ["unknown option", "no-such-option"]),
            ("max-batch = 5\n\nmax-batch = 6\n", 3, ["duplicate", "max-batch", "line 1"]),
            ("# ok\nmax-batch 5\n", 2, ["name = value"]),
            ("= 5\n", 1, ["name"]),
            ('db = "open\n', 1, ["quote"]),
            ('db = "a" b\n', 1, ["quote"]),
            ('db = "a\\tb"\n', 1, ["escape"]),
            ("config = other.conf\n", 1, ["config"]),
            ("print-config = 1\n", 1, ["unknown option"]),
            ("max-batch = 0\n", 1, ["max-batch", "'0'"]),
            ("max-batch = 12abc\n", 1, ["max-batch"]),
            ("max-batch = \n", 1, ["max-batch"]),
            ("synchronous = full\n", 1, ["synchronous", "FULL or NORMAL"]),
            ("log-level = verbose\n", 1, ["log-level"]),
            ("auth = on\n", 1, ["auth", "required or off"]),
            ("metrics = true\n", 1, ["metrics", "on or off"]),
            ("listen = 127.0.0.1:65536\n", 1, ["listen", "65535"]),
            ("listen = 8080\n", 1, ["listen", "HOST:PORT"]),
            ("listen = host:\n", 1, ["listen"]),
            ("listen = :80\n", 1, ["listen"]),
            ("listen = host:-1\n", 1, ["listen"]),
        ]
        for i, (text, line, want) in enumerate(cases):
            with self.subTest(text=text):
                conf = self.write(f"bad{i}.conf", text)
                self.assertUsageError("--config", conf, want=[f"{conf}:{line}"] + want)

    def test_file_binary_junk(self):
        conf = self.write("nul.conf", b"max-batch = 1\x002\n", mode="wb")
        self.assertUsageError("--config", conf, want=[f"{conf}:1"])

    def test_missing_config_file(self):
        missing = os.path.join(self.tmp, "missing.conf")
        self.assertUsageError("--config", missing, want=["--config", missing])
        self.assertUsageError(env=clean_env(PGCLD_CONFIG=missing), want=["PGCLD_CONFIG", missing])
        self.assertUsageError("--config", self.tmp, want=["--config", self.tmp])  # a directory

    # -- the same validation for env and flags, naming the source
    def test_env_errors_name_the_variable(self):
        cases = [("max-batch", "0"), ("max-batch", "many"), ("max-batch", "1048577"), ("synchronous", "OFF"),
                 ("log-level", "loud"), ("auth", "no"), ("metrics", "1"), ("listen", "localhost"),
                 ("listen", "h:70000"), ("max-body-bytes", "1023"), ("shutdown-grace", "-1"),
                 ("db", "tab\there")]
        for name, value in cases:
            with self.subTest(name=name, value=value):
                self.assertUsageError(env=clean_env(**{env_name(name): value}), want=[env_name(name)])

    def test_flag_errors_name_the_flag(self):
        for name, value in [("max-batch", "0"), ("synchronous", "normal"), ("listen", "h:99999"),
                            ("compute-workers", "1025"), ("auth", "")]:
            with self.subTest(name=name, value=value):
                self.assertUsageError(f"--{name}", value, want=[f"--{name}"])
        self.assertUsageError("--no-such-flag", "1", want=["--no-such-flag"])
        r = self.pgcld("--print-config", "--max-batch")
        self.assertEqual(r.returncode, USAGE_ERROR)
        self.assertIn("--max-batch needs a value", r.stderr)
        self.assertUsageError("stray", want=["stray"])
        r = self.pgcld("--print-config=yes")
        self.assertEqual(r.returncode, USAGE_ERROR)

    def test_bounds_both_ways(self):
        for name, lo, hi in [("max-batch", 1, 1 << 20), ("max-upload-bytes", 1024, 1 << 40),
                             ("shadow-queue", 1, 1 << 20), ("compute-workers", 0, 1024)]:
            with self.subTest(name=name):
                self.assertEqual(self.print_config(f"--{name}", str(lo))[name][0], str(lo))
                self.assertEqual(self.print_config(f"--{name}", str(hi))[name][0], str(hi))
                self.assertUsageError(f"--{name}", str(lo - 1), want=[f"--{name}"])
                self.assertUsageError(f"--{name}", str(hi + 1), want=[f"--{name}"])
        for days in ("0", "0.5", "36500", ""):
            self.assertEqual(self.print_config("--input-retention-days", days)["input-retention-days"][0], days)
        for days in ("-1", "36501", "1e3", "abc", "1.5d", "nan"):
            with self.subTest(days=days):
                self.assertUsageError("--input-retention-days", days, want=["--input-retention-days"])
        self.assertEqual(self.print_config("--listen", "[::1]:0")["listen"][0], "[::1]:0")
        self.assertEqual(self.print_config("--listen", "h:65535")["listen"][0], "h:65535")

    def test_an_invalid_file_value_is_an_error_even_if_a_flag_overrides_it(self):
        conf = self.write("o.conf", "max-batch = 0\n")
        self.assertUsageError("--config", conf, "--max-batch", "5", want=[f"{conf}:1"])

    # -- the sample
    def test_witness_repeatable_and_checked(self):
        import base64, hashlib
        def vkey(name, pub):  # a cosignature/v1 note verifier key (c2sp.org/signed-note)
            key_id = hashlib.sha256(name.encode() + b"\n\x04" + pub).digest()[:4].hex()
            return f"{name}+{key_id}+" + base64.b64encode(b"\x04" + pub).decode()
        base_point = bytes([0x58]) + bytes([0x66]) * 31
        a, b = f"a=http://127.0.0.1:1,{vkey('wa', base_point)}", f"b=http://127.0.0.1:2/w,{vkey('wb', base_point)}"
        self.assertEqual(self.print_config("--witness", a, "--witness", b)["witness"][0], f"{a} {b}")
        self.assertUsageError("--witness", "a=ftp://x," + vkey("wa", base_point), want=["--witness", "witness 'a=ftp://x,"])
        self.assertUsageError("--witness", "no-key-here", want=["--witness"])

    def test_deploy_sample_parses_at_defaults(self):
        got = self.print_config("--config", DEPLOY_CONF)
        for name, value in DEFAULTS.items():
            if name == "config":
                self.assertEqual(got[name], (DEPLOY_CONF, "flag --config"))
            else:
                self.assertEqual(got[name][0], value, name)
                self.assertTrue(got[name][1].startswith(f"file {DEPLOY_CONF}:"), got[name])


def score_items(n, seed):
    return {"items": H.json_items(H.random_embeddings(n, 1024, seed))}


class ReloadTest(unittest.TestCase):
    """SIGHUP against a running daemon: reloadable options change, others wait for a restart, an
    invalid file is refused whole, flags keep precedence."""

    def test_sighup(self):
        H.require_binary()
        tmp = tempfile.mkdtemp(prefix="pgcld-reload-")
        self.addCleanup(shutil.rmtree, tmp, True)
        conf = os.path.join(tmp, "pgcld.conf")

        def write_conf(text):
            with open(conf + ".tmp", "w") as f:
                f.write("auth = off\n" + text)
            os.replace(conf + ".tmp", conf)

        def reload(expect):
            before = d.logs(limit=10 ** 9).count(expect)
            d.proc.send_signal(signal.SIGHUP)
            self.assertTrue(H.wait_until(lambda: d.logs(limit=10 ** 9).count(expect) > before),
                            f"no '{expect}' after SIGHUP\n{d.logs()}")

        write_conf("max-batch = 2\nshutdown-grace = 10\n")
        d = H.Daemon(args=["--config", conf, "--max-body-bytes", "1000000"])
        self.addCleanup(d.cleanup)
        d.start()
        self.assertEqual(d.score(score_items(3, 1)).error_code(), "batch_too_large")
        self.assertEqual(d.score(score_items(2, 2)).status, 200)

        # a reloadable option changes; a non-reloadable one is kept with a warning
        write_conf("max-batch = 8\nshutdown-grace = 11\nmax-body-bytes = 5000000\n")
        reload("config: reloaded")
        self.assertEqual(d.score(score_items(3, 3)).status, 200)
        self.assertEqual(d.score(score_items(9, 4)).error_code(), "batch_too_large")
        logs = d.logs(limit=10 ** 9)
        self.assertIn("max-batch = 8", logs)
        self.assertRegex(logs, r"shutdown-grace changed to '11'.*restart")
        # the flag still wins over the file: about 1 MB of body, no more
        big = score_items(60, 5)  # ~1.2 MB of JSON numbers
        resp = d.raw("POST", "/v1/score", big, headers={"Content-Type": "application/json"})
        self.assertEqual(resp.error_code(), "payload_too_large", resp)

        # an invalid file is refused whole: max-batch stays 8
        # (the message is config.c's; main.c logs it with its own prefix)
        write_conf("max-batch = 1\nmax-pending-rows = 0\n")
        reload(f"{conf}:3: max-pending-rows: '0'")
        self.assertEqual(d.score(score_items(8, 6)).status, 200)

        write_conf("max-batch = 1\n")
        reload("config: reloaded")  # written after the new values are stored, not before
        self.assertIn("config: reload: max-batch = 1 (was 8", d.logs(limit=10 ** 9))
        self.assertEqual(d.score(score_items(2, 7)).error_code(), "batch_too_large")
        self.assertEqual(d.stop(), 0, d.logs())


if __name__ == "__main__":
    unittest.main(verbosity=2)
