"""Credentials for internal services' apps run inside the test process."""
from cdnaas.common import service_auth


def signed(test_client, caller="test"):
    """``test_client`` (a Flask test client of SO, SIDR, RO or IM) sending a service token
    signed with the test process's key (``CDNAAS_SERVICE_KEY_FILE``, see conftest)."""
    test_client.environ_base["HTTP_AUTHORIZATION"] = f"Bearer {service_auth.token(caller)}"
    return test_client
