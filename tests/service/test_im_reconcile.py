"""The Instance Manager's pass against a simulated vCDN (tests.support.plant), with a
controllable clock, on SQLite and PostgreSQL: time series, QoE and power figures,
scale decisions through SO with their inputs, healing, refusals, host marks,
retention and gauges."""
import datetime as dt
import threading

import pytest
from prometheus_client import REGISTRY
from sqlalchemy import select

from cdnaas.common import answers
from cdnaas.common.flavor import HostCapacity, PlanRequest, RegionRequest
from cdnaas.common.sig import Origin
from cdnaas.common.timeutil import aware
from cdnaas.db import migrate
from cdnaas.db.engine import Database
from cdnaas.im import series
from cdnaas.im.models import Action, History, HostMark, Sample
from cdnaas.im.reconcile import reconcile_once
from cdnaas_plugins.qoe_video.plugin import QoeVideoFlavor
from tests.support.im import VM_MODEL, template
from tests.support.plant import Plant, SimHost

START = dt.datetime(2026, 3, 1, 12, 0, tzinfo=dt.timezone.utc)
PERIOD = dt.timedelta(seconds=10)
MODEL = QoeVideoFlavor.load_model(template(VM_MODEL))


@pytest.fixture
def database(database_url):
    migrate.upgrade("im", database_url)
    found = Database(database_url)
    yield found
    found.dispose()


class World:
    """A plant and the IM's database, stepped one control period at a time."""

    def __init__(self, database, demands, hosts, document=None, meter=None):
        """``document``: the template SIDR serves the IM (the plan uses the vm model's)."""
        self.database, self.meter = database, meter
        self.hosts = hosts
        planned = template(VM_MODEL)
        request = PlanRequest(
            vcdn_id="vcdn-sim", hostname="sim.acme.cdn.example.net",
            origin=Origin("http", "origin.example.com", 80), default_region=demands[0][0],
            template=planned,
            regions=[RegionRequest(name=r, demand=d, quality={"min_mos": 4.0}, zone=None,
                                   vim_region=None, client_prefixes=[f"10.{i}.0.0/16"],
                                   hosts=self._free(r))
                     for i, (r, d) in enumerate(demands)])
        self.plant = Plant(document or planned, MODEL, QoeVideoFlavor().plan(request), hosts,
                           START)
        self.now = START
        self.recorded = []

    def _free(self, region):
        return [HostCapacity(h.name, h.vcpus, 10 ** 9, h.vcpus, 10 ** 9, h.idle_watts,
                             h.peak_watts) for h in self.hosts if h.region == region]

    def step(self, **viewers):
        """One period at these viewers per region; return the decisions of the pass."""
        self.now += PERIOD
        self.plant.advance(self.now, viewers)
        found = reconcile_once(self.database, now=self.now, so=self.plant.so, ro=self.plant.ro,
                               sidr=self.plant.sidr, meter=self.meter)
        self.recorded += found
        return found

    def run(self, passes, **viewers):
        return [d for _ in range(passes) for d in self.step(**viewers)]

    def points(self, scope, key):
        with self.database.sessions() as session:
            return session.scalars(select(Sample).where(Sample.scope == scope, Sample.key == key)
                                   .order_by(Sample.at)).all()

    def caches(self, region):
        return len(self.plant.serving.vnfs_in(region, "cache"))


def hosts(*spec):
    return [SimHost(name, region, vcpus) for name, region, vcpus in spec]


TWO_REGIONS = hosts(("eu-1", "eu", 16), ("eu-2", "eu", 16), ("us-1", "us", 16))


def test_each_pass_records_caches_vnfs_regions_the_vcdn_and_hosts(database):
    world = World(database, [("eu", 20000), ("us", 5000)], TWO_REGIONS)
    world.run(3, eu=10000, us=3000)
    region = world.points("region", "eu")
    assert [p.viewers for p in region] == [10000, 10000, 10000]
    assert region[-1].mos == pytest.approx(MODEL.mos(10000 / region[-1].vcpus))
    caches = [world.points("cache", v.name)[-1] for v in world.plant.sig.vnfs_in("eu", "cache")]
    assert sum(c.viewers for c in caches) == pytest.approx(10000)
    assert caches[0].requests_per_second == pytest.approx(10000 / 2 * caches[0].vcpus
                                                          / region[-1].vcpus)
    balancer = world.points("vnf", "eu-lb-0")[-1]
    assert balancer.viewers == 10000 and balancer.watts > 0
    vcdn = world.points("vcdn", "")
    assert vcdn[-1].viewers == 13000
    assert vcdn[-1].watts == pytest.approx(region[-1].watts + world.points("region", "us")[-1].watts)
    assert vcdn[0].energy_wh == 0.0
    assert vcdn[2].energy_wh == pytest.approx(vcdn[1].energy_wh + vcdn[2].watts * 10 / 3600)
    host = world.points("host", "eu-2")[-1] if world.plant.sig.vnfs_in("eu")[0].host == "eu-2" \
        else world.points("host", "eu-1")[-1]
    assert host.source == "model" and host.watts > 115.0
    assert host.watts == pytest.approx(world.plant.watts()[host.key])  # the plant's truth
    assert {p.key for p in world.points("host", "us-1")} == {"us-1"}


