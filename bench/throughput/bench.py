"""Throughput bench (issue 6): pgcld against the FastAPI + PyTorch peer, on one machine, loopback.

Called by bench/run.sh, which builds build-bench/ (release), the load generator and the forward
micro-benchmark first. Standard library only.

    bench.py --loadgen BIN --forward BIN --pgcld BIN [--quick] [--out DIR] [--results-md FILE]

Steps: machine and daemon commit; in-process forward and SGEMM rates (forward); start to ready
(loadgen ready); the matrix (batch x encoding x connections, closed loop) against the peer with 1
and 2 uvicorn workers and against pgcld; the open-loop latency comparison at the peer's highest
sustainable batch-1 rate; a perf profile of pgcld under batch-64 JSON load. Every server serves
the same three-model repository (toxicity, emotions and a copy of toxicity) and writes a fresh
SQLite audit database with synchronous=FULL. Writes OUT/*.json and, unless --quick, the section
"## Throughput (issue 6)" of --results-md (other sections are kept).
"""

import argparse
import datetime
import hashlib
import http.client
import json
import os
import platform
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), os.pardir, os.pardir))
SECTION = "## Throughput (issue 6)"
NOISY = 0.2  # cores used by other processes during a window above which a cell is marked as disturbed
PY = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable

FULL = {
    "batches": [1, 8, 64, 256], "encodings": ["json", "b64"],
    "conns": {1: [1, 4, 16, 64], 8: [1, 4, 16, 64], 64: [1, 4, 16, 64], 256: [1, 4, 16]},
    "warmup": 1.0, "duration": 3.0, "min_responses": 20, "max_duration": 8.0,
    "peers": [1, 2], "ladder": [0.5, 0.7, 0.85], "ladder_duration": 4.0,
    "forward_seconds": 0.6, "ready_runs": 5, "profile_seconds": 5.0,
    "diag_cells": [("json", 64, 4), ("b64", 64, 4), ("b64", 64, 16), ("json", 1, 16)],
    "cpu_only_cells": [("json", 64, 16), ("b64", 64, 16), ("json", 256, 16), ("b64", 256, 16)],
}
# Diagnostic variants of pgcld: options that change what the audit log does (on cfg["diag_cells"]),
# and a small request-body memory budget on the cells that hold the most body memory (its own cells).
MEMORY_CELLS = [("json", 64, 64), ("json", 256, 16), ("b64", 256, 16)]
SMALL_BODY_MEMORY = 8 << 20
DIAG = [("--store-inputs none", ["--store-inputs", "none"], None),
        ("--store-inputs none --synchronous NORMAL", ["--store-inputs", "none", "--synchronous", "NORMAL"], None),
        (f"--max-body-memory {SMALL_BODY_MEMORY}", ["--max-body-memory", str(SMALL_BODY_MEMORY)], MEMORY_CELLS)]
QUICK = {
    "batches": [1, 64], "encodings": ["json", "b64"],
    "conns": {1: [1, 16], 64: [4]},
    "warmup": 0.5, "duration": 1.5, "min_responses": 10, "max_duration": 4.0,
    "peers": [1], "ladder": [0.7], "ladder_duration": 2.0,
    "forward_seconds": 0.2, "ready_runs": 2, "profile_seconds": 0,
    "diag_cells": [], "cpu_only_cells": [],
}


def log(msg):
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def run(cmd, **kw):
    return subprocess.run(cmd, check=True, capture_output=True, text=True, **kw).stdout


def sh(cmd):
    try:
        return subprocess.run(cmd, shell=True, capture_output=True, text=True, timeout=30).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http_get(port, path, timeout=2.0):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request("GET", path)
        r = conn.getresponse()
        return r.status, r.read()
    finally:
        conn.close()


def wait_ready(port, proc, timeout=90.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with status {proc.returncode} before it was ready")
        try:
            if http_get(port, "/readyz")[0] == 200:
                return
        except OSError:
            pass
        time.sleep(0.05)
    raise RuntimeError(f"server on port {port} not ready within {timeout} s")


def descendants(pid):
    """pid and every process below it (uvicorn's workers), from /proc."""
    children = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
                children.setdefault(ppid, []).append(int(d))
            except (OSError, ValueError, IndexError):
                pass
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo += children.get(p, [])
    return out


def stop(proc, timeout=30.0):
    """SIGTERM the server we started, then its process group if it does not go."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    return proc.returncode


def metrics(port):
    """pgcld's per-stage duration sums and counts, and the batch-size sum, from /metrics."""
    out = {}
    try:
        text = http_get(port, "/metrics")[1].decode()
    except OSError:
        return out
    for m in re.finditer(r'^pgcld_request_duration_seconds_(sum|count)\{stage="(\w+)"\} (\S+)$', text, re.M):
        out[f"{m.group(2)}_{m.group(1)}"] = float(m.group(3))
    return out


# --------------------------------------------------------------------------- servers

class Server:
    def __init__(self, name, cmd, port, env=None, log_path=None, port_file=None):
        self.name, self.cmd, self.port, self.env, self.log_path, self.port_file = name, cmd, port, env, log_path, port_file
        self.proc = None

    def start(self):
        env = dict(os.environ)
        env.update(self.env or {})
        with open(self.log_path, "ab") as logf:
            self.proc = subprocess.Popen(self.cmd, stdin=subprocess.DEVNULL, stdout=logf, stderr=logf, env=env,
                                         cwd=ROOT, start_new_session=True)
        if self.port_file:
            deadline = time.monotonic() + 30
            while not (os.path.exists(self.port_file) and open(self.port_file).read().endswith("\n")):
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"{self.name} did not start; see {self.log_path}")
                time.sleep(0.02)
            self.port = int(open(self.port_file).read())
        wait_ready(self.port, self.proc)
        time.sleep(0.5)  # uvicorn workers: let every worker finish its start
        self.pids = descendants(self.proc.pid)
        log(f"{self.name} ready on port {self.port} (pids {self.pids})")
        return self

    def stop(self):
        if self.proc:
            rc = stop(self.proc)
            log(f"{self.name} stopped (exit status {rc})")
            self.proc = None


def pgcld_server(args, work, models, name="pgcld", extra=(), binary=None):
    port_file = os.path.join(work, f"{name.replace(' ', '_')}.port")
    db = os.path.join(work, f"{name.replace(' ', '_')}.db")
    opts = {"--listen": "127.0.0.1:0", "--port-file": port_file, "--models": models, "--db": db,
            "--synchronous": "FULL", "--auth": "off", "--log-level": "warn"}
    extra = list(extra)
    for i in range(0, len(extra), 2):
        opts[extra[i]] = extra[i + 1]
    cmd = [binary or args.pgcld, "serve"] + [x for kv in opts.items() for x in kv]
    return Server(name, cmd, 0, log_path=os.path.join(work, f"{name.replace(' ', '_')}.log"), port_file=port_file)


def peer_server(work, models, workers):
    port = free_port()
    name = f"peer-{workers}w"
    env = {"PEER_MODELS": models, "PEER_DB": os.path.join(work, f"{name}.db"), "PEER_MODE": "loop"}
    if workers > 1:
        env["OPENBLAS_NUM_THREADS"] = "1"  # one BLAS thread per worker; a single worker keeps OpenBLAS's default (all cores)
    cmd = [os.path.join(ROOT, "bench", "peer", "run.sh"), "--port", str(port), "--workers", str(workers)]
    return Server(name, cmd, port, env=env, log_path=os.path.join(work, f"{name}.log"))


# --------------------------------------------------------------------------- load

