"""The openstack driver's load generator: a server in the measured VNF's network running
the agent (:mod:`cdnaas.calibration.agent`), which runs wrk or the viewer simulator.

One generator per region of a deployment, booted by the first load test there from the
measured VNF's own image (the VNF image has wrk and python3) with the user-data of
:func:`.userdata.load_generator`, and kept for the next tests: recorded in
``deployment.resources["generators"]``, named and tagged as the vCDN's servers
(``cdnaas-<vcdn>-loadgen-<region>``), so :meth:`~.driver.OpenStackDriver.terminate`
and ``cleanup`` remove it with the rest. Its port has the region's last address
(``.254``, never a cache's: they count up from ``.10``; on an operator's network
Neutron picks) and the region's cache security group, which opens the management port
to ``CDNAAS_OS_MANAGEMENT_CIDR`` only: RO calls the agent there, as it calls the caches'
management listeners, so a deployment made without that setting has no generator.

A new generator answers within ``CDNAAS_OS_BOOT_TIMEOUT`` (server ACTIVE, then the agent
answering ``GET /health``) or is removed; one whose agent stops answering is removed
and its test fails (the next test boots another). A test's answer is awaited for the
test's own time bound (:func:`cdnaas.calibration.loads.timeout`) plus
:data:`ANSWER_SECONDS`. The generator has vCPUs of its own (reported ``isolated``),
though Nova may place it on the cache's compute host.
"""
import base64
import http.client
import ipaddress
import json
import logging
import time

from cdnaas.calibration import agent, loads
from cdnaas.ro.vim import loadreport
from cdnaas.ro.vim.base import VimError
from cdnaas.ro.vim.openstack import cloud as oscloud
from cdnaas.ro.vim.openstack import plan, userdata
from cdnaas.vnf.endpoints import MANAGEMENT_PORT

LOG = logging.getLogger(__name__)

#: the generator server's size (one core for the generator, one for the kernel and agent)
VCPUS, RAM_MB = 2, 1024
#: seconds to connect to the agent (each try while it boots)
CONNECT_TIMEOUT = 5.0
#: seconds the agent has to answer beyond its test's own time bound
ANSWER_SECONDS = 30.0
#: the largest answer read from the agent (its two streams, JSON-escaped)
MAX_ANSWER = 3 * agent.MAX_OUTPUT
#: what the agent answers a test: :class:`cdnaas.ro.vim.loadreport.Run`'s fields
_ANSWER = {"status": int, "stdout": str, "stderr": str, "cpu_seconds": (int, float),
           "seconds": (int, float), "tool": str}


class Unreachable(VimError):
    """The agent could not be reached, or broke off."""


def measured(deployment, vnf_name):
    """The VNF ``vnf_name`` of ``deployment``.

    :raises VimError: it has none of that name.
    """
    vnf = next((v for v in deployment.vnfs if v.name == vnf_name), None)
    if vnf is None:
        raise VimError(f"deployment {deployment.deployment_id} has no VNF {vnf_name}")
    return vnf


def run(conn, deployment, vnf, test, find_flavor, cpu_seconds):
    """Drive ``test`` at ``vnf`` from its region's generator (booted first if need be).

    :param find_flavor: ``() ->`` the id of a flavor of :data:`VCPUS` and :data:`RAM_MB`.
    :param cpu_seconds: ``() ->`` the CPU seconds ``vnf`` has used, or None (unknown).
    :raises GeneratorLimit: the viewer simulator cannot drive that many viewers.
    :raises VimError: no generator answered, or the test failed.
    """
    entry = ensure(conn, deployment, vnf, find_flavor)
    before = cpu_seconds()
    try:
        done = measure(entry["address"], test, vnf.address)
    except Unreachable as exc:
        remove(conn, deployment.resources["generators"].pop(vnf.region))
        raise VimError(f"{exc}; the load generator was removed") from exc
    after = cpu_seconds()
    return loadreport.report(test, done, None if before is None or after is None
                             else after - before, isolated=True)


