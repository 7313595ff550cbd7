"""The store as a dimension (issue 17): POST /v1/score against one pgcld on SQLite, one pgcld on
PostgreSQL, and two pgcld replicas on one PostgreSQL database, on this machine, in one run.

Called by bench/store.sh, which builds the daemon (build-bench/, release), the load generator and the
forward micro-benchmark first. Needs root for the throw-away PostgreSQL cluster
(tests/integration/pg_cluster.py: pg_createcluster, a real PostgreSQL 15 from Debian's packages).

    bench.py --loadgen BIN --forward BIN --pgcld BIN --audit-write BIN [--quick] [--out DIR]
             [--results-md FILE] [--report-only JSON]

Steps: the machine and the daemon's commit; the machine's limits, as bench/run.sh shows them: the
in-process forward rate (bench/throughput/forward, 2 threads) and the audit writer alone on each
store (build-bench/bench/audit_write, 64 rows per job, 4 threads: a fresh SQLite file with
synchronous=FULL, a fresh database of the cluster); then for each store the cells (base64 bodies,
batch 64 and batch 1, two connection counts each, closed loop, the load generator's connections
alternating between the replicas), every store on a fresh database, the servers stopped by PID after
their cells; after the PostgreSQL runs, GET /v1/audit/verify on a replica (every chain intact).
Server CPU is pgcld's processes plus every process of the PostgreSQL cluster. Writes OUT/store.json
and, unless --quick, the section "## Issue 17: the store as a dimension" of --results-md (replaced
when there, else inserted above the other sections; the other sections are kept).
"""

import argparse
import datetime
import json
import os
import shutil
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, os.pardir, "throughput"))
sys.path.insert(0, os.path.join(HERE, os.pardir, os.pardir, "tests", "integration"))

import measure  # noqa: E402  (bench/throughput: the load generator's cells, the machine, the commit)
import report  # noqa: E402  (bench/throughput: fmt, write_section)
from servers import ROOT, PY, log, run, sh, http_get, metrics, descendants, pgcld_server  # noqa: E402

SECTION = "## Issue 17: the store as a dimension"
FULL = {"cells": [(64, 4), (64, 16), (1, 16), (1, 64)], "warmup": 1.0, "duration": 3.0, "min_responses": 20,
        "max_duration": 6.0, "forward_seconds": 1.0, "aw_rows_sqlite": 40000, "aw_rows_pg": 20000}
QUICK = {"cells": [(64, 4), (1, 16)], "warmup": 0.5, "duration": 1.0, "min_responses": 5,
         "max_duration": 2.0, "forward_seconds": 0.3, "aw_rows_sqlite": 4096, "aw_rows_pg": 2048}
STORES = ("sqlite", "pg-1", "pg-2")


def pg_pids(cluster):
    """The postmaster of the cluster and every process below it (checkpointer, WAL writer, backends)."""
    with open(f"/var/lib/postgresql/15/{cluster.name}/postmaster.pid") as f:
        return descendants(int(f.readline()))


def pg_settings(uri):
    import psycopg2
    conn = psycopg2.connect(uri)
    try:
        cur = conn.cursor()
        out = {}
        for name in ("server_version", "fsync", "synchronous_commit", "synchronous_standby_names", "wal_sync_method",
                     "shared_buffers", "max_wal_size"):
            cur.execute(f"SHOW {name}")
            out[name] = cur.fetchone()[0]
        return out
    finally:
        conn.close()


def audit_write(args, cfg, db, rows, writer_id=None):
    cmd = [args.audit_write, "--db", db, "--rows", str(rows), "--batch", "64", "--threads", "4"]
    if writer_id:
        cmd += ["--writer-id", writer_id]
    return json.loads(run(cmd, timeout=300).strip().splitlines()[-1])