def test_a_surge_is_met_by_a_scale_out_through_so_that_says_why(database):
    world = World(database, [("eu", 20000), ("us", 5000)], TWO_REGIONS)
    world.run(5, eu=10000, us=3000)
    before = world.caches("eu")
    surge = world.run(2, eu=40000, us=3000)
    [decision] = [d for d in surge if d["kind"] == "scale_out"]
    assert decision["outcome"] == "started" and decision["region"] == "eu"
    assert decision["details"]["operation"] == "op-1"
    assert decision["details"]["counters"] == {"below": 2, "needed": 2}
    assert decision["details"]["thresholds"]["scale_out_below"] == pytest.approx(4.2)
    assert decision["details"]["samples"][-1]["viewers"] == 40000
    world.run(4, eu=40000, us=3000)  # the operation takes 13 s, then the vCDN is watched again
    assert world.caches("eu") == decision["details"]["target_caches"] > before
    assert world.plant.true_mos("eu") >= 4.5


def test_a_region_falling_below_its_quality_target_is_reported_to_so_once(database):
    world = World(database, [("eu", 20000), ("us", 5000)], TWO_REGIONS)
    world.run(3, eu=10000, us=3000)
    assert world.plant.events == []  # at target: nothing to say
    world.run(2, eu=40000, us=3000)  # the surge: below target for two passes, one event
    [(kind, vcdn_id, data)] = world.plant.events
    assert kind == "quality.below_target" and vcdn_id == world.plant.view()["id"]
    assert data["region"] == "eu" and data["target_mos"] == 4.0
    assert data["mos"] < 4.0 <= data["previous_mos"]
    assert data["mos"] == pytest.approx(world.points("region", "eu")[-2].mos, abs=1e-3)


@pytest.mark.parametrize("limit", [None, 1])
def test_a_cache_failing_two_passes_is_healed_at_most_the_limit_times_an_hour(database, limit,
                                                                             monkeypatch):
    if limit:  # CDNAAS_IM_HEAL_LIMIT, 3 when unset
        monkeypatch.setenv("CDNAAS_IM_HEAL_LIMIT", str(limit))
    world = World(database, [("eu", 20000), ("us", 5000)], TWO_REGIONS)
    world.run(2, eu=10000, us=3000)
    sick = world.plant.sig.vnfs_in("eu", "cache")[0].name
    world.plant.failing.add(sick)
    first = world.step(eu=10000, us=3000)
    assert [d["outcome"] for d in first if d["kind"] == "health"] == ["unhealthy"]
    assert not [d for d in first if d["kind"] == "heal"]
    [healed] = [d for d in world.step(eu=10000, us=3000) if d["kind"] == "heal"]
    assert healed["outcome"] == "started" and healed["details"]["vnf"] == sick
    kinds = []
    for _ in range(40):  # every replacement fails too, as on a broken host
        world.plant.failing.update(v.name for v in world.plant.serving.vnfs_in("eu", "cache"))
        kinds += [d["outcome"] for d in world.step(eu=10000, us=3000) if d["kind"] == "heal"]
    # packing may add caches meanwhile (they fail too): each is held once the limit is reached
    more = (limit or 3) - 1  # heals after the first
    assert kinds[:more + 1] == ["started"] * more + ["held"] and set(kinds[more + 1:]) <= {"held"}


def test_a_refused_scale_out_waits_before_it_is_sent_again(database, monkeypatch):
    monkeypatch.setenv("CDNAAS_IM_RETRY_SECONDS", "60")
    world = World(database, [("eu", 10000), ("us", 5000)],
                  hosts(("eu-1", "eu", 4), ("us-1", "us", 4)))
    refused = [d for d in world.run(12, eu=40000, us=1000)
               if d["kind"] == "scale_out" and d["region"] == "eu"]
    assert [d["outcome"] for d in refused] == ["refused", "refused"]
    assert "lacks" in refused[0]["details"]["error"]
    gap = dt.datetime.fromisoformat(refused[1]["created_at"]) - \
        dt.datetime.fromisoformat(refused[0]["created_at"])
    assert gap >= dt.timedelta(seconds=60)


