"""HTTPS from a viewer of the local driver: one HTTP/2 GET with curl, the certificate a
balancer serves, and a bounded loop of GETs across a certificate's rotation (the TLS
and managed-certificate tests)."""
import hashlib
import socket
import ssl
import threading
import time

from cdnaas.ro.vim.local import netns
from cdnaas.ro.vim.local.system import run

PATH = "/objects/chunk-low"
#: curl's exit code when the server ended the HTTP/2 connection before the request's
#: stream was processed: an nginx worker leaving on a graceful reload closes a connection
#: that has no stream yet with GOAWAY, unread HEADERS and all (measured: about 1 in 250
#: requests across 20 reloads with 4 clients); the request was not processed and a
#: client retries it (RFC 9113 6.8), as browsers do
GOAWAY_REFUSED = "16"


def served_fingerprint(namespace, address, name, ca_pem):
    """SHA-256 of the certificate the balancer at ``address`` serves for ``name``, verified
    against ``ca_pem`` (from a viewer's namespace)."""
    context = ssl.create_default_context(cadata=ca_pem)
    with netns.entered(namespace):
        raw = socket.create_connection((address, 443), timeout=5)
    with context.wrap_socket(raw, server_hostname=name) as tls:
        return hashlib.sha256(tls.getpeercert(binary_form=True)).hexdigest()


def https_get(viewer, name, balancer, cafile, timeout=10):
    """``(HTTP version, status, body, curl's exit code and error)`` of one HTTP/2 GET of
    ``name`` pinned to ``balancer`` (curl ``--http2`` verifying against ``cafile``)."""
    out = run(["curl", "-s", "--http2", "--cacert", str(cafile), "--max-time", str(timeout),
               "--resolve", f"{name}:443:{balancer}", "-o", "-",
               "-w", "\n%{http_version} %{http_code} %{exitcode} %{errormsg}",
               f"https://{name}{PATH}"],
              check=False, timeout=timeout + 5, binary=True, namespace=viewer.namespace)
    body, _, tail = out.rpartition(b"\n")
    version, status, code, error = (tail.decode("ascii", "replace").split(" ", 3) + [""] * 4)[:4]
    return version, int(status) if status.isdigit() else 0, body, f"{code} {error}"


class RequestLoop:
    """HTTP/2 GETs (:func:`https_get`) back to back in a thread while the block runs, at
    most ``requests`` of them for at most ``seconds``; a request an old worker refused
    with GOAWAY before processing it is retried once, as browsers do (RFC 9113 6.8).

    ``outcomes``: ``(version, status, error)`` of each; ``retried``: the refusals;
    ``failed``: the outcomes that are not an HTTP/2 200.
    """

    def __init__(self, viewer, name, balancer, cafile, requests, seconds):
        self.outcomes, self.retried = [], []
        self._get = lambda: https_get(viewer, name, balancer, cafile)
        self._limits = (requests, seconds)
        self._stop = threading.Event()
        self._worker = threading.Thread(target=self._loop)

    def _loop(self):
        requests, seconds = self._limits
        deadline = time.monotonic() + seconds
        while not self._stop.is_set() and len(self.outcomes) < requests \
                and time.monotonic() < deadline:
            version, status, _body, error = self._get()
            if error.startswith(f"{GOAWAY_REFUSED} "):
                self.retried.append(error)
                version, status, _body, error = self._get()
            self.outcomes.append((version, status, error))

    @property
    def failed(self):
        return [o for o in self.outcomes if o[:2] != ("2", 200)]

    def __enter__(self):
        self._worker.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._worker.join()
        return False
