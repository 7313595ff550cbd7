#!/usr/bin/env python3
"""Fills an empty pgcld audit database (schema already applied) with N realistic decisions and a
few thousand contests and resolutions, in one transaction.

Usage: make_db.py DB [--rows 1000000] [--contests 5000] [--seed 1]

The rows look like production traffic: three toxicity versions and one multiclass model, requests of
1..32 items sharing created_at, request_id and trace_id, created_at spread over 30 days and never decreasing
with seq (the audit writer stamps each transaction so), items re-scored now and then (repeated
item_id), 64-d float32 vectors, probabilities and the policy as JSON. Contests are filed on a
random sample of decisions (more on blocks), about 60 % resolved, a quarter of those overturned.
Only the Python standard library is used (the bench must run on a bare Debian).
"""
import argparse
import datetime as dt
import hashlib
import json
import os
import random
import sqlite3
import struct
import sys
import time
import uuid

DAYS = 30
START = dt.datetime(2026, 10, 1, tzinfo=dt.timezone.utc)


def ts(us):
    """RFC 3339 UTC with microseconds from unix microseconds (the daemon's created_at format)."""
    s, frac = divmod(us, 1_000_000)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(s)) + f".{frac:06d}Z"


def uuid7(ms, rng):
    r = rng.getrandbits(74)
    v = (ms & ((1 << 48) - 1)) << 80 | 0x7 << 76 | (r >> 62) << 64 | 0b10 << 62 | (r & ((1 << 62) - 1))
    return str(uuid.UUID(int=v))


