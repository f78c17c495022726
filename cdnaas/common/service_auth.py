"""Service-to-service authentication: short-lived tokens signed with the installation's key.

SO, SIDR, RO and IM answer only callers that hold the per-installation service key
(the customer API is authenticated by tenant tokens instead, see ``cdnaas.api.auth``).
A caller does not send the key itself: it sends a token that names it and expires,

    ``svc1.<caller>.<expires, unix seconds>.<HMAC-SHA256(key, "svc1.<caller>.<expires>")>``

so a token seen in a log is worthless ``TOKEN_TTL_SECONDS`` later and the key never
travels. The key file holds one or more keys, one hex key per line: the first signs,
every one verifies. That is how a key is rotated without downtime
(``cdnaas secret rotate``: a new key in front, the old one kept; once every service has
read the file, ``cdnaas secret rotate --finish`` drops the old ones). The file is read
again whenever it changes, so rotation needs no restart.

Where the key lives: ``CDNAAS_SERVICE_KEY_FILE``, by default ``service.key`` in the state
dir. ``cdnaas db upgrade`` (and so ``cdnaas up``) creates it, readable by its owner only.
"""
import contextlib
import functools
import hashlib
import hmac
import os
import re
import secrets
import time
from pathlib import Path

from cdnaas.common import config, errors

VERSION = "svc1"
TOKEN_TTL_SECONDS = 300
CLOCK_SKEW_SECONDS = 30
#: a token of this caller may only read ``/metrics``, and may live long enough for a scraper
METRICS_CALLER = "metrics"
METRICS_TOKEN_MAX_DAYS = 366
KEY_BYTES = 32
_CALLER = re.compile(r"^[a-z][a-z0-9-]{0,31}$")
_KEY_LINE = re.compile(r"^[0-9a-f]{64}$")  # a key, and a signature (HMAC-SHA256, hex)
_EXPIRES = re.compile(r"^[0-9]{1,12}$")


def key_file() -> Path:
    """Path of the service key file (``CDNAAS_SERVICE_KEY_FILE`` or the state dir's)."""
    explicit = config.setting("CDNAAS_SERVICE_KEY_FILE")
    return Path(explicit) if explicit else config.state_path() / "service.key"


def ensure_key(path=None) -> Path:
    """Create the key file with one new key unless it exists; return its path.

    Safe when several processes start at once: the file appears complete or not at all.
    """
    return ensure_private_file(Path(path or key_file()), lambda: secrets.token_hex(KEY_BYTES))


def ensure_private_file(path, new_line) -> Path:
    """Create ``path`` (mode 0600) holding the one line ``new_line()`` unless it exists;
    return it. Safe when several processes start at once (:func:`write_private_lines`)."""
    path = Path(path)
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        write_private_lines(path, [new_line()], replace=False)
    return path


def rotate(path=None, finish=False) -> list[str]:
    """Put a new signing key in front of the file's keys (``finish``: keep only the first).

    :returns: the key ids (first 8 hex digits) now in the file, signing key first.
    """
    path = ensure_key(path)
    keys = read_keys(path)
    keys = keys[:1] if finish else [secrets.token_hex(KEY_BYTES)] + keys[:1]
    write_private_lines(path, keys, replace=True)
    _keys_of.cache_clear()
    return [key[:8] for key in keys]


def read_keys(path=None) -> list[str]:
    """The keys of the key file, signing key first (read again once the file changes).

    :raises cdnaas.common.errors.CdnaasError: (500) the file is missing or holds no key.
    """
    path = os.fspath(path or key_file())  # a stat of a string: read at every call
    try:
        stat = os.stat(path)
    except FileNotFoundError as exc:
        raise errors.CdnaasError(f"no service key at {path}; run 'cdnaas db upgrade' "
                                 "(or set CDNAAS_SERVICE_KEY_FILE)") from exc
    return list(_keys_of(path, stat.st_mtime_ns, stat.st_size))


