"""The audit database for the integration tests, either store (imported through harness.py, which
re-exports it: `H.db_query`, `H.sqlite_only`).

PGCLD_TEST_STORE selects the store ("sqlite", the default, or "postgresql"). The helpers take a
Daemon's db_path, a SQLite file or a libpq URI: a URI is read through psycopg2 (imported only
then) with the same SQL and `?` placeholders, rows come back as dicts keyed by column name, bytea
as bytes. The PostgreSQL test cluster itself is harness.py's (pg_cluster).
"""

import os
import sqlite3
import unittest

import numpy as np

TEST_STORE = os.environ.get("PGCLD_TEST_STORE", "sqlite")
ON_POSTGRES = TEST_STORE == "postgresql"
if TEST_STORE not in ("sqlite", "postgresql"):
    raise RuntimeError(f"PGCLD_TEST_STORE={TEST_STORE!r}: expected sqlite or postgresql")


def is_postgres(db):
    """True when db (a Daemon's db_path) is a libpq URI rather than a SQLite file."""
    return str(db).startswith(("postgresql://", "postgres://"))


def sqlite_only(reason):
    """Decorator for a test (method or class) that is about the SQLite store by nature: it skips,
    with its reason, when the suite runs on PostgreSQL (PGCLD_TEST_STORE=postgresql)."""
    return unittest.skipIf(ON_POSTGRES, f"SQLite store only: {reason}")


def _pg_sql(sql, params):
    """SQLite-style SQL and parameters for psycopg2: every `%` doubled, every `?` outside a quoted
    string made %s, every numbered `?N` made %(pN)s (then the parameters go as a dict)."""
    out, quote, numbered, i = [], None, False, 0
    while i < len(sql):
        ch = sql[i]
        i += 1
        if quote:
            if ch == quote:
                quote = None
        elif ch in "'\"":
            quote = ch
        elif ch == "?":
            digits = ""
            while i < len(sql) and sql[i].isdigit():
                digits += sql[i]
                i += 1
            if digits:
                numbered = True
                out.append(f"%(p{int(digits)})s")
            else:
                out.append("%s")
            continue
        out.append("%%" if ch == "%" else ch)
    params = list(params)
    if numbered:
        params = {f"p{k + 1}": v for k, v in enumerate(params)}
    return "".join(out), params


def _pg_value(v):
    return bytes(v) if isinstance(v, memoryview) else v


_PG_CONNECTIONS = {}  # URI -> an autocommit psycopg2 connection, reused by the read helpers


def _pg_connection(uri):
    conn = _PG_CONNECTIONS.get(uri)
    if conn is None or conn.closed:
        import psycopg2
        conn = psycopg2.connect(uri, connect_timeout=10)
        conn.autocommit = True
        _PG_CONNECTIONS[uri] = conn
    return conn


def _pg_forget(uri):
    conn = _PG_CONNECTIONS.pop(uri, None)
    if conn is not None:
        try:
            conn.close()
        except Exception:
            pass


def _pg_execute(uri, sql, params, fetch):
    """Runs sql on uri (one retry on a fresh connection when the cached one was lost, e.g. after
    the server restarted); returns fetch(cursor)."""
    import psycopg2
    for attempt in (1, 2):
        conn = _pg_connection(uri)
        try:
            with conn.cursor() as cur:
                cur.execute(*_pg_sql(sql, params))
                return fetch(cur)
        except (psycopg2.OperationalError, psycopg2.InterfaceError):
            _pg_forget(uri)
            if attempt == 2:
                raise


def _pg_rows(cur):
    if cur.description is None:
        return []
    names = [c.name for c in cur.description]
    return [{n: _pg_value(v) for n, v in zip(names, row)} for row in cur.fetchall()]


def db_query(db_path, sql, params=()):
    """Run a read query on the audit DB (a SQLite file or a PostgreSQL URI); rows as dicts."""
    if is_postgres(db_path):
        return _pg_execute(db_path, sql, params, _pg_rows)
    conn = sqlite3.connect(db_path, timeout=30)
    try:
        conn.row_factory = sqlite3.Row
        return [dict(r) for r in conn.execute(sql, params).fetchall()]
    finally:
        conn.close()