def loadgen(args, cfg, server, bodies, batch, conns, label, rate=None, duration=None):
    if rate:
        wait_quiet()
    cmd = [args.loadgen, "run", "--port", str(server.port), "--connections", str(conns), "--items", str(batch),
           "--warmup", str(cfg["warmup"]), "--duration", str(duration or cfg["duration"]),
           "--min-responses", str(cfg["min_responses"] if rate is None else 0),
           "--max-duration", str(cfg["max_duration"] if rate is None else (duration or cfg["duration"])),
           "--drain", "60", "--label", label]
    if rate:
        cmd += ["--rate", f"{rate:.1f}"]
    for p in server.pids:
        cmd += ["--pid", str(p)]
    for b in bodies:
        cmd += ["--body", b]
    return json.loads(run(cmd))


def bodies_for(work, enc, batch):
    return [os.path.join(work, "bodies", f"{enc}-B{batch}-{k}.json") for k in range(4)]


def machine_busy(interval=0.3):
    """Cores busy machine-wide over interval seconds (/proc/stat)."""
    def sample():
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:9]]
        return v[0] + v[1] + v[2] + v[5] + v[6]
    a = sample()
    time.sleep(interval)
    return (sample() - a) / os.sysconf("SC_CLK_TCK") / interval


QUIET_BUDGET = [150.0]  # seconds of waiting for a quiet machine left to the whole run


def wait_quiet(max_wait=15.0, threshold=0.25):
    """Waits (up to max_wait s, and QUIET_BUDGET in all) until other processes leave the cores idle; the machine
    may be shared with other sessions' builds and tests."""
    t0 = time.monotonic()
    while True:
        busy = machine_busy()
        waited = time.monotonic() - t0
        if busy < threshold or waited >= min(max_wait, QUIET_BUDGET[0]):
            QUIET_BUDGET[0] = max(0.0, QUIET_BUDGET[0] - waited)
            if waited > 1:
                log(f"waited {waited:.1f} s for the machine to be quiet (now {busy:.2f} cores busy)")
            return waited, busy


def matrix(args, cfg, server, work, spec=None):
    cells = []
    is_pgcld = server.name.startswith("pgcld")
    if spec is None:
        spec = [(enc, batch, conns) for batch in cfg["batches"] for enc in cfg["encodings"]
                for conns in cfg["conns"][batch]]
    for enc, batch, conns in spec:
        label = f"{server.name} {enc} B={batch} c={conns}"
        waited, busy = wait_quiet()
        m0 = metrics(server.port) if is_pgcld else None
        r = loadgen(args, cfg, server, bodies_for(work, enc, batch), batch, conns, label)
        r.update(server=server.name, encoding=enc, batch=batch, quiet_wait_s=round(waited, 1),
                 busy_before=round(busy, 2))
        if is_pgcld:
            m1 = metrics(server.port)
            r["stages_ms"] = stage_means(m0, m1)
        cells.append(r)
        log(f"{label}: {r['emb_s']:.0f} emb/s, {r['req_s']:.1f} req/s, p50 {r['lat_ms']['p50']:.2f} ms, "
            f"p99 {r['lat_ms']['p99']:.2f} ms, server {r['server_cores']:.2f} cores, "
            f"peak RSS {r['server_rss_peak_kb'] / 1024:.0f} MiB, client {r['client_cores']:.2f} cores"
            + (f", errors {r['errors']} non-2xx {r['non2xx']}" if r["errors"] or r["non2xx"] else "")
            + (f", OTHER PROCESSES {r['other_cores']:.2f} cores" if r.get("other_cores", 0) > NOISY else ""))
    return cells


def stage_means(m0, m1):
    out = {}
    n = m1.get("total_count", 0) - m0.get("total_count", 0)
    if n <= 0:
        return out
    for stage in ("queue", "compute", "audit", "total"):
        out[stage] = (m1.get(f"{stage}_sum", 0) - m0.get(f"{stage}_sum", 0)) / n * 1e3
    out["other"] = out["total"] - out["queue"] - out["compute"] - out["audit"]
    out["requests"] = n
    return out


def best(cells, server, enc, batch, key="emb_s"):
    c = [x for x in cells if x["server"] == server and x["encoding"] == enc and x["batch"] == batch and x["requests"]]
    return max(c, key=lambda x: x[key]) if c else None


# --------------------------------------------------------------------------- other measurements

def forward_rates(args, cfg, models):
    out = run([args.forward, "--model", os.path.join(models, "toxicity", "1"), "--batches",
               ",".join(str(b) for b in cfg["batches"]), "--threads", "1,2", "--seconds", str(cfg["forward_seconds"])],
              env=dict(os.environ))
    return json.loads(out)


def gpu_forward(args, cfg, models):
    """The daemon's own micro-benchmark (bench/gpu_forward.c, built by meson), CPU backend, when the build has it."""
    exe = os.path.join(os.path.dirname(os.path.dirname(args.pgcld)), "bench", "gpu_forward")
    if not os.access(exe, os.X_OK):
        return None
    rows = []
    for threads in (1, 2):
        try:
            text = run([exe, "--model", os.path.join(models, "toxicity", "1"), "--backends", "cpu", "--batches",
                        ",".join(str(b) for b in cfg["batches"]), "--threads", str(threads), "--seconds",
                        str(cfg["forward_seconds"])], timeout=120)
        except (OSError, subprocess.SubprocessError) as e:
            return {"error": str(e)}
        for m in re.finditer(r"batch\s+(\d+)\s+threads\s+(\d+):\s+([\d.]+) rows/s\s+([\d.]+) ms/call", text):
            rows.append({"batch": int(m.group(1)), "threads": int(m.group(2)), "emb_s": float(m.group(3)),
                         "ms_per_call": float(m.group(4))})
    return {"exe": os.path.relpath(exe, ROOT), "rows": rows}


def ready_runs(args, cfg, work, models, binary, tag):
    out = []
    for i in range(cfg["ready_runs"]):
        db = os.path.join(work, f"ready-{tag}-{i}.db")
        port = free_port()
        out.append(json.loads(run([args.loadgen, "ready", "--port", str(port), "--log",
                                   os.path.join(work, "ready.log"), "--", binary, "serve", "--listen",
                                   f"127.0.0.1:{port}", "--models", models, "--db", db, "--synchronous", "FULL",
                                   "--auth", "off", "--log-level", "warn"])))
    return out


def ready_times(args, cfg, work, models):
    res = {"pgcld": [], "pgcld_1model": [], "peer": []}
    one = os.path.join(work, "models-1")
    if not os.path.isdir(one):
        os.makedirs(one)
        shutil.copytree(os.path.join(models, "toxicity"), os.path.join(one, "toxicity"))
    res["pgcld"] = ready_runs(args, cfg, work, models, args.pgcld, "3")
    res["pgcld_1model"] = ready_runs(args, cfg, work, one, args.pgcld, "1")
    port = free_port()
    env = dict(os.environ, PEER_MODELS=models, PEER_DB=os.path.join(work, "ready-peer.db"), PEER_MODE="loop")
    r = json.loads(run([args.loadgen, "ready", "--port", str(port), "--timeout", "120", "--log",
                        os.path.join(work, "ready-peer.log"), "--", os.path.join(ROOT, "bench", "peer", "run.sh"),
                        "--port", str(port), "--workers", "1"], env=env))
    res["peer"].append(r)
    return res


INCLUSIVE_LIBS = {"json_dumps", "json_loads", "sqlite3_step", "sqlite3_exec", "crypto_hash_sha256", "cblas_sgemm",
                  "__vsnprintf_internal", "MHD_run_from_select"}


def thread_cpu(pid):
    """{tid: (comm, utime + stime seconds)} for every thread of pid."""
    out, tick = {}, os.sysconf("SC_CLK_TCK")
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                head, rest = f.read().rsplit(")", 1)
            comm = head.split("(", 1)[1]
            fields = rest.split()
            out[tid] = (comm, (int(fields[11]) + int(fields[12])) / tick)
        except (OSError, ValueError, IndexError):
            pass
    return out


