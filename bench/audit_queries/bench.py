#!/usr/bin/env python3
"""Latency of the reviewer reads on a large audit database (driven by run.sh).

For each filter of GET /v1/decisions: 200 pages of limit 100, as 20 walks of 10 pages that each
start at a random point (a cursor made for a random seq) and follow next_cursor; filters that match
a handful of rows (item_id, request_id, trace_id) are 200 single-page requests for random values instead.
Reports p50 / p99 / max latency (client side, keep-alive loopback HTTP) and rows per page, and
prints the EXPLAIN QUERY PLAN of each filter's query as core/review/decision_lists.c builds it (explain helper).
Then single records, figures and a full NDJSON export (throughput and the daemon's peak RSS).

Standard library only. Output: Markdown on stdout.
"""
import argparse
import base64
import datetime as dt
import hashlib
import http.client
import json
import random
import sqlite3
import statistics
import subprocess
import sys
import time
import urllib.parse

# Mirrors core/review/time_cursor.c (pgcl_cursor_encode, pgcl_decision_filter_binding): version 2, kind, seq
# big-endian, an 8-byte BLAKE2b of the listing's filters, 6 bytes of keyed BLAKE2b-128. The daemon
# rejects a cursor that differs, so a mismatch fails the bench loudly (tests/integration/
# test_hardening.py checks the same encoding against the daemon).
CURSOR_KEY = b"pgcld audit cursor, version 1 .\x00"
FILTER_ORDER = ("model", "version", "label", "decision", "item_id", "request_id", "since", "until")
CONTEST_FILTER = {None: 0, "open": 1, "resolved": 2, "contested": 3, "none": 4}


def filters_binding(params):
    """The digest of a decision listing's filters (query parameters; since/until in the columns'
    format, as the daemon normalises them)."""
    h = hashlib.blake2b(digest_size=8)
    h.update(b"pgcld decision filters 1")
    for name in FILTER_ORDER:
        v = params.get(name)
        if v is not None and name in ("since", "until"):  # the columns' format, in UTC
            t = dt.datetime.fromisoformat(v.replace("Z", "+00:00")).astimezone(dt.timezone.utc)
            v = t.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        h.update(b"\0" if v is None else b"\1" + len(v.encode()).to_bytes(4, "big") + v.encode())
    h.update(bytes([CONTEST_FILTER[params.get("contest")]]))
    return h.digest()


def cursor(kind, seq, params=None):
    binding = filters_binding(params or {}) if kind == "d" else bytes(8)
    msg = bytes([2, ord(kind)]) + seq.to_bytes(8, "big") + binding
    mac = hashlib.blake2b(msg, digest_size=16, key=CURSOR_KEY).digest()[:6]
    return base64.urlsafe_b64encode(msg + mac).rstrip(b"=").decode()


class Client:
    def __init__(self, port):
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=300)

    def get(self, path):
        t0 = time.perf_counter()
        self.conn.request("GET", path)
        r = self.conn.getresponse()
        body = r.read()
        ms = (time.perf_counter() - t0) * 1000
        if r.status != 200:
            sys.exit(f"GET {path}: {r.status} {body[:300]!r}")
        return ms, body


def pct(values, p):
    s = sorted(values)
    return s[min(len(s) - 1, int(round(p / 100 * (len(s) - 1))))]


