"""What the local driver's steps share (:class:`LocalContext`) and where a deployment's
things live on this machine: its VNFs' files, namespaces and CPU groups, all named
after it, so that removing it needs no record beyond its id."""
import concurrent.futures
import dataclasses
from typing import Callable

from cdnaas.common import config
from cdnaas.ro.vim import pipeline
from cdnaas.ro.vim.base import Deployment, run_all
from cdnaas.ro.vim.local import network


def vnf_root(owner, deployment_id):
    """The folder of ``deployment_id``'s VNFs' files (one folder each)."""
    return config.state_dir() / "local" / owner / deployment_id


def group(owner, deployment_id, vnf_name):
    """The CPU group (:mod:`.cgroups`) of a VNF."""
    return f"{owner}_{deployment_id}_{vnf_name}"


@dataclasses.dataclass
class LocalContext(pipeline.Context):
    """A :class:`~cdnaas.ro.vim.pipeline.Context` with what the local driver's steps need:
    its thread pool and certificate reader, the deployment as recorded (an update's or
    restore's), and what the steps find on the way.

    ``record`` is the deployment's ``resources``: ``owner`` (whose VNFs these are),
    ``layout`` (region -> ``{bridge, subnet}``) and the ``service`` it serves.
    """

    pool: concurrent.futures.Executor | None = None
    tls_bundle: Callable | None = None
    deployment: Deployment | None = None
    #: region -> a viewer's client namespace (:mod:`.clients`), for the checks
    viewers: dict = dataclasses.field(default_factory=dict)
    #: restore: names of the VNFs an update added that serve at an address it does not hold
    serving: list = dataclasses.field(default_factory=list)
    #: restore: recorded VNFs found not whole but answering, mended where they run
    mended: set = dataclasses.field(default_factory=set)
    #: restore: recorded VNFs found silent or gone, built again
    gone: list = dataclasses.field(default_factory=list)
    _bundle: list = dataclasses.field(default_factory=list, init=False, repr=False)

    @property
    def owner(self):
        return self.record["owner"]

    @property
    def layout(self):
        return self.record["layout"]

    def bundle(self):
        """The certificate ``sig`` serves HTTPS with (or None), read once per flow."""
        if not self._bundle:
            self._bundle.append(self.tls_bundle(self.sig))
        return self._bundle[0]

    def prefix(self, vnf_name):
        """The folder of ``vnf_name``'s files, made if missing."""
        prefix = vnf_root(self.owner, self.deployment_id) / vnf_name
        prefix.mkdir(parents=True, exist_ok=True)
        return prefix

    def namespace(self, vnf_name):
        return network.namespace_name(self.owner, self.deployment_id, vnf_name)

    def group(self, vnf_name):
        return group(self.owner, self.deployment_id, vnf_name)

    def parallel(self, step, items, action):
        """Run ``action`` over ``items`` in parallel, reporting ``step``; first error wins."""
        run_all(self.pool, action, items, step, self.progress)