def ensure(conn, deployment, vnf, find_flavor):
    """The record of the generator of ``vnf``'s region, booted when none answers.

    :raises VimError: the deployment has no management prefixes, or the generator did
        not answer in time (it was removed).
    """
    record = deployment.resources
    if not record.get("management_cidrs"):
        raise VimError(f"vCDN {deployment.deployment_id} was deployed without "
                       "CDNAAS_OS_MANAGEMENT_CIDR: a load generator's agent answers on the "
                       "management port to those prefixes only (where RO must be); set it "
                       "and deploy again")
    generators = record.setdefault("generators", {})
    entry = generators.get(vnf.region)
    if entry is not None:
        if _answers(conn, entry):
            return entry
        LOG.warning("load generator %s does not answer: booting another", entry["name"])
        remove(conn, generators.pop(vnf.region))
    deadline = time.monotonic() + oscloud.timeout("boot")
    entry = generators[vnf.region] = _create_port(conn, deployment, vnf.region)
    try:
        _boot(conn, deployment, vnf, entry, find_flavor(), deadline)
        wait_for_agent(entry["address"], deadline - time.monotonic())
    except Exception as exc:
        remove(conn, generators.pop(vnf.region))
        error = oscloud.translate_error(exc, f"booting load generator {entry['name']}")
        raise VimError(f"{error}; the load generator was removed") from exc
    LOG.info("load generator %s answers on %s:%d", entry["name"], entry["address"],
             MANAGEMENT_PORT)
    return entry


def _create_port(conn, deployment, region):
    """The generator's port in ``region``'s network; returns its record (no server yet)."""
    info = deployment.resources["regions"][region]
    group = info.get("security_groups", {}).get("cache")
    if group is None:
        raise VimError(f"region {region} of {deployment.deployment_id} has no cache security "
                       "group for a load generator")
    name = plan.resource_name(deployment.deployment_id, f"loadgen-{region}")
    fixed = {"subnet_id": info["subnet_id"]}
    if not info.get("operator_network"):
        fixed["ip_address"] = str(ipaddress.ip_network(info["cidr"]).broadcast_address - 1)
    port = conn.network.create_port(name=name, network_id=info["network_id"], fixed_ips=[fixed],
                                    security_group_ids=[group])
    return {"name": name, "port_id": port.id, "server_id": None,
            "address": port.fixed_ips[0]["ip_address"]}


def _boot(conn, deployment, vnf, entry, flavor_id, deadline):
    """Tag the generator's port, create its server from ``vnf``'s image and wait until
    it is ACTIVE (until ``deadline``, a :func:`time.monotonic` time)."""
    info = deployment.resources["regions"][vnf.region]
    conn.network.set_tags(conn.network.get_port(entry["port_id"]),
                          plan.tags(deployment.deployment_id))
    image = conn.compute.get_server(vnf.resource_id).image["id"]
    user_data = userdata.load_generator(deployment.deployment_id, f"loadgen-{vnf.region}",
                                        entry["address"], [info["cidr"]],
                                        deployment.resources["management_cidrs"])
    server = conn.compute.create_server(
        name=entry["name"], image_id=image, flavor_id=flavor_id,
        networks=[{"port": entry["port_id"]}], availability_zone=info.get("zone"),
        user_data=base64.b64encode(user_data.encode()).decode(),
        tags=plan.tags(deployment.deployment_id),
        metadata={"cdnaas_vcdn": deployment.deployment_id[:255],
                  "cdnaas_role": "load_generator"})
    entry["server_id"] = server.id
    oscloud.servers_active(conn, [server.id], plan.vcdn_tag(deployment.deployment_id),
                           deadline - time.monotonic())


def remove(conn, entry):
    """Delete a generator's server and port (what is gone already is fine). A failure is
    logged, not raised: it comes on a failure's way out, and the vCDN's removal sweeps
    what carries its tag."""
    try:
        if entry.get("server_id"):
            oscloud.gone(conn.compute.delete_server, entry["server_id"])
            oscloud.servers_gone(conn, [entry["server_id"]], oscloud.timeout("delete"))
        oscloud.gone(conn.network.delete_port, entry["port_id"])
    except Exception as exc:  # pylint: disable=broad-except
        LOG.warning("could not remove load generator %s: %s", entry["name"], exc)
        return
    LOG.info("removed load generator %s", entry["name"])


