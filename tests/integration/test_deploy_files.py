#!/usr/bin/python3
"""Lint of the deployment files, which cannot be run here (no Docker engine, no cluster, no PID 1
systemd): each is parsed and checked against the code and against the others.

Dockerfile: two stages (build, runtime) with the base images as build arguments (the CUDA variant);
the build stage runs the README's set-up scripts (deploy/install-deps.sh, deploy/build.sh build
--buildtype=release); its package-listing step, run here against the built binary, names the
packages that own every library; the runtime stage runs as a numeric non-root USER, has a
HEALTHCHECK on /healthz, EXPOSEs the port of its config file, whose db lies in the VOLUME (checked
with `pgcld serve --print-config`).

deploy/systemd/pgcld.service: `systemd-analyze verify` is silent about it (with ExecStart pointed at
the built binary) and `systemd-analyze security --offline` rates it at most 2.0; the sandboxing
directives the deployment relies on are present.

deploy/k8s/*.yaml: every document parses; the StatefulSet, both Services (one headless, its
serviceName), the PodDisruptionBudget, ConfigMap and Secret agree on labels and names; probe paths
are routes of server/http/route_table.c (/healthz liveness, /readyz readiness); ports match the ConfigMap's
listen; the ConfigMap's pgcld.conf is valid (--print-config) and its db lies on the
volumeClaimTemplate's mount; pod and containers run as non-root with a read-only root filesystem and
no capabilities; resources are set and compute-workers fits the CPU limit; the grace period covers
preStop + shutdown-grace. The Secret pgcld-api-keys holds no key, is mounted read-only into the init
container that imports it (and into no other container), and that container's script, run here
with sh against the built pgcld and a copy of a Secret volume's layout, imports every entry with its
role and name, changes nothing when run again, prints no key, and stops on an entry that is not
ROLE.NAME or a key revoked in the database.

deploy/kserve/servingruntime.yaml (issue 19): a KServe ServingRuntime speaking v2 for the pgcl
format, the image of the StatefulSet, an environment that is a valid config reading /mnt/models and
the fleet's PostgreSQL store, probes that are routes on the listen port.

deploy/k8s/fleet/*.yaml (issue 17): the replicas as a Deployment (3) with no volume of their own,
--writer-id from the pod name (downward API), readiness on /readyz; the ConfigMap's pgcld.conf is
valid and its db is a postgresql:// URI as pgcld_writer, the migrate Job's the same database as
pgcld_owner; no password in any URI or Secret of the repository, each role's password (PGPASSWORD
from its own Secret) reaches only the pods of that role; the CloudNativePG example beside them (not
in the kustomization) is the server those URIs name, with a synchronous standby.

What some cases need (the built pgcld; ldd, dpkg-query and sh; systemd-analyze from Debian's systemd,
which deploy/install-deps.sh --test installs) is a suite dependency: without it a case skips when run
by hand and fails under tests/run_all.sh (tests/integration/skips.py).

Run: /usr/bin/python3 tests/integration/test_deploy_files.py
"""

import glob
import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import unittest

import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import harness as H  # noqa: E402
import skips  # noqa: E402

ROOT = H.SOURCE_ROOT
DOCKERFILE = os.path.join(ROOT, "Dockerfile")
UNIT = os.path.join(ROOT, "deploy", "systemd", "pgcld.service")
K8S = os.path.join(ROOT, "deploy", "k8s")


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def routes():
    """(method, pattern) of server/http/route_table.c's route table."""
    return set(re.findall(r'\{"(GET|POST|PUT|DELETE)", "(/[^"]*)"', read(os.path.join(ROOT, "server", "http", "route_table.c"))))


def print_config(conf_text, extra_env=None):
    """{name: value} of `pgcld serve --print-config` for a config file with this text (and the
    PGCLD_* variables of extra_env)."""
    with tempfile.TemporaryDirectory() as d:
        p = os.path.join(d, "pgcld.conf")
        with open(p, "w", encoding="utf-8") as f:
            f.write(conf_text)
        env = {k: v for k, v in os.environ.items() if not k.startswith("PGCLD_") or k in ("PGCLD_BIN",)}
        env.update(extra_env or {})
        r = subprocess.run([H.PGCLD_BIN, "serve", "--config", p, "--print-config"], capture_output=True,
                           text=True, timeout=60, env=env, cwd=d)
    if r.returncode != 0:
        raise AssertionError(f"pgcld refuses the config file: {r.stderr}\n{conf_text}")
    out = {}
    for line in r.stdout.splitlines():
        m = re.match(r'^(\S+) = ("(?:[^"\\]|\\.)*"|\S+)', line)
        if m:
            v = m.group(2)
            out[m.group(1)] = v[1:-1] if v.startswith('"') else v
    return out


def have_binary():
    return os.path.isfile(H.PGCLD_BIN) and os.access(H.PGCLD_BIN, os.X_OK)


# --------------------------------------------------------------------------- Dockerfile

def dockerfile_instructions(text):
    """[(INSTRUCTION, argument text)] with continuation lines joined and comments dropped."""
    out, cur = [], ""
    for line in text.splitlines():
        if not cur and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if cur and line.lstrip().startswith("#"):
            continue
        cur += line.rstrip()
        if cur.endswith("\\"):
            cur = cur[:-1] + " "
            continue
        word, _, rest = cur.strip().partition(" ")
        out.append((word.upper(), rest.strip()))
        cur = ""
    return out


def stages(instrs):
    """[{"from": image, "name": alias, "instrs": [...]}], and the ARGs before the first FROM."""
    result, global_args = [], {}
    for word, rest in instrs:
        if word == "FROM":
            m = re.match(r"(\S+)(?:\s+AS\s+(\S+))?$", rest, re.I)
            result.append({"from": m.group(1), "name": m.group(2), "instrs": []})
        elif not result:
            if word == "ARG":
                k, _, v = rest.partition("=")
                global_args[k] = v
        else:
            result[-1]["instrs"].append((word, rest))
    return result, global_args


class DockerfileTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.instrs = dockerfile_instructions(read(DOCKERFILE))
        cls.stages, cls.args = stages(cls.instrs)

    def stage(self, name):
        for s in self.stages:
            if s["name"] == name:
                return s
        self.fail(f"no stage {name!r}")

    def get(self, stage, word):
        return [rest for w, rest in stage["instrs"] if w == word]

    def test_two_stages_with_selectable_bases(self):
        self.assertEqual([s["name"] for s in self.stages], ["build", "runtime"])
        self.assertEqual(self.stage("build")["from"], "${BUILD_BASE}")
        self.assertEqual(self.stage("runtime")["from"], "${BASE}")
        self.assertEqual(self.args.get("BASE"), "debian:bookworm-slim")
        self.assertEqual(self.args.get("BUILD_BASE"), "debian:bookworm-slim")
        self.assertIn("CUDA=disabled", self.get(self.stage("build"), "ARG"))
        text = read(DOCKERFILE)
        # The CUDA variant is documented in the file with the build arguments it needs.
        for needle in ("--build-arg BASE=nvidia/cuda:", "--build-arg BUILD_BASE=nvidia/cuda:",
                       "--build-arg CUDA=enabled"):
            self.assertIn(needle, text)

    def test_build_stage_runs_the_readme_scripts(self):
        readme = read(os.path.join(ROOT, "README.md"))
        m = re.search(r"^(deploy/install-deps\.sh && deploy/build\.sh build [^&\n]*?)\s*&&", readme, re.M)
        self.assertIsNotNone(m, "README's set-up command not found")
        runs = " ".join(self.get(self.stage("build"), "RUN"))
        self.assertIn(m.group(1), runs, "the build stage does not run the README's set-up command")
        self.assertIn("-Dcuda=${CUDA}", runs)
        for script in ("deploy/install-deps.sh", "deploy/build.sh"):
            self.assertTrue(os.access(os.path.join(ROOT, script), os.X_OK), script)
        self.assertNotIn("install-deps.sh", " ".join(self.get(self.stage("runtime"), "RUN")),
                         "the runtime stage must not install the toolchain")

    def test_runtime_stage_user_healthcheck_port(self):
        rt = self.stage("runtime")
        users = self.get(rt, "USER")
        self.assertEqual(len(users), 1)
        uid, _, gid = users[0].partition(":")
        self.assertRegex(uid, r"^\d+$", "USER must be numeric so Kubernetes can check runAsNonRoot")
        self.assertNotEqual(int(uid), 0)
        self.assertNotEqual(gid, "0")
        health = self.get(rt, "HEALTHCHECK")
        self.assertEqual(len(health), 1)
        self.assertIn("/healthz", health[0])
        self.assertIn(("GET", "/healthz"), routes())
        self.assertEqual(self.get(rt, "EXPOSE"), ["8080"])
        self.assertIn('["/usr/local/bin/pgcld"]', self.get(rt, "ENTRYPOINT"))
        # runtime packages come from the build stage's list, plus curl for the HEALTHCHECK.
        run = " ".join(self.get(rt, "RUN"))
        self.assertIn("$(cat /tmp/runtime-packages)", run)
        self.assertIn("grep 'not found'", run, "the runtime stage must check that every library resolves")
        self.assertNotRegex(run, r"\b(build-essential|meson|ninja-build|-dev)\b")

    def container_conf(self):
        run = " ".join(self.get(self.stage("runtime"), "RUN"))
        m = re.search(r"printf '%s\\n' (.*?) > /etc/pgcld/pgcld\.conf", run)
        self.assertIsNotNone(m, "the runtime stage does not write /etc/pgcld/pgcld.conf")
        return "\n".join(shlex.split(m.group(1))) + "\n"

    @skips.needs(have_binary(), "the built pgcld")
    def test_container_config_matches_volume_and_models(self):
        cfg = print_config(self.container_conf())
        rt = self.stage("runtime")
        self.assertEqual(cfg["listen"], "0.0.0.0:8080")
        volumes = self.get(rt, "VOLUME")
        self.assertEqual(volumes, ['["/var/lib/pgcld"]'])
        self.assertEqual(os.path.dirname(cfg["db"]), "/var/lib/pgcld")
        self.assertIn("/var/lib/pgcld", self.get(rt, "WORKDIR"))
        self.assertIn(f"models {cfg['models']}", self.get(rt, "COPY"))
        self.assertIn("PGCLD_CONFIG=/etc/pgcld/pgcld.conf", self.get(rt, "ENV"))

    @skips.needs(have_binary() and shutil.which("ldd") and shutil.which("dpkg-query"),
                 "the built pgcld, ldd and dpkg-query")
    def test_runtime_package_list_step(self):
        """The build stage's package-listing RUN, run here on the binary built here."""
        run = [r for r in self.get(self.stage("build"), "RUN") if "runtime-packages" in r]
        self.assertEqual(len(run), 1)
        with tempfile.TemporaryDirectory() as d:
            os.makedirs(os.path.join(d, "usr", "local", "bin"))
            shutil.copy(H.PGCLD_BIN, os.path.join(d, "usr", "local", "bin", "pgcld"))
            script = run[0].replace("/out/", d + "/").replace("/tmp/owners", os.path.join(d, "owners"))
            r = subprocess.run(["/bin/sh", "-c", script], capture_output=True, text=True, timeout=120)
            self.assertEqual(r.returncode, 0, r.stderr)
            with open(os.path.join(d, "runtime-packages"), encoding="utf-8") as f:
                pkgs = f.read().split()
            with open(os.path.join(d, "unpackaged-libraries"), encoding="utf-8") as f:
                unowned = f.read().split()
        # Only a CUDA toolkit installed outside dpkg may leave libraries without a package.
        self.assertEqual([u for u in unowned if "cuda" not in u], [], unowned)
        for p in ("libc6", "libjansson4", "libutf8proc2", "libsqlite3-0", "libsodium23", "libpq5"):
            self.assertIn(p, pkgs)
        self.assertTrue(any(p.startswith("libmicrohttpd") for p in pkgs), pkgs)
        # OpenBLAS is not linked into the daemon since the forward pass has its own kernel (issue 16)
        self.assertFalse([p for p in pkgs if p.startswith("libopenblas")], pkgs)
        self.assertFalse([p for p in pkgs if p.endswith("-dev")], pkgs)