def cell(args, cfg, servers, pids, work, batch, conns, label):
    """One closed-loop cell over every server of `servers` (connection i → server i mod n)."""
    bodies = [os.path.join(work, "bodies", f"b64-B{batch}-{k}.json") for k in range(4)]
    waited, busy = measure.wait_quiet(max_wait=10.0)
    m0 = [metrics(s.port) for s in servers]
    cmd = [args.loadgen, "run", "--connections", str(conns), "--items", str(batch), "--warmup", str(cfg["warmup"]),
           "--duration", str(cfg["duration"]), "--min-responses", str(cfg["min_responses"]),
           "--max-duration", str(cfg["max_duration"]), "--drain", "60", "--label", label]
    for s in servers:
        cmd += ["--port", str(s.port)]
    for p in pids:
        cmd += ["--pid", str(p)]
    for b in bodies:
        cmd += ["--body", b]
    r = json.loads(run(cmd, timeout=120))
    stages = [measure.stage_means(a, b) for a, b in zip(m0, [metrics(s.port) for s in servers])]
    n = sum(s.get("requests", 0) for s in stages)
    r["stages_ms"] = {k: sum(s.get(k, 0) * s.get("requests", 0) for s in stages) / n
                      for k in ("queue", "compute", "audit", "total")} if n else {}
    r.update(batch=batch, quiet_wait_s=round(waited, 1), busy_before=round(busy, 2))
    log(f"{label}: {r['emb_s']:.0f} decisions/s, p50 {r['lat_ms']['p50']:.2f} ms, p99 {r['lat_ms']['p99']:.2f} ms, "
        f"commit {r['stages_ms'].get('audit', 0):.2f} ms, server {r['server_cores']:.2f} cores, other "
        f"{r.get('other_cores', 0):.2f} cores" + (f", ERRORS {r['errors']} non-2xx {r['non2xx']}"
                                                  if r["errors"] or r["non2xx"] else ""))
    return r


def run_store(args, cfg, store, work, models, cluster):
    """Starts the servers of one store on a fresh database, runs the cells, stops them."""
    servers, extra_pids, out = [], [], {"store": store, "cells": []}
    try:
        if store == "sqlite":
            servers.append(pgcld_server(args, work, models, name="pgcld-sqlite", binary=args.pgcld).start())
        else:
            uri = cluster.new_database()
            out["db"] = uri
            n = 1 if store == "pg-1" else 2
            for i in range(n):
                name = f"pgcld-{store}-{'ab'[i]}"
                servers.append(pgcld_server(args, work, models, name=name, binary=args.pgcld,
                                            extra=["--db", uri, "--writer-id", name]).start())
            extra_pids = pg_pids(cluster)
        pids = [p for s in servers for p in s.pids] + extra_pids
        for batch, conns in cfg["cells"]:
            out["cells"].append(cell(args, cfg, servers, pids, work, batch, conns, f"{store} b64 B={batch} c={conns}"))
        if store != "sqlite":
            status, body = http_get(servers[-1].port, "/v1/audit/verify", timeout=120)
            out["verify"] = {"status": status, **(json.loads(body) if status == 200 else {"body": body[:300].decode()})}
            log(f"{store}: verify {status} intact={out['verify'].get('intact')}")
    finally:
        for s in servers:
            s.stop()
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--loadgen")
    ap.add_argument("--forward")
    ap.add_argument("--pgcld")
    ap.add_argument("--audit-write")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--stores", default=",".join(STORES), help=f"a subset of {','.join(STORES)} (the report needs sqlite)")
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "results"))
    ap.add_argument("--results-md", default=os.path.join(ROOT, "bench", "RESULTS.md"))
    ap.add_argument("--report-only", metavar="JSON", help="rewrite the Markdown from a saved store.json")
    args = ap.parse_args()
    if args.report_only:
        res = json.load(open(args.report_only))
        report.write_section(args.results_md, markdown(res), SECTION, new_at_top=True)
        print(markdown(res))
        return
    for name in ("loadgen", "forward", "pgcld", "audit_write"):
        if not getattr(args, name):
            ap.error(f"--{name.replace('_', '-')} is required")

    import pg_cluster
    if not pg_cluster.AVAILABLE or not pg_cluster.HAVE_PSYCOPG2:
        sys.exit("bench/store: PostgreSQL 15 and psycopg2 are needed (deploy/install-deps.sh --test installs them)")
    stores = [x for x in args.stores.split(",") if x]
    if not stores or set(stores) - set(STORES):
        ap.error(f"--stores: a subset of {','.join(STORES)}")
    cfg = QUICK if args.quick else FULL
    measure.QUIET_BUDGET[0] = 30.0  # a shared machine: wait at most this long for quiet, in all
    out_dir = os.path.join(args.out, "quick") if args.quick else args.out
    os.makedirs(out_dir, exist_ok=True)
    t_start = time.monotonic()
    work = tempfile.mkdtemp(prefix="pgcld-bench-store-")
    res = {"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"), "quick": args.quick,
           "config": {k: v for k, v in cfg.items()}, "machine": measure.machine(), "daemon": measure.daemon_commit(),
           "binary": os.path.relpath(args.pgcld, ROOT), "stores": []}
    res["machine"]["packages"]["postgresql-15"] = sh("dpkg-query -W -f='${Version}' postgresql-15")
    res["machine"]["packages"]["libpq5"] = sh("dpkg-query -W -f='${Version}' libpq5")
    cluster = None
    try:
        models = os.path.join(work, "models")
        os.makedirs(models)
        shutil.copytree(os.path.join(ROOT, "models", "toxicity"), os.path.join(models, "toxicity"))
        run([PY, os.path.join(ROOT, "bench", "throughput", "make_bodies.py"), os.path.join(work, "bodies"),
             "--batches", "1,64"])
        log("a throw-away PostgreSQL cluster")
        cluster = pg_cluster.PgCluster()
        res["postgresql"] = pg_settings(cluster.uri())

        log("limits: the in-process forward rate, the audit writer alone on each store")
        measure.wait_quiet(max_wait=10.0)
        fwd = json.loads(run([args.forward, "--model", os.path.join(models, "toxicity", "1"), "--batches", "1,64",
                              "--threads", "2", "--seconds", str(cfg["forward_seconds"])]))
        res["forward"] = [{"batch": r["batch"], "threads": r["threads"], "emb_s": r["forward_emb_s"]}
                          for r in fwd["rows"]]
        res["audit_write"] = {"sqlite": audit_write(args, cfg, os.path.join(work, "audit-write.db"),
                                                    cfg["aw_rows_sqlite"])}
        if any(x.startswith("pg") for x in stores):
            res["audit_write"]["pg"] = audit_write(args, cfg, cluster.new_database(), cfg["aw_rows_pg"],
                                                   writer_id="audit-write")
        log("audit writer alone: " + ", ".join(f"{k} {v['rows_per_s']:.0f} rows/s" for k, v in res["audit_write"].items()))

        for store in stores:
            log(f"store {store}")
            res["stores"].append(run_store(args, cfg, store, work, models, cluster))
    finally:
        if cluster:
            cluster.drop()
        shutil.rmtree(work, ignore_errors=True)
    res["seconds"] = round(time.monotonic() - t_start, 1)
    path = os.path.join(out_dir, "store.json")
    with open(path, "w") as f:
        json.dump(res, f, indent=1)
    log(f"wrote {path} ({res['seconds']} s)")
    text = markdown(res)
    if not args.quick:
        report.write_section(args.results_md, text, SECTION, new_at_top=True)
    print(text)


