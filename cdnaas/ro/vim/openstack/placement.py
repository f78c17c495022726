"""Servers on their planned hosts: how the driver asks Nova for a host, and what it got.

SO plans each VNF on a host (``vnf.host``, a CDNaaS host name). A CDNaaS host is the
Nova compute host of the same name unless ``CDNAAS_OS_HOSTS`` maps it to another
(``north-1=compute-17,north-2=compute-18``; :func:`compute_host`). Nova offers three
ways of asking, tried in this order, each as far as the operator's policy allows:

1. ``host`` (compute API microversion 2.74 or later, policy
   ``compute:servers:create:requested_destination``, admin by default): the
   scheduler places the server on that host with all its filters (a host that is
   disabled, full, or not in the region's zone fails the server: NoValidHost);
2. ``availability_zone="<zone>:<host>"`` (policy
   ``os_compute_api:servers:create:forced_host``, admin by default): the host is
   forced, past the scheduler's filters;
3. ``availability_zone="<zone>"``: Nova's scheduler picks a host of the zone.

A way this cloud refuses (403 from its policy, 406 or a microversion below 2.74) is
remembered per cloud and OpenStack region (:class:`Refusals`); until one server
there has been created, servers are created one at a time, so only the first pays for
asking (then the others go in parallel); a compute host Nova does not know (400 to ``host``) sends
that server to its zone alone (forcing it would fail the server after creation).
Each server's record says what was planned, how it was asked, what was refused and
where Nova put it (``OS-EXT-SRV-ATTR:host``, shown to admins only by default:
``None`` when hidden), so a placement that could not be applied is a recorded
difference, not a silent one.
"""
import contextlib
import threading

from cdnaas.common import config
from cdnaas.ro.vim.base import DeploymentFailed

HOST = "host"
FORCED = "zone:host"
ZONE = "zone"
#: the compute API microversion that takes ``host`` on server create
HOST_MICROVERSION = "2.74"


def host_map():
    """``{CDNaaS host: Nova compute host}`` of ``CDNAAS_OS_HOSTS``.

    :raises DeploymentFailed: an item is not ``name=compute-host``.
    """
    found = {}
    for item in config.setting("CDNAAS_OS_HOSTS"):
        name, _, compute = (part.strip() for part in item.partition("="))
        if not name or not compute or ":" in compute:
            raise DeploymentFailed(f"CDNAAS_OS_HOSTS item {item!r} is not "
                                   "cdnaas-host=nova-compute-host")
        found[name] = compute
    return found


def compute_host(host, mapping=None):
    """The Nova compute host of the CDNaaS host ``host`` (None: no host planned)."""
    if not host:
        return None
    return (host_map() if mapping is None else mapping).get(host, host)


class Refusals:
    """Ways of asking for a host each cloud and OpenStack region refused (thread-safe)."""

    def __init__(self):
        self._refused = {}
        self._settled = set()  # keys where a server was created: what is refused is known
        self._first = {}  # key -> lock held by the creation that learns it
        self._lock = threading.Lock()

    @contextlib.contextmanager
    def asking(self, key):
        """Around one server creation at ``key``: one at a time until a creation there
        has succeeded (:meth:`settle`), then no wait at all."""
        with self._lock:
            first = None if key in self._settled else self._first.setdefault(
                key, threading.Lock())
        if first is None:
            yield
            return
        first.acquire()
        with self._lock:
            settled = key in self._settled
        if settled:  # learnt while this one waited: go on beside the others
            first.release()
            yield
            return
        try:
            yield
        finally:
            first.release()

    def settle(self, key):
        with self._lock:
            self._settled.add(key)

    def get(self, key):
        """``{way: why}`` refused at ``key`` (``(cloud, vim_region)``)."""
        with self._lock:
            return dict(self._refused.get(key, {}))

    def add(self, key, way, why):
        with self._lock:
            self._refused.setdefault(key, {})[way] = why


def ways(zone, nova_host, refused, host_supported):
    """``[(way, create attributes)]`` to try in order for a server of ``zone`` planned on
    ``nova_host``, leaving out the ways in ``refused`` (and ``host`` without 2.74)."""
    tried = []
    if nova_host:
        if host_supported and HOST not in refused:
            tried.append((HOST, {"host": nova_host, "availability_zone": zone}))
        if FORCED not in refused:
            tried.append((FORCED, {"availability_zone": f"{zone or ''}:{nova_host}"}))
    tried.append((ZONE, {"availability_zone": zone}))
    return tried


def refusal(way, exc):
    """How the cloud's answer ``exc`` to asking ``way`` is taken.

    :returns: ``"cloud"`` (this cloud refuses ``way`` for every server: policy, or an API
        without it), ``"host"`` (refused for this host only: Nova has no such compute
        host; do not force it either) or None (a real failure: raise it).
    """
    from openstack import exceptions
    status = getattr(exc, "status_code", None)
    words = str(getattr(exc, "details", None) or exc).lower()
    if way == ZONE or not isinstance(exc, exceptions.HttpException):
        return None
    if status == 403 and "policy" in words:  # a quota is a 403 too: that one fails
        return "cloud"
    if status == 406 or (status == 400 and "additional properties" in words):
        return "cloud"
    if status == 400 and way == HOST and "could not be found" in words:
        return "host"
    return None


def outcome(planned, asked, way, refused, actual):
    """The record of one server's placement.

    :param planned: the CDNaaS host SO planned; ``asked``: its Nova compute host.
    :param way: how Nova was asked (:data:`HOST`, :data:`FORCED`, :data:`ZONE`).
    :param refused: ``{way: why}`` refused on the way there.
    :param actual: the compute host Nova reports (None: not shown to this account).
    :returns: ``{"planned", "compute_host", "way", "refused", "actual", "as_planned"}``,
        ``as_planned`` None when the actual host is not known.
    """
    return {"planned": planned, "compute_host": asked, "way": way, "refused": dict(refused),
            "actual": actual,
            "as_planned": None if actual is None or asked is None else actual == asked}


def differences(record):
    """``{VNF: placement}`` of the servers of a driver record not known to run on their
    planned host (placed elsewhere, or not verifiable); empty when all are."""
    return {name: entry["placement"] for name, entry in record.get("servers", {}).items()
            if entry.get("placement") and entry["placement"]["compute_host"]
            and entry["placement"]["as_planned"] is not True}
