"""The ``designate`` zone publisher: the operator's zone in OpenStack's DNS service.

The zone (``CDNAAS_DNS_DOMAIN``) lives in the project of the cloud named by
``CDNAAS_DESIGNATE_CLOUD`` (else the OpenStack driver's cloud); :meth:`ensure_zone`
creates it there if it is missing. A delegation is record sets of that zone (through
openstacksdk's DNS proxy): the NS set at ``<label>.<zone>`` below the apex and the A /
AAAA glue of each NS name. Designate's pool pushes the zone to its DNS servers
(mini-DNS notifies them, they transfer it); a record set is ACTIVE once every server
serves it, and every change here returns only then.

No gap while a delegation changes: the new glue is written first, then the NS set,
then the glue of the NS names dropped; Designate serves the zone as its database holds
it at each transfer, so a server serves one of those states, each a whole delegation.
openstacksdk's objects stay in this module: the rest of RO sees
:class:`~cdnaas.ro.zones.base.Delegation`.
"""
import contextlib
import logging
import time

from cdnaas.common import config
from cdnaas.ro.vim.openstack import cloud as clouds
from cdnaas.ro.zones.base import (Delegation, Glue, ZoneError, ZonePublisher, ZoneUnavailable,
                                  check_label)

LOG = logging.getLogger(__name__)

#: Designate's states of a zone or record set that will not change by waiting
_SETTLED = ("ACTIVE", "ERROR")
#: TTL of the operator's zone as :meth:`DesignateZonePublisher.ensure_zone` creates it
ZONE_TTL = 300


