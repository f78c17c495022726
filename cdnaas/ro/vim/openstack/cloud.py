"""Connections to the operator's OpenStack cloud, and the few calls the driver builds itself.

The cloud is named the usual way: ``CDNAAS_OS_CLOUD`` or ``OS_CLOUD`` picks an
entry of ``clouds.yaml`` (``OS_CLIENT_CONFIG_FILE``, ``./clouds.yaml``,
``~/.config/openstack/``, ``/etc/openstack/``). One connection per OpenStack
region, created on first use. Every HTTP request of every connection is counted
(:attr:`Cloud.calls`, by service and method) so a benchmark can report API calls
per cache.
"""
import collections
import logging
import os
import re
import threading
import time

from cdnaas.common import config
from cdnaas.ro.vim.base import PrerequisitesMissing, RetryableVimError, VimError

LOG = logging.getLogger(__name__)

#: openstacksdk proxies the driver uses (touched once per connection, before threads share it)
SERVICES = ("compute", "network", "load_balancer", "image")
#: retries of a request whose connection failed: an API server may close a kept-alive
#: connection just as a request goes out on it (the request then never reached it)
CONNECT_RETRIES = 3


def cloud_name():
    return config.setting("CDNAAS_OS_CLOUD") or config.env("OS_CLOUD")


def timeout(kind):
    """Seconds to wait for ``kind`` (``boot``, ``lb``, ``delete``): ``CDNAAS_OS_<KIND>_TIMEOUT``."""
    return config.setting(f"CDNAAS_OS_{kind.upper()}_TIMEOUT")


def poll_interval():
    return config.setting("CDNAAS_OS_POLL_INTERVAL")


def check_configured():
    """Raise :class:`PrerequisitesMissing` unless a cloud is named and found in clouds.yaml."""
    from openstack import config as os_config
    from openstack import exceptions
    name = cloud_name()
    if not name:
        raise PrerequisitesMissing("no OpenStack cloud configured: set OS_CLOUD (or "
                                   "CDNAAS_OS_CLOUD) to an entry of clouds.yaml")
    try:
        os_config.OpenStackConfig().get_one(cloud=name)
    except (exceptions.ConfigException, KeyError, OSError) as exc:
        where = os.environ.get("OS_CLIENT_CONFIG_FILE") or "the standard clouds.yaml places"
        raise PrerequisitesMissing(f"cloud {name!r} is not in {where}: {exc}") from None


class Cloud:
    """Connections to one cloud's regions, counting every API call."""

    def __init__(self, name=None):
        self.name = name or cloud_name()
        self.calls = collections.Counter()
        self._connections = {}
        self._endpoints = {}
        self._lock = threading.Lock()  # connections
        self._count_lock = threading.Lock()  # calls (counted while a connection is made)

    def conn(self, vim_region=None):
        """The connection to ``vim_region`` (None: the cloud's default region).

        :raises RetryableVimError: the cloud does not answer.
        """
        with self._lock:
            if vim_region not in self._connections:
                self._connections[vim_region] = self._connect(vim_region)
            return self._connections[vim_region]

    def _connect(self, vim_region):
        import openstack
        try:
            conn = openstack.connect(cloud=self.name, region_name=vim_region,
                                     connect_retries=CONNECT_RETRIES)
            conn.session.session.hooks["response"].append(self._count)
            for service in SERVICES:
                proxy = getattr(conn, service)
                self._endpoints[proxy.get_endpoint().rstrip("/")] = service
        except Exception as exc:
            raise translate_error(exc, f"cannot reach cloud {self.name}") from exc
        return conn

    def _count(self, response, *_args, **_kwargs):
        url = response.request.url
        service = next((s for e, s in self._endpoints.items() if url.startswith(e)), "identity")
        with self._count_lock:
            self.calls[(service, response.request.method)] += 1

    def total_calls(self):
        with self._count_lock:
            return sum(self.calls.values())

    def regions(self):
        """OpenStack regions clouds.yaml lists for this cloud (cleanup looks in each)."""
        from openstack import config as os_config
        loader = os_config.OpenStackConfig()
        regions = [c.region_name for c in loader.get_all() if c.name == self.name]
        return sorted(set(regions)) or [None]


