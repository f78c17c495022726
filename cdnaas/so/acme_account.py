"""SO's ACME account: one P-256 key for the life of the SO deployment, its thumbprint, and
the account's URL at the operator's CA.

The key's thumbprint (RFC 7638, base64url SHA-256) ends every key authorization SO's
orders have the CA check, and the caches of every managed vCDN answer HTTP-01 challenges
with it from their config (:mod:`cdnaas.common.challenges`; the SIG's
``service.acme_thumbprint``, :func:`thumbprint`). So the key is made once and kept: a
CA that no longer knows the account (:func:`forget_url`) or another CA directory
registers the same key again, and the caches' answers stay right. Losing the account
file changes the thumbprint: the vCDNs' caches answer for the old key until an update
of each renders the new one (RO refuses the new orders' answers meanwhile, 409).

The file (``CDNAAS_ACME_ACCOUNT_FILE``, default ``<state dir>/acme-account.json``) holds
``{"key": PEM, "directory": URL or None, "uri": account URL or None}`` encrypted (Fernet)
with the key in the file of the same name ending ``.key`` (0600), both made on first
use. SO's replicas must share them (one account, one thumbprint).
"""
import json
import threading
from pathlib import Path

import josepy
from cryptography.fernet import Fernet, InvalidToken
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec

from cdnaas.common import config, service_auth

_lock = threading.Lock()


class AccountUnreadable(Exception):
    """The account file cannot be decrypted or read (was its ``.key`` file replaced?)."""


def account_file() -> Path:
    """Where SO's ACME account is kept (``CDNAAS_ACME_ACCOUNT_FILE`` or the state dir's)."""
    explicit = config.setting("CDNAAS_ACME_ACCOUNT_FILE")
    return Path(explicit) if explicit else config.state_path() / "acme-account.json"


def _fernet(path):
    key_file = service_auth.ensure_private_file(path.with_suffix(".key"),
                                                lambda: Fernet.generate_key().decode("ascii"))
    return Fernet(key_file.read_text(encoding="ascii").split()[0])


def _sealed(path, kept):
    return _fernet(path).encrypt(json.dumps(kept).encode("ascii")).decode("ascii")


def _new_key_pem():
    return ec.generate_private_key(ec.SECP256R1()).private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption()).decode("ascii")


def _read():
    """The kept ``{"key", "directory", "uri"}``, the key made and kept first if there is
    none (the first process to write it wins).

    :raises AccountUnreadable: the file cannot be decrypted or read.
    """
    path = account_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    service_auth.ensure_private_file(path, lambda: _sealed(
        path, {"key": _new_key_pem(), "directory": None, "uri": None}))
    try:
        kept = json.loads(_fernet(path).decrypt(path.read_bytes().strip()))
        josepy.JWKEC.load(kept["key"].encode("ascii"))
    except (InvalidToken, ValueError, KeyError, TypeError) as exc:
        raise AccountUnreadable(f"the ACME account in {path} cannot be read "
                                f"({type(exc).__name__}): was its .key file replaced?") from None
    return kept


def load(directory):
    """``(JWK, account URL or None)`` of SO's account at CA ``directory`` (None: the key is
    not registered there yet).

    :raises AccountUnreadable: as :func:`_read`.
    """
    with _lock:
        kept = _read()
    uri = kept["uri"] if kept["directory"] == directory else None
    return josepy.JWKEC.load(kept["key"].encode("ascii")), uri


def save_url(directory, uri):
    """Record that SO's key is account ``uri`` (None: not registered) at CA ``directory``."""
    with _lock:
        kept = _read()
        path = account_file()
        service_auth.write_private_lines(
            path, [_sealed(path, {**kept, "directory": directory, "uri": uri})], replace=True)


def forget_url():
    """Drop the account's URL (the CA no longer knows it): the next order registers the
    same key again, so the caches' answers stay right."""
    with _lock:
        kept = _read()
    save_url(kept["directory"], None)


def thumbprint() -> str:
    """The base64url SHA-256 thumbprint (RFC 7638) of SO's account key, as key
    authorizations end (the key made first if there is none).

    :raises AccountUnreadable: as :func:`_read`.
    """
    jwk, _uri = load(None)
    return josepy.b64encode(jwk.thumbprint(hash_function=hashes.SHA256)).decode("ascii")
