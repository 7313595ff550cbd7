"""Statements of reasons (GET /v1/decisions/{id}/statement) against the EU DSA Transparency
Database's (TDB) own validation rules, over real HTTP with a real daemon and SQLite file.

The rules, written from the TDB's published code and documentation (repository
github.com/digital-services-act/transparency-database, read at commit 69e80a0b, 2026-06-24):
  app/Http/Requests/StatementStoreRequest.php (rules() of POST /api/v1/statement):
    - decision_visibility: array, each value in Statement::DECISION_VISIBILITIES, nullable;
      required_without_all decision_monetary, decision_provision, decision_account (a statement
      states at least one restriction)
    - decision_visibility_other: required when decision_visibility holds DECISION_VISIBILITY_OTHER,
      excluded otherwise, max 500
    - decision_monetary_other: required_if DECISION_MONETARY_OTHER, max 500
    - decision_ground: required, in DECISION_GROUNDS; illegal_content_legal_ground (max 500) and
      illegal_content_explanation (max 2000) required_if DECISION_GROUND_ILLEGAL_CONTENT;
      incompatible_content_ground (max 500) and incompatible_content_explanation (max 2000)
      required_if DECISION_GROUND_INCOMPATIBLE_CONTENT; each excluded unless its ground;
      incompatible_content_illegal in INCOMPATIBLE_CONTENT_ILLEGALS (Yes, No)
    - decision_ground_reference_url: url, nullable, max 500
    - content_type: array, required, in CONTENT_TYPES; content_type_other required when
      CONTENT_TYPE_OTHER is among them, excluded otherwise, max 500
    - category: required, in STATEMENT_CATEGORIES; category_addition: array in STATEMENT_CATEGORIES
    - category_specification: array, in KEYWORDS, nullable; category_specification_other: max 500
      (api-documentation.md: "can be provided if KEYWORD_OTHER is part of the category_specification")
    - territorial_scope: array, nullable, in EuropeanCountriesService::EUROPEAN_COUNTRY_CODES (the 30
      EEA countries); api-documentation.md calls it "a required attribute"
    - content_language: in EuropeanLanguagesService::ALL_LANGUAGES (uppercase ISO 639-1), nullable
    - content_date: required, date_format Y-m-d, after_or_equal 2000-01-01, before_or_equal 2038-01-01
    - application_date: required, date_format Y-m-d, after_or_equal 2020-01-01, before_or_equal 2038-01-01
    - end_date_{account,monetary,service,visibility}_restriction: date_format Y-m-d, nullable,
      before_or_equal 2038-01-01 (api-documentation.md: after or equal to the application date)
    - decision_facts: required, max 5000
    - source_type: required, in SOURCE_TYPES; source_identity: max 500, excluded for SOURCE_VOLUNTARY
    - automated_detection: required, in AUTOMATED_DETECTIONS (Yes, No)
    - automated_decision: required, in AUTOMATED_DECISIONS
    - puid: required, max 500, regex ^[a-zA-Z0-9-_]+$
  app/Services/PlatformUniqueIdService.php, StatementAPIController::store: a puid is accepted once
    per platform (a second statement with it is refused); there is no update of a statement.
  Laravel's max on a string counts characters, not bytes. No rule orders content_date and
  application_date; this test also checks content_date <= application_date (a restriction cannot
  start before the content was posted).

pgcld's `pgcld` member is dropped before checking (the platform drops it before submitting).

Which cases need the storage half of issue 19 item 9 (content_date, territorial_scope and
content_language accepted per item by the scoring routes and stored with the decision):
StoredContentFieldsTest only. StatementRulesTest and ModelDsaTest run without it.

Run: PGCLD_BIN=build-test/server/pgcld /usr/bin/python3 tests/integration/test_dsa_statement.py
"""
import copy
import datetime as dt
import json
import os
import re
import shutil
import sys
import tempfile
import unittest
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402
from openapi_contract import SPEC, validation_errors  # noqa: E402

TINY = "tiny_binary"
D = 32
STATEMENT_SCHEMA = SPEC.schema_for(SPEC.response("/v1/decisions/{id}/statement", "get", "200"))

# ---- the TDB's enumerations (app/Models/Statement.php, app/Services/European*Service.php)
DECISION_VISIBILITIES = {
    "DECISION_VISIBILITY_CONTENT_REMOVED", "DECISION_VISIBILITY_CONTENT_DISABLED", "DECISION_VISIBILITY_CONTENT_DEMOTED",
    "DECISION_VISIBILITY_CONTENT_AGE_RESTRICTED", "DECISION_VISIBILITY_CONTENT_INTERACTION_RESTRICTED",
    "DECISION_VISIBILITY_CONTENT_LABELLED", "DECISION_VISIBILITY_OTHER"}
