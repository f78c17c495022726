"""What the delivery options' tests share: a refusal's field, the local-driver stack, a
body refused through the API, a sample origin for the length of an ExitStack."""
import os

import pytest

from cdnaas.common import errors
from cdnaas.origin import server as origin_server
from tests.support.api import populate, vcdn_body
from tests.support.stack import running_stack


def refused_field(option, value):
    """The field ``option.check`` names refusing ``value``."""
    with pytest.raises(errors.BadRequest) as caught:
        option.check(value, option.FIELD)
    return caught.value.field


def local_stack(tmp_path_factory):
    """The five services on the local driver, with the sample regions, hosts and tenants
    (the body of a module-scoped fixture)."""
    if os.geteuid() != 0:
        pytest.skip("the local driver needs root")
    with running_stack(None, tmp_path_factory.mktemp("local-stack"),
                       extra_env={"CDNAAS_VIM_DRIVER": "local"}) as running:
        yield populate(running)


def assert_api_refuses(stack, body_field, value, field):
    """A vCDN created with ``body_field: value`` is refused (400 naming ``field``) and no
    vCDN is written."""
    before = stack.acme.ok("GET", "/vcdns")
    answer = stack.acme.call("POST", "/vcdns", json=vcdn_body("hostile", **{body_field: value}))
    assert answer.status_code == 400, answer.text
    assert answer.json()["error"]["field"] == field
    assert stack.acme.ok("GET", "/vcdns") == before


def sample_origin(stack):
    """The sample origin on 127.0.0.1 in a thread, stopped when ``stack`` (an ExitStack)
    closes."""
    server, thread = origin_server.serve_in_thread("127.0.0.1", 0)
    stack.callback(thread.join, 5)
    stack.callback(server.server_close)
    stack.callback(server.shutdown)
    return server
