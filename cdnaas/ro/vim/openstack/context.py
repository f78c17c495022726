"""What the ``openstack`` driver's steps share: a :class:`~cdnaas.ro.vim.pipeline.Context`
with the cloud, the driver's thread pool, secret store and placement refusals, and
what an update plans before its first step (:func:`.flows.plan_update`)."""
import concurrent.futures
import dataclasses
import json

from cdnaas.ro.vim import pipeline
from cdnaas.ro.vim.base import Deployment, run_all


@dataclasses.dataclass
class OpenStackContext(pipeline.Context):
    """The steps' context on OpenStack.

    ``record`` is the deployment's ``resources``: ``cloud``, ``owner``, ``regions``
    (region -> its network, subnet, security groups, balancer and pools), ``servers``
    (VNF name -> its server, ports, legs, user-data digest, placement) and
    ``management_cidrs``.
    """

    cloud: object = None
    pool: concurrent.futures.Executor | None = None
    #: RO's secret store (:attr:`~cdnaas.ro.vim.base.VimDriver.secrets`)
    secrets: object = None
    #: the driver's ways of asking Nova for a host that were refused (:mod:`.placement`)
    placement_refused: object = None
    deployment: Deployment | None = None
    #: images, flavors and origin addresses looked up (:func:`.lookup.prepare`)
    prepared: dict = dataclasses.field(default_factory=dict)
    #: region -> its balancer's id, for the members' registration
    lbs: dict = dataclasses.field(default_factory=dict)
    #: an update: servers that boot (new caches, a DNS server moving, stand-ins)
    added: list = dataclasses.field(default_factory=list)
    #: an update: kept servers rebuilt with new user-data (:class:`.rebuild.Rebuild`)
    rebuilds: list = dataclasses.field(default_factory=list)
    #: an update: the stand-ins of caches alone in their region while they rebuild
    stand_ins: list = dataclasses.field(default_factory=list)
    #: an update: regions of kept caches whose members change
    resized: list = dataclasses.field(default_factory=list)
    #: an update: regions that stay
    lived: list = dataclasses.field(default_factory=list)
    #: an update: servers that go (VNF name -> its record), out of ``record`` already
    leaving: dict = dataclasses.field(default_factory=dict)
    #: an update: regions that go (region -> its record), out of ``record`` once it is done
    gone: dict = dataclasses.field(default_factory=dict)
    #: a restore: recorded servers that are gone, booted again
    missing: list = dataclasses.field(default_factory=list)
    #: a restore: recorded servers an update rebuilt with other user-data, rebuilt back
    rebuilt: list = dataclasses.field(default_factory=list)

    def conn(self, vim_region):
        """The cloud's connection to OpenStack region ``vim_region``."""
        return self.cloud.conn(vim_region)

    def region_conn(self, region):
        """The connection to the OpenStack region of the SIG's ``region``."""
        return self.cloud.conn(self.sig.region(region).vim_region)

    def parallel(self, action, items, step=None):
        """:func:`~cdnaas.ro.vim.base.run_all` in the driver's pool, reporting ``step``."""
        return run_all(self.pool, action, items, step, self.progress)


def copied(record):
    """A deep copy of a deployment's record: what a flow changes until it is done."""
    return json.loads(json.dumps(record))
