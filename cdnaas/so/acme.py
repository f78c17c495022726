"""Managed certificates: SO orders them from the operator's ACME CA and renews them.

A vCDN created or changed with ``certificate: {"managed": true}`` (:mod:`cdnaas.so.tls`)
is deployed serving HTTP, its SIG carrying ``service.managed_certificate`` and the
thumbprint of SO's ACME account key (``service.acme_thumbprint``,
:mod:`cdnaas.so.acme_account`): its caches answer every ACME HTTP-01 challenge with it,
statelessly (:mod:`cdnaas.common.challenges`), on every driver. :class:`Renewer`'s
pass, every ``CDNAAS_ACME_INTERVAL`` seconds in its own thread, orders a certificate
(RFC 8555, with certbot's ``acme`` client) for every ACTIVE vCDN that needs one
(:func:`due`): it has none yet, its hostnames changed, or ``CDNAAS_ACME_RENEW_AT`` of
its certificate's lifetime has passed. The order (:func:`issue`) makes a new P-256 key,
has RO check that the vCDN's caches give the key authorizations of its challenges
(``PUT /ro/v1/deployments/<id>/acme-challenges``: the thumbprint its SIG was deployed
with), tells the CA to validate, finalizes and downloads the chain. The certificate is
installed as an uploaded one: a PATCH-like UPDATE (:func:`cdnaas.so.instances.update`
with ``issued``) whose reason is ``certificate renewal``, so RO rotates it by a graceful
reload and the previous certificate's secret goes once the new one serves.

A failed order is logged and tried again at the next passes, waiting twice as long after
each failure (:data:`RETRY_MAX_SECONDS` at most); the vCDN keeps what it serves.
Replicas: each runs its pass (sharing the account file); the vCDN's row turning UPDATING
stops the other replicas' installs (409), so at worst a certificate is ordered twice.
"""
import datetime as dt
import logging
import threading

import josepy
import requests
from acme import challenges as acme_challenges
from acme import client as acme_client
from acme import crypto_util
from acme import errors as acme_errors
from acme import messages
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from sqlalchemy import select

from cdnaas.common import certificates, clock, config, errors, periodic
from cdnaas.common.clients import RoClient
from cdnaas.so import acme_account, hostname_checks, instances, states, tls
from cdnaas.so.models import Instance

LOG = logging.getLogger(__name__)

#: the operation reason of an install of a managed certificate
REASON = "certificate renewal"
#: the longest wait before retrying a vCDN whose orders failed
RETRY_MAX_SECONDS = 3600.0
USER_AGENT = "cdnaas-so"


class OrderFailed(Exception):
    """An ACME order did not give a certificate (the CA refused or could not validate,
    the CA or RO could not be reached): retried at a later pass."""


# -- the account's client ------------------------------------------------------------------

def connect(directory=None) -> acme_client.ClientV2:
    """An ACME client of the operator's CA (``CDNAAS_ACME_DIRECTORY``, trusted through
    ``CDNAAS_ACME_CA_BUNDLE``) acting as SO's account (:mod:`cdnaas.so.acme_account`),
    its key registered first if needed.

    :raises OrderFailed: no directory set, the account cannot be read, the CA could not
        be reached or refused.
    """
    directory = directory or config.setting("CDNAAS_ACME_DIRECTORY")
    if not directory:
        raise OrderFailed("CDNAAS_ACME_DIRECTORY is not set")
    try:
        jwk, uri = acme_account.load(directory)
    except acme_account.AccountUnreadable as exc:
        raise OrderFailed(str(exc)) from None
    net = acme_client.ClientNetwork(jwk, alg=josepy.ES256, user_agent=USER_AGENT,
                                    verify_ssl=config.setting("CDNAAS_ACME_CA_BUNDLE") or True)
    try:
        client = acme_client.ClientV2(acme_client.ClientV2.get_directory(directory, net), net)
        if uri is not None:
            net.account = messages.RegistrationResource(uri=uri, body=messages.Registration())
            return client
        regr = client.new_account(messages.NewRegistration.from_data(
            terms_of_service_agreed=True))
    except (acme_errors.Error, messages.Error, requests.RequestException) as exc:
        raise OrderFailed(f"the ACME CA at {directory} refused or could not be reached: "
                          f"{exc}") from exc
    acme_account.save_url(directory, regr.uri)
    LOG.info("registered ACME account %s at %s", regr.uri, directory)
    return client


# -- one order --------------------------------------------------------------------------------

