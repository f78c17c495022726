"""A service whose database cannot be reached answers 503 with a Retry-After (nothing was done:
the tests that start no process (the unit tier); the others, and what the module covers, are
in tests/service/test_database_outage.py."""

from cdnaas.common import errors


def test_a_peer_s_503_is_relayed_as_503():
    relayed = errors.from_response(503, {"error": {"message": "the so service cannot reach "
                                                              "its database right now"}})
    assert isinstance(relayed, errors.Unavailable) and relayed.status == 503
