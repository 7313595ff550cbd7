"""The Markdown report of the throughput bench (bench.py): the targets met or missed, the tables,
and the section it replaces in bench/RESULTS.md."""

import os
import re

from plan import NOISY, SMALL_BODY_MEMORY

SECTION = "## Throughput (issue 16)"


# --------------------------------------------------------------------------- report

def best(cells, server, enc, batch, key="emb_s"):
    c = [x for x in cells if x["server"] == server and x["encoding"] == enc and x["batch"] == batch and x["requests"]]
    return max(c, key=lambda x: x[key]) if c else None


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
    """Issue 16's targets: (name, figure text, met or None when not measurable)."""
    cells = res["cells"]
    peers = [p for p in ("peer-1w", "peer-2w") if any(c["server"] == p for c in cells)]
    def peer_best(enc, batch, key="emb_s"):
        cs = [best(cells, p, enc, batch, key) for p in peers]
        cs = [c for c in cs if c]
        return max(cs, key=lambda c: c[key]) if cs else None
    rows = []
    fwd = {(r["batch"], r["threads"]): r for r in res.get("forward", {}).get("rows", [])}
    pf = {(r["encoding"], r["threads"]): r for r in (res.get("parse_forward") or {}).get("rows", [])}
    pg, f2 = best(cells, "pgcld", "b64", 64), fwd.get((64, 2))
    r2 = ratio(pg and pg["emb_s"], f2 and f2["forward_emb_s"])
    rows.append(("batch 64 base64: ≥ 60 % of the in-process forward rate (same 2 cores)",
                 f"{fmt(pg and pg['emb_s'])} vs {fmt(f2 and f2['forward_emb_s'])} emb/s (pgcl_forward, 2 threads) = "
                 f"**{fmt(r2 and 100 * r2)} %**", r2 is not None and r2 >= 0.6))
    pg, pe, p2 = best(cells, "pgcld", "json", 64), peer_best("json", 64), pf.get(("json", 2))
    r = ratio(pg and pg["emb_s"], p2 and p2["emb_s"])
    rows.append(("batch 64 JSON: ≥ 60 % of the in-process rate of fast parse + forward (same 2 cores)",
                 f"{fmt(pg and pg['emb_s'])} vs {fmt(p2 and p2['emb_s'])} emb/s (bench/parse_forward, 2 threads) = "
                 f"**{fmt(r and 100 * r)} %**", r is not None and r >= 0.6))
    r = ratio(pg and pg["emb_s"], pe and pe["emb_s"])
    rows.append(("batch 64 JSON: ≥ 6× the peer",
                 f"{fmt(pg and pg['emb_s'])} vs {fmt(pe and pe['emb_s'])} ({pe and pe['server']}) emb/s = "
                 f"**{fmt(r, 1)}×**", r is not None and r >= 6))
    for enc, what in (("json", "JSON"), ("b64", "base64")):
        pg, pe = best(cells, "pgcld", enc, 1, "req_s"), peer_best(enc, 1, "req_s")
        r = ratio(pg and pg["req_s"], pe and pe["req_s"])
        rows.append((f"batch 1 {what}: ≥ 20× the peer's requests/s",
                     f"{fmt(pg and pg['req_s'])} vs {fmt(pe and pe['req_s'])} ({pe and pe['server']}) req/s = "
                     f"**{fmt(r, 1)}×**", r is not None and r >= 20))
    lad = res.get("latency")
    if lad and lad.get("pgcld"):
        pp, gp = lad["peer_at_rate"]["lat_ms"]["p99"], lad["pgcld"]["lat_ms"]["p99"]
        r = ratio(gp, pp)
        rows.append(("batch 1 at the peer's highest sustainable rate: p99 ≤ 1/10 of the peer's",
                     f"{fmt(lad['rate'])} req/s: pgcld p99 {gp:.2f} ms vs peer p99 {pp:.2f} ms = **{fmt(r and 1 / r, 1)}× lower**",
                     r is not None and r <= 0.1))
    for aw in res.get("audit_write") or []:
        f16 = aw["store_inputs"]
        want = 60000 if f16 else 120000
        rows.append((f"audit writer alone (bench/audit_write, FULL, 64 rows per job): ≥ {want:,} decisions/s "
                     + ("with float16 inputs stored" if f16 else "without stored inputs"),
                     f"**{fmt(aw['rows_per_s'])}/s**, {aw['cpu_us_per_row']:.1f} µs CPU and "
                     f"{fmt(aw['db_bytes_per_row'])} B of database per row; {fmt(aw['written_bytes_per_row'])} B "
                     f"written per row (WAL + checkpoint); the disk's own rate for commits of that size "
                     f"{aw['disk_mb_per_s']:.0f} MB/s allows {fmt(aw['disk_bound_rows_per_s'])}/s",
                     aw["rows_per_s"] >= want))
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
            f"forward pass: pgcld's packed-weight kernel ({res.get('forward', {}).get('gemm_kernel', '?')}); OpenBLAS "
            f"{m['packages']['libopenblas0-pthread']} (kernel {res.get('forward', {}).get('kernel', '?')}) only for the "
            f"SGEMM reference; "
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
                       " (`MHD-worker`: libmicrohttpd's pool threads (`--http-threads`), which receive, parse, build "
                       "and send; `pgcld`: main, compute workers (forward pass, decisions, rows) and the audit writer).")
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
                "packed-weight kernel, `core/model/gemm_packed.c`) — self: " +
                ", ".join(f"`{t['symbol']}` ({t['dso']}) {t['percent']:.1f} %" for t in pf["top"][:6]) +
                ". Everything outside the GEMM microkernels is pgcld's own element-wise work between GEMMs "
                "(`forward_chunk`: bias, activation, attention softmax, fusion, normalisation, head).",
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


def write_section(path, text, section=SECTION, new_at_top=False):
    """Replaces the section headed exactly `section` (up to the next '## ' heading); a new one is
    appended, or inserted above the first section when new_at_top (newest first)."""
    old = open(path, encoding="utf-8").read() if os.path.exists(path) else "# Benchmark results\n"
    m = re.search("^" + re.escape(section) + "[ \t]*$", old, re.M)
    if m:
        nxt = re.search(r"^## ", old[m.end():], re.M)
        end = m.end() + nxt.start() if nxt else len(old)
        new = old[:m.start()] + text.rstrip("\n") + "\n" + ("\n" + old[end:] if nxt else "")
    elif new_at_top:
        first = re.search(r"^## ", old, re.M)
        at = first.start() if first else len(old)
        new = old[:at].rstrip("\n") + "\n\n" + text.rstrip("\n") + "\n\n" + old[at:]
    else:
        new = old.rstrip("\n") + "\n\n" + text.rstrip("\n") + "\n"
    with open(path, "w", encoding="utf-8") as f:
        f.write(new)
