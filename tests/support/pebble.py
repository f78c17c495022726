"""Pebble (Debian's ``pebble``), a real ACME CA for the managed-certificate tests: real
HTTP-01 validation (``PEBBLE_VA_ALWAYS_VALID`` unset), names resolved through the DNS
server the test gives it, its own HTTPS listener trusted through :func:`pebble_ca`."""
import contextlib
import json
import os
import subprocess
import time

import pytest
import requests

from cdnaas.common import ports
from tests.support.certs import TestCA

PORT, MANAGEMENT_PORT = ports.free_loopback_ports(2)
#: the ACME directory SO orders from (``CDNAAS_ACME_DIRECTORY``)
DIRECTORY = f"https://localhost:{PORT}/dir"


@pytest.fixture(scope="module")
def pebble_ca(tmp_path_factory):
    """The CA of Pebble's own HTTPS listener (what SO trusts it by), and its files."""
    folder = tmp_path_factory.mktemp("pebble")
    ca = TestCA("Pebble listener test root")
    issued = ca.issue(["localhost"])
    (folder / "listener.crt").write_text(issued.chain_pem)
    (folder / "listener.key").write_text(issued.key_pem)
    (folder / "ca.pem").write_text(ca.root_pem)
    return folder


@contextlib.contextmanager
def running(folder, dns_server, http_port=80):
    """Pebble on loopback (the files of :func:`pebble_ca` in ``folder``), validating
    HTTP-01 on ``http_port`` of what ``dns_server`` (``address:port``) answers; yields the
    PEM of the root it issues under."""
    config = folder / "pebble.json"
    config.write_text(json.dumps({"pebble": {
        "listenAddress": f"127.0.0.1:{PORT}",
        "managementListenAddress": f"127.0.0.1:{MANAGEMENT_PORT}",
        "certificate": str(folder / "listener.crt"), "privateKey": str(folder / "listener.key"),
        "httpPort": http_port, "tlsPort": 5001, "ocspResponderURL": "",
        "externalAccountBindingRequired": False}}))
    env = {**os.environ, "PEBBLE_VA_NOSLEEP": "1", "PEBBLE_WFE_NONCEREJECT": "0",
           "PEBBLE_AUTHZREUSE": "0"}
    env.pop("PEBBLE_VA_ALWAYS_VALID", None)  # real validation
    log = (folder / "pebble.log").open("wb")
    process = subprocess.Popen(["pebble", "-config", str(config), "-dnsserver", dns_server],
                               env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                root = requests.get(f"https://localhost:{MANAGEMENT_PORT}/roots/0",
                                    verify=str(folder / "ca.pem"), timeout=2)
                if root.status_code == 200:
                    break
            except requests.ConnectionError:
                pass
            assert process.poll() is None and time.monotonic() < deadline, \
                (folder / "pebble.log").read_text()
            time.sleep(0.2)
        yield root.text
    finally:
        process.terminate()
        process.wait(timeout=10)
        log.close()