# --------------------------------------------------------------------------- report


def markdown(res):
    m, d = res["machine"], res["daemon"]
    pg = res.get("postgresql", {})
    fwd = {r["batch"]: r["emb_s"] for r in res.get("forward", [])}
    aw = res.get("audit_write", {})
    others = [c.get("other_cores", 0) for s in res["stores"] for c in s["cells"]]
    lines = [SECTION, "",
             "POST /v1/score (base64 bodies, batch 64 and batch 1) against one pgcld on SQLite, one pgcld on "
             "PostgreSQL and two pgcld replicas on one PostgreSQL database, on this machine, in one run.", "",
             f"- **Command:** `bench/store.sh` (as root: it makes a throw-away PostgreSQL cluster with "
             f"`tests/integration/pg_cluster.py`); run {res['date']}, {res['seconds']:.0f} s in all; raw figures in "
             f"`bench/results/store.json`.",
             f"- **Daemon:** commit `{d['head']}`" + (f" + {len(d['changed'])} uncommitted file(s)" if d["changed"] else
                                                      " (clean in core/, server/, migrations/)")
             + f", `{res['binary']}`; `--synchronous FULL --auth off --log-level warn`, every other option at its "
             "default (`--store-inputs float16`, chain encoding 2); one model (toxicity, binary).",
             f"- **Machine:** {m['cpus']} vCPUs ({m['cpu']}; {m['hypervisor'] or 'bare'}), {m['mem_gib']} GiB, "
             f"{m['os']}, kernel {m['kernel']}, {m['filesystem']} on a virtual disk; SQLite "
             f"{m['packages'].get('libsqlite3-0')}, postgresql-15 {m['packages'].get('postgresql-15')}, libpq5 "
             f"{m['packages'].get('libpq5')}.",
             f"- **PostgreSQL:** a cluster of Debian's postgresql-15 on the same disk and the same cores, "
             f"`fsync = {pg.get('fsync')}`, `synchronous_commit = {pg.get('synchronous_commit')}`, no standby "
             f"(`synchronous_standby_names = '{pg.get('synchronous_standby_names', '')}'`), `wal_sync_method = "
             f"{pg.get('wal_sync_method')}`, `shared_buffers = {pg.get('shared_buffers')}`, over TCP on the loopback; a "
             "fresh database per store. A synchronous standby on another machine would add its round trip and its "
             "fsync to every commit (docs/scaling.md, \"Durability\").",
             "- **Everything shares the 2 cores:** the load generator, the daemons and PostgreSQL. Two replicas "
             "here do not add cores: this measures what the store costs, not how a fleet scales out (replicas on "
             "their own machines add forward-pass capacity; the commits stay one database's, docs/scaling.md, "
             "\"Fleet order\").",
             f"- **Shared machine:** 5 other agents' builds and tests ran on these cores at times during this "
             f"run. Before each cell the bench waits (at most 10 s, 30 s in all) for the cores to be idle and the "
             f"load generator measures the CPU other processes used during the window: mean "
             f"{(sum(others) / len(others) if others else 0):.2f} cores, at most {max(others or [0]):.2f} (the "
             "last column). Figures are indicative; compare the stores within this run, not with other sections.",
             "- **Method:** closed loop, each connection sends its next request when the previous answer is read; "
             f"{res['config']['warmup']:g} s warm-up then a {res['config']['duration']:g} s window; connection i goes "
             "to replica i mod n. Latency: request sent → answer read. Commit: pgcld's own mean `audit` stage per "
             "request (from `/metrics`: waiting for the group commit and the commit itself). Server cores: pgcld's "
             "processes and every PostgreSQL process (`--pid`).",
             "", "### The machine's limits", "",
             "| limit | batch 1 | batch 64 |", "|---|---:|---:|",
             f"| in-process forward rate (`bench/throughput/forward`, 2 threads), emb/s | {report.fmt(fwd.get(1))} | "
             f"{report.fmt(fwd.get(64))} |", ""]
    if aw:
        lines += ["| audit writer alone (`build-bench/bench/audit_write --rows N --batch 64 --threads 4`, no HTTP, "
                  "no forward pass) | decisions/s | writer-side CPU µs per decision |", "|---|---:|---:|"]
        for key, label in (("sqlite", "SQLite, a fresh file, synchronous=FULL"),
                           ("pg", "PostgreSQL, a fresh database (the server's own CPU not counted)")):
            a = aw.get(key)
            if a:
                lines.append(f"| {label} | {report.fmt(a['rows_per_s'])} | {a['cpu_us_per_row']:.1f} |")
        lines.append("")
    lines += ["### Decisions per second and latency", "",
              "| store | batch | conns | decisions/s | req/s | p50 ms | p99 ms | commit ms | server cores | vs SQLite "
              "| other processes, cores |", "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    base = {(c["batch"], c["connections"]): c["emb_s"] for s in res["stores"] if s["store"] == "sqlite"
            for c in s["cells"]}
    names = {"sqlite": "SQLite, 1 pgcld", "pg-1": "PostgreSQL, 1 pgcld", "pg-2": "PostgreSQL, 2 pgcld"}
    for batch in sorted({c["batch"] for s in res["stores"] for c in s["cells"]}, reverse=True):
        for s in res["stores"]:
            for c in [c for c in s["cells"] if c["batch"] == batch]:
                b = base.get((batch, c["connections"]))
                errs = f" ({c['errors'] + c['non2xx']} errors)" if c["errors"] or c["non2xx"] else ""
                lines.append(f"| {names[s['store']]} | {batch} | {c['connections']} | {report.fmt(c['emb_s'])}{errs} | "
                             f"{report.fmt(c['req_s'], 1)} | {c['lat_ms']['p50']:.2f} | {c['lat_ms']['p99']:.2f} | "
                             f"{c['stages_ms'].get('audit', 0):.2f} | {c['server_cores']:.2f} | "
                             f"{(c['emb_s'] / b) if b else 0:.2f}× | {c.get('other_cores', 0):.2f} |")
    lines.append("")
    ver = [(names[s["store"]], s.get("verify", {})) for s in res["stores"] if s["store"] != "sqlite"]
    if ver:
        lines.append("After each PostgreSQL run, `GET /v1/audit/verify` on a replica: " + "; ".join(
            f"{n}: {v.get('status')} intact={v.get('intact')}" for n, v in ver) + ".")
        lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
