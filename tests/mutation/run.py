#!/usr/bin/python3
"""Mutation testing: does the suite fail when the product is wrong?

Each mutation below is a small, meaningful change to the product (a comparison of the decision
policy, a column left out of the chain encoding, an off-by-one cursor, a role check, the fsync
setting, a limit that is ignored, the idempotency fingerprint, the rate limiter). For each, the
script applies it to a private copy of the tree (the working tree is never touched), builds that
copy (one optimised build directory, kept between runs, so each build is incremental), runs only
the tests named for the mutation, and records whether some test failed ("killed", with the tests
that failed) or none did ("survived"). The unmutated copy is built and its tests run first: a test
that fails without a mutation would make every verdict meaningless, so the script stops there.

A mutation is a literal text replacement that must match exactly once in its file; if the source
changed so that it matches zero or several times, the script says which mutations are stale and
stops before building anything: edit the table, never guess a line number.

Usage (from anywhere; Debian's /usr/bin/python3):
  /usr/bin/python3 tests/mutation/run.py                 all mutations
  /usr/bin/python3 tests/mutation/run.py --only ID,...   some of them (see --list)
  /usr/bin/python3 tests/mutation/run.py --write-doc     also write the result into docs/testing.md
Options: --work DIR (the copy and its build; default $TMPDIR/pgcld-mutation), --skip-baseline.
Exit status: 0 every mutation killed, 1 one survived or did not build, 2 stale table or a failing
baseline. Not run in CI; its last result is in docs/testing.md, "Mutation testing".
"""

import argparse
import datetime
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, os.pardir))
BUILD = "build-mutation"
DOC = os.path.join("docs", "testing.md")
DOC_HEADING = "## Mutation testing"


class Mutation:
    def __init__(self, ident, path, old, new, what, tests):
        self.ident, self.path, self.old, self.new, self.what, self.tests = ident, path, old, new, what, tests


