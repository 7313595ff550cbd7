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
import json
import os
import shutil
import subprocess
import tempfile
import time

# The parts of the bench, in modules beside this file: plan.py (what is measured), servers.py
# (the processes), measure.py (the measurements), report.py (the Markdown and bench/RESULTS.md).
from plan import FULL, DIAG, QUICK
from servers import ROOT, PY, log, run, sh, pgcld_server, peer_server
from measure import (
    loadgen, bodies_for, wait_quiet, matrix, forward_rates, gpu_forward, ready_runs, ready_times, profile,
    profile_forward, smaps_summary, machine, daemon_commit, parse_forward_rates, audit_write_rates)
from report import SECTION, markdown, write_section


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
        wait_quiet()
        res["parse_forward"] = parse_forward_rates(args, cfg, models, work)
        log("audit writer alone")
        wait_quiet()
        res["audit_write"] = audit_write_rates(args, cfg, work)
        json.dump({k: res[k] for k in ("parse_forward", "audit_write")},
                  open(os.path.join(out_dir, "in_process.json"), "w"), indent=1)

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