def perf_tables(data, extra=()):
    """Self-time top symbols, inclusive shares of pgcld's functions, and shares by object from a perf.data."""
    out = {}
    rep = subprocess.run(["perf", "report", "-i", data, "--no-children", "--sort", "dso,symbol", "--stdio", "-g", "none",
                          "--percent-limit", "0.7"], capture_output=True, text=True)
    top = []
    for line in rep.stdout.splitlines():
        m = re.match(r"\s*([\d.]+)%\s+(\S+)\s+\[[.k]\]\s+(.*)$", line)
        if m:
            sym = re.sub(r"(\s+-)+\s*$", "", m.group(3)).strip()
            top.append({"percent": float(m.group(1)), "dso": m.group(2), "symbol": sym})
    out["top"] = top[:25]
    # Inclusive (self + callees) share of pgcld's own functions and of the library entry points it calls.
    rep = subprocess.run(["perf", "report", "-i", data, "--children", "--sort", "dso,symbol", "--stdio", "-g", "none",
                          "--percent-limit", "2"], capture_output=True, text=True)
    incl = []
    for line in rep.stdout.splitlines():
        m = re.match(r"\s*([\d.]+)%\s+([\d.]+)%\s+(\S+)\s+\[[.k]\]\s+(.*)$", line)
        if not m:
            continue
        sym = re.sub(r"(\s+-)+\s*$", "", m.group(4)).strip()
        if (m.group(3) in ("pgcld", "forward") or sym in INCLUSIVE_LIBS) and not sym.startswith("0x"):
            incl.append({"percent": float(m.group(1)), "self": float(m.group(2)), "dso": m.group(3), "symbol": sym})
    out["inclusive"] = incl[:30]
    rep = subprocess.run(["perf", "report", "-i", data, "--no-children", "--sort", "dso", "--stdio", "-g", "none"],
                         capture_output=True, text=True)
    out["by_dso"] = [{"percent": float(m.group(1)), "dso": m.group(2)} for m in
                     re.finditer(r"^\s*([\d.]+)%\s+(\S+)\s*$", rep.stdout, re.M)][:12]
    return out


def profile(args, cfg, server, work, enc="json", batch=64, conns=4, stat=True):
    """perf stat (optional) and perf record with DWARF call graphs on pgcld while a closed-loop load runs."""
    if not cfg["profile_seconds"] or not shutil.which("perf"):
        return None
    out = {"encoding": enc, "batch": batch, "connections": conns}
    secs = cfg["profile_seconds"]
    lg = [args.loadgen, "run", "--port", str(server.port), "--connections", str(conns), "--items", str(batch),
          "--warmup", "0.5", "--duration", str(secs + 1.5), "--drain", "60", "--label", "profile"] + \
        sum((["--body", b] for b in bodies_for(work, enc, batch)), [])
    pid = str(server.pids[0])
    for kind in (("stat", "record") if stat else ("record",)):
        wait_quiet()
        load = subprocess.Popen(lg, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        time.sleep(1.0)
        data = os.path.join(work, "perf.data")
        if kind == "stat":
            t0 = thread_cpu(pid)
            p = subprocess.run(["perf", "stat", "-x", ",", "-e",
                                "task-clock,context-switches,cpu-migrations,page-faults,cycles,instructions",
                                "-p", pid, "--", "sleep", str(secs)], capture_output=True, text=True)
            stats = {}
            for line in p.stderr.splitlines():
                f = line.split(",")
                if len(f) >= 3 and f[2]:
                    stats[f[2]] = f[0]
            out["stat"] = stats
            t1 = thread_cpu(pid)
            per = {}
            for tid, (comm, cpu) in t1.items():
                if tid in t0:
                    per[comm] = per.get(comm, 0.0) + (cpu - t0[tid][1]) / secs
            out["threads_cores"] = dict(sorted(per.items(), key=lambda kv: -kv[1]))
        else:
            subprocess.run(["perf", "record", "--call-graph", "dwarf,16384", "-F", "299", "-o", data, "-p", pid,
                            "--", "sleep", str(secs)], capture_output=True, text=True)
        load_result = json.loads(load.communicate()[0] or "{}")
        out[f"load_{kind}"] = {k: load_result.get(k) for k in ("req_s", "emb_s", "lat_ms", "other_cores")}
        if kind == "record" and os.path.exists(data):
            out.update(perf_tables(data))
            os.unlink(data)
    return out


def profile_forward(args, cfg, models, work, batch=64):
    """perf record of the forward micro-benchmark alone: where the forward pass spends what SGEMM does not."""
    if not cfg["profile_seconds"] or not shutil.which("perf"):
        return None
    data = os.path.join(work, "perf-forward.data")
    wait_quiet()
    subprocess.run(["perf", "record", "-F", "999", "-o", data, "--", args.forward, "--model",
                    os.path.join(models, "toxicity", "1"), "--batches", str(batch), "--threads", "1", "--seconds",
                    "2", "--only", "forward"], capture_output=True, text=True)
    if not os.path.exists(data):
        return None
    out = perf_tables(data)
    os.unlink(data)
    out["batch"] = batch
    return out


def smaps_summary(pid, n=6):
    """The largest mappings of a process by RSS (kB), grouped by file ('[anon]' for anonymous memory)."""
    by = {}
    name = "[anon]"
    try:
        with open(f"/proc/{pid}/smaps") as f:
            for line in f:
                if re.match(r"^[0-9a-f]+-[0-9a-f]+ ", line):
                    parts = line.split(None, 5)
                    name = parts[5].strip() if len(parts) > 5 and parts[5].strip() else "[anon]"
                elif line.startswith("Rss:"):
                    by[name] = by.get(name, 0) + int(line.split()[1])
    except OSError:
        return []
    return [{"mapping": k, "rss_kb": v} for k, v in sorted(by.items(), key=lambda kv: -kv[1])[:n]]


# --------------------------------------------------------------------------- machine

def machine():
    cpu = sh("grep -m1 'model name' /proc/cpuinfo | cut -d: -f2").strip()
    flags = sh("grep -m1 '^flags' /proc/cpuinfo")
    isa = [f for f in ("avx512f", "avx2", "fma") if f" {f}" in flags]
    def pkg(p):
        return sh(f"dpkg-query -W -f='${{Version}}' {p} 2>/dev/null")
    return {
        "cpus": os.cpu_count(), "cpu": cpu, "isa": isa,
        "hypervisor": sh("lscpu | sed -n 's/^Hypervisor vendor: *//p'"),
        "mem_gib": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1),
        "kernel": platform.release(), "os": sh(". /etc/os-release && echo $PRETTY_NAME"),
        "filesystem": sh("df -T /tmp | awk 'NR==2 {print $2}'"),
        "packages": {p: pkg(p) for p in ("libopenblas0-pthread", "libsqlite3-0", "libmicrohttpd12", "libjansson4",
                                         "python3-torch", "python3-fastapi", "python3-uvicorn", "python3-uvloop",
                                         "python3-httptools", "python3-numpy")},
        "python": platform.python_version(),
    }


def daemon_commit():
    head = sh(f"git -C {ROOT} rev-parse --short HEAD")
    porcelain = subprocess.run(["git", "-C", ROOT, "status", "--porcelain", "--", "core", "server", "gpu", "migrations",
                                "meson.build", "meson_options.txt"], capture_output=True, text=True).stdout
    changed = [l for l in porcelain.splitlines() if l.strip()]
    diff = sh(f"git -C {ROOT} diff HEAD -- core server gpu migrations meson.build meson_options.txt")
    return {"head": head, "changed": changed,
            "diff_sha256": hashlib.sha256(diff.encode()).hexdigest()[:12] if diff else None}


# --------------------------------------------------------------------------- report

def fmt(x, nd=0):
    if x is None:
        return "–"
    if isinstance(x, str):
        return x
    return f"{x:,.{nd}f}"