# --------------------------------------------------------------------------- systemd

def unit_directives(text):
    out = {}
    section = None
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("["):
            section = line.strip("[]")
            continue
        k, _, v = line.partition("=")
        out.setdefault((section, k), []).append(v)
    return out


class SystemdUnitTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.text = read(UNIT)
        cls.d = unit_directives(cls.text)

    def one(self, key, section="Service"):
        v = self.d.get((section, key))
        self.assertIsNotNone(v, f"{key}= missing")
        return v[-1]

    def test_sandboxing_directives(self):
        want = {"Type": "notify", "NotifyAccess": "main", "User": "pgcld", "ProtectSystem": "strict", "ProtectHome": "yes",
                "PrivateTmp": "yes", "NoNewPrivileges": "yes", "StateDirectory": "pgcld",
                "CapabilityBoundingSet": "", "SystemCallFilter": "@system-service",
                "MemoryDenyWriteExecute": "yes", "Restart": "on-failure", "WorkingDirectory": "/var/lib/pgcld"}
        for k, v in want.items():
            self.assertEqual(self.one(k), v, k)
        self.assertIn("/var/lib/pgcld", self.one("ReadWritePaths").split())
        self.assertEqual(set(self.one("RestrictAddressFamilies").split()), {"AF_INET", "AF_INET6", "AF_UNIX"})
        self.assertGreaterEqual(int(self.one("LimitNOFILE")), 4096)
        self.assertEqual(self.one("ExecStart"), "/usr/local/bin/pgcld serve --config /etc/pgcld/pgcld.conf")
        self.assertIn("sd_notify", self.text)  # what Type=notify gets, said in the file

    def test_watchdog_outlasts_a_writer_that_fails_and_retries(self):
        # pgcld withholds WATCHDOG=1 while its audit writer has owed progress for half WatchdogSec
        # (server/systemd_notify.c): half must exceed every wait the writer bounds by itself, read
        # from the code: the SQLite busy timeout, PostgreSQL's lock_timeout, connect timeout and
        # tcp_user_timeout
        watchdog_s = int(self.one("WatchdogSec").rstrip("s"))
        main_c = read(os.path.join(ROOT, "server", "main.c"))
        pg_db_c = read(os.path.join(ROOT, "core", "audit", "pg", "pg_db.c"))
        writer_c = read(os.path.join(ROOT, "core", "audit", "pg", "audit_pg_writer.c"))
        conn_keys, conn_values = ([v.strip().strip('"') for v in re.search(name + r"\[\] = \{(.*?)\};", pg_db_c,
                                                                            re.S).group(1).split(",")]
                                  for name in ("keys", "values"))
        waits_s = {
            "SQLite busy timeout": int(re.search(r"\.busy_timeout_ms = (\d+)", main_c).group(1)) / 1000,
            "PostgreSQL connect timeout": int(re.search(r"#define PGCL_PG_CONNECT_TIMEOUT_S (\d+)",
                                                        read(os.path.join(ROOT, "core", "audit", "pg",
                                                                          "pg_db.h"))).group(1)),
            "PostgreSQL lock_timeout": int(re.search(r"'lock_timeout', '(\d+)s'", writer_c).group(1)),
            "tcp_user_timeout": int(dict(zip(conn_keys, conn_values))["tcp_user_timeout"]) / 1000,
        }
        self.assertGreater(watchdog_s / 2, max(waits_s.values()), f"WatchdogSec is too short for {waits_s}")
        self.assertIn("AF_UNIX", self.one("RestrictAddressFamilies").split(), "sd_notify needs AF_UNIX")
        # model loading ends in READY=1 well within the start timeout
        self.assertGreaterEqual(int(self.one("TimeoutStartSec").rstrip("s")), 60)
        # TimeoutStopSec covers the default shutdown-grace plus the flush.
        grace = int(re.search(r"^shutdown-grace = (\d+)", read(os.path.join(ROOT, "deploy", "pgcld.conf")),
                              re.M).group(1))
        self.assertGreaterEqual(int(self.one("TimeoutStopSec").rstrip("s")), grace + 10)

    @skips.needs(shutil.which("systemd-analyze"), "systemd-analyze (Debian's systemd package)")
    def test_systemd_analyze(self):
        with tempfile.TemporaryDirectory() as d:
            unit = os.path.join(d, "pgcld.service")
            binary = H.PGCLD_BIN if have_binary() else "/bin/true"
            with open(unit, "w", encoding="utf-8") as f:
                f.write(self.text.replace("/usr/local/bin/pgcld", binary))
            r = subprocess.run(["systemd-analyze", "verify", unit], capture_output=True, text=True, timeout=120)
            problems = [l for l in (r.stdout + r.stderr).splitlines() if "pgcld.service" in l]
            self.assertEqual((r.returncode, problems), (0, []), r.stderr)
            r = subprocess.run(["systemd-analyze", "security", "--offline=yes", unit], capture_output=True,
                               text=True, timeout=120)
            m = re.search(r"Overall exposure level for \S+: ([\d.]+)", r.stdout)
            self.assertIsNotNone(m, f"systemd-analyze security rated nothing: {r.stdout[-500:]}{r.stderr[-500:]}")
            self.assertLessEqual(float(m.group(1)), 2.0, r.stdout)


