"""A pass's readings of its vCDNs, many per request: RO's (health, figures, first
traffic) and what the previous pass left of each (its points, its regions' recent levels,
its traffic cursor).

vCDNs are read in chunks of :data:`CHUNK`: one ``POST /ro/v1/readings`` per chunk,
chunks on the pass's threads, with the traffic cursors the pass read in one query. What
a replica's previous pass wrote of a vCDN it still observes is kept in its
:class:`Memory`, so only vCDNs new to it (its first pass, a share it took over) are read
back from the database, a query for each of their points and region histories per chunk.
"""
import dataclasses
import logging

from cdnaas.common import errors
from cdnaas.common.answers import Health, Instance, Unread
from cdnaas.im import flavors, monitoring, policy_hook, series, usage

LOG = logging.getLogger(__name__)

#: vCDNs per request to RO (its limit is 500)
CHUNK = 100
#: passes of history read per vCDN: with this pass's own, the policy's samples
HISTORY_PASSES = policy_hook.HISTORY_SAMPLES - 1


@dataclasses.dataclass
class Seen:
    """One ACTIVE vCDN as this pass read it."""

    vcdn: Instance
    flavor: flavors.Flavor
    model: object
    readings: list
    previous: dict
    points: list = dataclasses.field(default_factory=list)
    #: RO's first traffic answer of this pass (:class:`cdnaas.im.usage.TrafficRead`)
    traffic: usage.TrafficRead | None = None
    #: ``{region: [series.Level, ...]}`` of its latest passes, oldest first; the pass
    #: adds its own once its points are taken
    history: dict = dataclasses.field(default_factory=dict)
    #: RO's health answer of this pass
    health: Health | None = None


class Kept(dict):
    """A point kept as the :class:`~cdnaas.im.models.Sample` row read back would be: its columns as
    attributes, None where it has none (a dict copied in C: a namespace of every column
    made for each point held a fifth of the IM's CPU)."""

    __getattr__ = dict.get


class Memory:
    """What this replica's latest pass wrote of each vCDN it observed: its points (as the
    :class:`~cdnaas.im.models.Sample` rows read back would be) and its regions' latest levels."""

    def __init__(self):
        self._kept = {}
        self._health = {}

    def __len__(self):
        return len(self._kept)

    def recall(self, vcdn_id):
        """``(previous, history)`` of ``vcdn_id``, or None if not kept."""
        return self._kept.get(vcdn_id)

    def health(self, vcdn_id):
        """``(outcome, unhealthy VNF names)`` of ``vcdn_id``'s health as last recorded, or
        None if not kept."""
        return self._health.get(vcdn_id)

    def keep(self, seen, at):
        """Remember the points and health of ``seen`` (each a :class:`Seen`, its history
        closed, its health recorded) as written ``at``; forget every other vCDN."""
        self._health = {observed.vcdn.id: health_status(observed.health)
                        for observed in seen}
        self._kept = {
            observed.vcdn.id: (
                {(p["scope"], p["key"]): Kept(p, at=at) for p in observed.points},
                {region: levels[-HISTORY_PASSES:] for region, levels in observed.history.items()})
            for observed in seen}


def health_status(health):
    """``(outcome, unhealthy VNF names)`` of RO's :class:`Health` answer, as a ``health``
    decision records it."""
    unhealthy = [v.name for v in health.vnfs if not v.healthy]
    return ("unhealthy" if unhealthy else "healthy"), unhealthy


def read(database, ro, sidr, vcdns, remembered, cursors, models):
    """``[(vcdn, Seen or error text)]`` of ``vcdns`` (SO views), read through ``ro``.

    :param remembered: ``remembered(vcdn_id)``: ``(previous, history)`` or None.
    :param cursors: ``{vcdn_id: traffic cursor}`` as stored (:func:`usage.cursors`).
    :param models: ``{(flavor, version): model}`` read so far this pass (filled here: a
        model file is looked up once a pass).
    """
    found = []
    for start in range(0, len(vcdns), CHUNK):
        chunk = vcdns[start:start + CHUNK]
        ids = [v.id for v in chunk]
        known = {i: remembered(i) for i in ids}
        unknown = [i for i in ids if known[i] is None]
        if unknown:
            with database.sessions() as session:
                previous = series.previous(session, unknown)
                history = series.region_history(session, unknown, HISTORY_PASSES)
            known.update({i: (previous.get(i, {}), history.get(i, {})) for i in unknown})
        try:
            answers = ro.readings_many([{"id": i, "cursor": cursors.get(i)} for i in ids])
        except errors.CdnaasError as exc:
            found += [(v, str(exc)) for v in chunk]
            continue
        for vcdn, answer in zip(chunk, answers):
            if isinstance(answer, Unread):
                found.append((vcdn, answer.error.message))
                continue
            try:
                found.append((vcdn, _seen(vcdn, sidr, answer, *known[vcdn.id],
                                          cursors.get(vcdn.id), models)))
            except (errors.CdnaasError, LookupError) as exc:
                found.append((vcdn, str(exc)))
    return found


def _seen(vcdn, sidr, answer, previous, history, cursor, models):
    """:param models: ``{flavor key: model}`` read so far (a model is read once a chunk)."""
    flavor = flavors.of(vcdn, sidr)
    key = (vcdn.flavor, vcdn.template_version)
    if key not in models:
        models[key] = flavor.model()
    health = answer.health
    by_name = {key: row for (scope, key), row in previous.items() if scope in ("cache", "vnf")}
    readings = monitoring.readings(answer.metrics.vnfs, {v.name: v for v in health.vnfs},
                                   by_name)
    return Seen(vcdn=vcdn, flavor=flavor, model=models[key], readings=readings,
                previous=previous, history={r: list(levels) for r, levels in history.items()},
                traffic=usage.TrafficRead(cursor, answer.traffic, answer.traffic_error),
                health=health)