@functools.lru_cache(maxsize=8)
def _keys_of(path, _mtime_ns, _size):
    """The keys of ``path`` as it was at that modification time and size."""
    lines = [line.strip() for line in Path(path).read_text(encoding="ascii").splitlines()]
    keys = tuple(line for line in lines if _KEY_LINE.match(line))
    if not keys:
        raise errors.CdnaasError(f"the service key file {path} holds no key")
    return keys


def token(caller, path=None, now=None, ttl=TOKEN_TTL_SECONDS) -> str:
    """A token for ``caller`` (a service or tool name), valid ``ttl`` seconds.

    Only :data:`METRICS_CALLER` tokens may live longer than ``TOKEN_TTL_SECONDS``.
    """
    if not _CALLER.match(caller):
        raise ValueError(f"caller name {caller!r} is not a short lowercase name")
    if ttl > _max_ttl(caller):
        raise ValueError(f"a {caller} token lives at most {_max_ttl(caller)} s")
    expires = int((now or time.time()) + ttl)
    payload = f"{VERSION}.{caller}.{expires}"
    return f"{payload}.{_sign(read_keys(path)[0], payload)}"


def headers(caller, path=None) -> dict:
    """``{"Authorization": "Bearer <token>"}`` for a request made as ``caller``."""
    return {"Authorization": f"Bearer {token(caller, path)}"}


def verify(presented, path=None, now=None) -> str:
    """The caller named by a valid token.

    :raises cdnaas.common.errors.Unauthorized: malformed, expired, too far in the
        future, or signed by no key of the file.
    """
    parts = presented.split(".") if isinstance(presented, str) else []
    if len(parts) != 4 or parts[0] != VERSION or not _CALLER.match(parts[1]) \
            or not _EXPIRES.match(parts[2]) or not _KEY_LINE.match(parts[3]):
        raise errors.Unauthorized("the service token is malformed; internal services take "
                                  "'Authorization: Bearer svc1.<caller>.<expires>.<signature>'")
    now = now or time.time()
    expires = int(parts[2])
    if expires < now:
        raise errors.Unauthorized("the service token has expired; sign a new one")
    if expires > now + _max_ttl(parts[1]) + CLOCK_SKEW_SECONDS:
        raise errors.Unauthorized("the service token expires too far in the future")
    payload = ".".join(parts[:3])
    if not any(hmac.compare_digest(_sign(key, payload), parts[3]) for key in read_keys(path)):
        raise errors.Unauthorized("the service token is not signed by this installation's key")
    return parts[1]


def bearer(header_value) -> str:
    """The token of an ``Authorization: Bearer`` header value.

    :raises cdnaas.common.errors.Unauthorized: no bearer credential.
    """
    scheme, _, credential = (header_value or "").partition(" ")
    if scheme.lower() != "bearer" or not credential.strip():
        raise errors.Unauthorized("this is an internal service: send 'Authorization: Bearer "
                                  "<service token>' signed with the installation's service key")
    return credential.strip()


def _max_ttl(caller):
    return METRICS_TOKEN_MAX_DAYS * 86400 if caller == METRICS_CALLER else TOKEN_TTL_SECONDS


def _sign(key, payload):
    return hmac.new(bytes.fromhex(key), payload.encode("ascii"), hashlib.sha256).hexdigest()


def write_private_lines(path, keys, replace):
    """Write ``keys`` (lines) to a private (0600) temporary file, then move (``replace``) or
    link it in place (not ``replace``: a file another process made first is kept). Shared
    with RO's secret key (:func:`cdnaas.common.keyfiles.ensure_secret_key`)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "w", encoding="ascii") as handle:
            handle.write("".join(f"{key}\n" for key in keys))
        if replace:
            os.replace(tmp, path)
        else:
            with contextlib.suppress(FileExistsError):  # another process made it first
                os.link(tmp, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
