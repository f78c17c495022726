"""Thin JSON-over-HTTP client that every inter-service client builds on."""
import logging
import threading

import orjson
import requests
from flask import current_app, has_app_context

from cdnaas.common import config, errors, service_auth

LOG = logging.getLogger(__name__)


#: the most items one page of a list holds (its ``limit``)
PAGE_MAX = 1000


class JsonClient:
    """Calls one service's JSON API and turns error answers into exceptions.

    :param base_url: the service's base URL; read from the environment when omitted.
    :param token: bearer token sent with every request (the customer API's tenant
        tokens). Without one, requests to an internal service carry a fresh service
        token signed with the key in ``key_file`` (:mod:`cdnaas.common.service_auth`).
    :param timeout: seconds to wait for one answer.
    :param key_file: the service key file; the configured one when omitted.
    :param session: what sends the requests: an object with ``requests.Session``'s
        ``request(method, url, **kwargs)`` and ``get(url, **kwargs)`` returning
        ``requests.Response`` (a keystoneauth session behind an adapter such as
        :class:`cdnaas.osc.client.KeystoneTransport`). When omitted: between services,
        the calling thread's kept-alive session (:func:`service_session`); otherwise a
        new ``requests.Session``.
    """

    service = None  # set by subclasses to find their URL in the environment

    def __init__(self, base_url=None, token=None, timeout=30.0, key_file=None, session=None):
        self.base_url = (base_url or config.service_url(self.service)).rstrip("/")
        self.timeout = timeout
        self.key_file = key_file
        self.signed = not token and self.service in config.INTERNAL_SERVICES
        if session is None:
            session = service_session() if self.signed else requests.Session()
        self.session = session
        self.headers = {"Authorization": f"Bearer {token}"} if token else {}

    def request(self, method, path, json=None, params=None, data=None, headers=None,
                expect=(200, 201, 202, 204)):
        """Send one request; return the decoded JSON body (or None when empty).

        :raises cdnaas.common.errors.CdnaasError: the peer answered with an error
            (same status) or could not be reached (502).
        """
        url = f"{self.base_url}{path}"
        headers = {**(headers or {}), **self._credentials()}
        try:
            response = self.session.request(method, url, json=json, params=params, data=data,
                                            headers=headers, timeout=self.timeout)
        except requests.RequestException as exc:
            raise errors.UpstreamError(f"{self.service or url} is unreachable: {exc}") from exc
        body = _decode(response)
        if response.status_code not in expect:
            raise errors.from_response(response.status_code, body)
        return body

    def stream(self, path, params=None, chunk_bytes=65536):
        """GET ``path`` and return an iterator of its body's byte chunks as they arrive
        (an export: never held whole). The connection closes when the iterator ends
        or is dropped.

        :raises cdnaas.common.errors.CdnaasError: as :meth:`request`, before the first chunk.
        """
        url = f"{self.base_url}{path}"
        headers = self._credentials()
        try:
            response = self.session.get(url, params=params, headers=headers,
                                        timeout=self.timeout, stream=True)
        except requests.RequestException as exc:
            raise errors.UpstreamError(f"{self.service or url} is unreachable: {exc}") from exc
        if response.status_code != 200:
            body = _decode(response)
            response.close()
            raise errors.from_response(response.status_code, body)

        def chunks():
            try:
                yield from response.iter_content(chunk_bytes)
            except requests.RequestException as exc:
                LOG.warning("the stream from %s broke: %s", url, exc)
            finally:
                response.close()
        return chunks()

    def _credentials(self):
        """The headers that say who calls: the token given, or a service token."""
        if self.signed:
            return service_auth.headers(_caller(), self.key_file)
        return self.headers

    def get(self, path, **kwargs):
        return self.request("GET", path, **kwargs)

    def post(self, path, json=None, **kwargs):
        return self.request("POST", path, json=json, **kwargs)

    def put(self, path, json=None, **kwargs):
        return self.request("PUT", path, json=json, **kwargs)

    def patch(self, path, json=None, **kwargs):
        return self.request("PATCH", path, json=json, **kwargs)

    def delete(self, path, **kwargs):
        return self.request("DELETE", path, **kwargs)

    def every_page(self, path, key, params=None, limit=PAGE_MAX):
        """The ``key`` items of every page of the list at ``path`` (a list answering
        ``{key: [...], "next": marker or None}``), following ``next`` to the last."""
        found, marker = [], None
        while True:
            page = self.get(path, params={**(params or {}), "limit": limit,
                                          **({"marker": marker} if marker else {})})
            found += page[key]
            marker = page.get("next")
            if not marker:
                return found


_THREAD = threading.local()


def service_session():
    """The calling thread's session for calls between services: its connections are kept
    alive from one call to the next (a request no longer opens a TCP connection per hop),
    and it reads no proxy settings or ``.netrc`` from the environment at each request.
    A connection the peer closed meanwhile (its idle timeout, a replica stopped) is
    noticed before reuse and opened again."""
    session = getattr(_THREAD, "session", None)
    if session is None:
        session = _THREAD.session = requests.Session()
        session.trust_env = False
    return session


def _caller():
    """The name a service token carries: the calling service's, or ``cdnaas`` (tools)."""
    return current_app.config.get("SERVICE", "cdnaas") if has_app_context() else "cdnaas"


def _decode(response):
    if not response.content:
        return None
    try:
        return orjson.loads(response.content)  # 3-5x the standard decoder's speed
    except orjson.JSONDecodeError:
        return {"error": {"message": response.text[:500]}}