# --------------------------------------------------------------------------- Kubernetes

def load_manifests(directory):
    """The YAML documents of directory/*.yaml as [(file name, document)] and by kind."""
    docs = []
    for p in sorted(glob.glob(os.path.join(directory, "*.yaml"))):
        with open(p, encoding="utf-8") as f:
            docs += [(os.path.basename(p), doc) for doc in yaml.safe_load_all(f) if doc]
    by_kind = {}
    for _, doc in docs:
        by_kind.setdefault(doc["kind"], []).append(doc)
    return docs, by_kind


def config_values(text):
    """name -> value of a pgcld config file's `name = value` lines."""
    return dict(re.findall(r'^([a-z-]+) = "?([^"\n]*)"?\s*$', text, re.M))


class KubernetesTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.docs, cls.by_kind = load_manifests(K8S)
        cls.sts = cls.by_kind["StatefulSet"][0]
        cls.pod = cls.sts["spec"]["template"]["spec"]
        cls.main = [c for c in cls.pod["containers"] if c["name"] == "pgcld"][0]
        cm = cls.by_kind["ConfigMap"][0]
        cls.conf_text = cm["data"]["pgcld.conf"]
        cls.conf = config_values(cls.conf_text)

    def test_kustomization_lists_every_file(self):
        kust = [d for f, d in self.docs if d["kind"] == "Kustomization"][0]
        files = {os.path.basename(p) for p in glob.glob(os.path.join(K8S, "*.yaml"))} - {"kustomization.yaml"}
        self.assertEqual(set(kust["resources"]), files)

    def test_kinds_present(self):
        for kind in ("StatefulSet", "Service", "ConfigMap", "Secret", "PodDisruptionBudget"):
            self.assertIn(kind, self.by_kind)
        self.assertEqual(len(self.by_kind["Service"]), 2)

    def test_services_and_selectors(self):
        labels = self.sts["spec"]["template"]["metadata"]["labels"]
        self.assertEqual(self.sts["spec"]["selector"]["matchLabels"], labels)
        headless = [s for s in self.by_kind["Service"] if s["spec"].get("clusterIP") == "None"]
        self.assertEqual(len(headless), 1)
        self.assertEqual(self.sts["spec"]["serviceName"], headless[0]["metadata"]["name"])
        port_names = {p["name"]: p["containerPort"] for p in self.main["ports"]}
        for svc in self.by_kind["Service"]:
            for k, v in svc["spec"]["selector"].items():
                self.assertEqual(labels.get(k), v)
            for p in svc["spec"]["ports"]:
                self.assertIn(p["targetPort"], port_names)
        pdb = self.by_kind["PodDisruptionBudget"][0]
        for k, v in pdb["spec"]["selector"]["matchLabels"].items():
            self.assertEqual(labels.get(k), v)
        self.assertLess(pdb["spec"].get("maxUnavailable", 1), self.sts["spec"]["replicas"])

    def probe_port(self, probe):
        port = probe["httpGet"]["port"]
        return {p["name"]: p["containerPort"] for p in self.main["ports"]}.get(port, port)

    def test_probes_are_routes_on_the_listen_port(self):
        r = routes()
        self.assertEqual(self.main["livenessProbe"]["httpGet"]["path"], "/healthz")
        self.assertEqual(self.main["readinessProbe"]["httpGet"]["path"], "/readyz")
        listen_port = int(self.conf["listen"].rsplit(":", 1)[1])
        for name in ("livenessProbe", "readinessProbe", "startupProbe"):
            probe = self.main.get(name)
            if not probe:
                continue
            self.assertIn(("GET", probe["httpGet"]["path"]), r, name)
            self.assertEqual(self.probe_port(probe), listen_port, name)
        self.assertTrue(self.conf["listen"].startswith("0.0.0.0:"), "a pod must listen beyond loopback")

    def test_db_on_the_claimed_volume(self):
        claims = {c["metadata"]["name"] for c in self.sts["spec"]["volumeClaimTemplates"]}
        mounts = {m["mountPath"]: m["name"] for m in self.main["volumeMounts"]}
        db_dir = os.path.dirname(self.conf["db"])
        self.assertIn(db_dir, mounts, f"nothing is mounted at {db_dir}")
        self.assertIn(mounts[db_dir], claims, "the audit database is not on the replica's own volume")
        claim = [c for c in self.sts["spec"]["volumeClaimTemplates"] if c["metadata"]["name"] == mounts[db_dir]][0]
        self.assertEqual(claim["spec"]["accessModes"], ["ReadWriteOnce"])
        # The init container writes the same volume at the same path.
        for c in self.pod.get("initContainers", []):
            self.assertIn({"name": mounts[db_dir], "mountPath": db_dir}, c["volumeMounts"])
            self.assertIn(self.conf["db"], " ".join(c.get("args", []) + c.get("command", [])))
        # The config file comes from the ConfigMap mounted where the container reads it.
        cfg_arg = self.main["args"][self.main["args"].index("--config") + 1]
        cm_mount = [m for m in self.main["volumeMounts"] if m["mountPath"] == os.path.dirname(cfg_arg)][0]
        vol = [v for v in self.pod["volumes"] if v["name"] == cm_mount["name"]][0]
        self.assertEqual(vol["configMap"]["name"], self.by_kind["ConfigMap"][0]["metadata"]["name"])
        secret_names = {s["metadata"]["name"] for s in self.by_kind["Secret"]}
        for v in self.pod["volumes"]:
            if "secret" in v:
                self.assertIn(v["secret"]["secretName"], secret_names)

    # -- the API keys Secret and the init container that imports it

    def api_keys_parts(self):
        """(the Secret, its volume, the init container that mounts it, that mount)."""
        secret = [s for s in self.by_kind["Secret"] if s["metadata"]["name"] == "pgcld-api-keys"]
        self.assertEqual(len(secret), 1, "no Secret pgcld-api-keys")
        vols = [v for v in self.pod["volumes"] if v.get("secret", {}).get("secretName") == "pgcld-api-keys"]
        self.assertEqual(len(vols), 1, "pgcld-api-keys is not a volume of the pod")
        users = [(c, m) for c in self.pod["containers"] + self.pod.get("initContainers", [])
                 for m in c.get("volumeMounts", []) if m["name"] == vols[0]["name"]]
        self.assertEqual(len(users), 1, "pgcld-api-keys must be mounted by exactly one container")
        return secret[0], vols[0], users[0][0], users[0][1]

    def test_api_keys_secret_mounted_read_only_into_the_import_container(self):
        secret, vol, container, mount = self.api_keys_parts()
        self.assertIn(container, self.pod.get("initContainers", []), "the keys are imported by an init container")
        self.assertNotIn(vol["name"], {m["name"] for m in self.main["volumeMounts"]},
                         "the serving container has no use for the key texts")
        self.assertTrue(mount.get("readOnly"), "the keys Secret must be mounted read-only")
        self.assertEqual(vol["secret"]["defaultMode"], 0o440)
        self.assertTrue(vol["secret"].get("optional"), "a cluster without keys to import must still start")
        # a placeholder: no key in the manifest, nor anywhere under deploy/k8s
        self.assertFalse(secret.get("data") or secret.get("stringData"), "keys committed in secret.yaml")
        for p in filter(os.path.isfile, glob.glob(os.path.join(K8S, "**", "*"), recursive=True)):
            self.assertIsNone(re.search(r"pgcld_[0-9a-f]{8}_[A-Za-z0-9_-]{43}", read(p)), f"a key text in {p}")
        script = " ".join(container.get("command", []) + container.get("args", []))
        self.assertIn("pgcld keys import", script)
        self.assertIn(f"--db {self.conf['db']}", script)
        self.assertIn(mount["mountPath"], script)
        self.assertNotRegex(script, r"set -[a-z]*x", "a traced script would print its arguments")

    @skips.needs(have_binary() and shutil.which("sh"), "the built pgcld and sh")
    def test_import_container_script_imports_every_entry(self):
        _, _, container, mount = self.api_keys_parts()
        db_dir = os.path.dirname(self.conf["db"])
        self.assertEqual(container["command"][:2], ["/bin/sh", "-c"])
        script = container["args"][0]
        with tempfile.TemporaryDirectory() as tmp:
            keys_dir, data_dir, bin_dir = (os.path.join(tmp, n) for n in ("keys", "data", "bin"))
            for p in (keys_dir, data_dir, bin_dir):
                os.mkdir(p)
            os.symlink(H.PGCLD_BIN, os.path.join(bin_dir, "pgcld"))
            local = script.replace(mount["mountPath"], keys_dir).replace(db_dir, data_dir)
            db = os.path.join(data_dir, os.path.basename(self.conf["db"]))
            env = {"PATH": bin_dir + ":/usr/bin:/bin", "HOME": tmp}

            def run():
                return subprocess.run(["sh", "-c", local], capture_output=True, text=True, timeout=120, env=env,
                                      cwd=tmp)

            # An empty Secret (or none: the volume is optional): nothing to do.
            r = run()
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertFalse(os.path.exists(db), "an empty Secret created a database")

            # Keys made outside the cluster, as secret.yaml says, laid out as the kubelet does: the
            # files live in a hidden timestamped directory, reached through ..data and one symbolic
            # link per entry.
            keys = {}
            scratch = os.path.join(tmp, "scratch.db")
            entries = {"scorer.moderation-pipeline": "scorer", "reviewer.trust-and-safety": "reviewer",
                       "admin.ops.on-call": "admin"}
            hidden = os.path.join(keys_dir, "..2026_01_01_00_00_00.000000001")
            os.mkdir(hidden)
            for entry, role in entries.items():
                p = subprocess.run([H.PGCLD_BIN, "keys", "create", "--db", scratch, "--role", role, "--name", entry],
                                   capture_output=True, text=True, timeout=60, cwd=tmp)
                self.assertEqual(p.returncode, 0, p.stderr)
                keys[entry] = p.stdout.strip().splitlines()[-1]
                with open(os.path.join(hidden, entry), "w") as f:
                    f.write(keys[entry] + "\n")
            os.symlink(os.path.basename(hidden), os.path.join(keys_dir, "..data"))
            for entry in entries:
                os.symlink(os.path.join("..data", entry), os.path.join(keys_dir, entry))

            outputs = []
            for attempt in range(2):  # a restart runs it again: the second run changes nothing
                r = run()
                outputs.append(r.stdout + r.stderr)
                self.assertEqual(r.returncode, 0, r.stderr)
                listed = H.run_pgcld("keys", "list", "--db", db, timeout=60).stdout
                rows = {row["key_id"]: row for row in map(json.loads, listed.splitlines())}
                self.assertEqual(len(rows), len(entries), f"run {attempt + 1}: {rows}")
                for entry, role in entries.items():
                    row = rows[keys[entry][:14]]
                    self.assertEqual((row["role"], row["name"], row["revoked_at"]),
                                     (role, entry.split(".", 1)[1], None), entry)
                    self.assertEqual(H.db_scalar(db, "SELECT key_sha256 FROM api_keys WHERE key_id = ?",
                                                 (keys[entry][:14],)),
                                     hashlib.sha256(keys[entry].encode()).hexdigest())
                self.assertEqual(H.db_scalar(db, "SELECT count(*) FROM admin_events WHERE action = 'key.import'"),
                                 len(entries))
            self.assertIn("nothing changed", outputs[1])
            for text in outputs:
                for key in keys.values():
                    self.assertNotIn(key[15:], text, "the init container printed a key")

            # A key revoked in the database but still in the Secret stops the start, with the reason.
            victim = keys["reviewer.trust-and-safety"][:14]
            p = H.run_pgcld("keys", "revoke", "--db", db, "--key-id", victim, timeout=60)
            self.assertEqual(p.returncode, 0, p.stderr)
            r = run()
            self.assertNotEqual(r.returncode, 0)
            self.assertIn(f"key {victim} was revoked", r.stderr)

            # An entry that is not ROLE.NAME stops it too.
            os.remove(os.path.join(keys_dir, "reviewer.trust-and-safety"))
            os.symlink(os.path.join("..data", "scorer.moderation-pipeline"), os.path.join(keys_dir, "scorer"))
            r = run()
            self.assertNotEqual(r.returncode, 0)
            self.assertIn("'scorer' is not named ROLE.NAME", r.stderr)

    @skips.needs(have_binary(), "the built pgcld")
    def test_configmap_is_a_valid_config(self):
        cfg = print_config(self.conf_text)
        self.assertEqual(cfg["db"], self.conf["db"])
        self.assertEqual(cfg["listen"], self.conf["listen"])
        self.assertEqual(cfg["auth"], "required")

    def test_non_root_read_only_no_capabilities(self):
        psc = self.pod["securityContext"]
        self.assertTrue(psc["runAsNonRoot"])
        self.assertNotEqual(psc["runAsUser"], 0)
        df = [rest for w, rest in dockerfile_instructions(read(DOCKERFILE)) if w == "USER"][-1]
        self.assertEqual(str(psc["runAsUser"]), df.split(":")[0], "runAsUser differs from the image's USER")
        for c in self.pod["containers"] + self.pod.get("initContainers", []):
            sc = c["securityContext"]
            self.assertTrue(sc.get("runAsNonRoot", psc["runAsNonRoot"]), c["name"])
            self.assertTrue(sc["readOnlyRootFilesystem"], c["name"])
            self.assertFalse(sc["allowPrivilegeEscalation"], c["name"])
            self.assertEqual(sc["capabilities"]["drop"], ["ALL"], c["name"])
            self.assertNotIn("add", sc["capabilities"], c["name"])
            for kind in ("requests", "limits"):
                self.assertIn("cpu", c["resources"][kind], c["name"])
                self.assertIn("memory", c["resources"][kind], c["name"])
        # /tmp is writable (SQLite's temporary files) although the root filesystem is not.
        self.assertIn("/tmp", {m["mountPath"] for m in self.main["volumeMounts"]})

    def test_compute_workers_fit_the_cpu_limit(self):
        limit = str(self.main["resources"]["limits"]["cpu"])
        cpus = float(limit[:-1]) / 1000 if limit.endswith("m") else float(limit)
        workers = int(self.conf["compute-workers"])
        self.assertGreater(workers, 0, "0 means every CPU of the node, not of the pod")
        self.assertLessEqual(workers, max(1, int(cpus)))

    def test_grace_period_covers_the_drain(self):
        grace = int(self.conf.get("shutdown-grace", "10"))
        pre = self.main.get("lifecycle", {}).get("preStop", {}).get("exec", {}).get("command", [])
        sleep = int(pre[-1]) if pre and pre[0].endswith("sleep") else 0
        self.assertGreaterEqual(self.pod["terminationGracePeriodSeconds"], sleep + grace + 5)