def _answers(conn, entry):
    """Whether a recorded generator's server is ACTIVE and its agent answers."""
    from openstack import exceptions
    try:
        if conn.compute.get_server(entry["server_id"]).status != "ACTIVE":
            return False
    except exceptions.NotFoundException:
        return False
    try:
        return call(entry["address"], MANAGEMENT_PORT, "GET", agent.HEALTH_PATH)[0] \
            == 200
    except VimError:  # no answer, or not the agent's
        return False


def wait_for_agent(address, seconds, port=MANAGEMENT_PORT):
    """Ask the agent at ``address:port`` for its health until it answers 200 (anything
    else, no answer included, is asked again).

    :returns: its answer (``{"agent", "tools", "busy"}``).
    :raises Unreachable: it did not answer within ``seconds``.
    """
    deadline = time.monotonic() + seconds
    last = "not asked"
    while True:
        left = deadline - time.monotonic()
        try:
            status, document = call(address, port, "GET", agent.HEALTH_PATH,
                                    timeout=max(0.1, min(CONNECT_TIMEOUT, left)))
            if status == 200:
                return document
            last = f"{status} {document}"
        except VimError as exc:  # no answer, or not the agent's (yet)
            last = str(exc)
        if time.monotonic() >= deadline:
            raise Unreachable(f"the agent of the load generator at {address}:{port} did not "
                              f"answer within {max(0.0, seconds):.0f} s (last: {last})")
        time.sleep(max(0.0, min(oscloud.poll_interval(), deadline - time.monotonic())))


def measure(address, test, target, target_port=plan.HTTP_PORT,
            port=MANAGEMENT_PORT):
    """Have the agent at ``address:port`` drive ``test`` (a :class:`LoadTest`) at
    ``target:target_port``; return what the generator did.

    :rtype: :class:`cdnaas.ro.vim.loadreport.Run`
    :raises Unreachable: the agent could not be reached, or broke off.
    :raises VimError: the test was refused (here or by the agent).
    """
    checked = loadreport.checked(test, target, target_port)
    status, document = call(address, port, "POST", agent.LOAD_PATH, checked,
                            loads.timeout(checked) + ANSWER_SECONDS)
    if status != 200:
        raise VimError(f"the load generator's agent at {address}:{port} refused the test "
                       f"({status}): {document.get('error', document)}")
    wrong = [name for name, kind in _ANSWER.items()
             if not isinstance(document.get(name), kind) or isinstance(document.get(name), bool)]
    if wrong:
        raise VimError(f"the load generator's agent at {address}:{port} answered no valid "
                       f"{', '.join(wrong)}")
    return loadreport.Run(**{name: document[name] for name in _ANSWER})


def call(address, port, method, path, document=None, timeout=CONNECT_TIMEOUT):
    """``method path`` on the agent, with ``document`` as JSON; return ``(status, answer)``.

    :param timeout: seconds for the answer (connecting: at most :data:`CONNECT_TIMEOUT`).
    :raises Unreachable: no connection, or it broke off or timed out.
    :raises VimError: the answer is not a JSON object, or too large.
    """
    where = f"{address}:{port}"
    body = None if document is None else json.dumps(document).encode()
    connection = http.client.HTTPConnection(address, port,
                                            timeout=min(timeout, CONNECT_TIMEOUT))
    try:
        connection.connect()
        connection.sock.settimeout(timeout)
        connection.request(method, path, body=body,
                           headers={"Content-Type": "application/json"} if body else {})
        response = connection.getresponse()
        data = response.read(MAX_ANSWER + 1)
    except (OSError, http.client.HTTPException) as exc:
        raise Unreachable(f"the load generator's agent at {where} did not answer "
                          f"{method} {path}: {type(exc).__name__}: {exc}") from None
    finally:
        connection.close()
    if len(data) > MAX_ANSWER:
        raise VimError(f"the load generator's agent at {where} answered more than "
                       f"{MAX_ANSWER} bytes")
    try:
        answer = json.loads(data)
    except ValueError:
        answer = None
    if not isinstance(answer, dict):
        raise VimError(f"the load generator's agent at {where} answered {response.status} "
                       f"without a JSON object: {data[:200]!r}")
    return response.status, answer
