"""Delivery option ``access``: who may fetch a vCDN's content, checked at its caches.

``{"signed_urls": {"enabled", "paths", "keys"}, "regions": {"allow"}, "clients": {"allow"}
or {"deny"}, "rate_limit": {"requests_per_second", "burst"}}``, each part optional:

- ``signed_urls``: requests under one of ``paths`` (path prefixes, default ``["/"]``) need a
  token, in the query or the ``CDNaaS-Token`` cookie (:func:`sign`; the format is in
  ``templates/cdnaas-access.js``, which checks it in njs), signed with HMAC-SHA256 by one
  of ``keys`` (``[{id, secret}]``, one or two: a rotation replaces ``A, B`` by ``B, C``
  and tokens carry their key's ``kid``). Secrets are stored sealed (Fernet, with RO's
  secret key file, :func:`cdnaas.common.keyfiles.secret_key_file`), shown masked and
  written only to a root-only file on each cache (:func:`vnf_files`); the token's
  arguments stay out of the cache key (:data:`TOKEN_ARGS`);
- ``regions.allow``: the regions whose caches serve; the others' answer 403;
- ``clients.allow`` / ``clients.deny``: viewer prefixes (at most :data:`MAX_PREFIXES`)
  served only / refused (403); the caches see the viewer through the balancer's
  ``X-Forwarded-For`` (nginx's realip module);
- ``rate_limit``: requests per second per viewer address, with a burst; past it 429.
"""
import base64
import hashlib
import hmac
import ipaddress
import json
import os
import re
import time
from pathlib import Path
from urllib.parse import quote

from cryptography.fernet import InvalidToken

from cdnaas.common import config, keyfiles
from cdnaas.delivery import fields

FIELD = "access"
ROLES = ("cache",)

#: viewer prefixes one list may hold
MAX_PREFIXES = 256
MAX_PATHS = 32
MAX_KEYS = 2
MAX_REGIONS = 64
MAX_RATE = 1_000_000
#: the query arguments of a token, never part of an object's cache key
TOKEN_ARGS = ("exp", "kid", "prefix", "ip", "sig")
#: the cookie carrying a token (for players whose segment URLs cannot carry one)
COOKIE = "CDNaaS-Token"
#: longest lifetime of a signed URL
MAX_LIFETIME = 366 * 86400
#: the njs verifier a cache imports, and the root-only file of its keys (under its prefix)
SCRIPT_FILE = "cdnaas-access.js"
KEYS_FILE = "cdnaas-access-keys.json"
MASK = "********"

_PATH = re.compile(r"/[A-Za-z0-9_.~/-]{0,255}")
_KEY_ID = re.compile(r"[A-Za-z0-9_-]{1,32}")
_SECRET = re.compile(r"[\x21-\x7e]{16,256}")  # printable ASCII, no space
_REGION = re.compile(r"[a-z0-9][a-z0-9-]{0,62}")
_SIGNED_KEYS = ("enabled", "paths", "keys")


def path_prefix(value, field) -> str:
    """``value`` if it is a path prefix of ``A-Z a-z 0-9 _ . ~ / -`` starting with ``/``
    (at most 256, no ``..`` segment).

    :raises BadRequest: naming ``field``.
    """
    if not isinstance(value, str) or not _PATH.fullmatch(value) or ".." in value.split("/"):
        fields.bad(field, "must be a path prefix like /videos/ (A-Z, a-z, 0-9, _ . ~ / -, at most "
                    "256, starting with /, no ..)")
    return value


def client_prefix(value, field):
    """``value`` as an :class:`ipaddress.IPv4Network` or ``IPv6Network`` (host bits cleared).

    :raises BadRequest: naming ``field``.
    """
    try:
        prefix = ipaddress.ip_network(value, strict=False) if isinstance(value, str) else None
    except ValueError:
        prefix = None
    if prefix is None or "%" in value:
        fields.bad(field, "must be an address prefix like 10.1.0.0/24 or 2001:db8::/48")
    return prefix


# --- sealing the keys' secrets ----------------------------------------------------------

def _fernet():
    return keyfiles.fernet(keyfiles.ensure_secret_key())


def _sealed(secret) -> str:
    return _fernet().encrypt(secret.encode("ascii")).decode("ascii")


def _opened(sealed, field) -> str:
    try:
        return _fernet().decrypt(sealed.encode("ascii")).decode("ascii")
    except (InvalidToken, ValueError, UnicodeError):
        fields.bad(field, "cannot be opened with this installation's secret key file; send the "
                    "key's secret again")