# --------------------------------------------------------------------------- Kubernetes: the fleet

FLEET = os.path.join(K8S, "fleet")
FLEET_EXAMPLES = {"postgres-cloudnativepg.yaml"}  # beside the kustomization, not in it (needs an operator)
PASSWORD_IN_URI = re.compile(r"postgres(?:ql)?://[^/@\s:]+:[^/@\s]*@")


class FleetKubernetesTest(unittest.TestCase):
    """deploy/k8s/fleet: the replicas as a Deployment on one PostgreSQL database (issue 17)."""

    @classmethod
    def setUpClass(cls):
        cls.docs, cls.by_kind = load_manifests(FLEET)
        cls.deploy = cls.by_kind["Deployment"][0]
        cls.pod = cls.deploy["spec"]["template"]["spec"]
        cls.main = [c for c in cls.pod["containers"] if c["name"] == "pgcld"][0]
        cls.job = cls.by_kind["Job"][0]
        cls.job_pod = cls.job["spec"]["template"]["spec"]
        cls.conf_text = cls.by_kind["ConfigMap"][0]["data"]["pgcld.conf"]
        cls.conf = config_values(cls.conf_text)
        cls.cnpg = cls.by_kind["Cluster"][0]

    def env(self, container, name):
        found = [e for e in container.get("env", []) if e["name"] == name]
        self.assertEqual(len(found), 1, f"{container['name']}: no env {name}")
        return found[0]

    def test_kustomization_lists_every_file_but_the_examples(self):
        kust = [d for f, d in self.docs if d["kind"] == "Kustomization"][0]
        files = {os.path.basename(p) for p in glob.glob(os.path.join(FLEET, "*.yaml"))} - {"kustomization.yaml"}
        self.assertEqual(set(kust["resources"]), files - FLEET_EXAMPLES)
        self.assertTrue(FLEET_EXAMPLES <= files)

    def test_a_deployment_without_volumes_of_its_own(self):
        self.assertNotIn("StatefulSet", self.by_kind)
        self.assertNotIn("PersistentVolumeClaim", self.by_kind)
        self.assertEqual(self.deploy["spec"]["replicas"], 3)
        for v in self.pod["volumes"]:
            self.assertTrue({"configMap", "secret", "emptyDir"} & set(v), f"volume {v['name']}: not config or scratch")
        labels = self.deploy["spec"]["template"]["metadata"]["labels"]
        self.assertEqual(self.deploy["spec"]["selector"]["matchLabels"], labels)
        for svc in self.by_kind["Service"]:
            self.assertNotEqual(svc["spec"].get("clusterIP"), "None", "no per-replica names: any replica serves all")
            for k, v in svc["spec"]["selector"].items():
                self.assertEqual(labels.get(k), v)
            ports = {p["name"] for p in self.main["ports"]}
            for p in svc["spec"]["ports"]:
                self.assertIn(p["targetPort"], ports)
        pdb = self.by_kind["PodDisruptionBudget"][0]
        self.assertEqual(pdb["spec"]["selector"]["matchLabels"], labels)
        self.assertLess(pdb["spec"]["maxUnavailable"], self.deploy["spec"]["replicas"])

    def test_writer_id_from_the_pod_name(self):
        e = self.env(self.main, "PGCLD_WRITER_ID")
        self.assertEqual(e["valueFrom"]["fieldRef"]["fieldPath"], "metadata.name")

    def test_probes(self):
        r = routes()
        self.assertEqual(self.main["readinessProbe"]["httpGet"]["path"], "/readyz")
        self.assertEqual(self.main["livenessProbe"]["httpGet"]["path"], "/healthz")
        listen_port = int(self.conf["listen"].rsplit(":", 1)[1])
        ports = {p["name"]: p["containerPort"] for p in self.main["ports"]}
        for name in ("livenessProbe", "readinessProbe", "startupProbe"):
            probe = self.main[name]
            self.assertIn(("GET", probe["httpGet"]["path"]), r, name)
            self.assertEqual(ports.get(probe["httpGet"]["port"], probe["httpGet"]["port"]), listen_port, name)

    def uri_parts(self, uri):
        m = re.fullmatch(r"postgresql://([a-z_]+)@([a-z0-9-]+):(\d+)/([a-z_]+)\?(.*)", uri)
        self.assertIsNotNone(m, uri)
        return m.groups()

    def test_the_database_uris_hold_no_password_and_agree(self):
        for f, doc in self.docs:
            self.assertIsNone(PASSWORD_IN_URI.search(yaml.safe_dump(doc)), f"a password in a URI in {f}")
        for s in self.by_kind["Secret"]:
            self.assertFalse(s.get("data"), s["metadata"]["name"])
            self.assertEqual(s.get("stringData", {}).get("password", ""), "", f"a password in {s['metadata']['name']}")
        user, host, port, db, query = self.uri_parts(self.conf["db"])
        self.assertEqual(user, "pgcld_writer")
        args = self.job_pod["containers"][0]["args"]
        self.assertEqual(args[:2], ["migrate", "--db"])
        juser, jhost, jport, jdb, jquery = self.uri_parts(args[2])
        self.assertEqual(juser, "pgcld_owner")
        self.assertEqual((jhost, jport, jdb, jquery), (host, port, db, query))
        self.assertIn("sslmode=verify-full", query)
        # The example server: CloudNativePG's read-write Service of that Cluster, its database and owner.
        self.assertEqual(host, self.cnpg["metadata"]["name"] + "-rw")
        self.assertEqual(self.cnpg["spec"]["bootstrap"]["initdb"]["database"], db)
        self.assertEqual(self.cnpg["spec"]["bootstrap"]["initdb"]["owner"], "pgcld_owner")
        self.assertEqual([r["name"] for r in self.cnpg["spec"]["managed"]["roles"]], ["pgcld_writer"])
        self.assertEqual(self.cnpg["spec"]["postgresql"]["synchronous"]["number"], 1, "a synchronous standby")
        # its CA is the Secret the sslrootcert comes from
        ca_path = re.search(r"sslrootcert=([^&]+)", query).group(1)
        for pod, c in ((self.pod, self.main), (self.job_pod, self.job_pod["containers"][0])):
            mount = [m for m in c["volumeMounts"] if m["mountPath"] == os.path.dirname(ca_path)][0]
            vol = [v for v in pod["volumes"] if v["name"] == mount["name"]][0]
            self.assertEqual(vol["secret"]["secretName"], self.cnpg["metadata"]["name"] + "-ca")
            self.assertEqual(vol["secret"]["items"], [{"key": "ca.crt", "path": os.path.basename(ca_path)}])

    def test_each_role_password_reaches_only_its_user(self):
        secrets = {s["metadata"]["name"]: s for s in self.by_kind["Secret"]}
        for c, role, secret in ((self.main, "pgcld_writer", "pgcld-db-writer"),
                                (self.job_pod["containers"][0], "pgcld_owner", "pgcld-db-owner")):
            ref = self.env(c, "PGPASSWORD")["valueFrom"]["secretKeyRef"]
            self.assertEqual((ref["name"], ref["key"]), (secret, "password"))
            self.assertEqual(secrets[secret]["type"], "kubernetes.io/basic-auth")
            self.assertEqual(secrets[secret]["stringData"]["username"], role)
        text = yaml.safe_dump(self.deploy)
        self.assertNotIn("pgcld-db-owner", text, "the serving pods must not hold the owner's password")
        self.assertEqual(self.cnpg["spec"]["bootstrap"]["initdb"]["secret"]["name"], "pgcld-db-owner")
        self.assertEqual(self.cnpg["spec"]["managed"]["roles"][0]["passwordSecret"]["name"], "pgcld-db-writer")

    @skips.needs(have_binary(), "the built pgcld")
    def test_configmap_is_a_valid_config(self):
        cfg = print_config(self.conf_text, {"PGCLD_WRITER_ID": "pgcld-7d9c5b8f6-x2x4q"})
        self.assertEqual(cfg["db"], self.conf["db"])
        self.assertEqual(cfg["writer-id"], "pgcld-7d9c5b8f6-x2x4q", "PGCLD_WRITER_ID names no option")
        self.assertEqual(cfg["listen"], self.conf["listen"])
        self.assertEqual(cfg["auth"], "required")

    def test_migrate_job(self):
        self.assertIn(self.job_pod["restartPolicy"], ("OnFailure", "Never"))
        self.assertGreater(self.job["spec"]["backoffLimit"], 0, "the Job must outlast the database's start")
        self.assertIn("ttlSecondsAfterFinished", self.job["spec"])
        c = self.job_pod["containers"][0]
        self.assertEqual(c["image"], self.main["image"], "the schema of the image the replicas run")

    def test_non_root_read_only_no_capabilities(self):
        for pod in (self.pod, self.job_pod):
            psc = pod["securityContext"]
            self.assertTrue(psc["runAsNonRoot"])
            self.assertNotEqual(psc["runAsUser"], 0)
            self.assertFalse(pod["automountServiceAccountToken"])
            for c in pod["containers"] + pod.get("initContainers", []):
                sc = c["securityContext"]
                self.assertTrue(sc["readOnlyRootFilesystem"], c["name"])
                self.assertFalse(sc["allowPrivilegeEscalation"], c["name"])
                self.assertEqual(sc["capabilities"], {"drop": ["ALL"]}, c["name"])
                for kind in ("requests", "limits"):
                    self.assertIn("cpu", c["resources"][kind], c["name"])
                    self.assertIn("memory", c["resources"][kind], c["name"])

    def test_compute_workers_and_grace_period(self):
        limit = str(self.main["resources"]["limits"]["cpu"])
        cpus = float(limit[:-1]) / 1000 if limit.endswith("m") else float(limit)
        self.assertLessEqual(int(self.conf["compute-workers"]), max(1, int(cpus)))
        grace = int(self.conf.get("shutdown-grace", "10"))
        pre = self.main["lifecycle"]["preStop"]["exec"]["command"]
        self.assertGreaterEqual(self.pod["terminationGracePeriodSeconds"], int(pre[-1]) + grace + 5)