M = Mutation
MUTATIONS = [
    # -- the decision policy (core/model/model.c, pgcl_model_decide)
    M("policy-t-block", "core/model/model.c",
      "if (score >= p->t_block) return PGCL_DECISION_BLOCK;", "if (score > p->t_block) return PGCL_DECISION_BLOCK;",
      "block when score > t_block instead of >=", ["test_decide", "test_policy_boundary"]),
    M("policy-t-review", "core/model/model.c",
      "if (score >= p->t_review) return PGCL_DECISION_REVIEW;", "if (score > p->t_review) return PGCL_DECISION_REVIEW;",
      "review when score > t_review instead of >=", ["test_decide", "test_policy_boundary"]),
    M("policy-min-confidence", "core/model/model.c",
      "(double)probs[best] < p->min_confidence", "(double)probs[best] <= p->min_confidence",
      "an allow becomes review when the top probability is <= min_confidence instead of <",
      ["test_decide", "test_policy_boundary"]),
    M("policy-argmax-ties", "core/model/model.c",
      "if (probs[k] > probs[best]) best = k;", "if (probs[k] >= probs[best]) best = k;",
      "the predicted label is the last of tied probabilities instead of the first", ["test_decide", "test_model"]),
    # -- the chain encoding (core/audit/chain_encoding.c): each table's column list, and the entry hash
    M("chain-contests-reason", "core/audit/chain_encoding.c",
      "filed_by, filer_key_id, reason FROM contests", "filed_by, filer_key_id FROM contests",
      "contests' encoding leaves out reason", ["test_chain", "test_chain_encoding", "test_chain_known_answers"]),
    M("chain-resolutions-note", "core/audit/chain_encoding.c",
      "resolver_key_id, outcome, corrected_label, note\"", "resolver_key_id, outcome, corrected_label\"",
      "resolutions' encoding leaves out note", ["test_chain", "test_chain_encoding", "test_chain_known_answers"]),
    M("chain-admin-details", "core/audit/chain_encoding.c",
      "actor, action, target, details FROM admin_events", "actor, action, target FROM admin_events",
      "admin events' encoding leaves out details", ["test_chain", "test_chain_encoding", "test_chain_known_answers"]),
    M("chain-decisions-input-dtype", "core/audit/chain_encoding.c",
      "\" input_dtype, input_digest, trace_id,", "\" NULL, input_digest, trace_id,",
      "decisions' encoding reads NULL in input_dtype's place", ["test_chain", "test_chain_encoding", "test_chain_known_answers"]),
    M("chain-decisions-extension", "core/audit/chain_encoding.c",
      "    if (!decision_extension_set(sel)) return;\n", "    (void)decision_extension_set;\n    return;\n",
      "a decision row's trace id and statement facts (migration 0011) are left out of its encoding",
      ["test_chain_v2", "test_chain_known_answers", "test_trace_context"]),
    M("chain-decisions-order", "core/audit/chain_encoding.c",
      "decision, policy, t_review, t_block, vector, input_sha256, latency_us,\"\n     \" coalesce(input, (SELECT i.input FROM decision_inputs AS i WHERE i.decision_seq = decisions.seq)),\"\n     \" input_dtype, input_digest, trace_id,",
      "decision, policy, t_block, t_review, vector, input_sha256, latency_us,\"\n     \" coalesce(input, (SELECT i.input FROM decision_inputs AS i WHERE i.decision_seq = decisions.seq)),\"\n     \" input_dtype, input_digest, trace_id,",
      "decisions' encoding swaps t_review and t_block", ["test_chain", "test_chain_encoding", "test_chain_known_answers"]),
    M("chain-entry-prev", "core/audit/chain_encoding.c",
      "    enc_bytes(&e, TAG_TEXT, prev, prev_len);\n", "    (void)prev;\n    (void)prev_len;\n",
      "an entry's hash leaves out prev_hash (entries no longer linked)", ["test_chain", "test_chain_encoding", "test_chain_known_answers"]),
    # -- cursors (core/review/decision_lists.c, core/review/contest_reads.c)
    M("cursor-decisions", "core/review/decision_lists.c",
      "        qb_sql(q, \" AND d.seq < \");\n        qb_int(q, before_seq);\n    }\n    const struct {",
      "        qb_sql(q, \" AND d.seq <= \");\n        qb_int(q, before_seq);\n    }\n    const struct {",
      "GET /v1/decisions: the next page starts at the cursor's row instead of below it",
      ["test_review_reads", "test_sql_params"]),
    M("cursor-contests-open", "core/review/contest_reads.c",
      "\" WHERE c.seq > ? AND NOT EXISTS", "\" WHERE c.seq >= ? AND NOT EXISTS",
      "GET /v1/contests?status=open: the next page repeats the cursor's contest", ["test_review_reads", "test_review"]),
    # -- auth (server/http/http.c, server/http/route_table.c)
    M("auth-role-check", "server/http/http.c",
      "if (!(ctx->route->roles & (int)ctx->identity.role)) {", "if (0) {",
      "any valid key may use any endpoint (the route's roles are not checked)", ["test_admin", "test_errors"]),
    M("auth-checkpoint-role", "server/http/route_table.c",
      "pgcld_handle_audit_checkpoint, PGCL_ROLE_ADMIN,", "pgcld_handle_audit_checkpoint, PGCL_ROLE_REVIEWER | PGCL_ROLE_ADMIN,",
      "a reviewer key may sign audit checkpoints", ["test_admin", "test_chain_cli"]),
    # -- fsync (core/audit/audit_sqlite.c)
    M("fsync-normal", "core/audit/audit_sqlite.c",
      "const char *sync = opts->synchronous_full ? \"PRAGMA synchronous=FULL\" : \"PRAGMA synchronous=NORMAL\";",
      "const char *sync = \"PRAGMA synchronous=NORMAL\";",
      "the audit writer runs synchronous=NORMAL whatever --synchronous says (commits not fsynced)",
      ["test_storage_faults"]),
    # -- limits
    M("limit-max-pending-rows", "core/audit/audit_sqlite.c",
      "if (job->bounded && a->pending_rows > 0 && a->pending_rows + job->n_rows > a->max_pending_rows) {",
      "if (0) {",
      "--max-pending-rows ignored (the audit backlog is unbounded)", ["test_backlog", "test_openapi_score"]),
    M("limit-max-pending-rows-edge", "core/audit/audit_sqlite.c",
      "a->pending_rows + job->n_rows > a->max_pending_rows", "a->pending_rows + job->n_rows >= a->max_pending_rows",
      "a request that exactly fills the backlog is refused", ["test_backlog"]),
    M("limit-max-batch", "server/wire/score_parse.c",
      "    if (n > (size_t)srv->cfg->max_batch) {\n        pgcld_reply_error(reply, 413, \"batch_too_large\", -1, \"items\",",
      "    if (0) {\n        pgcld_reply_error(reply, 413, \"batch_too_large\", -1, \"items\",",
      "--max-batch ignored for JSON items (the fast parser bails, the DOM path accepts)",
      ["test_bad_inputs", "test_errors"]),
    M("limit-max-body-bytes-declared", "server/http/http.c",
      "if (ctx->declared > (unsigned long long)limit) {", "if (0) {",
      "--max-body-bytes not checked against Content-Length at the headers (the body is read first)",
      ["test_bad_inputs", "test_errors"]),
    M("limit-max-body-bytes-streamed", "server/http/http.c",
      "if (ctx->too_large || ctx->len + n > (size_t)limit) {",
      "if (ctx->too_large || (limit < 0 && ctx->len + n > (size_t)limit)) {",
      "--max-body-bytes ignored for bodies without Content-Length (chunked)", ["test_bad_inputs", "test_errors"]),
    # -- idempotency
    M("idempotency-fingerprint", "server/routes/score_idempotency.c",
      "if (pgcl_idem_same_request(rec, job->request_sha256, job->body_sha256)) {", "if (1) {",
      "a reused Idempotency-Key with another body replays the first answer instead of 422",
      ["test_idempotency", "test_hardening"]),
    # -- issue 13: the classes of input an outside probe answered wrongly
    M("fingerprint-query", "server/http/request.c",
      "    for (int i = 0; i < a.n; i++) {\n        fingerprint_part(&buf, &len, &cap, a.key[i], a.key_len[i]);",
      "    for (int i = 0; i < 0; i++) {\n        fingerprint_part(&buf, &len, &cap, a.key[i], a.key_len[i]);",
      "the idempotency fingerprint leaves out the query (?model= of an octet-stream retry replays another "
      "model's answer)", ["test_hardening"]),
    M("fingerprint-headers", "server/http/request.c",
      'FINGERPRINT_HEADERS[] = {"Pgcld-Item-Ids", "Inference-Header-Content-Length", NULL};',
      'FINGERPRINT_HEADERS[] = {"Inference-Header-Content-Length", NULL};',
      "the idempotency fingerprint leaves out Pgcld-Item-Ids (a retry with other ids replays the old ones)",
      ["test_hardening"]),
    M("f16-beyond-range-stored", "core/score/score.c",
      "bool half = row_f16 && pgcl_f16_all_finite(row_f16, D);", "bool half = row_f16 != NULL;",
      "a value beyond float16's range is stored as float16 infinity", ["test_hardening"]),
    M("rescore-not-finite", "core/score/rescore.c",
      "    if (!decode_input(out, m->D, z)) return PGCL_RESCORE_INPUT_NOT_FINITE;",
      "    decode_input(out, m->D, z);",
      "a stored input that is not finite is re-scored and compared anyway", ["test_hardening"]),
    M("csv-formula", "core/review/export.c",
      "return c == '=' || c == '+' || c == '-' || c == '@' || c == 0x2212;", "return c == '=';",
      "the CSV export neutralises only '=' (not +, -, @, U+2212)", ["test_hardening", "test_csv_formula"]),
    M("csv-formula-fold", "core/review/export.c",
      "const utf8proc_option_t nfkc = UTF8PROC_STABLE | UTF8PROC_COMPAT | UTF8PROC_COMPOSE;",
      "const utf8proc_option_t nfkc = UTF8PROC_STABLE | UTF8PROC_COMPOSE;",
      "the CSV export's rule folds by NFC, not NFKC (U+FE62 SMALL PLUS SIGN, U+207C SUPERSCRIPT EQUALS start no formula)",
      ["test_hardening", "test_csv_formula"]),
    M("csv-formula-invisible", "core/review/export.c",
      "return p->category == UTF8PROC_CATEGORY_ZS || p->category == UTF8PROC_CATEGORY_CF ||",
      "return p->category == UTF8PROC_CATEGORY_ZS ||",
      "the CSV export skips whitespace but not format characters before a formula (zero-width space, BOM pass)",
      ["test_hardening", "test_csv_formula"]),
    M("percent-nul", "server/http/request_head.c",
      'for (const char *p = strstr(target, "%00"); p; p = strstr(p + 1, "%00")) {',
      'for (const char *p = NULL; p; p = strstr(p + 1, "%00")) {',
      "a percent-encoded NUL in the path or query is decoded and cuts the name short",
      ["test_hardening", "test_bad_inputs"]),
    M("hidden-bytes", "server/http/request_head.c",
      "if (!CHECK_HIDDEN_BYTES || !method || !t->at) return NULL;", "return NULL;",
      "bytes hidden behind a NUL in a header line (Authorization: Bearer KEY\\0junk) pass unseen",
      ["test_bad_inputs"]),
    M("transfer-encoding", "server/http/request_head.c",
      'if (!pgcld_field_is(s.transfer_encoding, "chunked")) {',
      'if (!(s.transfer_encoding.len >= 7 &&\n'
      '              strncasecmp(s.transfer_encoding.at + s.transfer_encoding.len - 7, "chunked", 7) == 0)) {',
      "Transfer-Encoding: gzip, chunked is read as chunked (the gzip body is scored as JSON, or the "
      "connection hangs)", ["test_bad_inputs"]),
    M("singleton-headers", "server/http/request_head.c",
      "        if (s.counts[i] > 1) {", "        if (s.counts[i] > 2) {",
      "a header pgcld reads may be given twice (the first wins)", ["test_bad_inputs"]),
    M("query-without-value", "server/http/route_table.c",
      'else if (!value) c->problem = "has no value: write name=value";', 'else if (0) c->problem = "";',
      "a query parameter without a value (?label) is dropped instead of refused", ["test_bad_inputs"]),
    M("cursor-binding", "core/review/time_cursor.c",
      "if (sodium_memcmp(b + 10, binding, PGCL_CURSOR_BINDING) != 0) return PGCL_CURSOR_OTHER_FILTERS;", "",
      "a cursor sent with other filters resumes another listing", ["test_hardening", "test_review_reads"]),
    M("second-contest", "core/review/decision_record.c",
      '            status = "contested";\n            break;',
      '            status = "contested";\n            if (decided_by[0] == \'r\') decision = "block";\n            break;',
      "while a second contest is open, an overturned decision reads as blocked again",
      ["test_hardening"]),
    M("drain-keeps-connections", "server/http/http.c",
      "bool close = reply->close_connection || atomic_load(&srv->draining);",
      "bool close = reply->close_connection;",
      "answers sent while draining keep their connection open (a later request on it is dropped unanswered)",
      ["test_shutdown"]),
    M("unanswered-as-500", "server/http/http.c",
      "if (status) pgcld_metrics_request(ctx->srv->metrics, ctx->route_index, status);",
      "if (1) pgcld_metrics_request(ctx->srv->metrics, ctx->route_index, status ? status : 500);",
      "a request nobody answered is counted as a 500", ["test_hardening"]),
    M("idempotency-scope", "core/audit/idempotency.c",
      "\" WHERE scope = ?1 AND idem_key = ?2 AND expires_at > ?3\"", "\" WHERE idem_key = ?2 AND expires_at > ?3\"",
      "idempotency keys are not scoped by API key (one client's answer replayed to another)",
      ["test_idempotency"]),
    M("idempotency-expiry", "core/audit/idempotency.c",
      " AND idem_key = ?2 AND expires_at > ?3\"", " AND idem_key = ?2 AND (expires_at > ?3 OR 1)\"",
      "expired idempotency keys still replay", ["test_idempotency"]),
    # -- rate limits (server/http/ratelimit.c)
    M("ratelimit-refill", "server/http/ratelimit.c",
      "b->tokens_u += elapsed * rps;", "b->tokens_u = cap_u;",
      "any pause refills the whole burst", ["test_ratelimit", "test_overload_rate_limits"]),
    M("ratelimit-take", "server/http/ratelimit.c",
      "if (b->tokens_u >= MICRO) {", "if (b->tokens_u > 0) {",
      "a fraction of a token admits a request", ["test_ratelimit", "test_overload_rate_limits"]),
    # -- chain encoding version 2 and Merkle trees (issue 16: core/audit/merkle.c, chain_encoding.c, chain.c)
    M("merkle-split", "core/audit/merkle.c",
      "return (uint64_t)1 << (63 - __builtin_clzll(n - 1));", "return (n + 1) / 2;",
      "trees split at the middle instead of RFC 9162's largest power of two below n",
      ["test_merkle", "test_proof"]),
    M("merkle-verify-right-edge", "core/audit/merkle.c",
      "    for (int i = 0; i < path_len; i++) {\n        if (sn == 0) return false;\n        if ((fn & 1) || fn == sn) {",
      "    for (int i = 0; i < path_len; i++) {\n        if (sn == 0) return false;\n        if (fn & 1) {",
      "inclusion verification forgets the right edge of a tree whose size is not a power of two",
      ["test_merkle", "test_proof"]),
    M("leaf-input-bytes", "core/audit/chain_encoding.c",
      "        if (i == t->digest_column) encode_digest_column(e, sel, i, n);\n        else enc_column(e, sel, i);",
      "        if (0 && i == t->digest_column) encode_digest_column(e, sel, i, n);\n        else enc_column(e, sel, i);",
      "a version-2 leaf holds the stored input's bytes instead of their SHA-256 (inputs could not be dropped)",
      ["test_chain_v2"]),
    M("rewind-keeps-leaves", "core/audit/chain.c",
      "        c->n_pending = mark; /* nothing was written yet: the entry is made at seal() */",
      "        (void)mark;",
      "a job undone by its savepoint keeps its leaves in the commit's tree",
      ["test_audit", "test_chain_v2"]),
    # -- input retention (issue 27: core/audit/retention.c's walk, each store's statements). Without old and
    # young inputs side by side the pass's "anything older than the horizon?" check hides the period; the open
    # contest's exclusion was caught only by the PostgreSQL suite (test_retention: RetentionLimitsTest and
    # PgRetentionLimitsTest, which skips without PostgreSQL 15)
    M("retention-walk-period", "core/audit/retention.c",
      "    if (recent) hi = first_recent - 1; /* the walk ends there */\n", "    (void)first_recent;\n",
      "a retention step does not stop at the first decision inside the retention period (both stores' walk)",
      ["test_retention", "test_chain_v2"]),
    M("retention-period-sqlite", "core/audit/retention.c",
      'AND created_at >= ?3";', 'AND created_at >= ?3 AND 0";',
      "SQLite: retention never finds a decision inside the retention period (drops the younger inputs)",
      ["test_retention", "test_chain_v2"]),
    M("retention-open-contest-sqlite", "core/audit/retention.c",
      '" WHERE NOT EXISTS (SELECT 1 FROM resolutions AS r WHERE r.contest_id = c.contest_id) AND d.seq > ?1"',
      '" WHERE 0 AND d.seq > ?1"',
      "SQLite: retention drops the input of a decision under an open contest", ["test_retention", "test_chain_v2"]),
    M("retention-period-pg", "core/audit/pg/audit_pg_admin.c",
      'created_at COLLATE \\"C\\" >= $3";', 'created_at COLLATE \\"C\\" >= $3 AND false";',
      "PostgreSQL: retention never finds a decision inside the retention period (drops the younger inputs)",
      ["test_retention", "test_pg_admin"]),
    M("retention-open-contest-pg", "core/audit/pg/audit_pg_admin.c",
      '" WHERE NOT EXISTS (SELECT 1 FROM resolutions AS r WHERE r.contest_id = c.contest_id) AND d.seq > $1::bigint"',
      '" WHERE false AND d.seq > $1::bigint"',
      "PostgreSQL: retention drops the input of a decision under an open contest", ["test_retention", "test_pg_admin"]),
    # -- the transparency log's tiles (issue 28: core/audit/log/tiles.c, tiles_read.c)
    M("tiles-supersedes", "core/audit/log/tiles.c",
      "k == s_l >> height ? s_l & mask : 0);", "0);",
      "a level tile that replaces a partial one does not say so (a store keeping one row per tile "
      "would insert a second)", ["test_tiles"]),
    M("tiles-path-x000", "core/audit/log/tiles.c",
      "if (x && n_groups == 0 && g == 0) return PGCL_ERR_FORMAT;", "",
      "a tile path with a leading x000 group is accepted (two URLs for one tile)", ["test_tiles"]),
    M("tiles-edge-offset", "core/audit/log/tiles.c",
      "uint64_t at = k == 63 ? 0 : size >> (k + 1) << (k + 1);", "uint64_t at = size >> k << k;",
      "the appender's root takes each piece of the right edge at the wrong offset", ["test_tiles"]),
    M("tiles-bundle-unchecked", "core/audit/log/tiles.c",
      "if (memcmp(leaf.b, old_edge[0][k].b, PGCL_MERKLE_HASH_BYTES) != 0) {",
      "if (memcmp(leaf.b, old_edge[0][k].b, PGCL_MERKLE_HASH_BYTES) == 256) {",
      "the appender extends a partial bundle whose entries do not hash to level 0's tile", ["test_tiles"]),
    M("tiles-reader-narrower", "core/audit/log/tiles_read.c",
      "s->id.width >= width) return s->hash;", "s->id.width <= width) return s->hash;",
      "the reader answers from a kept tile narrower than the one asked for", ["test_tiles"]),
]