MODELS = [  # (name, version, sha, labels, policy, weight)
    ("toxicity", "1", "toxicity-1", ["non_toxic", "toxic"],
     {"kind": "threshold", "label": "toxic", "t_review": 0.5, "t_block": 0.8}, 0.25),
    ("toxicity", "2", "toxicity-2", ["non_toxic", "toxic"],
     {"kind": "threshold", "label": "toxic", "t_review": 0.5, "t_block": 0.8}, 0.45),
    ("toxicity", "3", "toxicity-3", ["non_toxic", "toxic"],
     {"kind": "threshold", "label": "toxic", "t_review": 0.45, "t_block": 0.85}, 0.10),
    ("emotions", "1", "emotions-1", ["joy", "anger", "fear"],
     {"kind": "label_map", "actions": {"anger": "review", "fear": "block"}, "min_confidence": 0.5}, 0.20),
]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("db")
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--contests", type=int, default=5000)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    rng = random.Random(a.seed)
    t0 = time.monotonic()
    conn = sqlite3.connect(a.db, isolation_level=None)
    conn.execute("PRAGMA cache_size=-1000000")
    conn.execute("PRAGMA synchronous=OFF")
    if conn.execute("SELECT count(*) FROM decisions").fetchone()[0]:
        sys.exit(f"{a.db} already holds decisions")
    models = [(n, v, hashlib.sha256(s.encode()).hexdigest(), labels, json.dumps(p, sort_keys=True,
               separators=(",", ":")), p, w) for n, v, s, labels, p, w in MODELS]
    weights = [m[-1] for m in models]
    span_us = DAYS * 86400 * 1_000_000
    start_us = int(START.timestamp()) * 1_000_000
    step = span_us / a.rows
    conn.execute("BEGIN")
    ins = ("INSERT INTO decisions (seq, decision_id, created_at, request_id, item_id, model_name, model_version,"
           " model_sha256, label, label_index, probabilities, toxicity, decision, policy, t_review, t_block,"
           " vector, input_sha256, latency_us, trace_id) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)")
    batch, seq, n_items = [], 0, 0
    blocked = []  # (seq, decision_id, created_us) of block/review decisions, to contest later
    allowed = []
    while seq < a.rows:
        m = rng.choices(models, weights)[0]
        name, version, sha, labels, policy_text, policy, _ = m
        n = min(rng.choice((1, 1, 1, 2, 4, 8, 16, 32)), a.rows - seq)
        created_us = start_us + int(seq * step)
        created = ts(created_us)
        request_id = uuid7(created_us // 1000, rng)
        trace_id = f"{rng.getrandbits(128):032x}"  # one W3C trace per request (migration 0011)
        latency = rng.randint(800, 20000)
        for _ in range(n):
            seq += 1
            if n_items > 1000 and rng.random() < 0.05:
                item = f"comment-{rng.randint(1, n_items)}"  # re-scored item
            else:
                n_items += 1
                item = f"comment-{n_items}"
            if policy["kind"] == "threshold":
                r = rng.random()
                p1 = rng.uniform(0, 0.45) if r < 0.85 else rng.uniform(0.5, 0.8) if r < 0.95 else rng.uniform(0.85, 1)
                probs = [1 - p1, p1]
                label_index = int(p1 >= 0.5)
                decision = "block" if p1 >= policy["t_block"] else "review" if p1 >= policy["t_review"] else "allow"
                tox, t_review, t_block = p1, policy["t_review"], policy["t_block"]
            else:
                raw = [rng.random() ** 3 for _ in labels]
                s = sum(raw)
                probs = [x / s for x in raw]
                label_index = max(range(len(labels)), key=lambda k: probs[k])
                decision = policy["actions"].get(labels[label_index], "allow")
                if decision == "allow" and probs[label_index] < policy["min_confidence"]:
                    decision = "review"
                tox = t_review = t_block = None
            probs_text = "{" + ",".join(f'"{l}":{p:.9g}' for l, p in zip(labels, probs)) + "}"
            vec = struct.pack("<64f", *(rng.gauss(0, 0.125) for _ in range(64)))
            did = uuid7(created_us // 1000, rng)
            batch.append((seq, did, created, request_id, item, name, version, sha, labels[label_index],
                          label_index, probs_text, tox, decision, policy_text, t_review, t_block, vec,
                          hashlib.sha256(vec).hexdigest(), latency, trace_id))
            (blocked if decision != "allow" else allowed).append((did, created_us))
        if len(batch) >= 20000:
            conn.executemany(ins, batch)
            batch.clear()
            print(f"  {seq} decisions ({time.monotonic() - t0:.0f} s)", file=sys.stderr, flush=True)
    conn.executemany(ins, batch)

    # Contests: 70 % on block/review decisions, 30 % on allows. Filed 1 min..10 days after the
    # decision; 60 % resolved 5 min..5 days later, a quarter of those overturned.
    end_us = start_us + span_us
    pool = rng.sample(blocked, min(len(blocked), int(a.contests * 0.7)))
    pool += rng.sample(allowed, min(len(allowed), a.contests - len(pool)))
    pool.sort(key=lambda x: x[1])
    contests, resolutions = [], []
    for did, created_us in pool:
        filed_us = min(created_us + rng.randint(60, 10 * 86400) * 1_000_000, end_us + 86400 * 1_000_000)
        cid = uuid7(filed_us // 1000, rng)
        contests.append((filed_us, cid, did, ts(filed_us), "bench reviewer (pgcld_bench000)", "pgcld_bench000",
                         "the user says the comment quotes a slur to criticise it"))
        if rng.random() < 0.6:
            res_us = filed_us + rng.randint(300, 5 * 86400) * 1_000_000
            over = rng.random() < 0.25
            resolutions.append((res_us, cid, ts(res_us), "bench lead (pgcld_bench001)", "pgcld_bench001",
                                "overturned" if over else "upheld", None, "checked against the guidelines"))
    contests.sort()
    resolutions.sort()
    conn.executemany("INSERT INTO contests (contest_id, decision_id, filed_at, filed_by, filer_key_id, reason)"
                     " VALUES (?,?,?,?,?,?)", [c[1:] for c in contests])
    conn.executemany("INSERT INTO resolutions (contest_id, resolved_at, resolved_by, resolver_key_id, outcome,"
                     " corrected_label, note) VALUES (?,?,?,?,?,?,?)", [r[1:] for r in resolutions])
    conn.execute("COMMIT")
    conn.close()
    print(f"{a.rows} decisions, {len(contests)} contests, {len(resolutions)} resolutions in "
          f"{time.monotonic() - t0:.0f} s; {os.path.getsize(a.db) / 2**20:.0f} MiB", file=sys.stderr)


if __name__ == "__main__":
    main()