DECISION_MONETARIES = {"DECISION_MONETARY_SUSPENSION", "DECISION_MONETARY_TERMINATION", "DECISION_MONETARY_OTHER"}
DECISION_PROVISIONS = {"DECISION_PROVISION_PARTIAL_SUSPENSION", "DECISION_PROVISION_TOTAL_SUSPENSION",
                       "DECISION_PROVISION_PARTIAL_TERMINATION", "DECISION_PROVISION_TOTAL_TERMINATION"}
DECISION_ACCOUNTS = {"DECISION_ACCOUNT_SUSPENDED", "DECISION_ACCOUNT_TERMINATED"}
ACCOUNT_TYPES = {"ACCOUNT_TYPE_BUSINESS", "ACCOUNT_TYPE_PRIVATE"}
DECISION_GROUNDS = {"DECISION_GROUND_ILLEGAL_CONTENT", "DECISION_GROUND_INCOMPATIBLE_CONTENT"}
CONTENT_TYPES = {"CONTENT_TYPE_APP", "CONTENT_TYPE_AUDIO", "CONTENT_TYPE_IMAGE", "CONTENT_TYPE_PRODUCT",
                 "CONTENT_TYPE_SYNTHETIC_MEDIA", "CONTENT_TYPE_TEXT", "CONTENT_TYPE_VIDEO", "CONTENT_TYPE_OTHER"}
CATEGORIES = {
    "STATEMENT_CATEGORY_ANIMAL_WELFARE", "STATEMENT_CATEGORY_CONSUMER_INFORMATION", "STATEMENT_CATEGORY_CYBER_VIOLENCE",
    "STATEMENT_CATEGORY_CYBER_VIOLENCE_AGAINST_WOMEN", "STATEMENT_CATEGORY_DATA_PROTECTION_AND_PRIVACY_VIOLATIONS",
    "STATEMENT_CATEGORY_ILLEGAL_OR_HARMFUL_SPEECH", "STATEMENT_CATEGORY_INTELLECTUAL_PROPERTY_INFRINGEMENTS",
    "STATEMENT_CATEGORY_NEGATIVE_EFFECTS_ON_CIVIC_DISCOURSE_OR_ELECTIONS", "STATEMENT_CATEGORY_NOT_SPECIFIED_NOTICE",
    "STATEMENT_CATEGORY_OTHER_VIOLATION_TC", "STATEMENT_CATEGORY_PROTECTION_OF_MINORS",
    "STATEMENT_CATEGORY_RISK_FOR_PUBLIC_SECURITY", "STATEMENT_CATEGORY_SCAMS_AND_FRAUD",
    "STATEMENT_CATEGORY_SELF_HARM", "STATEMENT_CATEGORY_UNSAFE_AND_PROHIBITED_PRODUCTS",
    "STATEMENT_CATEGORY_VIOLENCE"}
KEYWORDS = {"KEYWORD_" + k for k in (
    "ADULT_SEXUAL_MATERIAL AGE_SPECIFIC_RESTRICTIONS AGE_SPECIFIC_RESTRICTIONS_MINORS ANIMAL_HARM "
    "BIOMETRIC_DATA_BREACH BULLYING_AGAINST_GIRLS CHILD_SEXUAL_ABUSE_MATERIAL CHILD_SEXUAL_ABUSE_MATERIAL_DEEPFAKE "
    "CONTENT_PROMOTING_EATING_DISORDERS COORDINATED_HARM COPYRIGHT_INFRINGEMENT CYBER_BULLYING_INTIMIDATION "
    "CYBER_HARASSMENT CYBER_HARASSMENT_AGAINST_WOMEN CYBER_INCITEMENT CYBER_STALKING CYBER_STALKING_AGAINST_WOMEN "
    "DATA_FALSIFICATION DEFAMATION DESIGN_INFRINGEMENT DISCRIMINATION FEMALE_GENDERED_DISINFORMATION "
    "GEOGRAPHIC_INDICATIONS_INFRINGEMENT GEOGRAPHICAL_REQUIREMENTS GOODS_SERVICES_NOT_PERMITTED "
    "GROOMING_SEXUAL_ENTICEMENT_MINORS HATE_SPEECH HIDDEN_ADVERTISEMENT HUMAN_EXPLOITATION HUMAN_TRAFFICKING "
    "ILLEGAL_ORGANIZATIONS IMPERSONATION_ACCOUNT_HIJACKING INAUTHENTIC_ACCOUNTS INAUTHENTIC_LISTINGS "
    "INAUTHENTIC_USER_REVIEWS INCITEMENT_AGAINST_WOMEN INCITEMENT_VIOLENCE_HATRED INSUFFICIENT_INFORMATION_ON_TRADERS "
    "LANGUAGE_REQUIREMENTS MISINFORMATION_DISINFORMATION MISLEADING_INFO_CONSUMER_RIGHTS "
    "MISLEADING_INFO_GOODS_SERVICES MISSING_PROCESSING_GROUND NON_CONSENSUAL_IMAGE_SHARING "
    "NON_CONSENSUAL_IMAGE_SHARING_AGAINST_WOMEN NON_CONSENSUAL_MATERIAL_DEEPFAKE "
    "NON_CONSENSUAL_MATERIAL_DEEPFAKE_AGAINST_WOMEN NONCOMPLIANCE_PRICING NUDITY PATENT_INFRINGEMENT PHISHING "
    "PROHIBITED_PRODUCTS PYRAMID_SCHEMES RIGHT_TO_BE_FORGOTTEN RISK_ENVIRONMENTAL_DAMAGE RISK_PUBLIC_HEALTH "
    "SELF_MUTILATION STALKING SUICIDE TERRORIST_CONTENT TRADE_SECRET_INFRINGEMENT TRADEMARK_INFRINGEMENT "
    "TRAFFICKING_WOMEN_GIRLS UNLAWFUL_SALE_ANIMALS UNSAFE_CHALLENGES UNSAFE_PRODUCTS VIOLATION_EU_LAW "
    "VIOLATION_NATIONAL_LAW OTHER").split()}