def log(*args):
    print(*args, flush=True)


def git(*args):
    return subprocess.run(["git", "-C", ROOT, *args], capture_output=True, text=True, check=True).stdout


def sync_copy(tree):
    """Makes tree a copy of the working tree's tracked and unignored files, rewriting only files
    whose content differs (unchanged files keep their mtime, so the build stays incremental)."""
    files = [f for f in git("ls-files", "-co", "--exclude-standard", "-z").split("\0") if f]
    wanted = set()
    for rel in files:
        src = os.path.join(ROOT, rel)
        if not os.path.isfile(src) or os.path.islink(src):
            continue
        wanted.add(rel)
        dst = os.path.join(tree, rel)
        with open(src, "rb") as f:
            data = f.read()
        try:
            with open(dst, "rb") as f:
                same = f.read() == data
        except FileNotFoundError:
            same = False
        if not same:
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            with open(dst, "wb") as f:
                f.write(data)
            shutil.copymode(src, dst)
    for dirpath, dirnames, filenames in os.walk(tree):
        rel_dir = os.path.relpath(dirpath, tree)
        if rel_dir == BUILD or rel_dir.startswith(BUILD + os.sep):
            dirnames[:] = []
            continue
        for name in filenames:
            rel = os.path.normpath(os.path.join(rel_dir, name))
            if rel not in wanted:
                os.remove(os.path.join(dirpath, name))