def test_empty_hosts_are_switched_off_and_woken_when_the_region_needs_room(database,
                                                                         monkeypatch):
    monkeypatch.setenv("CDNAAS_IM_HEADROOM_VCPUS", "4")
    monkeypatch.setenv("CDNAAS_IM_HOST_IDLE_PASSES", "2")
    world = World(database, [("eu", 20000)], hosts(("eu-1", "eu", 12), ("eu-2", "eu", 12)))
    world.plant.power_actions = True
    assert not [d for d in world.step(eu=10000) if d["kind"] == "power_down"]  # not idle yet
    marked = [d for d in world.run(3, eu=10000) if d["kind"] == "power_down"]
    assert len(marked) == 1 and marked[0]["details"]["idle_watts_saved"] == 115.0
    empty = marked[0]["host"]
    assert marked[0]["outcome"] == "applied" and world.plant.power[empty] == "stopping"
    with database.sessions() as session:
        assert session.get(HostMark, empty).state == "power_down"
    world.run(4, eu=10000)
    assert world.plant.power[empty] == "off" and empty not in world.plant.watts()
    assert world.points("host", empty)[-1].watts == 0.0  # the IM's figure of a host it switched off
    woken = [d for d in world.run(8, eu=60000) if d["kind"] == "power_up"]
    assert [d["host"] for d in woken] == [empty]
    assert "short of demand" in woken[0]["reason"]
    with database.sessions() as session:
        assert session.get(HostMark, empty).state == "on"
    assert world.plant.power[empty] == "booting" and world.plant.enabled[empty]


def test_points_leave_the_retention_period_for_the_history_a_step_at_a_time(database,
                                                                            monkeypatch):
    monkeypatch.setenv("CDNAAS_IM_RETENTION_HOURS", str(35 / 3600))
    monkeypatch.setattr(series, "HISTORY_STEP", 30)
    world = World(database, [("eu", 20000)], hosts(("eu-1", "eu", 16)))
    for viewers in (1000, 3000, 2000, 2000, 2000, 4000, 4000, 4000):  # passes at +10..+80 s
        world.step(eu=viewers)
    # at +80 s, points before +45 s are past the retention; whole steps leave: [0, 30) s
    raw = world.points("region", "eu")
    assert len(raw) == 6 and aware(raw[0].at) == START + 3 * PERIOD
    with database.sessions() as session:
        [step] = session.scalars(select(History).where(History.scope == "region",
                                                       History.key == "eu")).all()
        assert (aware(step.at), step.passes, step.viewers) == (START, 2, 2000)
        [region] = series.window(session, "vcdn-sim", START, world.now, "region")
    assert [p.get("passes", 1) for p in region["points"]] == [2, 1, 1, 1, 1, 1, 1]
    assert [p["viewers"] for p in region["points"]] == [2000, 2000, 2000, 2000, 4000, 4000, 4000]

    monkeypatch.setenv("CDNAAS_IM_HISTORY_DAYS", str(75 / 86400))
    world.run(2, eu=4000)  # at +100 s: [30, 60) s leaves; history of steps before +25 s is dropped
    with database.sessions() as session:
        kept = session.scalars(select(History).where(History.scope == "region",
                                                     History.key == "eu")).all()
    assert [(aware(h.at), h.passes, h.viewers) for h in kept] == [
        (START + 3 * PERIOD, 3, 2000)]


def test_the_pass_publishes_prometheus_gauges(database):
    world = World(database, [("eu", 20000)], hosts(("eu-1", "eu", 16)))
    world.run(2, eu=12000)
    labels = {"vcdn": "vcdn-sim"}
    assert REGISTRY.get_sample_value("cdnaas_im_vcdn_viewers", labels) == 12000
    assert REGISTRY.get_sample_value("cdnaas_im_vcdn_mos", labels) == pytest.approx(4.8)
    assert REGISTRY.get_sample_value("cdnaas_im_vcdn_watts", labels) > 0
    assert REGISTRY.get_sample_value("cdnaas_im_host_watts", {"host": "eu-1", "region": "eu",
                                                              "source": "model"}) > 115


class FixedMeter:
    host = "eu-1"

    def watts(self):
        return 150.0


def test_a_host_with_rapl_counters_reports_them(database):
    world = World(database, [("eu", 20000)], hosts(("eu-1", "eu", 16), ("eu-2", "eu", 16)),
                  meter=FixedMeter())
    world.run(2, eu=5000)
    assert [(p.source, p.watts) for p in world.points("host", "eu-1")] == [("rapl", 150.0)] * 2
    assert world.points("host", "eu-2")[-1].source == "model"


def test_a_flavor_without_a_model_is_watched_but_not_scaled(database):
    document = {**template(VM_MODEL), "model": None}
    world = World(database, [("eu", 20000)], hosts(("eu-1", "eu", 16)), document=document)
    world.run(6, eu=90000)
    assert world.points("region", "eu")[-1].mos is None
    assert world.points("region", "eu")[-1].watts > 0
    assert not [d for d in world.recorded if d["kind"] in ("scale_out", "scale_in")]


