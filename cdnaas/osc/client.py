"""The customer API's typed client (:class:`cdnaas.common.clients.CustomerApi`) over a
keystoneauth session: the session adds the token (``X-Auth-Token``) and renews it."""
from osc_lib import exceptions

from cdnaas.cli.catalog import SERVICE_TYPE
from cdnaas.common.clients import CustomerApi


class KeystoneTransport:
    """``requests.Session``'s ``request`` and ``get`` over a keystoneauth1 session, as
    :class:`cdnaas.common.http.JsonClient` sends them: error statuses come back as
    responses (the client reads the API's error body) instead of keystoneauth's
    exceptions."""

    def __init__(self, session):
        self.session = session

    def request(self, method, url, **kwargs):
        """Send one request; ``kwargs`` as ``requests`` takes them (None values dropped)."""
        kwargs = {key: value for key, value in kwargs.items() if value is not None}
        return self.session.request(url, method, raise_exc=False, **kwargs)

    def get(self, url, **kwargs):
        return self.request("GET", url, **kwargs)


def cdn_client(session, endpoint):
    """A :class:`CustomerApi` of the API at ``endpoint`` (its root URL) through the
    keystoneauth ``session``.

    :raises osc_lib.exceptions.CommandError: there is no endpoint (``None``).
    """
    if not endpoint:
        raise exceptions.CommandError(f"no endpoint of service type {SERVICE_TYPE!r}: register "
                                      "it (cdnaas admin register-service) or give --os-endpoint")
    return CustomerApi(base_url=endpoint, session=KeystoneTransport(session))