def _key(value, field):
    """A key ``{id, secret}`` (or stored ``{id, sealed}``) as stored: ``{id, sealed}``."""
    fields.object_of(value, field, ("id", "secret", "sealed"))
    key_id = value.get("id")
    if not isinstance(key_id, str) or not _KEY_ID.fullmatch(key_id):
        fields.bad(f"{field}.id", "must be a key id of A-Z, a-z, 0-9, _ and - (1 to 32)")
    if "secret" in value:
        secret = value["secret"]
        if not isinstance(secret, str) or not _SECRET.fullmatch(secret):
            fields.bad(f"{field}.secret", "must be 16 to 256 printable ASCII characters without "
                                    "spaces (e.g. 32 random bytes in base64url)")
        return {"id": key_id, "sealed": _sealed(secret)}
    sealed = value.get("sealed")
    if not isinstance(sealed, str):
        fields.bad(f"{field}.secret", "is missing: send the key's secret")
    _opened(sealed, f"{field}.sealed")
    return {"id": key_id, "sealed": sealed}


def _signed_urls(value, field):
    fields.object_of(value, field, _SIGNED_KEYS)
    enabled = value.get("enabled", True)
    if not isinstance(enabled, bool):
        fields.bad(f"{field}.enabled", "must be true or false")
    if not enabled:
        return None
    paths = [path_prefix(p, f"{field}.paths[{i}]") for i, p in enumerate(
        fields.list_of(value.get("paths", ["/"]), f"{field}.paths", MAX_PATHS, "path prefixes"))]
    if not paths:
        fields.bad(f"{field}.paths", "is empty: list the path prefixes to protect (/ for all)")
    keys = fields.list_of(value.get("keys"), f"{field}.keys", MAX_KEYS,
                 "keys {id, secret} (two while rotating)")
    if not keys:
        fields.bad(f"{field}.keys", "is empty: give one key {id, secret} (two while rotating)")
    stored = [_key(k, f"{field}.keys[{i}]") for i, k in enumerate(keys)]
    if len({k["id"] for k in stored}) != len(stored):
        fields.bad(f"{field}.keys[1].id", "is the id of keys[0]: give each key its own id")
    return {"enabled": True, "paths": sorted(set(paths)), "keys": stored}


def _regions(value, field):
    fields.object_of(value, field, ("allow",))
    names = fields.list_of(value.get("allow"), f"{field}.allow", MAX_REGIONS, "region names")
    for index, name in enumerate(names):
        if not isinstance(name, str) or not _REGION.fullmatch(name):
            fields.bad(f"{field}.allow[{index}]", "must be a region name (a-z, 0-9 and -)")
    return {"allow": sorted(set(names))}


def _clients(value, field):
    fields.object_of(value, field, ("allow", "deny"))
    if len(value) != 1:
        fields.bad(field, "must have either allow or deny (a list of address prefixes)")
    [(kind, prefixes)] = value.items()
    prefixes = fields.list_of(prefixes, f"{field}.{kind}", MAX_PREFIXES, "address prefixes")
    if kind == "allow" and not prefixes:
        fields.bad(f"{field}.allow", "is empty, which would refuse every viewer; list prefixes")
    checked = {client_prefix(p, f"{field}.{kind}[{i}]") for i, p in enumerate(prefixes)}
    return {kind: [str(p) for p in sorted(checked, key=lambda p: (p.version, p))]} \
        if checked else None


def _rate_limit(value, field):
    fields.object_of(value, field, ("requests_per_second", "burst"))
    rate = fields.integer(value.get("requests_per_second"), f"{field}.requests_per_second",
                          1, MAX_RATE)
    burst = fields.integer(value.get("burst", rate), f"{field}.burst", 0, MAX_RATE)
    return {"requests_per_second": rate, "burst": burst}


_PARTS = {"signed_urls": _signed_urls, "regions": _regions, "clients": _clients,
          "rate_limit": _rate_limit}


def check(value, field="access") -> dict | None:
    """``value`` as stored (secrets sealed), or None for no restriction.

    :raises BadRequest: naming the first field refused and what to send instead.
    """
    fields.object_of(value, field, tuple(_PARTS))
    stored = {}
    for part, checker in _PARTS.items():
        if value.get(part) is not None:
            checked = checker(value[part], f"{field}.{part}")
            if checked is not None:
                stored[part] = checked
    return stored or None


def view(stored):
    """The option as a vCDN's view shows it: secrets masked; None: no restriction."""
    if stored is None:
        return None
    shown = dict(stored)
    if "signed_urls" in stored:
        shown["signed_urls"] = {**stored["signed_urls"], "keys": [
            {"id": k["id"], "secret": MASK} for k in stored["signed_urls"]["keys"]]}
    return shown


def render(stored) -> dict:
    """What a cache's template gets (``nginx-cache-access.conf.j2``): ``on`` (any
    restriction), ``signed`` (bool), ``keys_version`` (a digest of the sealed keys, so a
    new key changes the config and reloads the caches, which read the keys as they load
    it), ``regions`` (allowed region names, or None: all), ``allow`` and ``deny``
    (prefixes), ``rate`` (``"<n>r/s"`` or None) and ``burst``. Never a secret."""
    stored = stored or {}
    rate = stored.get("rate_limit")
    clients = stored.get("clients", {})
    sealed = json.dumps(stored.get("signed_urls", {}).get("keys", []), sort_keys=True)
    return {"on": bool(stored), "signed": "signed_urls" in stored,
            "keys_version": hashlib.sha256(sealed.encode("ascii")).hexdigest()[:16],
            "regions": stored.get("regions", {}).get("allow"),
            "allow": clients.get("allow", []), "deny": clients.get("deny", []),
            "rate": f"{rate['requests_per_second']}r/s" if rate else None,
            "burst": rate["burst"] if rate else 0}