def db_scalar(db_path, sql, params=()):
    if is_postgres(db_path):
        return _pg_execute(db_path, sql, params, lambda cur: _pg_value(cur.fetchone()[0]))
    conn = sqlite3.connect(db_path, timeout=30)
    try:
        return conn.execute(sql, params).fetchone()[0]
    finally:
        conn.close()


def db_execute(db_path, sql, params=()):
    """A write behind pgcld's back (tests that tamper with the record on purpose), committed."""
    if is_postgres(db_path):
        _pg_execute(db_path, sql, params, lambda cur: None)
        return
    conn = sqlite3.connect(db_path, timeout=30)
    try:
        conn.execute(sql, params)
        conn.commit()
    finally:
        conn.close()


def db_insert_events(db_path, table, sql, rows):
    """Inserts event rows behind pgcld's back (tests that need controlled timestamps), in one
    transaction. sql is `INSERT INTO <table> (<columns>) VALUES (...)` or `... SELECT ...` without
    seq: SQLite numbers the rows itself; on PostgreSQL each row gets the next seq of its table from
    fleet_counters (as a writer would), which goes first in the VALUES or SELECT list."""
    rows = [tuple(r) for r in rows]
    if not is_postgres(db_path):
        conn = sqlite3.connect(db_path, timeout=30)
        try:
            with conn:
                conn.executemany(sql, rows)
        finally:
            conn.close()
        return
    head = f"INSERT INTO {table} ("
    assert sql.startswith(head), sql
    body = head + "seq, " + sql[len(head):]
    for marker, with_seq in ((" VALUES (", " VALUES (?, "), (" SELECT ", " SELECT ?, ")):
        if marker in body:
            body = body.replace(marker, with_seq, 1)
            break
    else:
        raise ValueError(f"db_insert_events: neither VALUES nor SELECT in {sql!r}")
    conn = _pg_connection(db_path)
    conn.autocommit = False
    try:
        with conn, conn.cursor() as cur:
            cur.execute(f"UPDATE fleet_counters SET {table} = {table} + %s WHERE id = 1 RETURNING {table}",
                        (len(rows),))
            last = cur.fetchone()[0]
            for k, r in enumerate(rows):
                cur.execute(*_pg_sql(body, (last - len(rows) + 1 + k,) + r))
    finally:
        conn.autocommit = True


class WriterLock:
    """Makes the audit writer's next commit wait, behind pgcld's back, until release(): on SQLite
    the file's write lock (BEGIN EXCLUSIVE), on PostgreSQL the row of fleet_counters that every
    writer transaction locks first (SELECT ... FOR UPDATE in an open transaction)."""

    def __init__(self, db_path):
        self.db_path = db_path
        if is_postgres(db_path):
            import psycopg2
            self.conn = psycopg2.connect(db_path, connect_timeout=10)
            self.conn.autocommit = False
            self.conn.cursor().execute("SELECT 1 FROM fleet_counters WHERE id = 1 FOR UPDATE")
        else:
            self.conn = sqlite3.connect(db_path, timeout=30, isolation_level=None)
            self.conn.execute("BEGIN EXCLUSIVE")

    def release(self):
        if self.conn is None:
            return
        try:
            self.conn.rollback() if is_postgres(self.db_path) else self.conn.execute("ROLLBACK")
        finally:
            self.conn.close()
            self.conn = None


def decision_count(db_path):
    return db_scalar(db_path, "SELECT COUNT(*) FROM decisions")


def decisions_present(db_path, decision_ids):
    """How many of decision_ids have a row in decisions (each id counted once)."""
    ids = sorted(set(decision_ids))
    found = 0
    for i in range(0, len(ids), 500):
        chunk = ids[i:i + 500]
        found += db_scalar(db_path, "SELECT COUNT(*) FROM decisions WHERE decision_id IN (%s)"
                           % ",".join("?" * len(chunk)), chunk)
    return found


def sqlite_integrity_ok(db_path):
    """PRAGMA integrity_check on a SQLite file is "ok"; always True for a PostgreSQL database,
    which has no such file-level check (its consistency is the server's)."""
    return is_postgres(db_path) or db_scalar(db_path, "PRAGMA integrity_check") == "ok"


def blob_vector(blob):
    return np.frombuffer(blob, dtype="<f4")
