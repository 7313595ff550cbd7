"""Known answers for the log's records (docs/log-record.md; core/audit/log/record.c), from an encoder
written here with struct.pack from the document's layout alone.

Three sources must agree on every byte of one record of each kind (and a second decision that takes
the other branches of its layout):
  - this file's encoder, fed the sample values written out below (tests/core/record_samples.h holds
    the same values for the C side);
  - the C encoder, through tests/core/record_tool.c (`record_tool known-answers`, PGCLD_RECORD_TOOL);
  - the document: its annotated examples (the "known-answer" blocks: offset, bytes, field per line),
    whose offsets must also run without gap or overlap.
The document's size figures are checked too: the typical decision's record and version-2 leaf
exactly (`record_tool sizes`), and today's row figures within 10% (they are SQLite's pages).

Run: PGCLD_RECORD_TOOL=build/tests/record_tool /usr/bin/python3 tests/integration/test_record_known_answers.py
"""
import calendar
import hashlib
import os
import re
import struct
import subprocess
import unittest

ROOT = os.environ.get("PGCLD_SOURCE_ROOT", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
DOC = os.path.join(ROOT, "docs", "log-record.md")

# ---- the layout's primitives (docs/log-record.md, "Conventions") ----


def u8(v):
    return struct.pack(">B", v)


def u16(v):
    return struct.pack(">H", v)


def i64(v):
    return struct.pack(">q", v)


def f64(v):
    return struct.pack("<d", v)


def f32s(values):
    return struct.pack("<%df" % len(values), *values)


def varint(n):
    out = bytearray()
    while n >= 0x80:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def text(s):
    b = s.encode("utf-8")
    return varint(len(b)) + b


def uuid(s):
    assert re.fullmatch(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", s)
    return bytes.fromhex(s.replace("-", ""))


def time_us(s):
    m = re.fullmatch(r"(\d{4})-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d)\.(\d{6})Z", s)
    y, mo, d, h, mi, sec, frac = (int(g) for g in m.groups())
    return i64(calendar.timegm((y, mo, d, h, mi, sec)) * 1000000 + frac)


def key_id(s):
    assert re.fullmatch(r"pgcld_[0-9a-f]{8}", s)
    return bytes.fromhex(s[6:])


def run(first, n):
    return bytes((first + i) & 0xFF for i in range(n))


def leaf_hash(record):
    return hashlib.sha256(b"\x00" + record).digest()


# ---- the sample records (tests/core/record_samples.h), as (field, bytes) lists ----

POLICY_JSON = '{"kind":"threshold","label":"toxic","t_block":0.348393,"t_review":0.054411}'


def policy_fields():
    return [("version", u8(1)), ("kind: policy", u8(6)), ("labels: K", u16(2)), ("labels[0]", text("non_toxic")),
            ("labels[1]", text("toxic")), ("policy", text(POLICY_JSON))]


def join(fields):
    return b"".join(b for _, b in fields)


def decision_fields():
    return [
        ("version", u8(1)), ("kind: decision", u8(1)),
        ("decision_id", uuid("0190b6a2-8f3c-7a11-9b2e-4c5d6e7f8091")),
        ("created_at", time_us("2026-01-02T03:04:05.123456Z")),
        ("trace_id", bytes.fromhex("4bf92f3577b34da6a3ce929d0e0e4736")),
        ("model_sha256", run(0x10, 32)),
        ("policy_ref: the leaf hash of the policy sample", leaf_hash(join(policy_fields()))),
        ("input_sha256", run(0x40, 32)),
        ("flags: trace, date, scope, language, request UUID", u8(0x1F)),
        ("task: binary", u8(0)), ("decision: review", u8(1)), ("policy_kind: threshold", u8(0)),
        ("stored_input: f16", u8(1)), ("K", u16(2)), ("label_index", u16(0)), ("d", u16(4)),
        ("policy_label", u16(1)), ("t_review", f64(0.054411)), ("t_block", f64(0.348393)),
        ("probabilities", f32s([0.875, 0.125])), ("vector", f32s([0.25, -1.5, 3.0, 0.0])),
        ("latency_us: 1234", varint(1234)),
        ("request_id (UUID form)", uuid("0190b6a2-8f3c-7000-8000-000000000001")),
        ("item_id", text("item-42")), ("model_name", text("toxicity")), ("model_version", text("1")),
        ("stored_digest", run(0x80, 32)),
        ("content_date: 2025-12-31", u16(2025) + u8(12) + u8(31)),
        ("territorial_scope: DE, FR", u8(2) + b"DEFR"),
        ("content_language", b"EN"),
    ]


def decision_label_map_fields():
    return [
        ("version", u8(1)), ("kind: decision", u8(1)),
        ("decision_id", uuid("0190b6a2-8f3c-7a12-a000-000000000003")),
        ("created_at", time_us("2026-01-02T03:04:05.999999Z")),
        ("trace_id: none", bytes(16)),
        ("model_sha256", run(0x20, 32)), ("policy_ref", run(0x30, 32)), ("input_sha256", run(0x50, 32)),
        ("flags: none", u8(0)), ("task: multiclass", u8(1)), ("decision: block", u8(2)),
        ("policy_kind: label_map", u8(1)), ("stored_input: none", u8(0)), ("K", u16(3)),
        ("label_index", u16(0)), ("d", u16(2)), ("min_confidence", f64(0.5)),
        ("probabilities", f32s([0.5, 0.25, 0.25])), ("vector", f32s([1.0, -0.0])),
        ("latency_us: 300000", varint(300000)), ("request_id (text form)", text("client-request-7")),
        ("item_id", text("\u00e9t\u00e9")), ("model_name", text("emotions")), ("model_version", text("2.1")),
    ]


def admin_event_fields():
    details = '{"model":"toxicity","previous_version":"1","version":"2"}'
    return [
        ("version", u8(1)), ("kind: admin_event", u8(2)),
        ("event_id", uuid("0190b6a2-8f3c-7b22-8a00-000000000002")),
        ("created_at", time_us("2026-01-02T03:00:00.000001Z")),
        ("actor", text("admin (pgcld_1a2b3c4d)")), ("action", text("model.activate")),
        ("target", text("toxicity/2")), ("details", text(details)),
    ]


def key_event_fields():
    return [
        ("version", u8(1)), ("kind: key_event", u8(3)),
        ("event_id", uuid("0190b6a2-8f3c-7c33-b000-000000000004")),
        ("created_at", time_us("2026-01-01T00:00:00.000000Z")),
        ("action: create", u8(0)), ("role: reviewer", u8(1)), ("key_id: pgcld_0badc0de", key_id("pgcld_0badc0de")),
        ("name", text("alice")), ("actor", text("cli:root")),
    ]


def contest_fields():
    return [
        ("version", u8(1)), ("kind: contest", u8(4)),
        ("contest_id", uuid("0190b6a2-8f3c-7d44-8000-000000000005")),
        ("decision_id", uuid("0190b6a2-8f3c-7a11-9b2e-4c5d6e7f8091")),
        ("filed_at", time_us("2026-01-03T12:00:00.500000Z")),
        ("flags: filer key", u8(1)), ("filer_key_id: pgcld_1a2b3c4d", key_id("pgcld_1a2b3c4d")),
        ("filed_by", text("alice (pgcld_1a2b3c4d)")), ("reason", text("not toxic: a quotation")),
    ]


def resolution_fields():
    return [
        ("version", u8(1)), ("kind: resolution", u8(5)),
        ("contest_id", uuid("0190b6a2-8f3c-7d44-8000-000000000005")),
        ("decision_id", uuid("0190b6a2-8f3c-7a11-9b2e-4c5d6e7f8091")),
        ("resolved_at", time_us("2026-01-04T08:30:00.000000Z")),
        ("outcome: overturned", u8(1)), ("flags: resolver key, corrected label", u8(3)),
        ("resolver_key_id: pgcld_0badc0de", key_id("pgcld_0badc0de")),
        ("resolved_by", text("bob (pgcld_0badc0de)")), ("corrected_label", text("non_toxic")),
        ("note", text("a quotation; allowed")),
    ]


def legacy_head_fields():
    return [
        ("version", u8(1)), ("kind: legacy_head", u8(7)),
        ("created_at", time_us("2026-02-01T00:00:00.000000Z")),
        ("head_seq: 1234", struct.pack(">Q", 1234)), ("head_hash", run(0xC0, 32)),
        ("flags: log root", u8(1)), ("log_root", run(0x60, 32)), ("writer_id", text("replica-1")),
    ]


SAMPLES = {
    "decision": decision_fields, "decision_label_map": decision_label_map_fields,
    "admin_event": admin_event_fields, "key_event": key_event_fields, "contest": contest_fields,
    "resolution": resolution_fields, "policy": policy_fields, "legacy_head": legacy_head_fields,
}


def annotate(fields):
    """The document's form of a record: one line per field, "offset  hex  field"."""
    lines, at = [], 0
    for name, b in fields:
        lines.append("%4d  %s  %s" % (at, b.hex(), name))
        at += len(b)
    return lines


def doc_blocks(doc):
    """{name: [lines]} of the document's known-answer blocks."""
    blocks = {}
    for m in re.finditer(r"<!-- known-answer: (\w+) -->\s*```text\n(.*?)```", doc, re.S):
        blocks[m.group(1)] = m.group(2).rstrip("\n").split("\n")
    return blocks


class RecordKnownAnswersTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tool = os.environ.get("PGCLD_RECORD_TOOL")
        if not cls.tool:
            raise unittest.SkipTest("PGCLD_RECORD_TOOL is not set (meson sets it)")
        out = subprocess.run([cls.tool, "known-answers"], check=True, capture_output=True, text=True).stdout
        cls.c_hex = dict(line.split(" ", 1) for line in out.splitlines())
        with open(DOC, encoding="utf-8") as f:
            cls.doc = f.read()

    def test_c_encoder_matches_this_encoder(self):
        self.assertEqual(sorted(self.c_hex), sorted(SAMPLES))
        for name, fields in SAMPLES.items():
            with self.subTest(kind=name):
                self.assertEqual(self.c_hex[name], join(fields()).hex())

    def test_document_examples_match_this_encoder(self):
        blocks = doc_blocks(self.doc)
        self.assertEqual(sorted(blocks), sorted(SAMPLES), "a known-answer block per sample in docs/log-record.md")
        for name, fields in SAMPLES.items():
            with self.subTest(kind=name):
                lines = blocks[name]
                at = 0
                for line in lines:  # offsets run without gap or overlap
                    offset, hexbytes = line.split()[:2]
                    self.assertEqual(int(offset), at, line)
                    at += len(bytes.fromhex(hexbytes))
                self.assertEqual(lines, annotate(fields()))

    def test_document_sizes_are_measured_ones(self):
        out = subprocess.run([self.tool, "sizes", os.path.join(ROOT, "models", "toxicity", "1")], check=True,
                             capture_output=True, text=True).stdout
        measured = {k: int(v) for k, v in (line.split() for line in out.splitlines())}
        figures = dict(re.findall(r"<!-- size: (\w+) -->\s*(\d+)", self.doc))
        self.assertEqual(sorted(figures), sorted(measured), "a figure per measurement in docs/log-record.md")
        for name in ("record", "v2_leaf", "policy_json", "stored_input"):
            self.assertEqual(int(figures[name]), measured[name], name)
        for name in ("row_payload", "row_pages", "row_indexes", "input_pages", "all_but_inputs", "log_pages"):
            self.assertLess(abs(int(figures[name]) - measured[name]), 0.1 * measured[name], name)


if __name__ == "__main__":
    unittest.main()