def test_a_failing_policy_is_recorded_and_the_pass_goes_on(database, monkeypatch):
    def broken(_self, _observation):
        raise RuntimeError("bug in the plugin")
    monkeypatch.setattr(QoeVideoFlavor, "policy", broken)
    world = World(database, [("eu", 20000)], hosts(("eu-1", "eu", 16)))
    errors = [d for d in world.step(eu=1000) if d["kind"] == "reconcile"]
    assert errors and "bug in the plugin" in errors[0]["reason"]
    assert world.points("region", "eu")


def test_a_window_read_in_steps_averages_levels_and_keeps_the_most_vcpus_and_energy(database):
    world = World(database, [("eu", 20000)], hosts(("eu-1", "eu", 16)))
    for viewers in (1000, 2000, 3000, 6000, 6000):
        world.step(eu=viewers)
    passes = world.points("region", "eu")  # oldest first
    with database.sessions() as session:
        [region] = series.window(session, "vcdn-sim", START, world.now, "region",
                                 step=30)
    # passes at +10, +20 | +30, +40, +50 s from START: steps of 30 s begin at START
    assert [p["at"][11:19] for p in region["points"]] == ["12:00:00", "12:00:30"]
    assert [p["passes"] for p in region["points"]] == [2, 3]
    assert [p["viewers"] for p in region["points"]] == [1500, 5000]
    assert region["points"][-1]["energy_wh"] == round(max(p.energy_wh for p in passes[2:]), 3)
    assert region["points"][-1]["vcpus"] == max(p.vcpus for p in passes[2:])
    assert region["points"][-1]["mos"] == pytest.approx(
        sum(p.mos for p in passes[2:]) / 3, abs=1e-3)


def test_a_window_of_more_passes_than_the_point_limit_is_read_in_steps(database, monkeypatch):
    world = World(database, [("eu", 20000)], hosts(("eu-1", "eu", 16)))
    world.run(4, eu=1000)
    with database.sessions() as session:
        assert series.default_step(session, "vcdn-sim", START, world.now) is None
        monkeypatch.setattr(series, "MAX_POINTS", 3)
        assert series.default_step(session, "vcdn-sim", START, world.now) == 14  # 40 s / 3
        assert series.default_step(session, "vcdn-sim", START + 2 * PERIOD, world.now) is None


def test_the_metrics_window_lists_each_series_oldest_first(database):
    world = World(database, [("eu", 20000)], hosts(("eu-1", "eu", 16)))
    world.run(3, eu=2000)
    with database.sessions() as session:
        found = series.window(session, "vcdn-sim", START, world.now, None)
    assert [s["scope"] for s in found][:2] == ["cache", "vnf"] and found[-1]["scope"] == "vcdn"
    region = next(s for s in found if s["scope"] == "region")
    assert [p["viewers"] for p in region["points"]] == [2000, 2000, 2000]
    assert set(region["points"][0]) == {"at", *series.FIGURES}
    with database.sessions() as session:
        assert session.scalars(select(Action).where(Action.kind == "heal")).all() == []


@pytest.mark.parametrize("workers, overlap", [("8", True), ("1", False)])
def test_a_pass_reads_its_vcdns_at_once(database, monkeypatch, workers, overlap):
    """Two vCDNs (the plant's, and a twin of it under another id), one per chunk: with
    workers their chunks' reads (RO's counters and health) are in flight together; with one
    they come one by one. Either way each is read and recorded."""
    from cdnaas.im import reading

    monkeypatch.setenv("CDNAAS_IM_WORKERS", workers)
    monkeypatch.setattr(reading, "CHUNK", 1)
    world = World(database, [("eu", 20000), ("us", 5000)], TWO_REGIONS)
    view = world.plant.view
    monkeypatch.setattr(world.plant.so, "instances", lambda state=None, brief=False: answers.many(
        answers.Instance, [view(), {**view(), "id": "vcdn-twin"}])
        if state in (None, "ACTIVE") else [])
    both = threading.Barrier(2, timeout=2)
    met = []
    read = reading.read

    def meet(*args):
        try:
            both.wait()
            met.append(True)
        except threading.BrokenBarrierError:
            met.append(False)
        return read(*args)
    monkeypatch.setattr(reading, "read", meet)
    found = world.step(eu=10000, us=3000)
    assert met == [overlap, overlap]
    assert not [d for d in found if d["kind"] == "reconcile"]
    with world.database.sessions() as session:
        assert set(session.scalars(select(Sample.vcdn_id).where(
            Sample.scope == "vcdn"))) == {"vcdn-sim", "vcdn-twin"}
