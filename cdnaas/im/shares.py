"""The vCDNs shared out among IM replicas, each pass, by claims with leases.

The vCDNs fall in :data:`SHARES` shares (a hash of the id). Each share is a row of
``im_shares`` claimed by one replica (:class:`cdnaas.db.leases.Claims`: ``claimed_by``
and a lease a thread renews); a replica observes the vCDNs of the shares it holds.
Every replica is a row of ``im_replicas`` too, kept alive by its passes; at the start of
a pass (:meth:`Shares.begin`) a replica counts the live ones and takes free shares (never
claimed or given back) up to its fair part, ``ceil(SHARES / live replicas)``, and
every share whose lease expired (its replica died: within a lease its vCDNs are
observed again, by whichever replica looks first); at the end (:meth:`Shares.end`) it gives back what it
holds beyond that part, after observing it, so a replica that joins takes its part at
its next pass and no share goes a period unobserved.

Decisions about hosts (power, their points) need every vCDN: the leader
(:class:`cdnaas.db.leases.Leadership`) takes them from what its own pass saw plus the
``summary`` each other live replica left of its latest pass (hosts' loads, regions'
needs: :func:`cdnaas.im.reconcile.summary`).
"""
import dataclasses
import datetime as dt
import logging
import math
import threading
import zlib

from sqlalchemy import delete, func, select, update

from cdnaas.common.timeutil import utcnow
from cdnaas.db import leases
from cdnaas.im.models import Replica
from cdnaas.im.models import Share as ShareRow

LOG = logging.getLogger(__name__)

#: shares of the vCDNs (rows of ``im_shares``, made by migration im_0005)
SHARES = 64


def share_of(vcdn_id):
    """The share ``vcdn_id`` falls in."""
    return zlib.crc32(vcdn_id.encode()) % SHARES


@dataclasses.dataclass
class Share:
    """What one pass of one replica covers.

    :param held: the shares it observes; ``continuing``: those it held in its previous
        pass too (what it remembers of their vCDNs is still the latest).
    :param leads: whether it takes the decisions about hosts.
    :param peers: the ``summary`` of each other live replica's latest pass.
    """

    held: frozenset
    continuing: frozenset = frozenset()
    leads: bool = True
    peers: list = dataclasses.field(default_factory=list)
    #: what this pass saw of hosts and regions, set by the pass for its peers
    summary: dict = dataclasses.field(default_factory=dict)

    def covers(self, vcdn_id):
        return share_of(vcdn_id) in self.held

    def continued(self, vcdn_id):
        return share_of(vcdn_id) in self.continuing


def everything():
    """A pass over every vCDN, deciding about hosts (one process alone, tests)."""
    return Share(held=frozenset(range(SHARES)))


class Shares:
    """This replica's shares of the vCDNs (see the module docstring).

    :param database: the IM's :class:`~cdnaas.db.engine.Database`.
    """

    def __init__(self, database):
        self.database = database
        self.claims = leases.Claims(database, ShareRow, "im")
        self.owner = self.claims.owner
        self._held = frozenset()
        self._started = False
        self._stop = threading.Event()
        threading.Thread(target=self._keep_alive, daemon=True, name="im-replica").start()

    def _alive_until(self, now):
        """How long this replica counts as live unless it says so again (as its leases)."""
        return now + dt.timedelta(seconds=leases.lease_seconds())

    def _keep_alive(self):
        """Push this replica's row on every third of a lease (a thread, as leases are)."""
        while not self._stop.wait(leases.lease_seconds() / 3):
            try:
                with self.database.transaction() as session:
                    session.execute(update(Replica).where(Replica.owner == self.owner)
                                    .values(expires_at=self._alive_until(utcnow())))
            except Exception:  # the database may be away a moment; the row outlasts it
                LOG.exception("keeping IM replica %s alive failed", self.owner)

    def begin(self, leads):
        """Mark this replica live, take its part of the free shares; return its :class:`Share`."""
        now = utcnow()
        with self.database.transaction() as session:
            me = session.get(Replica, self.owner)
            if me is None:
                session.add(Replica(owner=self.owner, expires_at=self._alive_until(now),
                                    summary={}))
            else:
                me.expires_at = self._alive_until(now)
            session.execute(delete(Replica).where(Replica.expires_at < now))
            session.flush()
            live = session.scalars(select(Replica)).all()
            fair = math.ceil(SHARES / max(1, len(live)))
            # every row, waiting for a peer's begin or end (not SKIP LOCKED: a replica that
            # skipped the rows a peer held locked would see none of its own); in id order
            rows = session.scalars(select(ShareRow).order_by(ShareRow.id)
                                   .with_for_update()).all()
            mine = [r for r in rows if self.claims.mine(r)]
            free = [r for r in rows if not self.claims.mine(r)
                    and self.claims.free(r, startup=not self._started, now=now)]
            # a lease run out: its replica died, its vCDNs are owed a pass whatever the part
            orphans = [r for r in free if r.claimed_by is not None]
            unclaimed = [r for r in free if r.claimed_by is None]
            for row in mine + orphans + unclaimed[:max(0, fair - len(mine) - len(orphans))]:
                self.claims.take(row)
            held = frozenset(r.id for r in rows if self.claims.mine(r))
            peers = [r.summary for r in live if r.owner != self.owner and r.summary]
        for lost in self._held - held:
            self.claims.drop(lost)
        self._started = True
        share = Share(held=held, continuing=self._held & held, leads=leads, peers=peers)
        self._held = held
        return share

    def end(self, share, at):
        """Leave ``share.summary`` (of the pass ``at``) for the peers; give back the shares
        held beyond this replica's fair part."""
        with self.database.transaction() as session:
            me = session.get(Replica, self.owner)
            if me is not None:
                me.summary, me.at = share.summary, at
            count = session.scalar(select(func.count()).select_from(Replica)
                                   .where(Replica.expires_at >= utcnow()))
            excess = len(self._held) - math.ceil(SHARES / max(1, count))
            if excess > 0:
                given = sorted(self._held)[-excess:]
                for row in session.scalars(select(ShareRow).where(ShareRow.id.in_(given))
                                           .order_by(ShareRow.id).with_for_update()):
                    self.claims.give_back(row)
                self._held -= set(given)
                LOG.info("gave %d share(s) back for %d replica(s)", excess, count)

    def shares_held(self):
        """The shares this replica holds now."""
        return self._held

    def stop(self):
        """Stop renewing the leases and the row (as a replica that died)."""
        self.claims.stop()
        self._stop.set()

    def leave(self):
        """Give every share back and stop counting as live (a replica stopping)."""
        self.stop()
        with self.database.transaction() as session:
            for row in session.scalars(select(ShareRow).where(ShareRow.id.in_(self._held))
                                       .with_for_update()):
                self.claims.give_back(row)
            session.execute(delete(Replica).where(Replica.owner == self.owner))
        self._held = frozenset()