def ts(t):
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--db", required=True)
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--pid", type=int, required=True)
    ap.add_argument("--explain", required=True)
    ap.add_argument("--seed", type=int, default=7)
    a = ap.parse_args()
    rng = random.Random(a.seed)
    db = sqlite3.connect(f"file:{a.db}?mode=ro", uri=True)
    max_seq = db.execute("SELECT max(seq) FROM decisions").fetchone()[0]
    first = dt.datetime.strptime(db.execute("SELECT created_at FROM decisions WHERE seq = 1").fetchone()[0][:19],
                                 "%Y-%m-%dT%H:%M:%S").replace(tzinfo=dt.timezone.utc)
    day_since, day_until = first + dt.timedelta(days=10), first + dt.timedelta(days=11)
    wide_since, wide_until = first + dt.timedelta(days=5), first + dt.timedelta(days=25)

    def seq_range(since, until):
        return db.execute("SELECT min(seq), max(seq) FROM decisions WHERE created_at >= ? AND created_at < ?",
                          (since.strftime("%Y-%m-%dT%H:%M:%S.000000Z"),
                           until.strftime("%Y-%m-%dT%H:%M:%S.000000Z"))).fetchone()

    def random_values(column, n):
        out = []
        for _ in range(n):
            s = rng.randint(1, max_seq)
            out.append(db.execute(f"SELECT {column} FROM decisions WHERE seq = ?", (s,)).fetchone()[0])
        return out

    contests = db.execute("SELECT count(*) FROM contests").fetchone()[0]
    open_contests = db.execute("SELECT count(*) FROM contests c WHERE NOT EXISTS"
                               " (SELECT 1 FROM resolutions r WHERE r.contest_id = c.contest_id)").fetchone()[0]
    # (name, fixed params, seq range for random starts | None, per-request params for point lookups)
    day = {"since": ts(day_since), "until": ts(day_until)}
    wide = {"since": ts(wide_since), "until": ts(wide_until)}
    filters = [
        ("none", {}, (1, max_seq), None),
        ("model+version", {"model": "toxicity", "version": "2"}, (1, max_seq), None),
        ("label", {"label": "toxic"}, (1, max_seq), None),
        ("decision", {"decision": "block"}, (1, max_seq), None),
        ("item_id", None, None, [{"item_id": v} for v in random_values("item_id", 200)]),
        ("request_id", None, None, [{"request_id": v} for v in random_values("request_id", 200)]),
        ("trace_id", None, None, [{"trace_id": v} for v in random_values("trace_id", 200)]),
        ("time range (1 day)", day, seq_range(day_since, day_until), None),
        ("contest=open", {"contest": "open"}, (1, max_seq), None),
        ("model, all versions", {"model": "toxicity"}, (1, max_seq), None),
        ("time range (20 days)", wide, seq_range(wide_since, wide_until), None),
        ("contest=resolved", {"contest": "resolved"}, (1, max_seq), None),
        ("label+decision+time (1 day)", dict(day, label="toxic", decision="review"),
         seq_range(day_since, day_until), None),
    ]
    c = Client(a.port)

    # The daemon's cursors are the ones this bench makes.
    _, body = c.get("/v1/decisions?limit=1")
    page = json.loads(body)
    assert page["next_cursor"] == cursor("d", page["decisions"][0]["seq"]), "cursor encoding differs from the daemon"

    print(f"Database: {max_seq:,} decisions, {contests:,} contests ({open_contests:,} open).\n")
    print("| filter | pages | p50 ms | p99 ms | max ms | rows/page |")
    print("|---|---:|---:|---:|---:|---:|")
    plans = []
    for name, params, start_range, point in filters:
        lat, rows = [], []
        if point:
            for p in point:
                ms, body = c.get("/v1/decisions?" + urllib.parse.urlencode(dict(p, limit=100)))
                lat.append(ms)
                rows.append(len(json.loads(body)["decisions"]))
            plan_params = point[0]
            plan_before = 0
        else:
            walks = 0
            while len(lat) < 200:
                start = rng.randint(start_range[0], start_range[1]) + 1
                cur = cursor("d", start, params)
                walks += 1
                for _ in range(10):
                    ms, body = c.get("/v1/decisions?" + urllib.parse.urlencode(dict(params, limit=100, cursor=cur)))
                    page = json.loads(body)
                    lat.append(ms)
                    rows.append(len(page["decisions"]))
                    cur = page["next_cursor"]
                    if not cur or len(lat) == 200:
                        break
            plan_params = params
            plan_before = (start_range[0] + start_range[1]) // 2
        print(f"| {name} | {len(lat)} | {statistics.median(lat):.1f} | {pct(lat, 99):.1f} | {max(lat):.1f} "
              f"| {statistics.mean(rows):.0f} |")
        args = [a.explain, a.db] + [f"{k}={v}" for k, v in plan_params.items()]
        if plan_before:
            args.append(f"before={plan_before}")
        out = subprocess.run(args, capture_output=True, text=True, check=True).stdout
        plans.append((name, plan_params, plan_before, out))

    # First pages (no cursor) of time windows: the page a reviewer opens first.
    print(f"\n| first page, no cursor | pages | p50 ms | p99 ms | max ms | rows/page |\n|---|---:|---:|---:|---:|---:|")
    for name, params in (("time range (1 day)", day), ("time range (20 days)", wide),
                         ("until only (26 days)", {"until": wide["until"]}),
                         ("label + time range (20 days)", dict(wide, label="toxic"))):
        lat, rows = [], []
        for _ in range(20):
            ms, body = c.get("/v1/decisions?" + urllib.parse.urlencode(dict(params, limit=100)))
            lat.append(ms)
            rows.append(len(json.loads(body)["decisions"]))
        print(f"| {name} | {len(lat)} | {statistics.median(lat):.1f} | {pct(lat, 99):.1f} | {max(lat):.1f} "
              f"| {statistics.mean(rows):.0f} |")

    # Single records, figures, export.
    ids = random_values("decision_id", 200)
    lat = [c.get(f"/v1/decisions/{i}")[0] for i in ids]
    lat_stmt = [c.get(f"/v1/decisions/{i}/statement")[0] for i in ids[:100]]
    print(f"\n| other reads | requests | p50 ms | p99 ms | max ms |\n|---|---:|---:|---:|---:|")
    print(f"| GET /v1/decisions/{{id}} | {len(lat)} | {statistics.median(lat):.1f} | {pct(lat, 99):.1f} "
          f"| {max(lat):.1f} |")
    print(f"| GET /v1/decisions/{{id}}/statement | {len(lat_stmt)} | {statistics.median(lat_stmt):.1f} "
          f"| {pct(lat_stmt, 99):.1f} | {max(lat_stmt):.1f} |")
    for label, path in (("GET /v1/audit/stats (all time)", "/v1/audit/stats"),
                        ("GET /v1/audit/stats (1 day)", "/v1/audit/stats?" + urllib.parse.urlencode(day)),
                        ("GET /v1/contests (open, limit 100)", "/v1/contests?limit=100"),
                        ("GET /v1/contests (resolved, limit 100)", "/v1/contests?status=resolved&limit=100")):
        lat = [c.get(path)[0] for _ in range(5)]
        print(f"| {label} | 5 | {statistics.median(lat):.1f} | {max(lat):.1f} | {max(lat):.1f} |")

    def rss_kib(field):
        with open(f"/proc/{a.pid}/status") as f:
            for line in f:
                if line.startswith(field):
                    return int(line.split()[1])
        return 0

    rss_before = rss_kib("VmRSS:")
    t0 = time.perf_counter()
    conn = http.client.HTTPConnection("127.0.0.1", a.port, timeout=600)
    conn.request("GET", "/v1/audit/export?format=ndjson")
    r = conn.getresponse()
    n_bytes = n_lines = 0
    peak = rss_before
    while True:
        chunk = r.read(1 << 20)
        if not chunk:
            break
        n_bytes += len(chunk)
        n_lines += chunk.count(b"\n")
        peak = max(peak, rss_kib("VmRSS:"))
    secs = time.perf_counter() - t0
    print(f"\nExport, NDJSON, all {n_lines:,} rows: {n_bytes / 2**20:,.0f} MiB in {secs:.1f} s "
          f"({n_lines / secs:,.0f} rows/s); daemon RSS {rss_before / 1024:.0f} MiB before, "
          f"{peak / 1024:.0f} MiB at most during the export (sampled once per MiB read).")

    print("\n### Query plans (EXPLAIN QUERY PLAN of the query each filter runs)\n")
    for name, params, before, out in plans:
        args = " ".join(f"{k}={v}" for k, v in params.items())
        print(f"**{name}** (`{args or 'no filter'}`{f', cursor at seq {before}' if before else ''})\n")
        lines = [l for l in out.splitlines() if not l.startswith("sql:")]
        print("```\n" + "\n".join(lines) + "\n```\n")


if __name__ == "__main__":
    main()