def translate_error(exc, doing):
    """Our error for an openstacksdk/keystoneauth exception met while ``doing``."""
    from keystoneauth1 import exceptions as ks_exceptions
    from openstack import exceptions
    if isinstance(exc, VimError):
        return exc
    if isinstance(exc, (ks_exceptions.ConnectFailure, ks_exceptions.ConnectTimeout,
                        ks_exceptions.DiscoveryFailure)):
        return RetryableVimError(f"{doing}: the cloud does not answer ({exc})")
    if isinstance(exc, exceptions.HttpException) and exc.status_code in (502, 503, 504):
        return RetryableVimError(f"{doing}: {exc.status_code} {_details(exc)}")
    if isinstance(exc, exceptions.SDKException):
        return VimError(f"{doing}: {_details(exc)}")
    return VimError(f"{doing}: {exc}")


def _details(exc):
    return getattr(exc, "details", None) or str(exc)


def wait_until(check, what, seconds):
    """Call ``check()`` every poll interval until it returns true.

    A poll the cloud failed to answer (:func:`translate_error` calls it retryable:
    no connection, 502-504) is polled again: one lost answer of a loaded API server
    must not fail, and undo, a deployment that is booting fine. Any other exception
    of ``check`` propagates.

    :raises VimError: ``seconds`` passed first (naming the last unanswered poll, if any).
    """
    deadline = time.monotonic() + seconds
    unanswered = None
    while True:
        try:
            if check():
                return
            unanswered = None
        except Exception as exc:  # pylint: disable=broad-except
            error = translate_error(exc, f"polling for {what}")
            if not isinstance(error, RetryableVimError):
                raise
            LOG.warning("%s; polling again", error)
            unanswered = error
        if time.monotonic() > deadline:
            raise VimError(f"{what} did not happen within {seconds:.0f} s"
                           + (f" ({unanswered})" if unanswered else ""))
        time.sleep(poll_interval())


def servers_active(conn, server_ids, tag, seconds, on_active=None):
    """Wait until every server of ``server_ids`` is ACTIVE, polling one listing by ``tag``.

    :param on_active: called with the number ACTIVE each time it grows.
    :returns: ``{server id: compute host}`` as the last listing shows them
        (``OS-EXT-SRV-ATTR:host``; None where Nova's policy hides it, admin only by default).
    :raises VimError: a server went to ERROR (with nova's fault) or the wait timed out.
    """
    wanted, seen, hosts = set(server_ids), [0], {}

    def check():
        statuses = {s.id: s for s in conn.compute.servers(tags=tag) if s.id in wanted}
        hosts.update({i: s.compute_host for i, s in statuses.items()})
        for server in statuses.values():
            if server.status == "ERROR":
                fault = (server.fault or {}).get("message", "no fault recorded")
                raise VimError(f"server {server.name} failed to boot: {fault}")
        missing = wanted - set(statuses)
        if missing:
            raise VimError(f"servers {sorted(missing)} disappeared while booting")
        active = sum(1 for s in statuses.values() if s.status == "ACTIVE")
        if on_active and active != seen[0]:
            seen[0] = active
            on_active(active)
        return active == len(wanted)
    wait_until(check, f"{len(wanted)} server(s) ACTIVE", seconds)
    return hosts


def load_balancer_active(conn, lb_id, seconds):
    """Wait until load balancer ``lb_id`` is provisioned (ACTIVE).

    :raises VimError: it went to ERROR or the wait timed out.
    """
    def check():
        lb = conn.load_balancer.get_load_balancer(lb_id)
        if lb.provisioning_status == "ERROR":
            raise VimError(f"load balancer {lb.name} went to ERROR")
        return lb.provisioning_status == "ACTIVE"
    wait_until(check, f"load balancer {lb_id} ACTIVE", seconds)


def batch_update_members(conn, pool_id, members):
    """Replace the members of ``pool_id`` with ``members`` in ONE call (Octavia batch update).

    Octavia creates the new members, keeps those already there (same address and
    port) and deletes (drains) the others. openstacksdk has no call for it, so the
    driver sends ``PUT /v2/lbaas/pools/{pool_id}/members`` itself.

    :param members: dicts with ``address``, ``protocol_port``, ``subnet_id``, ``name``, ``tags``.
    :raises VimError: Octavia refused.
    """
    from openstack import exceptions
    response = conn.load_balancer.put(f"/lbaas/pools/{pool_id}/members",
                                      json={"members": members})
    exceptions.raise_from_response(response)


