"""The servers the throughput bench measures (bench.py): pgcld and the FastAPI + PyTorch peer as
processes started and stopped by PID, their readiness and /metrics, and the shell helpers."""

import http.client
import os
import re
import signal
import socket
import subprocess
import sys
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), os.pardir, os.pardir))
PY = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable


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
