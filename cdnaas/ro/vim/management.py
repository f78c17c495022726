"""Asking an nginx VNF's management listener (:data:`cdnaas.vnf.endpoints.MANAGEMENT_PORT`),
which answers only RO's side (the local driver's bridge gateway, the OpenStack driver's
management prefixes): whether it answers, the configuration generation its workers run,
its ``stub_status`` figures. One HTTP request each, from this thread's namespace."""
import http.client

from cdnaas.vnf.endpoints import GENERATION_PATH, MANAGEMENT_PORT, STATUS_PATH
from cdnaas.vnf.generation import generation_of


def _get(address, port, path, timeout):
    """``(status, body)`` of ``GET path`` at ``address:port``; raises OSError/HTTPException."""
    connection = http.client.HTTPConnection(address, port, timeout=timeout)
    try:
        connection.request("GET", path)
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


def answers_http(address, port=MANAGEMENT_PORT, path=STATUS_PATH, timeout=0.5):
    """True when the server at ``address`` answers ``path`` with 200 (by default: nginx's
    status page on its management listener)."""
    try:
        return _get(address, port, path, timeout)[0] == 200
    except (OSError, http.client.HTTPException):
        return False


def generation(address, port=MANAGEMENT_PORT, timeout=0.5):
    """The generation of the configuration the workers of the nginx VNF at ``address`` run
    (:data:`GENERATION_PATH` on its management listener): "" when it answers without one
    (a configuration of before generations), None when it does not answer."""
    try:
        status, body = _get(address, port, GENERATION_PATH, timeout)
    except (OSError, http.client.HTTPException):
        return None
    if status not in (200, 404):
        return None
    return generation_of(body.decode("ascii", "replace")) or ""


def stub_status(address, port=MANAGEMENT_PORT):
    """nginx ``stub_status`` figures (active connections, accepts, handled, requests...)
    from its management listener, or None when the server does not answer (or refuses:
    403 to a source that is not the management side)."""
    try:
        status, body = _get(address, port, STATUS_PATH, 1)
    except (OSError, http.client.HTTPException):
        return None
    if status != 200:
        return None
    lines = body.decode("ascii", "replace").splitlines()
    accepts, handled, total = (int(x) for x in lines[2].split())
    reading, writing, waiting = (int(x) for x in lines[3].split()[1::2])
    return {"active": int(lines[0].split(":")[1]), "accepts": accepts, "handled": handled,
            "requests": total, "reading": reading, "writing": writing, "waiting": waiting}