def issue(vcdn_id, hostnames, ro=None, client=None) -> tuple:
    """Order a certificate for ``hostnames`` of vCDN ``vcdn_id`` (ACTIVE, its caches
    answering challenges); return ``(chain PEM, private key PEM)``.

    :param ro: the :class:`RoClient` that checks the caches give the answers (default: a
        new one).
    :param client: the ACME client (default: :func:`connect`'s).
    :raises OrderFailed: the CA refused, a challenge failed, RO could not be reached or
        found the caches answer for another account, or ``CDNAAS_ACME_TIMEOUT`` passed.
    """
    ro = ro or RoClient()
    key = ec.generate_private_key(ec.SECP256R1())
    key_pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption())
    deadline = dt.datetime.now() + dt.timedelta(seconds=config.setting("CDNAAS_ACME_TIMEOUT"))
    try:
        client = client or connect()
        order = client.new_order(crypto_util.make_csr(key_pem, hostnames))
        pending = [_http01(authz, client.net.key) for authz in order.authorizations
                   if authz.body.status != messages.STATUS_VALID]
        ro.check_challenges(vcdn_id, [answer for _challb, _response, answer in pending])
        for challb, response, _answer in pending:
            client.answer_challenge(challb, response)
        order = client.poll_and_finalize(order, deadline)
    except messages.Error as exc:
        if exc.code == "accountDoesNotExist":
            acme_account.forget_url()
        raise OrderFailed(f"the ACME CA refused the order: {exc}") from exc
    except (acme_errors.Error, requests.RequestException, errors.CdnaasError) as exc:
        raise OrderFailed(f"the order for {', '.join(hostnames)} failed: {exc}") from exc
    LOG.info("ACME CA issued a certificate for %s of %s", ", ".join(hostnames), vcdn_id)
    return order.fullchain_pem, key_pem.decode("ascii")


def _http01(authz, account_key):
    """``(challenge body, response, answer for RO)`` of ``authz``'s HTTP-01 challenge."""
    for challb in authz.body.challenges:
        if isinstance(challb.chall, acme_challenges.HTTP01):
            response, key_authorization = challb.response_and_validation(account_key)
            return challb, response, {"token": challb.chall.encode("token"),
                                      "key_authorization": key_authorization}
    raise OrderFailed(f"the ACME CA offers no HTTP-01 challenge for "
                      f"{authz.body.identifier.value}")


# -- which vCDNs need one ---------------------------------------------------------------------

def due(service, now):
    """Why the managed certificate of an instance's ``service`` is to be ordered at
    ``now`` (``first certificate``, ``hostnames changed``, ``renewal``), or None."""
    if not tls.managed_of(service):
        return None
    current, hostnames = tls.tls_of(service), hostname_checks.active(service)
    if not hostnames:  # none seen pointing at the vCDN yet: the CA could not check them
        return None
    if current is None:
        return "first certificate"
    if not all(certificates.covers(current.get("names", []), name) for name in hostnames):
        return "hostnames changed"
    if now >= certificates.lifetime_point(current, config.setting("CDNAAS_ACME_RENEW_AT")):
        return "renewal"
    return None


class Renewer:
    """Orders and installs the managed certificates that are due (:func:`due`), one pass
    at a time (:meth:`renew_once`), every ``CDNAAS_ACME_INTERVAL`` seconds in a thread
    (:meth:`start`).

    :param database: SO's database.
    :param submit: ``submit(operation id)`` runs an operation (the runner's).
    :param issue_certificate: ``issue(vcdn_id, hostnames) -> (chain, key)`` (:func:`issue`).
    """

    def __init__(self, database, submit, issue_certificate=issue):
        self.database = database
        self.submit = submit
        self.issue = issue_certificate
        self._failures = {}  # vCDN id -> (failures in a row, next attempt)
        self._stop = threading.Event()

    def renew_once(self, now=None) -> list:
        """Order and install every due certificate of an ACTIVE vCDN (not those waiting
        after a failure); return the ids of the UPDATE operations started."""
        if not config.setting("CDNAAS_ACME_DIRECTORY"):
            return []
        now = now or clock.now()
        with self.database.sessions() as session:
            wanted = [(i.id, hostname_checks.active(i.service), why)
                      for i in session.scalars(select(Instance).where(
                          Instance.state == states.ACTIVE))
                      for why in [due(i.service, now)] if why]
        started = []
        for vcdn_id, hostnames, why in wanted:
            if vcdn_id in self._failures and self._failures[vcdn_id][1] > now:
                continue
            LOG.info("ordering the managed certificate of %s (%s)", vcdn_id, why)
            try:
                chain, key = self.issue(vcdn_id, hostnames)
                _instance, operation = instances.update(
                    self.database, vcdn_id, {"certificate": {"certificate": chain,
                                                             "private_key": key}},
                    reason=REASON, issued=True)
            except (OrderFailed, errors.CdnaasError) as exc:
                self._failed(vcdn_id, now, exc)
                continue
            self._failures.pop(vcdn_id, None)
            self.submit(operation.id)
            started.append(operation.id)
        return started

    def _failed(self, vcdn_id, now, exc):
        count = self._failures.get(vcdn_id, (0, None))[0] + 1
        wait = min(config.setting("CDNAAS_ACME_INTERVAL") * 2 ** (count - 1), RETRY_MAX_SECONDS)
        self._failures[vcdn_id] = (count, now + dt.timedelta(seconds=wait))
        LOG.warning("managed certificate of %s not obtained (failure %d, next try in %.1f s): "
                    "%s", vcdn_id, count, wait, exc)

    def start(self):
        """Run :meth:`renew_once` every ``CDNAAS_ACME_INTERVAL`` seconds in a thread."""
        periodic.run_every("CDNAAS_ACME_INTERVAL", self.renew_once, "so-acme", self._stop,
                           "managed certificate pass")

    def stop(self):
        self._stop.set()