def mark(c):
    return " †" if c and c.get("other_cores", 0) > NOISY else ""


def lat3(c):
    if not c or not c["requests"]:
        return "–"
    l = c["lat_ms"]
    def f(v):
        return f"{v:.1f}" if v < 100 else f"{v:.0f}"
    return f"{f(l['p50'])} / {f(l['p99'])} / {f(l['p999'])}"


def stages(c):
    st = c and c.get("stages_ms")
    if not st:
        return "–"
    return f"{st['other']:.1f} / {st['compute']:.1f} / {st['audit']:.1f}"


def ratio(a, b):
    return None if not a or not b else a / b


def evaluate(res):
    """The issue's targets: (name, figure text, met or None when not measurable)."""
    cells = res["cells"]
    peers = [p for p in ("peer-1w", "peer-2w") if any(c["server"] == p for c in cells)]
    def peer_best(enc, batch, key="emb_s"):
        cs = [best(cells, p, enc, batch, key) for p in peers]
        cs = [c for c in cs if c]
        return max(cs, key=lambda c: c[key]) if cs else None
    rows = []
    fwd = {(r["batch"], r["threads"]): r for r in res.get("forward", {}).get("rows", [])}
    for enc, what in (("json", "JSON"),):
        pg, pe = best(cells, "pgcld", enc, 64), peer_best(enc, 64)
        r = ratio(pg and pg["emb_s"], pe and pe["emb_s"])
        rows.append(("batch 64 " + what + ": pgcld ≥ 10× peer emb/s",
                     f"{fmt(pg and pg['emb_s'])} vs {fmt(pe and pe['emb_s'])} ({pe and pe['server']}) emb/s = "
                     f"**{fmt(r, 1)}×**", r is not None and r >= 10))
    for batch in (64, 256):
        if batch not in res["config"]["batches"]:
            continue
        pg, pe = best(cells, "pgcld", "b64", batch), peer_best("b64", batch)
        r = ratio(pg and pg["emb_s"], pe and pe["emb_s"])
        rows.append((f"batch {batch} base64: pgcld ≥ 10× peer emb/s",
                     f"{fmt(pg and pg['emb_s'])} vs {fmt(pe and pe['emb_s'])} ({pe and pe['server']}) emb/s = "
                     f"**{fmt(r, 1)}×**", r is not None and r >= 10))
        f2 = fwd.get((batch, 2))
        r2 = ratio(pg and pg["emb_s"], f2 and f2["forward_emb_s"])
        rows.append((f"batch {batch} base64: ≥ 60 % of the in-process forward rate",
                     f"{fmt(pg and pg['emb_s'])} vs {fmt(f2 and f2['forward_emb_s'])} emb/s (pgcl_forward, 2 threads) = "
                     f"**{fmt(r2 and 100 * r2)} %**", r2 is not None and r2 >= 0.6))
    for enc, what in (("json", "JSON"), ("b64", "base64")):
        pg, pe = best(cells, "pgcld", enc, 1, "req_s"), peer_best(enc, 1, "req_s")
        r = ratio(pg and pg["req_s"], pe and pe["req_s"])
        rows.append((f"batch 1 {what}: pgcld ≥ 20× peer req/s",
                     f"{fmt(pg and pg['req_s'])} vs {fmt(pe and pe['req_s'])} ({pe and pe['server']}) req/s = "
                     f"**{fmt(r, 1)}×**", r is not None and r >= 20))
    lad = res.get("latency")
    if lad and lad.get("pgcld"):
        pp, gp = lad["peer_at_rate"]["lat_ms"]["p99"], lad["pgcld"]["lat_ms"]["p99"]
        r = ratio(gp, pp)
        rows.append(("batch 1 at the peer's highest sustainable rate: pgcld p99 ≤ 1/10 of the peer's",
                     f"{fmt(lad['rate'])} req/s: pgcld p99 {gp:.2f} ms vs peer p99 {pp:.2f} ms = **{fmt(r and 1 / r, 1)}× lower**",
                     r is not None and r <= 0.1))
    for batch in (64, 256):
        f1 = fwd.get((batch, 1))
        if f1:
            rows.append((f"forward pass ≥ 70 % of the OpenBLAS SGEMM rate (batch {batch}, 1 thread)",
                         f"{fmt(f1['forward_emb_s'])} vs {fmt(f1['sgemm_emb_s'])} emb/s (SGEMM {batch}×1024×"
                         f"{res['forward']['n_sgemm']}) = **{fmt(100 * f1['forward_over_sgemm'])} %**",
                         f1["forward_over_sgemm"] >= 0.7))
    pg_cells = [c for c in cells if c["server"] == "pgcld"]
    if pg_cells:
        worst = max(pg_cells, key=lambda c: c["server_rss_peak_kb"])
        ready_hwm = max(r["hwm_kb"] for r in res["ready"]["pgcld"]) if res.get("ready") else None
        mb = worst["server_rss_peak_kb"] / 1024
        cpu_only = [c for c in res.get("diagnostics", []) if "CPU-only" in c["server"]]
        extra = ""
        if cpu_only:
            w2 = max(c["server_rss_peak_kb"] for c in cpu_only) / 1024
            r2 = max(r["hwm_kb"] for r in res["ready"].get("pgcld_cpu_only", [{"hwm_kb": 0}])) / 1024
            extra = (f"; the build without CUDA: {r2:.1f} MiB at ready, {w2:.1f} MiB at most in its "
                     f"{len(cpu_only)} cells (16 connections, batch 64 and 256)")
        small = [c for c in res.get("diagnostics", []) if "--max-body-memory" in c["server"]]
        if small:
            w3 = max(c["server_rss_peak_kb"] for c in small) / 1024
            ratios = []
            for c in small:
                base = next((x for x in pg_cells if x["encoding"] == c["encoding"] and x["batch"] == c["batch"]
                             and x["connections"] == c["connections"]), None)
                if base and base["emb_s"]:
                    ratios.append(c["emb_s"] / base["emb_s"])
            extra += (f"; with `--max-body-memory {SMALL_BODY_MEMORY}` (default 32 MiB): **{w3:.1f} MiB** at most in "
                      f"its {len(small)} cells, the most body-hungry ones, at "
                      + (f"{min(ratios):.2f}–{max(ratios):.2f}× the default's emb/s" if ratios else "–"))
        rows.append(("peak RSS with three models loaded ≤ 64 MB",
                     f"**{mb:.1f} MiB** under load (worst cell: {worst['encoding']} B={worst['batch']} "
                     f"c={worst['connections']}); {fmt(ready_hwm and ready_hwm / 1024, 1)} MiB at ready{extra}",
                     mb <= 64))
    if res.get("ready"):
        rs = sorted(r["ready_ms"] for r in res["ready"]["pgcld"])
        med = rs[len(rs) // 2]
        rows.append(("start to ready ≤ 200 ms (exec to /readyz 200, three models, fresh database)",
                     f"**{med:.0f} ms** median of {len(rs)} (max {rs[-1]:.0f} ms)", rs[-1] <= 200))
    return rows


def noise_summary(cells):
    o = [c.get("other_cores", 0) for c in cells if c.get("other_cores", -1) >= 0]
    if not o:
        return "not measured."
    noisy = sum(1 for x in o if x > NOISY)
    return (f"mean {sum(o) / len(o):.2f} cores over {len(o)} cells, {noisy} cell(s) above {NOISY}"
            + (f" (at most {max(o):.2f})" if noisy else "") + ".")


def markdown(res):
    out = []
    m, d, cfg = res["machine"], res["daemon"], res["config"]
    cells = res["cells"]
    peers = [p for p in ("peer-1w", "peer-2w") if any(c["server"] == p for c in cells)]
    dirty = (f" plus uncommitted changes to {len(d['changed'])} daemon file(s) in the working tree "
             f"(diff sha256 {d['diff_sha256']}: " + ", ".join(l[3:] for l in d["changed"]) + ")") if d["changed"] else \
        " (working tree clean in core/, server/, gpu/, migrations/)"
    out += [SECTION, "",
            "POST /v1/score throughput and latency of pgcld against a FastAPI + PyTorch peer written the way a competent "
            "team would in an afternoon (`bench/peer/`), same checkpoints, same request and answer, same decision rows "
            "committed to SQLite before the answer.", "",
            f"- **Daemon measured:** commit `{d['head']}`{dirty}; `build-bench/` (`--buildtype=release`); "
            f"run {res['date']}, whole bench {res['elapsed_s'] / 60:.1f} min.",
            f"- **Machine:** {m['cpus']} vCPUs ({m['cpu']}, {', '.join(m['isa'])}; {m['hypervisor'] or 'bare metal'} "
            f"guest), {m['mem_gib']} GiB RAM, {m['os']}, kernel {m['kernel']}, {m['filesystem']} on a virtual disk; "
            f"OpenBLAS {m['packages']['libopenblas0-pthread']} (kernel {res.get('forward', {}).get('kernel', '?')}), "
            f"SQLite {m['packages']['libsqlite3-0']}, libmicrohttpd {m['packages']['libmicrohttpd12']}; peer: Python "
            f"{m['python']}, torch {m['packages']['python3-torch']}, FastAPI {m['packages']['python3-fastapi']}, "
            f"uvicorn {m['packages']['python3-uvicorn']} + uvloop {m['packages']['python3-uvloop']} + httptools "
            f"{m['packages']['python3-httptools']}.",
            "- **The load generator shares the 2 cores** with the server (`bench/throughput/loadgen`: one thread, "
            "epoll, keep-alive, pre-built requests; its own CPU use is in the JSON, typically 1–5 % of one core), so "
            "every HTTP figure is what the server gets out of about 1.9 cores.",
            "- **Commands:** `bench/install-deps.sh` (as root, once) then `bench/run.sh` from the repository root "
            "(`bench/run.sh --quick` for a smoke check in under 3 minutes). It builds pgcld with "
            "`deploy/build.sh build-bench --buildtype=release`, the load generator and the forward micro-benchmark, "
            "then runs `bench/throughput/bench.py`; raw figures in `bench/results/*.json`.",
            "- **Servers:** `pgcld serve --models M --db FRESH.db --synchronous FULL --auth off` (all other options at "
            "their defaults: compute workers = CPUs, 1 BLAS thread each, `--device auto`, `--store-inputs float16`, "
            "hash chain" + ("; this build found the CUDA toolkit at build time and links cuBLAS, but the machine has "
                            "no GPU, so it serves on the CPU" if d.get("cuda_linked") else "") + "); the "
            "peer as `bench/peer/run.sh --workers 1` (uvloop, httptools, handler in the event loop, OpenBLAS with 2 "
            "threads) and `--workers 2` (one OpenBLAS thread per worker), `PEER_MODE=loop`. M holds three models: "
            "toxicity/1, emotions/1 and a copy of toxicity; requests name none, so toxicity (binary) scores them.",
            f"- **Method:** closed loop, each connection sends its next request when the previous answer is read; "
            f"{cfg['warmup']:g} s warm-up, then a {cfg['duration']:g} s window (extended to at least "
            f"{cfg['min_responses']} answers, at most {cfg['max_duration']:g} s); bodies pre-built, 4 variants per "
            f"cell. JSON bodies are `json.dumps(z.tolist())` of float32 embeddings (about 22 KB per 1024-d embedding, "
            f"17 significant digits as Python sends them); base64 bodies about 5.5 KB. Latency: request sent → answer "
            f"read. Server CPU: utime + stime of the server's processes over the window; peak RSS: VmHWM, reset "
            f"before each cell (summed over uvicorn's processes).",
            f"- **Shared machine:** other sessions run builds and test suites on these cores at times. Before each "
            f"cell the bench waits (up to 15 s) until the machine is idle, and the load generator measures the CPU "
            f"other processes used during the window (`other_cores` in the JSON): " + noise_summary(cells) +
            f" Cells where it exceeded {NOISY} cores are marked †.", ""]

    out += ["### Targets", "", "| target | measured | |", "|---|---|---|"]
    for name, text, met in evaluate(res):
        out.append(f"| {name} | {text} | {'met' if met else 'MISSED'} |")
    out.append("")

    out += ["### Best over connection counts", "",
            "Each server's best embeddings/s over the connection counts tried, with the connections it took and the "
            "latency (p50 / p99 / p99.9 ms) at that point; ratio = pgcld over the better peer.", "",
            "| body | batch | pgcld emb/s | req/s | conns | p50 / p99 / p99.9 ms | CPU µs/emb | "
            + " | ".join(f"{p} emb/s | conns | p50 / p99 / p99.9 ms | CPU µs/emb" for p in peers) + " | ratio |",
            "|---|---:|---:|---:|---:|---:|---:|" + "---:|---:|---:|---:|" * len(peers) + "---:|"]
    for enc in cfg["encodings"]:
        for batch in cfg["batches"]:
            g = best(cells, "pgcld", enc, batch)
            row = [("JSON" if enc == "json" else "base64"), str(batch)]
            row += [fmt(g and g["emb_s"]), fmt(g and g["req_s"], 1), fmt(g and str(g["connections"])), lat3(g),
                    fmt(g and g["server_cpu_us_per_emb"], 1)]
            bp = None
            for p in peers:
                c = best(cells, p, enc, batch)
                row += [fmt(c and c["emb_s"]), fmt(c and str(c["connections"])), lat3(c),
                        fmt(c and c["server_cpu_us_per_emb"], 1)]
                if c and (bp is None or c["emb_s"] > bp["emb_s"]):
                    bp = c
            r = ratio(g and g["emb_s"], bp and bp["emb_s"])
            row.append(f"**{fmt(r, 1)}×**" if r else "–")
            out.append("| " + " | ".join(row) + " |")
    out.append("")

    out += ["### Full matrix", "",
            "emb/s and p50 / p99 / p99.9 ms for every cell; pgcld's server CPU (cores busy), peak RSS and its own "
            "stage means per request from `/metrics` (stages: the rest = receive + parse + build the answer, then "
            "forward, then audit commit, in ms; waiting for a compute slot is left out); ratio = pgcld emb/s over "
            "the better peer in that cell.", "",
            "| body | batch | conns | pgcld emb/s | pgcld latency ms | cores | RSS MiB | stages ms | "
            + " | ".join(f"{p} emb/s | {p} latency ms | RSS MiB" for p in peers) + " | ratio |",
            "|---|---:|---:|---:|---:|---:|---:|---:|" + "---:|---:|---:|" * len(peers) + "---:|"]
    for enc in cfg["encodings"]:
        for batch in cfg["batches"]:
            for conns in cfg["conns"][str(batch)]:
                def cell(server):
                    for c in cells:
                        if (c["server"], c["encoding"], c["batch"], c["connections"]) == (server, enc, batch, conns):
                            return c
                    return None
                g = cell("pgcld")
                row = [("JSON" if enc == "json" else "base64"), str(batch), str(conns),
                       fmt(g and g["emb_s"]) + mark(g), lat3(g),
                       fmt(g and g["server_cores"], 2), fmt(g and g["server_rss_peak_kb"] / 1024, 1), stages(g)]
                bp = None
                for p in peers:
                    c = cell(p)
                    row += [fmt(c and c["emb_s"]) + mark(c), lat3(c), fmt(c and c["server_rss_peak_kb"] / 1024)]
                    if c and (bp is None or c["emb_s"] > bp["emb_s"]):
                        bp = c
                r = ratio(g and g["emb_s"], bp and bp["emb_s"])
                row.append(f"{fmt(r, 1)}×" if r else "–")
                errs = sum(c["errors"] + c["non2xx"] for c in (g, *[cell(p) for p in peers]) if c)
                if errs:
                    row[-1] += f" ({errs} errors)"
                out.append("| " + " | ".join(row) + " |")
    out.append("")

    lad = res.get("latency")
    if lad:
        out += ["### Latency at the peer's highest sustainable rate (batch 1, JSON)", "",
                f"Open loop (requests due at a fixed rate whether or not earlier ones were answered; latency counted "
                f"from the time a request was due, so queueing is included), up to 64 connections, "
                f"{cfg['ladder_duration']:g} s windows. The peer's maximum is its best closed-loop batch-1 JSON "
                f"rate ({fmt(lad['peer_max'], 0)} req/s, {lad['peer']}); it is offered fractions of that, and the "
                f"highest rate it sustains (answers ≥ 97 % of the offered rate, no errors) is offered to pgcld.", "",
                "| server | offered req/s | answered req/s | p50 ms | p99 ms | p99.9 ms | max ms | sustained | other "
                "processes, cores |", "|---|---:|---:|---:|---:|---:|---:|---|---:|"]
        for r in lad["ladder"]:
            out.append(f"| {lad['peer']} | {r['rate_offered']:,.0f} | {r['req_s']:,.0f} | {r['lat_ms']['p50']:.2f} | "
                       f"{r['lat_ms']['p99']:.2f} | {r['lat_ms']['p999']:.2f} | {r['lat_ms']['max']:.2f} | "
                       f"{'yes' if r['sustained'] else 'no'} | {r.get('other_cores', 0):.2f} |")
        if lad.get("pgcld"):
            r = lad["pgcld"]
            out.append(f"| pgcld | {r['rate_offered']:,.0f} | {r['req_s']:,.0f} | {r['lat_ms']['p50']:.2f} | "
                       f"{r['lat_ms']['p99']:.2f} | {r['lat_ms']['p999']:.2f} | {r['lat_ms']['max']:.2f} | "
                       f"{'yes' if r['sustained'] else 'no'} | {r.get('other_cores', 0):.2f} |")
        out.append("")

    diag = res.get("diagnostics")
    if diag:
        out += ["### Diagnostics: what pgcld's audit log and its body memory cost", "",
                "The same cells against pgcld started with options that change the audit work (fresh database each), "
                f"with a small request-body budget (`--max-body-memory {SMALL_BODY_MEMORY}`, on the cells that hold "
                "the most body memory), and against a build without CUDA where the default build links it; ratio = "
                "emb/s over the default pgcld in the same cell.", "",
                "| pgcld | body | batch | conns | emb/s | p50 / p99 / p99.9 ms | cores | RSS MiB | stages ms | "
                "vs default |", "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
        for c in diag:
            base = next((x for x in cells if x["server"] == "pgcld" and x["encoding"] == c["encoding"]
                         and x["batch"] == c["batch"] and x["connections"] == c["connections"]), None)
            r = ratio(c["emb_s"], base and base["emb_s"])
            out.append(f"| {c['server'][6:]} | {'JSON' if c['encoding'] == 'json' else 'base64'} | {c['batch']} | "
                       f"{c['connections']} | {fmt(c['emb_s'])} | {lat3(c)} | {c['server_cores']:.2f} | "
                       f"{c['server_rss_peak_kb'] / 1024:.1f} | {stages(c)} | {fmt(r, 2) + '×' if r else '–'} |")
        out.append("")

    fwd = res.get("forward")
    if fwd:
        out += ["### In-process forward rate and the OpenBLAS SGEMM limit", "",
                "`bench/throughput/forward` (no HTTP, no JSON, no audit): `pgcl_forward` from `build-bench/core/"
                "libpgclcore.a` on the toxicity checkpoint, each thread with its own scratch, next to raw "
                f"`cblas_sgemm` for the first-layer shape batch × 1024 × {fwd['n_sgemm']} (the reference named in "
                f"the issue; pgcld's own first GEMM is batch × 1024 × {fwd['n_first']}: layer 1's 512 outputs plus "
                f"K = 2 folded attention scores) and for the whole GEMM chain of one forward pass ({fwd['n_first']}, "
                "256, 64 outputs). OpenBLAS kernel " f"{fwd['kernel']} (best for this CPU: {fwd['best_kernel']}), "
                "one BLAS thread per call as pgcld runs it." + (
                    "" if (fwd.get("gpu_forward") or {}).get("rows") else
                    " The daemon's own forward micro-benchmark (bench/gpu_forward) was not in this build, so "
                    "these figures stand in for it."), "",
                "| batch | threads | pgcl_forward emb/s | SGEMM ×578 emb/s | GFLOP/s | forward / SGEMM | GEMM chain emb/s "
                "| forward / chain | gpu_forward cpu emb/s |", "|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
        gf = {(r["batch"], r["threads"]): r for r in ((fwd.get("gpu_forward") or {}).get("rows") or [])}
        for r in fwd["rows"]:
            g2 = gf.get((r["batch"], r["threads"]))
            out.append(f"| {r['batch']} | {r['threads']} | {r['forward_emb_s']:,} | {r['sgemm_emb_s']:,} | "
                       f"{r['sgemm_gflops']:.1f} | {100 * r['forward_over_sgemm']:.0f} % | {r['chain_emb_s']:,} | "
                       f"{100 * r['forward_over_chain']:.0f} % | {fmt(g2 and g2['emb_s'])} |")
        out.append("")
        rows = {(r["batch"], r["threads"]): r for r in fwd["rows"]}
        b = max(r["batch"] for r in fwd["rows"])
        if (b, 1) in rows and (b, 2) in rows and rows[(b, 1)]["sgemm_emb_s"]:
            scale = rows[(b, 2)]["sgemm_emb_s"] / rows[(b, 1)]["sgemm_emb_s"]
            out += [f"Two threads give {scale:.2f}× one thread's SGEMM rate at batch {b}"
                    + (": the two vCPUs did not behave as two independent cores during this run (SMT siblings on the "
                       "host, or another process on the machine)" if scale < 1.5 else "") +
                    ". The base64 target compares pgcld's HTTP rate with the 2-thread forward rate (pgcld runs one "
                    "compute worker per CPU).", ""]
        if gf:
            out += [f"The last column is the daemon's own micro-benchmark (`{fwd['gpu_forward']['exe']} --backends cpu`, "
                    "the CPU backend through core/model/backend.h, which calls the same `pgcl_forward`), run with the same "
                    "batches and threads as a cross-check.", ""]

    rd = res.get("ready")
    if rd:
        def summ(rs):
            t = sorted(r["ready_ms"] for r in rs)
            return f"{t[len(t) // 2]:.0f} ms (min {t[0]:.0f}, max {t[-1]:.0f}; n = {len(t)})", \
                f"{max(r['hwm_kb'] for r in rs) / 1024:.1f} MiB"
        out += ["### Start to ready and memory", "",
                "Time from fork + exec to the first `GET /readyz` answering 200 (polled every millisecond by "
                "`loadgen ready`), fresh audit database each time (the schema is created at start), and the "
                "process's VmHWM at that moment.", "",
                "| process | models | start to ready, median | VmHWM at ready |", "|---|---|---:|---:|"]
        for key, what, n in (("pgcld", "pgcld", "toxicity, emotions, toxicity copy"),
                             ("pgcld_1model", "pgcld", "toxicity"),
                             ("pgcld_cpu_only", "pgcld, build with -Dcuda=disabled", "toxicity, emotions, toxicity copy"),
                             ("peer", "peer, 1 uvicorn worker", "toxicity, emotions, toxicity copy")):
            if rd.get(key):
                a, b = summ(rd[key])
                out.append(f"| {what} | {n} | {a} | {b} |")
        pg_cells = [c for c in cells if c["server"] == "pgcld"]
        if pg_cells:
            out += ["", "Peak RSS of pgcld per cell is in the full matrix; over all cells:"]
            by_conns = {}
            for c in pg_cells:
                by_conns[c["connections"]] = max(by_conns.get(c["connections"], 0), c["server_rss_peak_kb"])
            out.append(", ".join(f"{k} connection{'s' if k > 1 else ''}: {v / 1024:.0f} MiB" for k, v in
                                 sorted(by_conns.items())) + " (peak over every batch size and encoding).")
        out.append("")

    prof = res.get("profile")
    b64cells = [c for c in cells if c["server"] == "pgcld" and c["batch"] == 64 and c.get("stages_ms")]
    if b64cells or prof:
        out += ["### Where pgcld's time goes (profile notes for the missed targets)", ""]
    if b64cells:
        f64 = {(r["batch"], r["threads"]): r for r in res.get("forward", {}).get("rows", [])}.get((64, 1))
        out += ["pgcld's own stage histograms at batch 64 (`/metrics`, mean ms per request over each cell): *rest* = "
                "receive the body + parse and validate + build the answer (serialising and sending it come after and "
                "are not in any stage); *queue* = wait for a compute slot; *forward*; *audit* = until the rows are "
                "committed (the group-commit writer: queueing behind other requests' rows, SQLite inserts, hash "
                "chain, fsync). Server CPU per embedding for comparison"
                + (f" with the forward pass alone: {1e6 / f64['forward_emb_s']:.0f} µs per embedding on one core."
                   if f64 else "."), "",
                "| body | conns | emb/s | total ms | rest | queue | forward | audit | audit share | server cores | "
                "CPU µs/emb |", "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
        for c in sorted(b64cells, key=lambda c: (c["encoding"] != "json", c["connections"])):
            st = c["stages_ms"]
            out.append(f"| {'JSON' if c['encoding'] == 'json' else 'base64'} | {c['connections']} | {fmt(c['emb_s'])} | "
                       f"{st['total']:.1f} | {st['other']:.1f} | {st['queue']:.1f} | {st['compute']:.1f} | "
                       f"{st['audit']:.1f} | {100 * st['audit'] / st['total']:.0f} % | {c['server_cores']:.2f} | "
                       f"{c['server_cpu_us_per_emb']:.0f} |")
        out.append("")
    if prof:
        out += [f"**perf, batch 64 JSON, 4 connections** ({res['config']['profile_seconds']:g} s while the load "
                "generator drives pgcld"
                + (f", {prof['load_record']['emb_s']:,.0f} emb/s during the recording" if prof.get("load_record") else "")
                + ").", ""]
        st = prof.get("stat") or {}
        if st.get("task-clock"):
            try:
                tc = float(st["task-clock"])
                out.append(f"`perf stat -p PID`: task-clock {tc:,.0f} ms ({tc / 1000 / res['config']['profile_seconds']:.2f}"
                           f" CPUs), {st.get('context-switches', '?')} context switches, {st.get('cpu-migrations', '?')}"
                           f" migrations; cycles and instructions {st.get('cycles', '?')} in this VM.")
                out.append("")
            except ValueError:
                pass
        if prof.get("threads_cores"):
            out.append("CPU by thread name over the same seconds (cores): " +
                       ", ".join(f"`{k}` {v:.2f}" for k, v in prof["threads_cores"].items() if v >= 0.005) +
                       " (`MHD-connection`: libmicrohttpd's thread per connection, which receives, parses, builds and "
                       "sends; `pgcld`: main, compute workers and the audit writer).")
            out.append("")
        if prof.get("by_dso"):
            out.append("Samples by object: " +
                       ", ".join(f"{x['dso']} {x['percent']:.1f} %" for x in prof["by_dso"][:8]) + ".")
        out.append("")
        if prof.get("inclusive"):
            out += ["Inclusive share (the function and everything it calls; `perf record --call-graph dwarf -F 299 "
                    "-p PID`) of pgcld's functions and the library entry points they call, % of all pgcld samples:",
                    "", "| incl. % | self % | object | function |", "|---:|---:|---|---|"]
            for t in prof["inclusive"][:24]:
                out.append(f"| {t['percent']:.1f} | {t['self']:.1f} | {t['dso']} | `{t['symbol']}` |")
            out.append("")
        if prof.get("top"):
            out += ["Top symbols by self time:", "", "| self % | object | symbol |", "|---:|---|---|"]
            for t in prof["top"][:15]:
                out.append(f"| {t['percent']:.1f} | {t['dso']} | `{t['symbol']}` |")
            out.append("")
    for p in res.get("profiles_more") or []:
        if not p or not p.get("top"):
            continue
        what = f"batch {p['batch']} {'JSON' if p['encoding'] == 'json' else 'base64'}, {p['connections']} connections"
        incl = [t for t in p.get("inclusive", []) if t["symbol"] not in ("on_request", "pgcld_handle_score")][:10]
        out += [f"**perf, {what}** — inclusive: " + ", ".join(f"`{t['symbol']}` {t['percent']:.0f} %" for t in incl)
                + "; self: " + ", ".join(f"`{t['symbol']}` {t['percent']:.1f} %" for t in p["top"][:8]) + ".", ""]
    pf = res.get("profile_forward")
    if pf and pf.get("top"):
        out += [f"**perf, the forward pass alone** (`forward --only forward`, batch {pf['batch']}, one thread; the "
                "forward-vs-SGEMM target) — self: " +
                ", ".join(f"`{t['symbol']}` ({t['dso']}) {t['percent']:.1f} %" for t in pf["top"][:6]) +
                ". Everything outside the SGEMM kernels and their packing routines is pgcld's own element-wise work "
                "between GEMMs (`forward_chunk`: bias, activation, attention softmax, fusion, normalisation, head).",
                ""]
    for key, what in (("smaps_at_ready", "the default build"), ("smaps_at_ready_cpu_only", "the build without CUDA")):
        sm = res.get(key)
        if sm:
            out += [f"**Memory at ready, {what}** (largest mappings by RSS, `/proc/PID/smaps`): " +
                    ", ".join(f"{os.path.basename(x['mapping']) or x['mapping']} {x['rss_kb'] / 1024:.1f} MiB"
                              for x in sm) + ".", ""]
    if res.get("notes"):
        out += res["notes"] + [""]
    return "\n".join(out)


def write_section(path, text):
    """Replaces the section headed exactly SECTION (up to the next '## ' heading) or appends it."""
    old = open(path, encoding="utf-8").read() if os.path.exists(path) else "# Benchmark results\n"
    m = re.search("^" + re.escape(SECTION) + "[ \t]*$", old, re.M)
    start = m.start() if m else -1
    if start < 0:
        new = old.rstrip("\n") + "\n\n" + text.rstrip("\n") + "\n"
    else:
        nxt = re.search(r"^## ", old[start + len(SECTION):], re.M)
        end = start + len(SECTION) + nxt.start() if nxt else len(old)
        new = old[:start] + text.rstrip("\n") + "\n" + ("\n" + old[end:] if nxt else "")
    with open(path, "w", encoding="utf-8") as f:
        f.write(new)


# --------------------------------------------------------------------------- main

def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--loadgen", required=True)
    ap.add_argument("--forward", required=True)
    ap.add_argument("--pgcld", required=True)
    ap.add_argument("--pgcld-cpu", help="a build with -Dcuda=disabled, measured beside --pgcld when that one links CUDA")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "results"))
    ap.add_argument("--results-md", default=os.path.join(ROOT, "bench", "RESULTS.md"))
    ap.add_argument("--keep-work", action="store_true", help="keep the temporary directory (databases, logs)")
    ap.add_argument("--report-only", metavar="JSON", help="rewrite the Markdown from a saved summary.json")
    args = ap.parse_args()

    if args.report_only:
        res = json.load(open(args.report_only))
        write_section(args.results_md, markdown(res))
        print(markdown(res))
        return

    cfg = QUICK if args.quick else FULL
    out_dir = os.path.join(args.out, "quick") if args.quick else args.out
    os.makedirs(out_dir, exist_ok=True)
    t_start = time.monotonic()
    work = tempfile.mkdtemp(prefix="pgcld-bench-throughput-")
    res = {"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
           "quick": args.quick, "config": {k: v for k, v in cfg.items() if k != "conns"} |
           {"conns": {str(k): v for k, v in cfg["conns"].items()}},
           "machine": machine(), "daemon": daemon_commit(), "cells": [], "notes": []}
    res["daemon"]["cuda_linked"] = "libcudart" in sh(f"ldd {args.pgcld}")
    log(f"work directory {work}; daemon {res['daemon']['head']}"
        + (f" + {len(res['daemon']['changed'])} uncommitted file(s)" if res["daemon"]["changed"] else ""))
    servers = []
    try:
        models = os.path.join(work, "models")
        os.makedirs(models)
        for src, dst in (("toxicity", "toxicity"), ("emotions", "emotions"), ("toxicity", "toxicity_copy")):
            shutil.copytree(os.path.join(ROOT, "models", src), os.path.join(models, dst))
        run([PY, os.path.join(ROOT, "bench", "throughput", "make_bodies.py"), os.path.join(work, "bodies"),
             "--batches", ",".join(str(b) for b in cfg["batches"])])

        log("forward micro-benchmark")
        wait_quiet()
        res["forward"] = forward_rates(args, cfg, models)
        wait_quiet()
        res["gpu_forward"] = gpu_forward(args, cfg, models)
        res["forward"]["gpu_forward"] = res["gpu_forward"]
        json.dump(res["forward"], open(os.path.join(out_dir, "forward.json"), "w"), indent=1)

        log("start to ready")
        wait_quiet()
        res["ready"] = ready_times(args, cfg, work, models)
        json.dump(res["ready"], open(os.path.join(out_dir, "ready.json"), "w"), indent=1)

        for workers in cfg["peers"]:
            srv = peer_server(work, models, workers)
            servers.append(srv)
            srv.start()
            cells = matrix(args, cfg, srv, work)
            res["cells"] += cells
            json.dump(cells, open(os.path.join(out_dir, f"{srv.name}.json"), "w"), indent=1)
            srv.stop()

        # The peer's highest sustainable batch-1 rate, then pgcld at that rate.
        peer_cells = [c for c in res["cells"] if c["server"].startswith("peer") and c["batch"] == 1
                      and c["encoding"] == "json" and c["requests"]]
        lat = None
        if peer_cells:
            top = max(peer_cells, key=lambda c: c["req_s"])
            lat = {"peer": top["server"], "peer_max": top["req_s"], "ladder": []}
            srv = peer_server(work, models, int(top["server"][5]))
            servers.append(srv)
            srv.start()
            lcfg = dict(cfg, warmup=1.0)
            for frac in cfg["ladder"]:
                rate = frac * top["req_s"]
                r = loadgen(args, lcfg, srv, bodies_for(work, "json", 1), 1, 64, f"{srv.name} open {rate:.0f}/s",
                            rate=rate, duration=cfg["ladder_duration"])
                r["sustained"] = r["req_s"] >= 0.97 * rate and not r["errors"] and not r["non2xx"]
                r["fraction"] = frac
                lat["ladder"].append(r)
                log(f"{srv.name} open loop {rate:.0f}/s: answered {r['req_s']:.0f}/s, p50 {r['lat_ms']['p50']:.2f} "
                    f"p99 {r['lat_ms']['p99']:.2f} ms, sustained {r['sustained']}")
            srv.stop()
            ok = [r for r in lat["ladder"] if r["sustained"]]
            chosen = max(ok, key=lambda r: r["rate_offered"]) if ok else min(lat["ladder"], key=lambda r: r["rate_offered"])
            lat["rate"] = chosen["rate_offered"]
            lat["peer_at_rate"] = chosen
            if not ok:
                res["notes"].append(f"- The peer sustained none of the offered batch-1 rates; the lowest "
                                    f"({chosen['rate_offered']:.0f} req/s) is used for the latency comparison.")

        srv = pgcld_server(args, work, models)
        servers.append(srv)
        srv.start()
        res["smaps_at_ready"] = smaps_summary(srv.pids[0])
        cells = matrix(args, cfg, srv, work)
        res["cells"] += cells
        json.dump(cells, open(os.path.join(out_dir, "pgcld.json"), "w"), indent=1)
        if lat:
            r = loadgen(args, dict(cfg, warmup=1.0), srv, bodies_for(work, "json", 1), 1, 64,
                        f"pgcld open {lat['rate']:.0f}/s", rate=lat["rate"], duration=cfg["ladder_duration"])
            r["sustained"] = r["req_s"] >= 0.97 * lat["rate"] and not r["errors"] and not r["non2xx"]
            lat["pgcld"] = r
            log(f"pgcld open loop {lat['rate']:.0f}/s: p50 {r['lat_ms']['p50']:.2f} p99 {r['lat_ms']['p99']:.2f} ms")
            res["latency"] = lat
            json.dump(lat, open(os.path.join(out_dir, "latency.json"), "w"), indent=1)
        if cfg["profile_seconds"]:
            log("perf profiles of pgcld (batch 64 JSON, batch 64 base64, batch 1 JSON) and of the forward pass")
            try:
                res["profile"] = profile(args, cfg, srv, work)
                res["profiles_more"] = [profile(args, cfg, srv, work, "b64", 64, 4, stat=False),
                                        profile(args, cfg, srv, work, "json", 1, 16, stat=False)]
                res["profile_forward"] = profile_forward(args, cfg, models, work)
            except (OSError, ValueError, subprocess.SubprocessError) as e:
                res["notes"].append(f"- perf profile failed: {e}")
            json.dump({k: res.get(k) for k in ("profile", "profiles_more", "profile_forward")},
                      open(os.path.join(out_dir, "profile.json"), "w"), indent=1)
        srv.stop()

        for variant, extra, variant_cells in (DIAG if cfg["diag_cells"] else []):
            srv = pgcld_server(args, work, models, name=f"pgcld {variant}", extra=extra)
            servers.append(srv)
            srv.start()
            res.setdefault("diagnostics", []).extend(matrix(args, cfg, srv, work, variant_cells or cfg["diag_cells"]))
            srv.stop()
        if args.pgcld_cpu and cfg["cpu_only_cells"]:
            srv = pgcld_server(args, work, models, name="pgcld CPU-only build", binary=args.pgcld_cpu)
            servers.append(srv)
            srv.start()
            res["smaps_at_ready_cpu_only"] = smaps_summary(srv.pids[0])
            res.setdefault("diagnostics", []).extend(matrix(args, cfg, srv, work, cfg["cpu_only_cells"]))
            srv.stop()
            res["ready"]["pgcld_cpu_only"] = ready_runs(args, cfg, work, models, args.pgcld_cpu, "cpu-only")
        if res.get("diagnostics"):
            json.dump(res["diagnostics"], open(os.path.join(out_dir, "pgcld-diagnostics.json"), "w"), indent=1)
    finally:
        for s in servers:
            s.stop()
        if not args.keep_work:
            shutil.rmtree(work, ignore_errors=True)
    res["elapsed_s"] = time.monotonic() - t_start
    json.dump(res, open(os.path.join(out_dir, "summary.json"), "w"), indent=1)
    md = markdown(res)
    if not args.quick:
        write_section(args.results_md, md)
        log(f"wrote {args.results_md} section '{SECTION}' and {out_dir}/*.json")
    print(md)
    log(f"done in {res['elapsed_s'] / 60:.1f} min")


if __name__ == "__main__":
    main()