def stale_mutations(tree, chosen):
    problems = []
    for m in chosen:
        with open(os.path.join(tree, m.path), encoding="utf-8") as f:
            n = f.read().count(m.old)
        if n != 1:
            problems.append(f"  {m.ident}: {m.path}: the text to replace occurs {n} times (expected once):\n"
                            f"    {m.old!r}")
    return problems


def build(tree):
    """Configures (once) and builds the copy; returns (ok, tail of the output)."""
    bdir = os.path.join(tree, BUILD)
    if not os.path.isfile(os.path.join(bdir, "meson-private", "coredata.dat")):
        p = subprocess.run(["meson", "setup", bdir, "--buildtype=debugoptimized"], cwd=tree, capture_output=True,
                           text=True)
        if p.returncode != 0:
            return False, p.stdout[-3000:] + p.stderr[-3000:]
    p = subprocess.run(["meson", "compile", "-C", bdir], cwd=tree, capture_output=True, text=True)
    return p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]


def run_tests(tree, names):
    """Runs the named meson tests one at a time; returns {name: result} (OK, FAIL, TIMEOUT, SKIP, ...)."""
    bdir = os.path.join(tree, BUILD)
    logfile = os.path.join(bdir, "meson-logs", "testlog.json")
    if os.path.exists(logfile):
        os.remove(logfile)
    subprocess.run(["meson", "test", "-C", bdir, "--no-rebuild", "--num-processes", "1", *names], cwd=tree,
                   capture_output=True, text=True)
    results = {}
    if os.path.exists(logfile):
        with open(logfile, encoding="utf-8") as f:
            for line in f:
                rec = json.loads(line)
                results[rec["name"].split(" / ")[-1]] = rec["result"]  # "project:suite / name"
    for n in names:
        results.setdefault(n, "NOT RUN")
    return results


