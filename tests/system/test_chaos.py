"""A short chaos soak (``benchmarks/chaos.py``): 200 viewers fetch cached objects through
the balancers of two vCDNs for 72 s while an API operation runs every ~6 s and a fault
strikes every 8 s, each of another kind (``kill -9`` of a service followed by ``cdnaas up
--detach``, of a cache's master or worker, a balancer's master or a dnsmasq: all nine
kinds on a quiet machine, fewer where restarts take longer than 8 s); then every fault
healed, no operation is stuck, the ledger holds, nothing leaks once every vCDN is deleted,
and no viewer request failed (embedded default stack, local driver, root only)."""
import os

import pytest

from benchmarks import chaos

pytestmark = [pytest.mark.xdist_group("chaos"),
              pytest.mark.skipif(os.geteuid() != 0, reason="the local driver needs root")]


def test_a_short_soak_keeps_every_invariant(tmp_path):
    params = chaos.Params(seconds=72, viewers=200, operation_every=6, fault_every=8,
                          settle=90, heal_bound=90, seed=28)
    result = chaos.soak(params, tmp_path)
    chaos.report(result)
    assert len({f.kind for f in result.faults}) == len(result.faults) >= 5, result.faults
    assert [f for f in result.faults if f.error] == []
    assert [f for f in result.faults if f.healed is None] == [], "a fault was not healed"
    assert result.stuck == [], "operations that never ended"
    assert {o.state for o in result.operations} >= {"COMPLETED"}
    assert result.ledger is None, result.ledger
    assert result.leaks == {}
    assert result.outcomes[200] >= 200 * 60
    assert result.errors == [], "viewer requests failed"
