"""Rolling rebuilds: which servers of a live vCDN get new user-data, and in what waves.

Caches and DNS servers take their configuration from cloud-init user-data at boot
(:mod:`.userdata`), so the driver changes the origin, cache rules or served names of
a live vCDN (:attr:`~cdnaas.ro.vim.changes.Change.caches_reconfigured`,
:attr:`~cdnaas.ro.vim.changes.Change.renamed`; a new size alone, which changes the
neighbours' planned connections, rebuilds nothing: it would empty caches just as the
load changes) by rebuilding servers (Nova's rebuild: same server, ports, addresses
and compute host, a fresh disk from the image and new user-data; compute API
:data:`MICROVERSION`). Each server's user-data is known by its SHA-256: in the
record (``servers[name][DIGEST_KEY]``, what RO committed) and in the server's
metadata (:data:`METADATA_KEY`, what Nova last gave it), so a restore after an
interrupted update sees which servers were rebuilt. Nothing here calls the cloud
but :func:`check_compute`.
"""
import base64
import dataclasses
import hashlib

from cdnaas.common.sig import Vnf
from cdnaas.ro.vim.base import DeploymentFailed
from cdnaas.ro.vim.openstack import userdata

#: the compute API microversion that lets a rebuild set new user-data
MICROVERSION = "2.57"
#: the record's key (under ``servers[name]``) for the digest of the server's user-data
DIGEST_KEY = "user_data_sha256"
#: the server's metadata key for the digest of the user-data Nova last gave it
METADATA_KEY = "cdnaas_user_data"
#: the record's key (under ``servers[name]``) for the generation of the nginx config the
#: server's user-data writes (:func:`.userdata.generation`), which its guest reports
GENERATION_KEY = "nginx_generation"


@dataclasses.dataclass
class Rebuild:
    """A kept server and the user-data ``sig`` gives it.

    :param previous: the user-data the previous SIG renders for it (the undo's, where
        Nova does not show the server's own).
    :param stand_in: a cache alone in its region: the server booted beside it with the
        new user-data that serves the region while it rebuilds (:func:`stand_in`).
    """

    vnf: Vnf
    server_id: str
    image_id: str
    user_data: str
    previous: str
    stand_in: Vnf | None = None


def digest(user_data: str) -> str:
    """The SHA-256 (hex) of ``user_data``."""
    return hashlib.sha256(user_data.encode()).hexdigest()


def note(entry: dict, user_data: str):
    """Record in ``entry`` (``servers[name]``) what RO gave the server: the digest of
    ``user_data`` and the generation of the nginx config it writes (none for a DNS
    server)."""
    entry[DIGEST_KEY] = digest(user_data)
    entry[GENERATION_KEY] = userdata.generation(user_data)


def encoded(user_data: str) -> str:
    """``user_data`` as Nova takes it (base64)."""
    return base64.b64encode(user_data.encode()).decode()


def decoded(value: str) -> str:
    """User-data as Nova shows it (base64) in text."""
    return base64.b64decode(value).decode()


def changed(rebuilds: list[Rebuild], recorded: dict) -> list[Rebuild]:
    """Those of ``rebuilds`` whose new user-data differs from the server's: its digest in
    ``recorded`` (VNF name -> digest, None for servers booted before digests were
    recorded: then the previous SIG's rendering)."""
    return [r for r in rebuilds
            if digest(r.user_data) != (recorded.get(r.vnf.name) or digest(r.previous))]


def rebuilt_since(metadata: dict | None, entry: dict) -> bool:
    """Whether the server recorded as ``entry``, whose Nova metadata is ``metadata``, has
    other user-data than the record names: an update that did not finish rebuilt it. A
    server without the digest in its metadata (booted before it was kept) was never
    rebuilt."""
    found = (metadata or {}).get(METADATA_KEY)
    return found is not None and found != entry.get(DIGEST_KEY)


def stand_in(cache: Vnf) -> Vnf:
    """The VNF that serves ``cache``'s region while ``cache``, alone there, rebuilds: its
    copy (same image, size and planned connections) named ``<name>-stand-in``."""
    return dataclasses.replace(cache, name=f"{cache.name}-stand-in")


def waves(changed_caches: list, region_caches: int) -> list[list]:
    """``changed_caches`` of a region of ``region_caches`` caches, split into waves taken
    out of the balancer together: at most half of them at a time (one at least), so
    the others serve meanwhile. A region of one cache is one wave, served by its
    stand-in meanwhile (:func:`stand_in`)."""
    size = 1 if region_caches < 2 else max(1, len(changed_caches) // 2)
    return [changed_caches[i:i + size] for i in range(0, len(changed_caches), size)]


def check_compute(conn, vim_region) -> None:
    """Refuse, before anything changes, a compute API that cannot rebuild with user-data.

    :raises DeploymentFailed: ``conn``'s compute API (negotiated, or held by
        ``compute_api_version`` in clouds.yaml) is below :data:`MICROVERSION`.
    """
    from openstack import utils
    if not utils.supports_microversion(conn.compute, MICROVERSION):
        raise DeploymentFailed(
            f"the openstack driver changes the origin, cache rules, names or regions of a "
            f"live vCDN by rebuilding its servers with new user-data, which needs compute API "
            f"{MICROVERSION}; region {vim_region or 'default'} of this cloud offers less; "
            "nothing was changed: deploy a new vCDN instead")
