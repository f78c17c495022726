"""Errors that services turn into JSON answers, and back again in clients.

Every error answer has the shape ``{"error": {"code", "title", "message",
"field", "details"}}``: ``message`` says what to fix, ``field`` names the
offending input where there is one, ``details`` lists every problem found.
"""


class CdnaasError(Exception):
    """Base of errors that map to an HTTP status."""

    status = 500
    title = "Internal error"

    def __init__(self, message, field=None, details=None):
        super().__init__(message)
        self.message = message
        self.field = field
        self.details = details or []

    def to_dict(self):
        body = {"code": self.status, "title": self.title, "message": self.message}
        if self.field:
            body["field"] = self.field
        if self.details:
            body["details"] = self.details
        return {"error": body}


class BadRequest(CdnaasError):
    status = 400
    title = "Bad request"


class Unauthorized(CdnaasError):
    status = 401
    title = "Unauthorized"


class Forbidden(CdnaasError):
    status = 403
    title = "Forbidden"


class NotFound(CdnaasError):
    status = 404
    title = "Not found"


class Conflict(CdnaasError):
    status = 409
    title = "Conflict"


class Unprocessable(CdnaasError):
    status = 422
    title = "Unprocessable request"


class PreconditionFailed(CdnaasError):
    """An ``If-Match`` precondition does not hold: the record changed since it was read."""

    status = 412
    title = "Precondition failed"


class PayloadTooLarge(CdnaasError):
    status = 413
    title = "Payload too large"


class UpstreamError(CdnaasError):
    """A peer service failed or could not be reached (retryable)."""

    status = 502
    title = "Upstream service error"


class Unavailable(CdnaasError):
    """The service cannot answer now (its database is unreachable or restarting):
    retryable, nothing was changed."""

    status = 503
    title = "Service unavailable"
    retry_after_seconds = 2


def outage_words(exc) -> str:
    """The first line of what the database driver said of ``exc`` (SQLAlchemy's
    ``OperationalError``: the server restarting, unreachable, SQLite locked), for a log
    line or an :class:`Unavailable`'s message."""
    return str(getattr(exc, "orig", None) or exc).splitlines()[0][:200]


_BY_STATUS = {cls.status: cls for cls in (BadRequest, Unauthorized, Forbidden, NotFound,
                                           Conflict, PreconditionFailed, PayloadTooLarge,
                                           Unprocessable, UpstreamError, Unavailable)}


def from_response(status: int, body) -> CdnaasError:
    """Rebuild the error a peer service answered with, keeping its status."""
    error = (body or {}).get("error", {}) if isinstance(body, dict) else {}
    cls = _BY_STATUS.get(status, UpstreamError)
    exc = cls(error.get("message") or f"peer answered HTTP {status}",
              field=error.get("field"), details=error.get("details"))
    exc.status = status if status in _BY_STATUS else UpstreamError.status
    return exc
