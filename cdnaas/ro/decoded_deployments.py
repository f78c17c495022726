"""Each deployment record's :class:`~cdnaas.ro.vim.base.Deployment`, decoded once per
version in an RO process.

The Instance Manager asks, every pass and of every vCDN, for readings
(:meth:`~cdnaas.ro.service.DeploymentService.readings_many`) and for where VNFs sit
(:meth:`~cdnaas.ro.service.DeploymentService.placement`), though a deployment rarely
changes. Every write of a record's ``deployment`` stamps its ``updated_at``
(:meth:`~cdnaas.ro.models.DeploymentRecord.mark`), so ``(id, updated_at)`` names one
version of it: a look-up reads the cheap columns (``id, status, driver, updated_at``) of
the rows, and ``deployment`` only of those new to this process or written since, which
it decodes. Status and driver are read at every look-up.

Held: the version last decoded of each record not DELETED (two threads decoding one
record at once may leave the older: the next look-up decodes it again). A look-up forgets
the ids it finds DELETED or gone; a look-up of every live record
(:meth:`DecodedDeployments.live`) forgets every other id, so what is held stays bounded
by the live deployments (some 7 KB each, of seven VNFs on the noop driver).
"""
import dataclasses
import datetime
import threading
from typing import NamedTuple

from sqlalchemy import select

from cdnaas.ro.models import DELETED, DeploymentRecord
from cdnaas.ro.vim.base import Deployment

#: ids per query reading the ``deployment`` of records not decoded yet (a first look-up
#: of every live record reads them all)
IDS_PER_QUERY = 500


class Found(NamedTuple):
    """A record as a look-up found it: its status and driver as read now, its deployment
    as decoded for its current version.

    ``deployment``: None while nothing runs; shared by every caller of every thread:
    read it, never change it. ``placed``: ``(host, "id/VNF")`` of each of its VNFs that
    sits on a host, in its order.
    """

    id: str
    status: str
    driver: str
    deployment: Deployment | None
    placed: tuple


@dataclasses.dataclass(frozen=True)
class _Version:
    """One version of a record's deployment, decoded."""

    updated_at: datetime.datetime
    deployment: Deployment | None
    placed: tuple


class DecodedDeployments:
    """The decoded deployment of each record of ``database`` (thread-safe).

    :param database: the RO's :class:`~cdnaas.db.engine.Database`.
    """

    def __init__(self, database):
        self.database = database
        self._versions = {}  # record id -> _Version
        self._lock = threading.Lock()

    def of(self, ids):
        """``{id: Found}`` of the records of ``ids`` there are (DELETED ones too)."""
        return self._look_up(DeploymentRecord.id.in_(ids), set(ids))

    def live(self):
        """:class:`Found` of every record not DELETED, in the database's order."""
        return [f for f in self._look_up(DeploymentRecord.status != DELETED).values()
                if f.status != DELETED]

    def _look_up(self, where, covered=None):
        """``{id: Found}`` of the records ``where`` selects, decoding the versions not held;
        what is held of ``covered`` (ids; None: every id) found DELETED or gone is forgotten.
        """
        cheap = (DeploymentRecord.id, DeploymentRecord.status, DeploymentRecord.driver,
                 DeploymentRecord.updated_at)
        with self.database.sessions() as session:
            rows = {r.id: r for r in session.execute(select(*cheap).where(where))}
            with self._lock:
                held = {id_: self._versions.get(id_) for id_ in rows}
            stale = [id_ for id_, version in held.items()
                     if version is None or version.updated_at != rows[id_].updated_at]
            for start in range(0, len(stale), IDS_PER_QUERY):
                # status and driver again: each answer is one row as it was at one time
                for row in session.execute(select(*cheap, DeploymentRecord.deployment).where(
                        DeploymentRecord.id.in_(stale[start:start + IDS_PER_QUERY]))):
                    rows[row.id], held[row.id] = row, _decode(row)
        live = {id_ for id_, row in rows.items() if row.status != DELETED}
        with self._lock:
            for id_ in (set(self._versions) if covered is None else covered) - live:
                self._versions.pop(id_, None)
            self._versions.update((id_, held[id_]) for id_ in stale if id_ in live)
        return {id_: Found(id_, row.status, row.driver, held[id_].deployment, held[id_].placed)
                for id_, row in rows.items()}


def _decode(row):
    """The :class:`_Version` of a row of ``id``, ``updated_at`` and ``deployment``."""
    deployment = Deployment.from_dict(row.deployment) if row.deployment is not None else None
    placed = tuple((vnf.host, f"{row.id}/{vnf.name}") for vnf in
                   (deployment.vnfs if deployment else ()) if vnf.host)
    return _Version(row.updated_at, deployment, placed)