EEA_COUNTRIES = set("AT BE BG CY CZ DE DK EE ES FI FR GR HR HU IE IS IT LI LT LU LV MT NL NO PL PT RO SE SI SK".split())
SOURCE_TYPES = {"SOURCE_ARTICLE_16", "SOURCE_TRUSTED_FLAGGER", "SOURCE_TYPE_OTHER_NOTIFICATION", "SOURCE_VOLUNTARY"}
AUTOMATED_DETECTIONS = {"Yes", "No"}
AUTOMATED_DECISIONS = {"AUTOMATED_DECISION_FULLY", "AUTOMATED_DECISION_PARTIALLY", "AUTOMATED_DECISION_NOT_AUTOMATED"}
# every field the store request knows (anything else is not a TDB field)
TDB_FIELDS = {
    "content_id", "content_id_ean", "decision_visibility", "decision_visibility_other", "decision_monetary",
    "decision_monetary_other", "decision_provision", "decision_account", "account_type", "category_specification",
    "category_specification_other", "decision_ground", "decision_ground_reference_url", "illegal_content_legal_ground",
    "illegal_content_explanation", "incompatible_content_ground", "incompatible_content_explanation",
    "incompatible_content_illegal", "content_type", "content_type_other", "category", "category_addition",
    "territorial_scope", "content_language", "content_date", "application_date", "end_date_account_restriction",
    "end_date_monetary_restriction", "end_date_service_restriction", "end_date_visibility_restriction",
    "decision_facts", "source_type", "source_identity", "automated_detection", "automated_decision", "puid"}
REQUIRED = ("decision_ground", "content_type", "category", "content_date", "application_date", "decision_facts",
            "source_type", "automated_detection", "automated_decision", "puid",
            "territorial_scope")  # territorial_scope: required by the documentation, nullable in the rules
