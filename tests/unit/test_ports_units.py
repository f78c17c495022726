"""Free ports for stacks and config checks come from below the ephemeral range, where no
outgoing connection can take them between the pick and the bind: the tests that start no
process (the unit tier); the others, and what the module covers, are in
tests/service/test_ports.py."""


from cdnaas.common import ports


def test_an_unreadable_range_is_linuxs_default(monkeypatch):
    monkeypatch.setattr(ports, "RANGE_FILE", "/nonexistent/ip_local_port_range")
    assert ports.ephemeral_range() == (32768, 60999)
