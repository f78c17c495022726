"""HTTPS on custom names, end to end on the local driver (real nginx and dnsmasq): the tests
that start no process (the unit tier); the others, and what the module covers, are in
tests/system/test_tls.py."""

import pytest

from cdnaas.vnf import templates
from cdnaas.vnf.fields import ConfigError


@pytest.mark.parametrize("argument, value", [
    ("server_names", ["cdn.example.com;"]), ("server_names", ["a.example.com", "a.example.com"]),
    ("server_names", ["cdn.example.com\n}"]), ("server_names", "cdn.example.com"),
    ("tls", {"port": 443, "certificate": "/x/c.pem;", "key": "/x/k.pem"}),
    ("tls", {"port": 443, "certificate": "/x/../c.pem", "key": "/x/k.pem"}),
    ("tls", {"port": 443, "certificate": "relative.pem", "key": "/x/k.pem"}),
    ("tls", {"port": 80, "certificate": "/x/c.pem", "key": "/x/k.pem"}),
    ("tls", {"port": 443, "certificate": "/x/c.pem"}),
    ("tls", "/x/c.pem"),
])
def test_balancer_configs_refuse_hostile_names_and_paths(tmp_path, argument, value):
    from cdnaas.vnf import balancer, geodns  # pylint: disable=import-outside-toplevel
    with pytest.raises(ConfigError):
        balancer.lb_config(name="lb", workers=1, listen_address="127.0.0.1", listen_port=80,
                            members=[("c", "127.0.0.1", 8080)], prefix_dir=str(tmp_path),
                            management_sources=["127.0.0.1"], **{argument: value})
    with pytest.raises(ConfigError):
        geodns.dns_config(name="d", hostname="x.example.net", answer_address="10.0.0.2",
                             listen_addresses=["10.0.0.3"], port=5300, prefix_dir=str(tmp_path),
                             aliases=value if argument == "server_names" else ["a b"])


def test_a_flavor_balancer_template_without_https_is_refused_for_a_vcdn_with_a_certificate(
        tmp_path):
    from cdnaas.vnf import balancer  # pylint: disable=import-outside-toplevel
    stock = (templates.TEMPLATES_DIR / templates.LB_TEMPLATE).read_text()
    (tmp_path / "plain-lb.conf.j2").write_text(
        stock.replace('{% include "nginx-lb-tls.conf.j2" %}\n', ""))
    values = {"name": "lb", "workers": 1, "listen_address": "127.0.0.1", "listen_port": 80,
              "members": [("c", "127.0.0.1", 8080)], "prefix_dir": str(tmp_path),
              "management_sources": ["127.0.0.1"],
              "flavor": templates.FlavorConfig(template="plain-lb.conf.j2",
                                               folders=(str(tmp_path),))}
    assert "ssl_certificate" not in balancer.lb_config(**values)  # HTTP only: fine
    with pytest.raises(ConfigError, match="nginx-lb-tls.conf.j2"):
        balancer.lb_config(**values, tls={"port": 443, "certificate": f"{tmp_path}/c.crt",
                                           "key": f"{tmp_path}/c.key"})
