"""Where a VIM driver keeps tenants' certificate material (:class:`SecretBackend`): RO's own
table, sealed with its secret key file (:class:`FernetBackend`), or the cloud's key manager
(:mod:`.openstack.barbican`). RO's :class:`cdnaas.ro.secrets.SecretStore` keeps the rows."""
import abc
import json

from cryptography.fernet import InvalidToken

from cdnaas.common import certificates, keyfiles
from cdnaas.ro.models import SecretRecord
from cdnaas.ro.vim.base import VimError


class SecretBackend(abc.ABC):
    """Where a VIM driver keeps certificate material (one per driver)."""

    #: recorded with each secret (``ro_secrets.backend``)
    name = None

    @abc.abstractmethod
    def put(self, ref: str, owner: str, bundle: certificates.Bundle) -> tuple:
        """Keep ``bundle``; return ``(ciphertext, external_ref)`` to record (either None).

        :raises VimError: the backend refused or failed; nothing is kept.
        """

    @abc.abstractmethod
    def get(self, record: SecretRecord) -> tuple:
        """``(certificate PEM, private key PEM)`` of ``record``.

        :raises VimError: the material cannot be read.
        """

    @abc.abstractmethod
    def remove(self, record: SecretRecord) -> None:
        """Delete ``record``'s material; what is gone already is success."""


class FernetBackend(SecretBackend):
    """The material in RO's own table, encrypted with the secret key file (Fernet:
    AES-128-CBC and HMAC-SHA256)."""

    name = "fernet"

    def __init__(self, path=None):
        self.path = path

    def _fernet(self):
        return keyfiles.fernet(self.path or keyfiles.secret_key_file())

    def put(self, ref, owner, bundle):
        plain = json.dumps({"certificate": bundle.certificate, "private_key": bundle.private_key})
        return self._fernet().encrypt(plain.encode("ascii")).decode("ascii"), None

    def get(self, record):
        try:
            plain = json.loads(self._fernet().decrypt(record.ciphertext.encode("ascii")))
        except (InvalidToken, OSError, ValueError) as exc:
            raise VimError(f"secret {record.id} cannot be decrypted with {self.path or keyfiles.secret_key_file()}"
                           f" ({type(exc).__name__}): was the secret key file replaced?") from None
        return plain["certificate"], plain["private_key"]

    def remove(self, record):
        """Nothing outside the row (which the store deletes)."""
