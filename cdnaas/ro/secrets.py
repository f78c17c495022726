"""Tenants' certificates and keys, kept by RO (the only part that reaches infrastructure).

SO sends a vCDN's certificate chain and key once (``POST /ro/v1/secrets``) and keeps
only the reference RO answers, with the certificate's public facts; the SIG carries that
reference and RO's VIM driver reads the material where it deploys (the local driver
writes the balancers' files) or hands the reference on (OpenStack: Octavia's listener
takes Barbican's certificate container). SO deletes a reference once no SIG of the vCDN
uses it: the previous one after a rotation, every one when the vCDN ends.

:class:`SecretStore` keeps one row per reference in RO's database (``ro_secrets``);
where the material itself lives is the driver's secret backend
(:mod:`cdnaas.ro.vim.secret_backends`, :meth:`cdnaas.ro.vim.base.VimDriver.secret_backend`;
None: the Fernet backend), encrypted in that row with the key in
``CDNAAS_SECRET_KEY_FILE`` (``<state dir>/secrets.key``, mode 0600, made by
``cdnaas db upgrade`` and by RO as it starts); on OpenStack, Barbican.
Nothing here logs or answers key material.
"""
import logging
import uuid

from sqlalchemy import select

from cdnaas.common import certificates, errors
from cdnaas.common.timeutil import isoformat
from cdnaas.ro.models import ACTIVE, DEPLOYING, UPDATING, DeploymentRecord, SecretRecord, utcnow
from cdnaas.ro.vim.base import VimError

LOG = logging.getLogger(__name__)

#: deployments in these statuses run (or are about to run) their SIG's certificate
USING = (ACTIVE, DEPLOYING, UPDATING)


class SecretStore:
    """RO's secrets: a row per reference, the material in ``backend``.

    :param database: RO's :class:`~cdnaas.db.engine.Database`.
    :param backend: the driver's :class:`~cdnaas.ro.vim.secret_backends.SecretBackend`.
    """

    def __init__(self, database, backend):
        self.database = database
        self.backend = backend

    def store(self, owner, certificate, private_key) -> dict:
        """Keep a checked bundle for the vCDN ``owner``; return its view (with ``ref``).

        :raises BadRequest, Unprocessable: the texts are not a certificate chain and its
            key (:func:`cdnaas.common.certificates.parse`; SO checked names and dates).
        :raises UpstreamError: the backend failed.
        """
        bundle = certificates.parse(certificate, private_key)
        ref = str(uuid.uuid4())
        ciphertext, external = self._backend_call("store", self.backend.put, ref, owner, bundle)
        record = SecretRecord(id=ref, owner=owner, backend=self.backend.name,
                              fingerprint_sha256=bundle.facts.fingerprint_sha256,
                              ciphertext=ciphertext, external_ref=external, created_at=utcnow())
        try:
            with self.database.transaction() as session:
                session.add(record)
        except Exception:
            self.backend.remove(record)
            raise
        LOG.info("stored secret %s of %s (certificate %s)", ref, owner,
                 bundle.facts.fingerprint_sha256)
        return _view(record)

    def list(self, owner=None) -> list:
        """Views of the secrets (of ``owner``), oldest first: never their material."""
        query = select(SecretRecord).order_by(SecretRecord.created_at, SecretRecord.id)
        if owner:
            query = query.where(SecretRecord.owner == owner)
        with self.database.sessions() as session:
            return [_view(r) for r in session.scalars(query)]

    def load(self, ref) -> certificates.Bundle:
        """The bundle of ``ref`` (for a driver writing it where its balancers read it).

        :raises NotFound: no such secret.
        :raises VimError: the backend cannot give it.
        """
        record = self._record(ref)
        return certificates.parse(*self.backend.get(record))

    def external_ref(self, ref) -> str | None:
        """The backend's own reference of ``ref`` (Barbican's container), or None.

        :raises NotFound: no such secret.
        """
        return self._record(ref).external_ref

    def delete(self, ref) -> None:
        """Delete ``ref`` and its material; an unknown ``ref`` is success.

        :raises Conflict: a deployment that runs (or is being built or changed) uses it.
        :raises UpstreamError: the backend failed; the secret is kept.
        """
        with self.database.sessions() as session:
            record = session.get(SecretRecord, ref)
            if record is None:
                return
            users = [d.id for d in session.scalars(select(DeploymentRecord).where(
                DeploymentRecord.status.in_(USING))) if _uses(d.sig, ref)]
        if users:
            raise errors.Conflict(f"secret {ref} is used by deployment {users[0]}; delete it "
                                  "once no SIG of the vCDN refers to it", field="ref")
        self._backend_call("delete", self.backend.remove, record)
        with self.database.transaction() as session:
            gone = session.get(SecretRecord, ref)
            if gone is not None:
                session.delete(gone)
        LOG.info("deleted secret %s of %s", ref, record.owner)

    def _record(self, ref):
        with self.database.sessions() as session:
            record = session.get(SecretRecord, ref)
            if record is None:
                raise errors.NotFound(f"no secret {ref}", field="ref")
            session.expunge(record)
            return record

    @staticmethod
    def _backend_call(what, call, *args):
        try:
            return call(*args)
        except VimError as exc:
            raise errors.UpstreamError(f"could not {what} the secret: {exc}") from None


def _uses(sig, ref):
    return ((sig or {}).get("service") or {}).get("tls", {}).get("certificate_ref") == ref


def _view(record):
    return {"ref": record.id, "owner": record.owner, "backend": record.backend,
            "fingerprint_sha256": record.fingerprint_sha256,
            "created_at": isoformat(record.created_at)}