def read(tree, m):
    with open(os.path.join(tree, m.path), encoding="utf-8") as f:
        return f.read()


def write(tree, m, text):
    with open(os.path.join(tree, m.path), "w", encoding="utf-8") as f:
        f.write(text)


def fmt_table(rows):
    head = ("mutation", "file", "verdict", "failing tests (of those run)", "what")
    widths = [max(len(str(r[i])) for r in [head, *rows]) for i in range(4)]
    out = []
    for r in [head, *rows]:
        out.append("  ".join(str(r[i]).ljust(widths[i]) for i in range(4)) + "  " + r[4])
    return "\n".join(out)


def write_doc(results, commit, started, seconds, command):
    path = os.path.join(ROOT, DOC)
    text = ""
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            text = f.read()
    lines = [DOC_HEADING, "",
             "`tests/mutation/run.py` applies each mutation below to a private copy of the tree, builds it",
             "(one optimised build, incremental), runs the tests named for it and records whether one of them",
             "failed (**killed**) or none did (**survived**). It does not run in CI. Reproduce with:", "",
             f"    {command}", "",
             "Each mutation is a literal replacement that must match exactly once in its file; when the source",
             "moves under one, the script names it and stops before building anything: update its entry in",
             "`MUTATIONS`. A new mutation goes there with the tests that should kill it; one that survives needs",
             "a test that kills it, or a note here on why it changes no behaviour (an equivalent mutant).", "",
             "Before issue 14 (commit 82311b2) the first three mutations, `chain-contests-reason` and",
             "`limit-max-pending-rows` survived every test that could see them (test_model, test_score, test_review,",
             "test_batching; test_chain, test_chain_cli, test_review_reads; test_audit, test_overload, test_openapi,",
             "test_config); test_decide, test_policy_boundary, the literal known answers of test_chain,",
             "test_chain_known_answers and test_backlog were written to kill them.", "",
             f"Last result: {started} UTC, commit `{commit}`, {len(results)} mutations in {seconds / 60:.0f} min.", "",
             "| mutation | file | what | verdict | failing tests | tests run |", "|---|---|---|---|---|---|"]
    for m, verdict, failed, ran in results:
        lines.append(f"| `{m.ident}` | `{m.path}` | {m.what} | **{verdict}** | "
                     f"{', '.join(failed) or '—'} | {', '.join(ran)} |")
    section = "\n".join(lines) + "\n"
    start = text.find(DOC_HEADING + "\n")
    if start < 0:
        new = (text.rstrip("\n") + "\n\n" if text else "# Testing\n\n") + section
    else:
        end = text.find("\n## ", start + len(DOC_HEADING))
        new = text[:start] + section + ("\n" + text[end + 1:] if end >= 0 else "")
    with open(path, "w", encoding="utf-8") as f:
        f.write(new)
    log(f"wrote {DOC}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--only", help="comma-separated mutation ids")
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--work", default=os.path.join(tempfile.gettempdir(), "pgcld-mutation"))
    ap.add_argument("--skip-baseline", action="store_true")
    ap.add_argument("--write-doc", action="store_true")
    args = ap.parse_args()

    chosen = MUTATIONS
    if args.only:
        ids = args.only.split(",")
        unknown = [i for i in ids if i not in {m.ident for m in MUTATIONS}]
        if unknown:
            ap.error(f"unknown mutation ids: {', '.join(unknown)}")
        chosen = [m for m in MUTATIONS if m.ident in ids]
    if args.list:
        for m in chosen:
            log(f"{m.ident:32} {m.path:24} {m.what}  [{', '.join(m.tests)}]")
        return 0

    tree = os.path.join(args.work, "tree")
    os.makedirs(tree, exist_ok=True)
    commit = git("rev-parse", "--short", "HEAD").strip() + (" + uncommitted changes" if git("status", "--porcelain",
                                                                                               "-uno").strip() else "")
    started = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M")
    t0 = time.monotonic()
    log(f"copying {ROOT} to {tree}")
    sync_copy(tree)
    stale = stale_mutations(tree, chosen)
    if stale:
        log("the source changed under these mutations; update tests/mutation/run.py:\n" + "\n".join(stale))
        return 2

    log("building the unmutated copy")
    ok, out = build(tree)
    if not ok:
        log(f"the unmutated copy does not build:\n{out}")
        return 2
    if not args.skip_baseline:
        names = sorted({t for m in chosen for t in m.tests})
        log(f"baseline: {' '.join(names)}")
        res = run_tests(tree, names)
        bad = {n: r for n, r in res.items() if r != "OK"}
        if bad:
            log(f"baseline: these tests do not pass without a mutation, so no verdict would mean anything: {bad}")
            return 2

    results = []
    for i, m in enumerate(chosen, 1):
        log(f"[{i}/{len(chosen)}] {m.ident}: {m.what}")
        original = read(tree, m)
        try:
            write(tree, m, original.replace(m.old, m.new, 1))
            ok, out = build(tree)
            if not ok:
                log(f"  did not build:\n{out}")
                results.append((m, "did not build", [], []))
                continue
            res = run_tests(tree, m.tests)
        finally:
            write(tree, m, original)
        failed = [n for n in m.tests if res[n] not in ("OK", "SKIP")]
        skipped = [n for n in m.tests if res[n] == "SKIP"]
        verdict = "killed" if failed else "survived"
        log(f"  {verdict}" + (f" by {', '.join(f'{n} ({res[n]})' for n in failed)}" if failed else "") +
            (f"; skipped: {', '.join(skipped)}" if skipped else ""))
        results.append((m, verdict, failed, m.tests))
    log("rebuilding the unmutated copy")
    build(tree)
    seconds = time.monotonic() - t0

    log("\n" + fmt_table([(m.ident, m.path, v, ", ".join(f) or "-", m.what) for m, v, f, _ in results]))
    survived = [m.ident for m, v, _, _ in results if v != "killed"]
    log(f"\n{len(results) - len(survived)} of {len(results)} mutations killed in {seconds / 60:.1f} min"
        + (f"; not killed: {', '.join(survived)}" if survived else ""))
    if args.write_doc:
        cmd = "/usr/bin/python3 tests/mutation/run.py" + (f" --only {args.only}" if args.only else "")
        write_doc(results, commit, started, seconds, cmd)
    return 1 if survived else 0


if __name__ == "__main__":
    sys.exit(main())
