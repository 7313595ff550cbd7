"""The exceptions of the pgcld client.

Every error answer of pgcld is a JSON body ``{"error": {"code", "message", "item"?, "field"?}}``
(openapi.yaml, "Errors"); the client raises it as a ``PgcldError`` carrying those members and the
HTTP status. A request that got no answer at all, after its retries, raises a
``PgcldConnectionError`` (status None) chained to the last network error. A proof that does not
verify raises a ``ProofError``."""


class PgcldError(Exception):
    """An error answer of pgcld.

    status: the HTTP status (None for PgcldConnectionError); code: pgcld's stable error code
    (``rate_limited``, ``dimension_mismatch``, ...; ``http_<status>`` when the body was not pgcld's
    JSON error, e.g. an HTML page of a proxy); message: pgcld's message; field and item: the
    member and the zero-based item index the error names, or None; retry_after: the
    ``Retry-After`` header in seconds, or None; body: the raw answer body (bytes)."""

    def __init__(self, status, code, message, field=None, item=None, retry_after=None, body=b""):
        super().__init__(f"{status} {code}: {message}" if status is not None else f"{code}: {message}")
        self.status = status
        self.code = code
        self.message = message
        self.field = field
        self.item = item
        self.retry_after = retry_after
        self.body = body


class PgcldConnectionError(PgcldError):
    """No answer came back (connection refused, reset or dropped, timeout), after every retry the
    request allowed. ``__cause__`` is the last network error."""

    def __init__(self, message):
        super().__init__(None, "connection_error", message)


class ProofError(ValueError):
    """An inclusion proof that does not verify; the message says which step failed."""
