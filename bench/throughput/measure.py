"""The measurements of the throughput bench (bench.py): the load generator's cells and the
matrix, the in-process forward and SGEMM rates, start to ready, perf profiles, memory maps, the
machine and the daemon commit measured."""

import hashlib
import json
import os
import platform
import re
import shutil
import subprocess
import time

from plan import NOISY
from servers import ROOT, log, run, sh, free_port, metrics


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


def bench_exe(args, name):
    """A micro-benchmark meson builds beside the daemon (BUILD/bench/NAME), or None."""
    exe = os.path.join(os.path.dirname(os.path.dirname(args.pgcld)), "bench", name)
    return exe if os.access(exe, os.X_OK) else None


def parse_forward_rates(args, cfg, models, work):
    """The in-process rate of fast parse + forward (bench/parse_forward.c) on the batch-64 bodies the
    HTTP cells send, 1 and 2 threads: the reference of the JSON (and base64) targets."""
    exe = bench_exe(args, "parse_forward")
    if not exe:
        return None
    bodies = [b for enc in ("json", "b64") for b in bodies_for(work, enc, 64)[:1]]
    out = run([exe, "--model", os.path.join(models, "toxicity", "1"), "--threads", "1,2",
               "--seconds", str(max(cfg["forward_seconds"], 0.5))] + [x for b in bodies for x in ("--body", b)],
              timeout=120)
    rows = json.loads(out)["rows"]
    for r in rows:
        r["encoding"] = "json" if os.path.basename(r["body"]).startswith("json") else "b64"
        r["batch"] = 64
    return {"exe": os.path.relpath(exe, ROOT), "rows": rows}


def audit_write_rates(args, cfg, work):
    """The audit writer alone (bench/audit_write.c: no HTTP, FULL, 64 rows per job, 4 client threads),
    with float16 inputs stored and without, on the same disk as the bench's databases."""
    exe = bench_exe(args, "audit_write")
    if not exe:
        return None
    out = []
    for inputs in ("f16", "none"):
        text = run([exe, "--db", os.path.join(work, f"audit-write-{inputs}.db"), "--rows", str(cfg["audit_rows"]),
                    "--store-inputs", inputs], timeout=300)
        out.append(json.loads(text.strip().splitlines()[-1]))
    return out


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
