#!/usr/bin/python3
"""A/B of two bench/audit_write binaries on the write path (issue 28: the log's write cost).

    bench/log_write_ab.py --a OLD/bench/audit_write --b NEW/bench/audit_write [--rounds 5]
                          [--rows 20000] [--batch 64] [--threads 4] [--store-inputs none] [--pg 1]

Runs A and B interleaved (A, B, A, B, ...) on a fresh SQLite file each run (synchronous NORMAL, no
disk check: the CPU side) and, with --pg 1, on a fresh database each run of one throw-away
PostgreSQL cluster (tests/integration/pg_cluster.py; as root). Prints one JSON line per run and
then, per store, the medians of rows/s and writer-side CPU µs per row for A and B. The machine may
be shared: interleaving and medians keep a neighbour's burst from favouring one side.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))


def run_one(binary, db, args, pg):
    cmd = [binary, "--db", db, "--rows", str(args.rows), "--batch", str(args.batch), "--threads",
           str(args.threads), "--store-inputs", args.store_inputs]
    if pg:
        cmd += ["--writer-id", "audit-write"]
    else:
        cmd += ["--synchronous", "normal", "--disk-check", "0"]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    line = [l for l in out.splitlines() if l.startswith("{")][-1]
    result = json.loads(line)
    if result.get("failures"):
        raise SystemExit(f"{binary}: {result['failures']} failures")
    return result


def summarize(store, runs):
    for side in ("A", "B"):
        rs = [r["rows_per_s"] for s, r in runs if s == side]
        cpu = [r["cpu_us_per_row"] for s, r in runs if s == side]
        print(json.dumps({"store": store, "side": side, "runs": len(rs), "median_rows_per_s": statistics.median(rs),
                          "median_cpu_us_per_row": statistics.median(cpu), "rows_per_s": rs, "cpu_us_per_row": cpu}))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--a", required=True)
    p.add_argument("--b", required=True)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--rows", type=int, default=20000)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--threads", type=int, default=4)
    p.add_argument("--store-inputs", default="none")
    p.add_argument("--pg", type=int, default=0)
    p.add_argument("--sqlite", type=int, default=1)
    args = p.parse_args()
    sides = (("A", args.a), ("B", args.b))
    if args.sqlite:
        runs = []
        with tempfile.TemporaryDirectory() as tmp:
            for i in range(args.rounds):
                for side, binary in sides:
                    r = run_one(binary, os.path.join(tmp, f"{side}{i}.db"), args, False)
                    print(json.dumps({"store": "sqlite", "side": side, "round": i, **r}), flush=True)
                    runs.append((side, r))
        summarize("sqlite", runs)
    if args.pg:
        import pg_cluster
        runs = []
        with pg_cluster.PgCluster() as cluster:
            for i in range(args.rounds):
                for side, binary in sides:
                    r = run_one(binary, cluster.new_database(), args, True)
                    print(json.dumps({"store": "postgresql", "side": side, "round": i, **r}), flush=True)
                    runs.append((side, r))
        summarize("postgresql", runs)


if __name__ == "__main__":
    main()