def gone(delete, *args, **kwargs):
    """Call ``delete`` (an openstacksdk delete) accepting that the resource is gone already."""
    from openstack import exceptions
    try:
        delete(*args, ignore_missing=True, **kwargs)
    except exceptions.NotFoundException:
        pass


def found(find, name_or_id, **kwargs):
    """What openstacksdk's ``find(name_or_id, **kwargs)`` (a ``find_*`` proxy method) finds,
    or None: asked with ``ignore_missing=False``, as openstacksdk 6 does by default."""
    from openstack import exceptions
    try:
        return find(name_or_id, ignore_missing=False, **kwargs)
    except exceptions.NotFoundException:
        return None


def servers_gone(conn, server_ids, seconds):
    """Wait until none of ``server_ids`` exists any more (their ports can then go)."""
    wanted = set(server_ids)
    if not wanted:
        return
    wait_until(lambda: not wanted & {s.id for s in conn.compute.servers(details=False)},
               f"deletion of {len(wanted)} server(s)", seconds)


#: how many times a balancer is asked to go: Octavia leaves one whose delete flow failed
#: (a network or compute driver error) in ERROR, where a new delete is accepted
LB_DELETE_ASKS = 3


def delete_load_balancer(conn, lb_id):
    """Ask Octavia to delete balancer ``lb_id`` with everything it holds (cascade); one
    still provisioning (409) is asked again once it has settled."""
    from openstack import exceptions
    try:
        conn.load_balancer.delete_load_balancer(lb_id, ignore_missing=True, cascade=True)
    except exceptions.ConflictException:
        wait_until(lambda: not load_balancer_status(conn, lb_id).startswith("PENDING"),
                   f"load balancer {lb_id} to settle", timeout("lb"))
        conn.load_balancer.delete_load_balancer(lb_id, ignore_missing=True, cascade=True)


def load_balancer_gone(conn, lb_id, seconds):
    """Wait until balancer ``lb_id``, asked to go (:func:`delete_load_balancer`), is gone;
    one that went to ERROR is asked again, up to :data:`LB_DELETE_ASKS` times in all.

    :raises VimError: it stayed in ERROR, or the wait timed out (naming the status it
        was left in).
    """
    asked, status = 1, ""

    def check():
        nonlocal asked, status
        status = load_balancer_status(conn, lb_id)
        if status == "ERROR":
            if asked == LB_DELETE_ASKS:
                raise VimError(f"Octavia failed {asked} times to delete load balancer {lb_id}; "
                               "it is in ERROR (its worker's log says why)")
            LOG.warning("load balancer %s went to ERROR while being deleted; asking again",
                        lb_id)
            delete_load_balancer(conn, lb_id)
            asked += 1
        return status == "DELETED"
    try:
        wait_until(check, f"deletion of load balancer {lb_id}", seconds)
    except VimError as exc:
        if not status.startswith("PENDING"):
            raise
        raise VimError(f"{exc}: Octavia still shows it {status} (its worker has not "
                       "finished; an operator can look at octavia-worker's log)") from None


def load_balancer_status(conn, lb_id):
    """Balancer ``lb_id``'s provisioning status (``DELETED`` once Octavia forgot it)."""
    from openstack import exceptions
    try:
        return conn.load_balancer.get_load_balancer(lb_id).provisioning_status
    except exceptions.NotFoundException:
        return "DELETED"


def retry_conflicts(action, what, seconds):
    """Run ``action()`` until neutron stops answering 409 (ports still in use), or time runs out."""
    from openstack import exceptions
    deadline = time.monotonic() + seconds
    while True:
        try:
            return action()
        except exceptions.ConflictException:
            if time.monotonic() > deadline:
                raise VimError(f"{what}: still in use after {seconds:.0f} s") from None
            time.sleep(poll_interval())


def octavia_versions(conn):
    """The API versions Octavia lists at its root (``["v2.0", ..., "v2.27"]``); [] when
    it does not answer (then nothing newer than v2.0 is asked of it)."""
    try:
        endpoint = conn.load_balancer.get_endpoint().rstrip("/")
        root = re.sub(r"/v2(\.0)?$", "", endpoint) + "/"
        document = conn.load_balancer.get(root).json()
        return [v.get("id") for v in document.get("versions", [])]
    except Exception as exc:  # an old or odd Octavia: no ALPN rather than no balancer
        LOG.info("Octavia did not list its versions (%s); HTTPS listeners get no ALPN",
                 type(exc).__name__)
        return []