class DesignateZonePublisher(ZonePublisher):
    """Delegations as record sets of the operator's zone in Designate."""

    name = "designate"

    def __init__(self):
        self._conn = None

    @property
    def conn(self):
        """The openstacksdk connection to the DNS service's cloud, made on first use."""
        if self._conn is None:
            import openstack
            name = config.setting("CDNAAS_DESIGNATE_CLOUD") or clouds.cloud_name()
            with _asking(f"reaching cloud {name}"):
                self._conn = openstack.connect(cloud=name, connect_retries=clouds.CONNECT_RETRIES)
        return self._conn

    def ensure_zone(self):
        zone = self.zone
        with _asking(f"making zone {zone}"):
            found = self._zone(missing_ok=True)
            if found is None:
                LOG.info("creating the operator's zone %s in Designate", zone)
                found = self.conn.dns.create_zone(name=f"{zone}.", email=f"hostmaster@{zone}",
                                                  ttl=ZONE_TTL, type="PRIMARY")
            self._wait(lambda: self.conn.dns.get_zone(found.id).status, f"zone {zone}")

    def publish(self, label, servers):
        delegation = self.delegation_of(label, servers)
        wanted = {(owner, kind): values for owner, kind, values in delegation.records()}
        with _asking(f"publishing {delegation.name}"):
            zone = self._zone()
            held = self._held(zone, delegation.name)
            glue = [key for key in wanted if key[1] != "NS"]
            # glue first, then the NS set, then what no longer belongs (old NS names' glue)
            changed = [self._put(zone, held.get(key), key, wanted[key], delegation.ttl)
                       for key in glue + [(delegation.name, "NS")]]
            changed += [self._delete(zone, recordset)
                        for key, recordset in held.items() if key not in wanted]
            self._settle(zone, delegation.name, [c for c in changed if c])
        return delegation

    def withdraw(self, label):
        name = self._name(label)
        with _asking(f"withdrawing {name}"):
            zone = self._zone()
            held = self._held(zone, name)
            # the NS set first: the name is no longer delegated before its glue goes
            order = sorted(held, key=lambda key: key[1] != "NS")
            self._settle(zone, name, [self._delete(zone, held[key]) for key in order])

    def published(self, label):
        name = self._name(label)
        with _asking(f"reading {name}"):
            held = self._held(self._zone(), name)
        ns = held.get((name, "NS"))
        if ns is None:
            return None
        targets = sorted(_bare(r) for r in ns.records)
        return Delegation(name=name, name_servers=tuple(targets), ttl=ns.ttl, glue=tuple(
            Glue(target, tuple(sorted(
                address for kind in ("A", "AAAA")
                for address in getattr(held.get((target, kind)), "records", None) or [])))
            for target in targets))

    # -- Designate ------------------------------------------------------------------

    def _name(self, label):
        zone = self.zone
        return f"{check_label(label, zone)}.{zone}"

    def _zone(self, missing_ok=False):
        """The operator's zone as Designate holds it in our project (None if missing and
        ``missing_ok``).

        :raises ZoneUnavailable: it is missing (``ensure_zone`` makes it).
        """
        zone = self.zone
        found = next(iter(self.conn.dns.zones(name=f"{zone}.")), None)
        if found is None and not missing_ok:
            raise ZoneUnavailable(f"the operator's zone {zone} is not in Designate (in the "
                                  "project of its cloud): ensure_zone makes it")
        return found

    def _held(self, zone, name):
        """``{(owner, type): record set}`` of ``name`` and every name below it, owners
        without the trailing dot (record sets Designate is deleting left out)."""
        held = {}
        for recordset in self.conn.dns.recordsets(zone, name=f"*{name}."):
            owner = recordset.name.rstrip(".").lower()
            if (owner == name or owner.endswith(f".{name}")) and recordset.action != "DELETE":
                held[(owner, recordset.type)] = recordset
        return held

    def _put(self, zone, recordset, key, values, ttl):
        """Make record set ``key`` hold ``values`` with ``ttl``; its id, or None when it
        already did."""
        owner, kind = key
        records = [f"{v}." for v in values] if kind == "NS" else list(values)
        if recordset is None:
            return self.conn.dns.create_recordset(zone, name=f"{owner}.", type=kind,
                                                  records=records, ttl=ttl).id
        if sorted(_bare(r) for r in recordset.records) == sorted(values) \
                and recordset.ttl == ttl:
            return None
        return self.conn.dns.update_recordset(recordset, records=records, ttl=ttl).id

    def _delete(self, zone, recordset):
        self.conn.dns.delete_recordset(recordset, zone, ignore_missing=True)
        return recordset.id

    def _settle(self, zone, name, changed):
        """Wait until every record set of ``changed`` (ids, below ``name``) is served:
        ACTIVE, or gone for one deleted."""
        if not changed:
            return

        def status():
            states = {r.id: r.status for r in self.conn.dns.recordsets(zone, name=f"*{name}.")
                      if r.id in changed}
            return "ERROR" if "ERROR" in states.values() else \
                "ACTIVE" if all(s == "ACTIVE" for s in states.values()) else "PENDING"
        self._wait(status, f"{len(changed)} change(s) of {name}")

    def _wait(self, status, what):
        """Poll ``status()`` until it is settled (see :data:`_SETTLED`).

        :raises ZoneUnavailable: it ended in ERROR, or ``CDNAAS_DESIGNATE_TIMEOUT`` passed
            (what was written stays: Designate goes on pushing it).
        """
        seconds = config.setting("CDNAAS_DESIGNATE_TIMEOUT")
        deadline = time.monotonic() + seconds
        while (state := status()) not in _SETTLED:
            if time.monotonic() > deadline:
                raise ZoneUnavailable(f"Designate did not serve {what} within {seconds:.0f} s "
                                      f"(still {state}: its worker, mini-DNS or pool's DNS "
                                      "servers are behind)")
            time.sleep(clouds.poll_interval())
        if state == "ERROR":
            raise ZoneUnavailable(f"Designate failed to serve {what} (ERROR: its worker's log "
                                  "says why)")


def _bare(value):
    """A record's value as the API shows it, without the trailing dot of a name."""
    return value.rstrip(".").lower()


@contextlib.contextmanager
def _asking(doing):
    """Our :class:`ZoneUnavailable` for an openstacksdk/keystoneauth exception met while
    ``doing`` (with the DNS service's own words where it gave some); our own errors pass."""
    try:
        yield
    except ZoneError:
        raise
    except Exception as exc:  # pylint: disable=broad-except
        details = getattr(exc, "details", None) or str(exc) or type(exc).__name__
        raise ZoneUnavailable(f"{doing}: {details}") from exc