KSERVE = os.path.join(ROOT, "deploy", "kserve")


class KServeRuntimeTest(unittest.TestCase):
    """deploy/kserve/servingruntime.yaml (issue 19): pgcld as a KServe custom runtime speaking v2."""

    @classmethod
    def setUpClass(cls):
        cls.docs, cls.by_kind = load_manifests(KSERVE)
        cls.runtime = cls.by_kind["ServingRuntime"][0]
        cls.container = cls.runtime["spec"]["containers"][0]
        cls.env = {e["name"]: e for e in cls.container["env"]}

    def test_a_v2_runtime_for_the_pgcl_format(self):
        spec = self.runtime["spec"]
        self.assertEqual(self.runtime["apiVersion"], "serving.kserve.io/v1alpha1")
        self.assertEqual(spec["protocolVersions"], ["v2"])
        self.assertEqual([f["name"] for f in spec["supportedModelFormats"]], ["pgcl"])
        self.assertEqual(self.container["name"], "kserve-container", "KServe finds its container by this name")
        self.assertEqual(self.container["args"], ["serve"])
        statefulset = load_manifests(K8S)[1]["StatefulSet"][0]["spec"]["template"]["spec"]["containers"][0]
        self.assertEqual(self.container["image"], statefulset["image"])

    @skips.needs(have_binary(), "the built pgcld")
    def test_env_is_a_valid_config_reading_kserve_s_model_mount(self):
        values = {k: e["value"] for k, e in self.env.items() if "value" in e}
        values["PGCLD_WRITER_ID"] = "toxicity-predictor-00001-deployment-7d9c5b8f6-x2x4q"
        cfg = print_config("", {k: v for k, v in values.items() if k.startswith("PGCLD_")})
        self.assertEqual(cfg["models"], "/mnt/models", "KServe's storage initializer writes there")
        self.assertEqual(cfg["db"], values["PGCLD_DB"])
        self.assertTrue(cfg["db"].startswith("postgresql://pgcld_writer@"), "pods come and go: the fleet's store")
        self.assertEqual(cfg["writer-id"], values["PGCLD_WRITER_ID"])
        self.assertEqual(cfg["auth"], "required")
        self.assertEqual(self.env["PGCLD_WRITER_ID"]["valueFrom"]["fieldRef"]["fieldPath"], "metadata.name")
        self.assertEqual(self.env["PGPASSWORD"]["valueFrom"]["secretKeyRef"]["name"], "pgcld-db-writer")
        self.assertIsNone(PASSWORD_IN_URI.search(cfg["db"]))
        port = int(cfg["listen"].rsplit(":", 1)[1])
        self.assertEqual([p["containerPort"] for p in self.container["ports"]], [port])
        self.assertEqual(self.runtime["metadata"]["annotations"]["prometheus.kserve.io/port"], str(port))
        r = routes()
        for name in ("livenessProbe", "readinessProbe"):
            probe = self.container[name]["httpGet"]
            self.assertIn(("GET", probe["path"]), r, name)
            self.assertEqual(probe["port"], port, name)
        self.assertIn(("GET", self.runtime["metadata"]["annotations"]["prometheus.kserve.io/path"]), r)
        mounts = {m["mountPath"] for m in self.container["volumeMounts"]}
        self.assertIn("/etc/pgcld-db-ca", mounts, "the URI's sslrootcert")
        self.assertTrue(self.container["securityContext"]["readOnlyRootFilesystem"])
        self.assertEqual(self.container["securityContext"]["capabilities"]["drop"], ["ALL"])


if __name__ == "__main__":
    unittest.main(verbosity=2)
