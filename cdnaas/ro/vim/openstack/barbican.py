"""Tenants' certificates in Barbican, as Octavia's TERMINATED_HTTPS listeners take them.

A certificate is three Barbican secrets (the server certificate, its private key and,
when there are issuers, the intermediates, each PEM ``text/plain``) in one container of
type ``certificate`` whose refs are named ``certificate``, ``private_key`` and
``intermediates``: the form Octavia's Barbican certificate manager reads. RO records the
container's href as the secret's ``external_ref`` (:mod:`cdnaas.ro.secrets`) and the
driver gives it to Octavia (``default_tls_container_ref``); RO never reads the key back.

:func:`secret_specs` and :func:`container_spec` are the pure translation (unit-tested);
:class:`BarbicanBackend` makes the calls through openstacksdk's ``key_manager``.
"""
import logging
import re

from cdnaas.common import config, errors
from cdnaas.ro.vim.base import VimError
from cdnaas.ro.vim.secret_backends import SecretBackend

LOG = logging.getLogger(__name__)

#: names of a certificate container's refs, as Octavia reads them
ROLES = ("certificate", "private_key", "intermediates")
_PEM_CERTIFICATE = re.compile(r"-----BEGIN CERTIFICATE-----.*?-----END CERTIFICATE-----\n?", re.S)


def secret_specs(ref, bundle):
    """``[(container ref name, create_secret attributes)]`` of ``bundle`` (a checked
    :class:`~cdnaas.common.certificates.Bundle`) kept as RO secret ``ref``."""
    blocks = _PEM_CERTIFICATE.findall(bundle.certificate)
    parts = [(ROLES[0], blocks[0], "certificate"), (ROLES[1], bundle.private_key, "private")]
    if blocks[1:]:
        parts.append((ROLES[2], "".join(blocks[1:]), "opaque"))
    return [(role, {"name": f"cdnaas-{ref}-{role}", "payload": payload,
                    "payload_content_type": "text/plain", "secret_type": kind})
            for role, payload, kind in parts]


def refuse_oversized(specs, limit):
    """Refuse, before anything is stored, the secrets of ``specs`` (:func:`secret_specs`)
    larger than ``limit`` bytes: Barbican would refuse them (413) after the others.

    :raises Unprocessable: a part is larger, named with its size and the limit.
    """
    for role, attrs in specs:
        size = len(attrs["payload"].encode())
        if size > limit:
            raise errors.Unprocessable(
                f"the certificate's {role.replace('_', ' ')} take {size} bytes; this cloud "
                f"keeps secrets of at most {limit} (CDNAAS_OS_BARBICAN_MAX_SECRET_BYTES, "
                "Barbican's max_allowed_secret_in_bytes): send a shorter chain",
                field="certificate")


def container_spec(ref, secret_refs):
    """``create_container`` attributes of the certificate container of RO secret ``ref``,
    ``secret_refs`` being ``{container ref name: Barbican secret href}``."""
    return {"name": f"cdnaas-{ref}", "type": "certificate",
            "secret_refs": [{"name": role, "secret_ref": href}
                            for role, href in secret_refs.items()]}


def _line(text):
    """``text`` ending with one line break."""
    return text.rstrip("\n") + "\n"


def _id(href):
    """The id at the end of a Barbican href (what openstacksdk's calls take)."""
    return href.rstrip("/").rsplit("/", 1)[-1]


class BarbicanBackend(SecretBackend):
    """The material in Barbican, through ``connect()`` (an openstacksdk connection)."""

    name = "barbican"

    def __init__(self, connect):
        self.connect = connect

    def put(self, ref, owner, bundle):
        """See :meth:`SecretBackend.put`: the secrets, then their container; a failure
        deletes the secrets already made (those it cannot delete, Barbican being away,
        are named in the error).

        :raises Unprocessable: a part is larger than Barbican keeps (nothing was made).
        """
        specs = secret_specs(ref, bundle)
        refuse_oversized(specs, config.setting("CDNAAS_OS_BARBICAN_MAX_SECRET_BYTES"))
        conn = self.connect()
        made = {}
        try:
            for role, attrs in specs:
                made[role] = conn.key_manager.create_secret(**attrs).secret_ref
            container = conn.key_manager.create_container(**container_spec(ref, made))
        except Exception as exc:  # openstacksdk's errors, or the cloud away
            stays = []
            for href in made.values():
                try:
                    self._delete_secret(conn, href)
                except Exception:  # pylint: disable=broad-except
                    stays.append(href)
            status = getattr(exc, "status_code", None)  # Barbican's answer, never its text
            why = type(exc).__name__ + (f" {status}" if status else "")
            if stays:
                LOG.warning("secrets of %s left in Barbican after a failed put: %s", ref,
                            ", ".join(stays))
                why += (f"; {len(stays)} secret(s) named cdnaas-{ref}-* it made could not be "
                        "deleted: delete them once it answers")
            raise VimError(f"Barbican did not keep the certificate: {why}") from None
        return None, container.container_ref

    def get(self, record):
        """See :meth:`SecretBackend.get`: the chain (certificate and intermediates) and key."""
        conn = self.connect()
        try:
            container = conn.key_manager.get_container(_id(record.external_ref))
            payloads = {r["name"]: conn.key_manager.get_secret(_id(r["secret_ref"])).payload
                        for r in container.secret_refs}
        except Exception as exc:
            raise VimError(f"Barbican did not give certificate {record.id}: "
                           f"{type(exc).__name__}") from None
        # Barbican strips each payload's final line break: one PEM block per line again
        return ("".join(_line(payloads[p]) for p in ("certificate", "intermediates")
                        if p in payloads), _line(payloads["private_key"]))

    def remove(self, record):
        """See :meth:`SecretBackend.remove`: the container, then its secrets (found by
        name when the container is gone: a removal cut short between the two)."""
        from openstack import exceptions  # pylint: disable=import-outside-toplevel
        conn = self.connect()
        try:
            try:
                container = conn.key_manager.get_container(_id(record.external_ref))
            except exceptions.NotFoundException:
                hrefs = [s.secret_ref for role in ROLES for s in conn.key_manager.secrets(
                    name=f"cdnaas-{record.id}-{role}")]
            else:
                conn.key_manager.delete_container(container, ignore_missing=True)
                hrefs = [item["secret_ref"] for item in container.secret_refs or []]
            for href in hrefs:
                self._delete_secret(conn, href)
        except Exception as exc:
            raise VimError(f"Barbican did not delete {record.id}: {type(exc).__name__}") \
                from None

    @staticmethod
    def _delete_secret(conn, href):
        conn.key_manager.delete_secret(_id(href), ignore_missing=True)