def signs(service) -> bool:
    """Whether a SIG's ``service`` has signed URLs (its caches' keys leave the token out)."""
    return "signed_urls" in ((service or {}).get(FIELD) or {})


def vnf_files(service) -> list:
    """``[(file name, text, mode)]`` a cache of a SIG with this ``service`` needs under its
    prefix directory: the njs verifier and its keys (mode 0600: nginx's root master reads
    them as it loads the config); none without signed URLs.

    :raises BadRequest: the stored option is refused or a secret cannot be opened.
    """
    stored = (service or {}).get(FIELD)
    stored = None if stored is None else check(stored, f"service.{FIELD}")
    signed = (stored or {}).get("signed_urls")
    if signed is None:
        return []
    keys = {k["id"]: _opened(k["sealed"], f"service.{FIELD}.signed_urls.keys")
            for k in signed["keys"]}
    script = (config.REPO_ROOT / "templates" / SCRIPT_FILE).read_text(encoding="utf-8")
    return [(SCRIPT_FILE, script, 0o644),
            (KEYS_FILE, json.dumps({"paths": signed["paths"], "keys": keys}), 0o600)]


def write_vnf_files(prefix_dir, files) -> None:
    """Write ``files`` (:func:`vnf_files`) under ``prefix_dir``, each replaced whole with
    its mode; remove those not among them (the vCDN signs no URL any more)."""
    wanted = {name: (text, mode) for name, text, mode in files}
    for name in (SCRIPT_FILE, KEYS_FILE):
        path = Path(prefix_dir, name)
        if name not in wanted:
            path.unlink(missing_ok=True)
            continue
        text, mode = wanted[name]
        scratch = path.with_name(f".{name}.new")
        scratch.unlink(missing_ok=True)
        with open(os.open(scratch, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode), "w",
                  encoding="utf-8") as out:
            out.write(text)
        os.replace(scratch, path)


# --- signing ------------------------------------------------------------------------

def token(secret, key_id, path, expires, prefix=None, client=None) -> str:
    """The query text of a token (``exp=..&kid=..[&prefix=..][&ip=..]&sig=..``) for
    ``path`` (or every path under ``prefix``, which ``path`` must start with), valid until
    ``expires`` (Unix seconds), from viewers in ``client`` (an IPv4 prefix) only if given.
    """
    scope = f"prefix:{prefix}" if prefix is not None else f"path:{path}"
    message = "\n".join(["cdnaas-v1", str(expires), key_id, scope, client or ""])
    digest = hmac.new(secret.encode("ascii"), message.encode("utf-8"), hashlib.sha256).digest()
    fields = [("exp", str(expires)), ("kid", key_id)]
    fields += [("prefix", prefix)] if prefix is not None else []
    fields += [("ip", client)] if client else []
    fields.append(("sig", base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")))
    return "&".join(f"{name}={quote(value, safe='/')}" for name, value in fields)


def sign(stored, body, now=None) -> dict:
    """A signed URL's parts for the request ``body`` (``{path, expires_in, prefix, client,
    key_id}``) with the vCDN's stored option: ``{path, query, expires, key_id}``.

    :raises BadRequest: naming the field refused; the vCDN has no signed URLs (``access``).
    """
    signed = (stored or {}).get("signed_urls")
    if signed is None:
        fields.bad("access", "has no signed_urls: enable them (PATCH the vCDN's access) first")
    fields.object_of(body, "body", ("path", "expires_in", "prefix", "client", "key_id"))
    path = path_prefix(body.get("path"), "path")
    lifetime = fields.integer(body.get("expires_in", 3600), "expires_in", 1, MAX_LIFETIME)
    prefix = body.get("prefix")
    if prefix is not None and not path.startswith(path_prefix(prefix, "prefix")):
        fields.bad("prefix", f"must be a prefix of path {path}")
    client = body.get("client")
    if client is not None:
        network = client_prefix(client, "client")
        if network.version != 4:
            fields.bad("client", "must be an IPv4 prefix (signed client prefixes are IPv4 only)")
        client = str(network)
    keys = {k["id"]: k for k in signed["keys"]}
    key_id = body.get("key_id", signed["keys"][-1]["id"])
    if key_id not in keys:
        fields.bad("key_id", f"is not one of the vCDN's keys ({', '.join(keys)})")
    expires = int(now if now is not None else time.time()) + lifetime
    secret = _opened(keys[key_id]["sealed"], "access.signed_urls.keys")
    return {"path": path, "query": token(secret, key_id, path, expires, prefix, client),
            "expires": expires, "key_id": key_id}
