"""Fernet key files: a service's own key that encrypts what it keeps at rest.

RO keeps tenants' certificate keys with one (``CDNAAS_SECRET_KEY_FILE``), SO webhook
signing secrets with another (``CDNAAS_WEBHOOK_KEY_FILE``). A file holds one Fernet key
on its first line, mode 0600; replicas of a service share it.
"""
import functools
from pathlib import Path

from cryptography.fernet import Fernet

from cdnaas.common import config, service_auth


def path_of(setting, default_name) -> Path:
    """The key file named by ``setting``, or ``default_name`` in the state dir."""
    explicit = config.setting(setting)
    return Path(explicit) if explicit else config.state_path() / default_name


def ensure(path) -> Path:
    """Create the key file ``path`` (one new Fernet key, mode 0600) unless it exists; return
    its path. Safe when several processes start at once."""
    return service_auth.ensure_private_file(Path(path),
                                            lambda: Fernet.generate_key().decode("ascii"))


def secret_key_file() -> Path:
    """Path of RO's secret key file (``CDNAAS_SECRET_KEY_FILE`` or the state dir's
    ``secrets.key``), which seals tenants' certificate keys and signing keys."""
    return path_of("CDNAAS_SECRET_KEY_FILE", "secrets.key")


def ensure_secret_key(path=None) -> Path:
    """Create RO's secret key file (:func:`secret_key_file`, or ``path``) unless it exists;
    return its path."""
    return ensure(path or secret_key_file())


def fernet(path) -> Fernet:
    """The :class:`Fernet` of the key file ``path`` (read again once the file is replaced).

    :raises OSError: the file cannot be read.
    """
    path = Path(path)
    return _fernet_of(str(path), path.stat().st_mtime_ns)


@functools.lru_cache(maxsize=8)
def _fernet_of(path, _mtime_ns):
    return Fernet(Path(path).read_text(encoding="ascii").split()[0])