PUID_RE = re.compile(r"^[a-zA-Z0-9\-_]+$")
DATE_RE = re.compile(r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$")


def tdb_date(value):
    """Y-m-d as PHP's date_format checks it: exactly that shape, a real calendar date; else None."""
    if not isinstance(value, str) or not DATE_RE.match(value):
        return None
    try:
        return dt.date.fromisoformat(value)
    except ValueError:
        return None


def tdb_violations(statement, allowed_missing=()):
    """The TDB rules a statement breaks (pgcld's own member dropped first), as readable strings.
    allowed_missing: required fields whose absence is accepted (those pgcld says it lacks)."""
    s = {k: v for k, v in statement.items() if k != "pgcld"}
    out = []

    def text(field, limit, required=False):
        v = s.get(field)
        if v is None:
            if required:
                out.append(f"{field}: required")
            return
        if not isinstance(v, str) or not v:
            out.append(f"{field}: must be a non-empty string")
        elif len(v) > limit:  # characters, as Laravel's max counts them
            out.append(f"{field}: {len(v)} characters > {limit}")

    def members(field, enum, required=False):
        v = s.get(field)
        if v is None:
            if required:
                out.append(f"{field}: required")
            return []
        if not isinstance(v, list):
            out.append(f"{field}: must be an array")
            return []
        for x in v:
            if x not in enum:
                out.append(f"{field}: {x!r} is not one of its values")
        return v

    def one_of(field, enum):
        if field in s and s[field] not in enum:
            out.append(f"{field}: {s[field]!r} is not one of its values")

    for field in sorted(set(s) - TDB_FIELDS):
        out.append(f"{field}: not a field of the statement store request")
    for field in REQUIRED:
        if s.get(field) in (None, "", []) and field not in allowed_missing:
            out.append(f"{field}: required")
    # restrictions: at least one of the four
    visibility = members("decision_visibility", DECISION_VISIBILITIES)
    monetary = s.get("decision_monetary")
    one_of("decision_monetary", DECISION_MONETARIES)
    one_of("decision_provision", DECISION_PROVISIONS)
    one_of("decision_account", DECISION_ACCOUNTS)
    one_of("account_type", ACCOUNT_TYPES)
    if not visibility and not monetary and not s.get("decision_provision") and not s.get("decision_account"):
        out.append("decision_visibility: required without decision_monetary, decision_provision, decision_account")
    if "DECISION_VISIBILITY_OTHER" in visibility:
        text("decision_visibility_other", 500, required=True)
    elif "decision_visibility_other" in s:
        out.append("decision_visibility_other: only with DECISION_VISIBILITY_OTHER")
    if monetary == "DECISION_MONETARY_OTHER":
        text("decision_monetary_other", 500, required=True)
    # grounds
    one_of("decision_ground", DECISION_GROUNDS)
    ground = s.get("decision_ground")
    conditional = {"DECISION_GROUND_ILLEGAL_CONTENT": (("illegal_content_legal_ground", 500),
                                                       ("illegal_content_explanation", 2000)),
                   "DECISION_GROUND_INCOMPATIBLE_CONTENT": (("incompatible_content_ground", 500),
                                                            ("incompatible_content_explanation", 2000))}
    for g, fields in conditional.items():
        for field, limit in fields:
            if ground == g:
                text(field, limit, required=True)
            elif field in s:
                out.append(f"{field}: only with {g}")
    if "incompatible_content_illegal" in s:
        if ground != "DECISION_GROUND_INCOMPATIBLE_CONTENT":
            out.append("incompatible_content_illegal: only with DECISION_GROUND_INCOMPATIBLE_CONTENT")
        one_of("incompatible_content_illegal", {"Yes", "No"})
    text("decision_ground_reference_url", 500)
    if isinstance(s.get("decision_ground_reference_url"), str) and \
            not re.match(r"^https?://[^\s]+$", s["decision_ground_reference_url"]):
        out.append("decision_ground_reference_url: must be a URL")
    # content
    types = members("content_type", CONTENT_TYPES, required=True)
    if "CONTENT_TYPE_OTHER" in types:
        text("content_type_other", 500, required=True)
    elif "content_type_other" in s:
        out.append("content_type_other: only with CONTENT_TYPE_OTHER")
    one_of("category", CATEGORIES)
    members("category_addition", CATEGORIES)
    spec = members("category_specification", KEYWORDS)
    text("category_specification_other", 500)
    if "category_specification_other" in s and "KEYWORD_OTHER" not in spec:
        out.append("category_specification_other: only with KEYWORD_OTHER")
    members("territorial_scope", EEA_COUNTRIES)
    if "content_language" in s and not (isinstance(s["content_language"], str)
                                        and re.match(r"^[A-Z]{2}$", s["content_language"])):
        out.append("content_language: must be an uppercase ISO 639-1 code")
    # dates
    content_date = application_date = None
    if "content_date" in s:
        content_date = tdb_date(s["content_date"])
        if content_date is None:
            out.append(f"content_date: {s['content_date']!r} is not YYYY-MM-DD")
        elif not dt.date(2000, 1, 1) <= content_date <= dt.date(2038, 1, 1):
            out.append(f"content_date: {content_date} outside 2000-01-01 .. 2038-01-01")
    if "application_date" in s:
        application_date = tdb_date(s["application_date"])
        if application_date is None:
            out.append(f"application_date: {s['application_date']!r} is not YYYY-MM-DD")
        elif not dt.date(2020, 1, 1) <= application_date <= dt.date(2038, 1, 1):
            out.append(f"application_date: {application_date} outside 2020-01-01 .. 2038-01-01")
    for kind in ("account", "monetary", "service", "visibility"):
        field = f"end_date_{kind}_restriction"
        if s.get(field) is not None:
            end = tdb_date(s[field])
            if end is None or end > dt.date(2038, 1, 1) or (application_date and end < application_date):
                out.append(f"{field}: {s[field]!r} is not a date from the application date to 2038-01-01")
    if content_date and application_date and content_date > application_date:
        out.append(f"content_date {content_date} is after application_date {application_date}")
    # the rest
    text("decision_facts", 5000, required=True)
    one_of("source_type", SOURCE_TYPES)
    if s.get("source_type") == "SOURCE_VOLUNTARY" and "source_identity" in s:
        out.append("source_identity: excluded for SOURCE_VOLUNTARY")
    text("source_identity", 500)
    one_of("automated_detection", AUTOMATED_DETECTIONS)
    one_of("automated_decision", AUTOMATED_DECISIONS)
    puid = s.get("puid")
    if puid is not None and not (isinstance(puid, str) and len(puid) <= 500 and PUID_RE.match(puid)):
        out.append(f"puid: {puid!r} is not 1 to 500 of a-z, A-Z, 0-9, '-', '_'")
    return out


def ts(t):
    """The audit columns' timestamp format."""
    return t.astimezone(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_ts(s):
    return dt.datetime.strptime(s, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=dt.timezone.utc)


SCAMS_DSA = {"category": "STATEMENT_CATEGORY_SCAMS_AND_FRAUD",
             "category_specification": ["KEYWORD_PHISHING", "KEYWORD_OTHER"],
             "category_specification_other": "Advance-fee lottery bait"}


def models_dir(parent):
    """tiny (tiny_binary as it is: no dsa, the binary default) and scams (the same checkpoint with
    a `dsa` object naming another category)."""
    root = os.path.join(parent, "models")
    shutil.copytree(H.version_dir(TINY), os.path.join(root, "tiny", "1"))
    shutil.copytree(H.version_dir(TINY), os.path.join(root, "scams", "1"))
    path = os.path.join(root, "scams", "1", "config.json")
    with open(path, encoding="utf-8") as f:
        cfg = json.load(f)
    cfg["dsa"] = SCAMS_DSA
    with open(path, "w", encoding="utf-8") as f:
        json.dump(cfg, f, indent=2)
    return root


class StatementTestBase(unittest.TestCase):
    @classmethod
    def start(cls):
        H.require_models(TINY)
        cls.tmp = tempfile.mkdtemp(prefix="pgcld-dsa-")
        cls.addClassCleanup(shutil.rmtree, cls.tmp, True)
        cls.daemon = H.start_daemon(cls, models=models_dir(cls.tmp), default_model="tiny")
        cls.other_reviewer = cls.daemon.create_key("reviewer", "second reviewer")

    @classmethod
    def score_all(cls, model, extra=None):
        """Scores 64 random items with `model`; returns {decision: [result, ...]} (at this scale
        each decision of the tiny model's thresholds occurs many times). extra: fields added to
        every item."""
        items = H.json_items(H.random_embeddings(64, D, 23, scale=1.0), model)
        for it in items:
            it.update(extra or {})
        r = cls.daemon.score({"model": model, "items": items})
        assert r.status == 200, r
        by = {}
        for x in r.json["results"]:
            by.setdefault(x["decision"], []).append(x)
        assert set(by) == {"allow", "review", "block"}, sorted(by)
        return by

    def statement(self, did):
        """The statement of a decision, checked against openapi.yaml's StatementOfReasons."""
        r = self.daemon.get(f"/v1/decisions/{did}/statement", key=self.daemon.keys["reviewer"])
        self.assertEqual(r.status, 200, r)
        errs = validation_errors(STATEMENT_SCHEMA, r.json)
        self.assertFalse(errs, "; ".join(e.message for e in errs[:3]))
        return r.json

    def record(self, did):
        r = self.daemon.get(f"/v1/decisions/{did}", key=self.daemon.keys["reviewer"])
        self.assertEqual(r.status, 200, r)
        return r.json

    def assert_valid(self, st, restriction=True):
        """Every TDB rule holds, but for the fields pgcld says it lacks; a statement of no
        restriction is informational (not to be submitted) and states no restriction."""
        notes = st["pgcld"]
        self.assertEqual(notes["restriction"], restriction, st)
        found = tdb_violations(st, allowed_missing=notes["missing_fields"])
        if not restriction:
            self.assertIn("not to be submitted", notes["note"])
            self.assertEqual(st["decision_visibility"], [])
            want = ["decision_visibility: required without decision_monetary, decision_provision, decision_account"]
            self.assertEqual(found, want, json.dumps(st, indent=1))
        else:
            self.assertEqual(found, [], json.dumps(st, indent=1))
        for field in notes["missing_fields"]:
            self.assertNotIn(field, st)
            self.assertIn(field, ("content_date", "territorial_scope"))


class StatementRulesTest(StatementTestBase):
    """Statements of block, review and allow decisions, of contested and resolved ones, and of a
    model whose config.json names another category, against the TDB's rules (no storage half
    needed: content_date and territorial_scope are not sent, so pgcld lists them as missing)."""

    @classmethod
    def setUpClass(cls):
        cls.start()
        cls.tiny = cls.score_all("tiny")
        cls.scams = cls.score_all("scams")

    def test_checker_catches_broken_statements(self):
        """The checker itself: a valid statement passes; each broken rule is reported."""
        st = self.statement(self.tiny["review"][0]["decision_id"])
        self.assertEqual(tdb_violations(st, st["pgcld"]["missing_fields"]), [])
        breaks = [
            (lambda s: s.pop("decision_visibility_other"), "decision_visibility_other: required"),
            (lambda s: s.update(category="STATEMENT_CATEGORY_TOXICITY"), "category:"),
            (lambda s: s.update(application_date="2026-1-05"), "application_date:"),
            (lambda s: s.update(application_date="2019-12-31"), "application_date:"),
            (lambda s: s.update(content_date="2026-02-30"), "content_date:"),
            (lambda s: s.update(puid="a b"), "puid:"),
            (lambda s: s.update(puid="x" * 501), "puid:"),
            (lambda s: s.update(decision_facts="é" * 5001), "decision_facts:"),
            (lambda s: s.update(incompatible_content_ground="g" * 501), "incompatible_content_ground:"),
            (lambda s: s.update(territorial_scope=["DE", "UK"]), "territorial_scope:"),
            (lambda s: s.update(content_language="en"), "content_language:"),
            (lambda s: s.update(illegal_content_explanation="x"), "illegal_content_explanation: only"),
            (lambda s: s.update(source_identity="x"), "source_identity:"),
            (lambda s: s.update(content_type=["CONTENT_TYPE_OTHER"]), "content_type_other: required"),
            (lambda s: s.update(category_specification_other="x"), "category_specification_other: only"),
            (lambda s: s.update(decision_visibility=[]), "decision_visibility: required"),
            (lambda s: s.update(model="tiny"), "model: not a field"),
        ]
        for edit, needle in breaks:
            broken = copy.deepcopy(st)
            edit(broken)
            found = tdb_violations(broken, broken["pgcld"]["missing_fields"])
            self.assertTrue(any(needle in v for v in found), (needle, found))

    def test_block_review_allow(self):
        for decision, restriction in (("block", True), ("review", True), ("allow", False)):
            for x in self.tiny[decision][-3:]:  # the first ones are contested by the tests below
                did = x["decision_id"]
                st = self.statement(did)
                rec = self.record(did)
                self.assert_valid(st, restriction)
                self.assertEqual(st["puid"], did)  # never contested: the decision's own puid
                self.assertEqual(st["application_date"], rec["created_at"][:10])
                self.assertEqual(st["category"], "STATEMENT_CATEGORY_ILLEGAL_OR_HARMFUL_SPEECH")  # binary default
                self.assertNotIn("category_specification", st)
                self.assertEqual(st["automated_decision"], "AUTOMATED_DECISION_FULLY")
                notes = st["pgcld"]
                self.assertEqual(notes["missing_fields"], ["content_date", "territorial_scope"])
                self.assertEqual((notes["category_source"], notes["in_force_since_contest"], notes["previous_puids"]),
                                 ("task_default", None, []))
                if restriction:
                    self.assertIn("Add content_date and territorial_scope", notes["note"])
        self.assertEqual(self.statement(self.tiny["block"][-1]["decision_id"])["decision_visibility"],
                         ["DECISION_VISIBILITY_CONTENT_REMOVED"])
        self.assertEqual(self.statement(self.tiny["review"][0]["decision_id"])["decision_visibility"],
                         ["DECISION_VISIBILITY_OTHER"])

    def test_model_with_its_own_category(self):
        for decision, restriction in (("block", True), ("review", True), ("allow", False)):
            st = self.statement(self.scams[decision][0]["decision_id"])
            self.assert_valid(st, restriction)
            self.assertEqual(st["category"], "STATEMENT_CATEGORY_SCAMS_AND_FRAUD")
            self.assertEqual(st["category_specification"], SCAMS_DSA["category_specification"])
            self.assertEqual(st["category_specification_other"], SCAMS_DSA["category_specification_other"])
            self.assertEqual(st["pgcld"]["category_source"], "config")

    # -- contests
    def contest(self, did, key):
        r = self.daemon.post(f"/v1/decisions/{did}/contests", {"reason": "please look again"}, key=key)
        self.assertEqual(r.status, 201, r)
        return r.json["contest_id"]

    def resolve(self, cid, outcome, key):
        r = self.daemon.post(f"/v1/contests/{cid}/resolution", {"outcome": outcome, "note": "n"}, key=key)
        self.assertEqual(r.status, 201, r)

    def resolved_at(self, did, n):
        return self.record(did)["contests"][n - 1]["resolution"]["resolved_at"]

    def test_resolutions_refile_with_their_own_puid(self):
        """Through the real contest routes: block, upheld (same puid), overturned (allow: nothing in
        force, puid -r2), overturned again (review: a restriction the resolution started, puid -r3,
        application_date the resolution's)."""
        d = self.daemon
        a, b = d.keys["reviewer"], self.other_reviewer
        did = self.tiny["block"][0]["decision_id"]
        c1 = self.contest(did, a)
        st = self.statement(did)
        self.assert_valid(st)
        self.assertEqual((st["puid"], st["pgcld"]["effective_status"]), (did, "contested"))
        self.resolve(c1, "upheld", b)
        st = self.statement(did)
        self.assert_valid(st)
        self.assertEqual(st["puid"], did)  # an upheld removal is the same restriction
        self.assertEqual(st["automated_decision"], "AUTOMATED_DECISION_PARTIALLY")
        self.resolve(self.contest(did, b), "overturned", a)
        st = self.statement(did)
        self.assert_valid(st, restriction=False)
        self.assertEqual(st["puid"], did + "-r2")
        self.assertEqual((st["pgcld"]["in_force_since_contest"], st["pgcld"]["previous_puids"]), (2, [did]))
        self.assertEqual(st["application_date"], self.resolved_at(did, 2)[:10])
        self.resolve(self.contest(did, a), "overturned", b)
        st = self.statement(did)
        self.assert_valid(st)
        self.assertEqual(st["decision_visibility"], ["DECISION_VISIBILITY_OTHER"])
        self.assertEqual(st["puid"], did + "-r3")
        self.assertEqual((st["pgcld"]["in_force_since_contest"], st["pgcld"]["previous_puids"]),
                         (3, [did, did + "-r2"]))
        self.assertEqual(st["application_date"], self.resolved_at(did, 3)[:10])
        # the puid is stable: asked again, the same statement
        self.assertEqual(self.statement(did)["puid"], did + "-r3")

    def test_application_date_is_the_resolution_that_started_the_restriction(self):
        """A contest of an allow, overturned days later (rows inserted with controlled times):
        the hold for review starts on the resolution's date, not the decision's."""
        d = self.daemon
        did = self.tiny["allow"][0]["decision_id"]
        created = parse_ts(self.record(did)["created_at"])
        filed, resolved = created + dt.timedelta(days=1), created + dt.timedelta(days=3, hours=1)
        cid = str(uuid.uuid4())
        key_id = d.keys["reviewer"][:14]
        H.db_insert_events(d.db_path, "contests",
                           "INSERT INTO contests (contest_id, decision_id, filed_at, filed_by, filer_key_id, reason)"
                           " VALUES (?,?,?,?,?,?)", [(cid, did, ts(filed), f"r ({key_id})", key_id, "why")])
        st = self.statement(did)
        self.assertEqual((st["puid"], st["application_date"]), (did, created.date().isoformat()))
        H.db_insert_events(d.db_path, "resolutions",
                           "INSERT INTO resolutions (contest_id, resolved_at, resolved_by, resolver_key_id,"
                           " outcome, corrected_label, note) VALUES (?,?,?,?,?,?,?)",
                           [(cid, ts(resolved), "lead (pgcld_lead0000)", "pgcld_lead0000", "overturned", None, "n")])
        st = self.statement(did)
        self.assert_valid(st)
        self.assertEqual(st["pgcld"]["decision_in_force"], "review")
        self.assertEqual(st["puid"], did + "-r1")
        self.assertEqual(st["application_date"], resolved.date().isoformat())
        self.assertNotEqual(st["application_date"], created.date().isoformat())


class ModelDsaTest(StatementTestBase):
    """GET /v1/models shows each loaded version's DSA vocabulary: the dsa object as written, or
    the task's default category."""

    @classmethod
    def setUpClass(cls):
        cls.start()

    def test_models_show_their_dsa(self):
        r = self.daemon.get("/v1/models")
        self.assertEqual(r.status, 200, r)
        dsa = {m["name"]: v.get("dsa") for m in r.json["models"] for v in m["versions"]}
        self.assertEqual(dsa["scams"], dict(SCAMS_DSA, category_source="config"))
        self.assertEqual(dsa["tiny"], {"category": "STATEMENT_CATEGORY_ILLEGAL_OR_HARMFUL_SPEECH",
                                       "category_source": "task_default"})


class VersionSwapTest(StatementTestBase):
    """A statement names the vocabulary of the version that decided, whatever is active now: the
    TDB never updates a puid, so its category must not change when an operator activates a version
    with another `dsa`. A version no longer loaded is read from the model repository; one that is
    gone from it gets the fallback category, never another version's."""

    @classmethod
    def setUpClass(cls):
        cls.start()
        root = os.path.join(cls.tmp, "models", "scams")
        shutil.copytree(os.path.join(root, "1"), os.path.join(root, "2"))
        path = os.path.join(root, "2", "config.json")
        with open(path, encoding="utf-8") as f:
            cfg = json.load(f)
        cfg["dsa"] = {"category": "STATEMENT_CATEGORY_ILLEGAL_OR_HARMFUL_SPEECH"}
        with open(path, "w", encoding="utf-8") as f:
            json.dump(cfg, f, indent=2)

    def test_category_of_the_deciding_version(self):
        did = self.score_all("scams")["block"][0]["decision_id"]
        self.assertEqual(self.statement(did)["category"], SCAMS_DSA["category"])
        r = self.daemon.post("/v1/admin/models/scams/activate", {"version": "2"})
        self.assertEqual(r.status, 200, r)
        after = self.daemon.score({"model": "scams", "items": H.json_items(H.random_embeddings(1, D, 3), "v2")})
        self.assertEqual(after.status, 200, after)
        self.assertEqual(self.statement(after.json["results"][0]["decision_id"])["category"],
                         "STATEMENT_CATEGORY_ILLEGAL_OR_HARMFUL_SPEECH")
        st = self.statement(did)  # version 1 is not loaded now: read from the repository
        self.assertEqual(st["category"], SCAMS_DSA["category"], st)
        self.assertEqual(st["category_specification"], SCAMS_DSA["category_specification"])
        self.assertEqual(st["pgcld"]["category_source"], "config")
        shutil.rmtree(os.path.join(self.tmp, "models", "scams", "1"))
        st = self.statement(did)  # gone from the repository: the fallback, not version 2's category
        self.assertEqual(st["category"], "STATEMENT_CATEGORY_OTHER_VIOLATION_TC", st)
        self.assertEqual(st["pgcld"]["category_source"], "fallback")


CONTENT = {"content_date": "2026-01-15", "territorial_scope": ["DE", "FR"], "content_language": "EN"}


class StoredContentFieldsTest(StatementTestBase):
    """NEEDS THE STORAGE HALF (issue 19 item 9: the scoring routes accept content_date,
    territorial_scope and content_language per item and store them with the decision): with them
    sent, the statement is complete — nothing missing, every TDB rule holds as it is."""

    @classmethod
    def setUpClass(cls):
        cls.start()
        cls.with_fields = cls.score_all("scams", CONTENT)

    def test_complete_statements(self):
        for decision in ("block", "review"):
            st = self.statement(self.with_fields[decision][0]["decision_id"])
            self.assertEqual(st["pgcld"]["missing_fields"], [], st)
            self.assertEqual(tdb_violations(st), [], json.dumps(st, indent=1))
            for field, value in CONTENT.items():
                self.assertEqual(st[field], value)
            self.assertEqual(st["pgcld"]["note"], "Drop this 'pgcld' member before submitting.")
        st = self.statement(self.with_fields["allow"][0]["decision_id"])
        self.assertEqual(st["pgcld"]["missing_fields"], [])
        self.assertEqual(st["content_date"], CONTENT["content_date"])
        self.assertFalse(st["pgcld"]["restriction"])

    def test_only_what_was_sent(self):
        """An item sent with content_date only: territorial_scope is still listed as missing and
        content_language left out (it is optional)."""
        items = H.json_items(H.random_embeddings(4, D, 5), "partial")
        for it in items:
            it["content_date"] = "2025-12-31"
        r = self.daemon.score({"model": "tiny", "items": items})
        self.assertEqual(r.status, 200, r)
        st = self.statement(r.json["results"][0]["decision_id"])
        self.assertEqual(st["content_date"], "2025-12-31")
        self.assertNotIn("content_language", st)
        self.assertEqual(st["pgcld"]["missing_fields"], ["territorial_scope"])
        self.assertEqual(tdb_violations(st, ["territorial_scope"]), [])


if __name__ == "__main__":
    unittest.main()
