"""Service-to-service authentication: tokens, key rotation, and every internal route of a
real stack refusing callers without the installation's key.

Its tests that start no process are in tests/unit/test_service_auth_units.py (the unit
tier)."""
import re
import stat
import subprocess

import pytest
import requests
import yaml

from cdnaas.cli.stack import cli_command
from cdnaas.common import config, errors, service_auth
from cdnaas.common.clients import RoClient, SoClient
from tests.support.api import Api, populate, vcdn_body
from tests.support.stack import running_stack

INTERNAL = ("so", "sidr", "ro", "im")


# -- a real stack ---------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    with running_stack(None, tmp_path_factory.mktemp("auth")) as running:
        yield populate(running)


def _concrete(path):
    return re.sub(r"\{[a-z_]+\}", "x1", path)


def _internal_routes():
    from cdnaas.common.openapi import validator_for  # pylint: disable=import-outside-toplevel
    return [(svc, method, _concrete(path)) for svc in INTERNAL
            for method, path in sorted(validator_for(config.api_spec_path(svc)).paths())
            if path != "/healthz"]


def test_the_stack_made_its_key_with_the_migrations(stack):
    assert stack.key_file.exists() and stat.S_IMODE(stack.key_file.stat().st_mode) == 0o600


@pytest.mark.parametrize("credential", ["none", "tenant", "operator", "other-key", "garbage"])
def test_every_internal_route_refuses_a_caller_without_the_service_key(stack, tmp_path,
                                                                       credential):
    other = service_auth.ensure_key(tmp_path / "other.key")
    headers = {"none": {}, "tenant": {"Authorization": f"Bearer {stack.acme.token}"},
               "operator": {"Authorization": f"Bearer {stack.operator_token}"},
               "other-key": service_auth.headers("so", other),
               "garbage": {"Authorization": "Bearer \udcff".encode("utf-8", "surrogateescape")
                           .decode("latin-1")}}[credential]
    refused = []
    for service, method, path in _internal_routes():
        answer = requests.request(method, stack.urls[service] + path, headers=headers,
                                  json={"sig": {}}, timeout=10)
        if answer.status_code != 401 or "error" not in answer.json():
            refused.append((service, method, path, answer.status_code))
        assert answer.headers.get("WWW-Authenticate", "").startswith("Bearer")
    assert refused == []
    for service in INTERNAL:
        assert requests.get(stack.urls[service] + "/healthz", timeout=10).status_code == 200


def test_a_metrics_token_reads_metrics_and_nothing_else(stack):
    metrics = service_auth.headers(service_auth.METRICS_CALLER, stack.key_file)
    for service in INTERNAL:
        assert requests.get(stack.urls[service] + "/metrics", headers=metrics,
                            timeout=10).status_code == 200
    refused = requests.get(stack.urls["so"] + "/so/v1/instances", headers=metrics, timeout=10)
    assert refused.status_code == 401 and "metrics only" in refused.json()["error"]["message"]


def test_services_reach_each_other_and_tools_with_the_key(stack):
    accepted = stack.acme.ok("POST", "/vcdns", 202, json=vcdn_body("signed"))
    assert stack.acme.wait(accepted["operation"]["id"])["state"] == "COMPLETED"
    vcdn_id = accepted["vcdn"]["id"]
    assert stack.client(RoClient).get_deployment(vcdn_id).status == "ACTIVE"
    assert stack.client(SoClient).get(f"/so/v1/instances/{vcdn_id}")["tenant"] == "acme"
    with pytest.raises(errors.Unauthorized):
        RoClient(base_url=stack.urls["ro"]).get_deployment(vcdn_id)  # the test process's key


def _template(flavor):
    return {"flavor": flavor, "version": 1, "plugin": "static", "technology": "container",
            "description": "registered through the API",
            "vnfs": {role: {"image": "cdnaas-vnf", "instances": {"min": 1, "max": 1},
                            "vcpus": {"min": 1, "max": 1}, "ram_mb": {"min": 256, "max": 256},
                            "config_templates": []}
                     for role in ("cache", "load_balancer", "dns")}}


def test_templates_are_registered_by_operators_through_the_api(stack):
    document = _template("auth-test")
    assert stack.acme.call("POST", "/templates", json=document).status_code == 403
    assert Api(stack.urls["api"]).call("POST", "/templates", json=document).status_code == 401
    assert stack.operator.ok("POST", "/templates", 201, json=document)["flavor"] == "auth-test"
    listed = stack.operator.ok("GET", "/templates", params={"flavor": "auth-test"})["templates"]
    assert [t["version"] for t in listed] == [1]
    assert stack.acme.call("GET", "/templates").status_code == 403


def test_the_cli_registers_a_template_with_the_operator_token(stack, tmp_path):
    path = tmp_path / "cli-template.yaml"
    path.write_text(yaml.safe_dump(_template("cli-auth")))
    env = dict(stack.env, CDNAAS_TOKEN=stack.operator_token)
    done = subprocess.run(cli_command("template", "register", str(path)), env=env,
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0 and "cli-auth" in done.stdout, done.stderr
    env["CDNAAS_TOKEN"] = stack.acme.token
    refused = subprocess.run(cli_command("template", "list"), env=env, capture_output=True,
                             text=True, timeout=60, check=False)
    assert refused.returncode != 0 and "operator" in refused.stderr + refused.stdout
