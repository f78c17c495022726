"""The custom hostname pass: every ``CDNAAS_HOSTNAME_CHECK_INTERVAL`` seconds, a vCDN's
pending custom names whose records point at it (:mod:`.hostname_checks`) are activated
by an UPDATE of the vCDN."""
import logging
import threading

from sqlalchemy import select

from cdnaas.common import errors, periodic
from cdnaas.so import instances, states
from cdnaas.so.hostname_checks import REASON, active, checking, resolver, seen
from cdnaas.so.models import Instance

LOG = logging.getLogger(__name__)


class Verifier:
    """Activates the custom hostnames whose records appeared, one pass at a time
    (:meth:`verify_once`), every ``CDNAAS_HOSTNAME_CHECK_INTERVAL`` seconds in a thread.

    :param database: SO's database.
    :param submit: ``submit(operation id)`` runs an operation (the runner's).
    """

    def __init__(self, database, submit):
        self.database = database
        self.submit = submit
        self._stop = threading.Event()

    def verify_once(self) -> list:
        """Look up every pending name of every ACTIVE or SCHEDULED vCDN; activate those
        seen (an UPDATE per vCDN); return the operations started."""
        if not checking():
            return []
        with self.database.sessions() as session:
            # the service settings of every vCDN, the SIG (large) only of those naming hosts
            named = {vcdn_id: service for vcdn_id, service in session.execute(
                select(Instance.id, Instance.service).where(
                    Instance.state.in_((states.ACTIVE, states.SCHEDULED))))
                if service and service.get("hostnames")}
            entries = dict(session.execute(select(Instance.id, Instance.sig).where(
                Instance.id.in_(named))).all()) if named else {}
        pending = [(vcdn_id, entries[vcdn_id]["hostname"],
                    [h for h in service["hostnames"] if h not in active(service)])
                   for vcdn_id, service in named.items() if vcdn_id in entries]
        ask, started = resolver(), []
        for vcdn_id, entry, names in pending:
            found = [h for h in names if seen(vcdn_id, h, entry, ask)]
            if not found:
                continue
            LOG.info("vCDN %s: %s now point(s) at %s: activating", vcdn_id, ", ".join(found),
                     entry)
            try:
                _instance, operation = instances.update(self.database, vcdn_id, {},
                                                        reason=REASON, verified=found)
            except errors.CdnaasError as exc:  # busy (an operation runs): the next pass
                LOG.info("vCDN %s: activation of %s waits: %s", vcdn_id, found, exc)
                continue
            if operation.state != states.COMPLETED:
                self.submit(operation.id)
            started.append(operation.id)
        return started

    def start(self):
        """Run :meth:`verify_once` every ``CDNAAS_HOSTNAME_CHECK_INTERVAL`` s in a thread."""
        periodic.run_every("CDNAAS_HOSTNAME_CHECK_INTERVAL", self.verify_once, "so-hostnames",
                           self._stop, "custom hostname pass")

    def stop(self):
        self._stop.set()
