"""Placing a region's VNF instances on its hosts at the least energy cost.

Energy cost of a placement, in watts at the vCDN's peak demand::

    sum over hosts it powers on of  idle_watts
  + sum over instances of  (peak_watts - idle_watts) / host vcpus * instance vcpus * utilisation

A host with part of its capacity already taken is on and costs no idle
watts; a host with everything free is off until something is placed on it.
``utilisation`` is the expected busy share of the instance's vCPUs (1.0 when
unknown), so the cost is also the power the placement adds to the region.

Objectives: ``fewest_hosts`` minimises the cost; ``spread`` minimises it
subject to no host carrying more than ``max_host_share`` of the region's
serving vCPUs (the caches': instances with ``serving=True``).

Two solvers return the same ``{instance name: host name}``:
:func:`place_exact`, an integer program solved by HiGHS, and
:func:`place_greedy`, a heuristic; :func:`place` picks by problem size.
Both treat instances of equal size, utilisation and role as one type and
decide how many of each type go on each host, which removes the symmetry
between identical caches, and both first drop hosts that can never be
needed (:meth:`_Problem._undominated`), which keeps the optimum: with hosts
of a few models, a region of 1,000 hosts shrinks to a few dozen.

Among placements of equal cost, :func:`place` puts caches on the region's
*anchored* hosts first (:func:`_gather`): those carrying VNFs a scale in never
removes (a balancer, the DNS). A scale in takes caches off the hosts carrying
the fewest of the region's VNFs first (:func:`cdnaas.planning.resizing.removal_order`),
so a shrinking region ends on its anchored hosts and the others empty, to be
switched off, rather than keeping one host for a lone balancer and another for
the caches.
"""
import dataclasses
import logging
import math

import numpy as np
from scipy import optimize, sparse

from cdnaas.common.flavor import HostCapacity, InsufficientCapacity

LOG = logging.getLogger(__name__)

OBJECTIVES = ("fewest_hosts", "spread")
#: Share of a region's serving vCPUs one host may carry under ``spread`` when
#: the template sets no ``max_host_share``: losing a host loses at most half.
DEFAULT_SPREAD_SHARE = 0.5
#: :func:`place` solves exactly up to this many (instance type, host) pairs;
#: beyond, HiGHS takes longer than the per-request budget (benchmarks/placement.py).
EXACT_MAX_PAIRS = 400
#: Seconds HiGHS may spend on one region in :func:`place` (a fifth of the
#: per-request budget; it usually proves optimality within a few ms).
EXACT_TIME_LIMIT = 0.1
#: Pruning compares distinct host profiles pairwise; beyond this many it is skipped.
PRUNE_MAX_PROFILES = 3000
#: Greedy starts besides the plain one (see :func:`_solve_greedy`).
GREEDY_STARTS = 4
_EPS = 1e-9


@dataclasses.dataclass(frozen=True)
class Instance:
    """One VNF instance to place.

    :param utilisation: expected busy share of its vCPUs at peak (dynamic power).
    :param serving: counts toward the region's serving capacity (``max_host_share``).
    """

    name: str
    vcpus: int
    ram_mb: int
    utilisation: float = 1.0
    serving: bool = True


def is_on(host: HostCapacity):
    """A host carrying reservations is powered on already."""
    return host.free_vcpus < host.vcpus or host.free_ram_mb < host.ram_mb


def dynamic_watts_per_vcpu(host: HostCapacity):
    """Watts one fully busy vCPU adds to ``host`` (linear between idle and peak)."""
    return (host.peak_watts - host.idle_watts) / host.vcpus


def energy_watts(instances, hosts, mapping):
    """Energy cost of ``mapping`` ({instance name: host name}); see the module docstring."""
    by_name = {h.name: h for h in hosts}
    idle = sum(by_name[name].idle_watts for name in set(mapping.values())
               if not is_on(by_name[name]))
    return idle + sum(dynamic_watts_per_vcpu(by_name[mapping[i.name]]) * i.vcpus * i.utilisation
                      for i in instances)


def powered_on(hosts, mapping):
    """Names of the hosts ``mapping`` turns on, sorted."""
    return sorted({h.name for h in hosts if not is_on(h)} & set(mapping.values()))


def share_limit(objective, max_host_share):
    """The ``max_host_share`` an objective imposes: None for ``fewest_hosts``."""
    if objective not in OBJECTIVES:
        raise ValueError(f"unknown placement objective {objective!r}; one of {OBJECTIVES}")
    return (max_host_share or DEFAULT_SPREAD_SHARE) if objective == "spread" else None


def place(region, instances, hosts, objective="fewest_hosts", max_host_share=None,
          anchors=()):
    """Place ``instances`` on ``hosts`` for ``objective``: exactly while small, else greedily;
    then, at no cost, caches onto anchored hosts (:func:`_gather`).

    Should HiGHS not prove optimality within :data:`EXACT_TIME_LIMIT`, the
    cheaper of its best placement so far and the heuristic's is taken.

    :param anchors: names of hosts already carrying VNFs of the region that a scale
        in never removes (:func:`cdnaas.planning.resizing.anchors`); hosts taking a
        non-serving instance of ``instances`` are anchored too.
    :returns: ``{instance name: host name}``.
    :raises InsufficientCapacity: no placement exists.
    """
    share = share_limit(objective, max_host_share)
    problem = _Problem(region, instances, hosts, share, anchors=anchors)
    if problem.pairs > EXACT_MAX_PAIRS:
        return problem.mapping(_gather(problem, _solve_greedy(problem)))
    counts, optimal = _solve_exact(problem, EXACT_TIME_LIMIT)
    if not optimal:
        greedy = _solve_greedy(problem)
        if counts is None or problem.cost(greedy) < problem.cost(counts):
            counts = greedy
    return problem.mapping(_gather(problem, counts))


def place_exact(region, instances, hosts, max_host_share=None, time_limit=None, prune=True):
    """The least-cost placement by integer programming (HiGHS through ``scipy.optimize.milp``).

    When ``time_limit`` (seconds) runs out, the best placement found so far is
    returned, or the heuristic's if HiGHS found none.

    :param prune: drop dominated hosts first (same optimum, smaller program);
        False solves the program over every host, to check that claim.
    :raises InsufficientCapacity: the integer program is infeasible.
    """
    problem = _Problem(region, instances, hosts, max_host_share, prune)
    counts, _ = _solve_exact(problem, time_limit)
    return problem.mapping(_solve_greedy(problem) if counts is None else counts)


def place_greedy(region, instances, hosts, max_host_share=None):
    """A cheap placement by a greedy heuristic and local improvement (see :func:`_solve_greedy`).

    :raises InsufficientCapacity: the heuristic found no placement, and the
        integer program confirms none exists.
    """
    problem = _Problem(region, instances, hosts, max_host_share)
    return problem.mapping(_solve_greedy(problem))


class _Problem:
    """Instances grouped into types, hosts as arrays; ``limit[t, h]`` bounds type t on host h.

    With ``prune``, hosts that can never be needed are dropped first (see
    :meth:`_undominated`), which keeps the optimum and shrinks the problem.
    """

    def __init__(self, region, instances, hosts, max_host_share, prune=True, anchors=()):
        self.region, self.hosts = region, list(hosts)
        groups = {}
        for instance in instances:
            key = (instance.vcpus, instance.ram_mb, instance.utilisation, instance.serving)
            groups.setdefault(key, []).append(instance.name)
        self.keys = sorted(groups, key=lambda k: (-k[0], -k[1], -k[2], not k[3]))
        self.names = [groups[k] for k in self.keys]
        self.count = np.array([len(n) for n in self.names], dtype=np.int64)
        self.vcpus = np.array([k[0] for k in self.keys], dtype=np.int64)
        self.ram = np.array([k[1] for k in self.keys], dtype=np.int64)
        self.load = np.array([k[0] * k[2] for k in self.keys], dtype=float)  # busy vCPUs
        self.serving = np.array([k[3] for k in self.keys], dtype=bool)
        self.free_cpu = np.array([h.free_vcpus for h in self.hosts], dtype=np.int64)
        self.free_ram = np.array([h.free_ram_mb for h in self.hosts], dtype=np.int64)
        self.on = np.array([is_on(h) for h in self.hosts], dtype=bool)
        self.idle = np.array([h.idle_watts for h in self.hosts], dtype=float)
        self.dynamic = np.array([dynamic_watts_per_vcpu(h) for h in self.hosts], dtype=float)
        anchors = set(anchors)
        self.anchored = np.array([h.name in anchors for h in self.hosts], dtype=bool)
        self.needed = int(self.vcpus @ self.count)
        serving_vcpus = int(self.vcpus[self.serving] @ self.count[self.serving])
        # no host may carry more serving vCPUs than this (the whole demand when unbounded)
        self.cap = (math.floor(max_host_share * serving_vcpus + _EPS) if max_host_share
                    else serving_vcpus)
        # what hosts could give at most, counted before pruning, for the error message
        self.usable = int(np.minimum(self.free_cpu, self.cap + self.needed - serving_vcpus)
                          .clip(min=0).sum())
        limit = np.minimum(self.free_cpu[None, :] // self.vcpus[:, None],
                           self.free_ram[None, :] // np.maximum(self.ram[:, None], 1))
        limit = np.minimum(limit, self.count[:, None])
        limit = np.where(self.serving[:, None], np.minimum(limit, self.cap // self.vcpus[:, None]),
                         limit)
        self.limit = np.maximum(limit, 0).reshape(len(self.keys), len(self.hosts))
        self._restrict(self.limit.any(axis=0))  # hosts that hold nothing are never needed
        if prune and self.hosts:
            self._restrict(self._undominated())
        self.pairs = int((self.limit > 0).sum())

    def _undominated(self):
        """Hosts fewer than N others dominate, N being the number of instances.

        Host y dominates host x when it has at least x's free vCPUs and RAM
        (counting no more than the whole demand), no higher dynamic watts and
        no higher idle price (zero when on); ties go to the earlier host. A
        placement uses at most N hosts, so if N hosts dominate x, one of them
        is unused and can take x's instances for no more watts: dropping x
        keeps the optimum.
        """
        n = int(self.count.sum())
        profile = np.column_stack([
            np.minimum(self.free_cpu, self.needed), np.minimum(self.free_ram, self.ram @ self.count),
            -self.dynamic, -np.where(self.on, 0.0, self.idle), self.anchored])
        unique, which, size = np.unique(profile, axis=0, return_inverse=True, return_counts=True)
        if len(unique) > PRUNE_MAX_PROFILES:  # the pairwise comparison would cost too much
            return np.ones(len(self.hosts), dtype=bool)
        which = which.ravel()
        better = np.ones((len(unique), len(unique)), dtype=bool)  # better[y, x]: y dominates x
        for column in unique.T:
            better &= np.greater_equal.outer(column, column)
        np.fill_diagonal(better, False)
        strictly = size @ better  # hosts in profiles strictly better than each profile
        rank = np.zeros(len(self.hosts), dtype=np.int64)  # earlier hosts with the same profile
        order = np.argsort(which, kind="stable")
        starts = np.concatenate([[0], np.cumsum(size)[:-1]])
        rank[order] = np.arange(len(order)) - np.repeat(starts, size)
        return strictly[which] + rank < n

    def _restrict(self, keep):
        self.hosts = [h for h, kept in zip(self.hosts, keep) if kept]
        for field in ("free_cpu", "free_ram", "on", "idle", "dynamic", "anchored"):
            setattr(self, field, getattr(self, field)[keep])
        self.limit = self.limit[:, keep]

    def cost(self, counts):
        """Energy cost (W) of ``counts[t, h]`` instances of type t on host h."""
        used = counts.sum(axis=0) > 0
        return float(self.idle[used & ~self.on].sum() + self.dynamic @ (self.load @ counts))

    def mapping(self, counts):
        """``{instance name: host name}`` for ``counts``; hosts taken in input order."""
        placed = {}
        for t, names in enumerate(self.names):
            hosts = np.repeat(np.arange(len(self.hosts)), counts[t])
            placed.update((name, self.hosts[h].name) for name, h in zip(names, hosts))
        return placed

    def insufficient(self):
        """The error for an infeasible problem: vCPUs short overall, else one instance's worth."""
        missing = (self.needed - self.usable if self.needed > self.usable
                   else int(self.vcpus.max(initial=1)))
        return InsufficientCapacity(self.region, missing, self.needed)


def _solve_exact(problem, time_limit=None):
    """``(counts[t, h], optimal)`` by MILP: counts None if HiGHS ran out of time
    without a solution, ``optimal`` False if it ran out before proving optimality.

    Variables: n[t, h] integer (instances of type t on host h) for each pair
    that can hold one, y[h] binary (host h powered on) for each host now off.
    Minimise sum idle[h] y[h] + dynamic[h] load[t] n[t, h] subject to: every
    instance placed; vCPUs and RAM on host h within its free capacity (times
    y[h] if off); serving vCPUs on host h within the share cap; and
    n[t, h] <= limit[t, h] y[h], which tightens the relaxation.
    """
    if (problem.limit.sum(axis=1) < problem.count).any():
        raise problem.insufficient()
    if not problem.count.any():
        return problem.limit * 0, True
    types, hosts = np.nonzero(problem.limit)
    n_vars, n_hosts = len(types), len(problem.hosts)
    var = np.arange(n_vars)
    off = np.unique(hosts[~problem.on[hosts]])
    y_of = np.full(n_hosts, -1)
    y_of[off] = n_vars + np.arange(len(off))
    limit = problem.limit[types, hosts].astype(float)
    rows = _Rows()

    first = rows.add(problem.count, problem.count)  # every instance placed
    rows.coef(first + types, var, 1.0)
    for weight, free in ((problem.vcpus, problem.free_cpu), (problem.ram, problem.free_ram)):
        first = rows.add(np.full(n_hosts, -np.inf), np.where(problem.on, free, 0))
        rows.coef(first + hosts, var, weight[types])
        rows.coef(first + off, y_of[off], -free[off])
    capped = problem.serving[types] & (problem.free_cpu[hosts] > problem.cap)
    first = rows.add(np.full(n_hosts, -np.inf), np.full(n_hosts, problem.cap))
    rows.coef(first + hosts[capped], var[capped], problem.vcpus[types[capped]])
    linked = var[~problem.on[hosts]]
    first = rows.add(np.full(len(linked), -np.inf), np.zeros(len(linked)))
    rows.coef(first + np.arange(len(linked)), linked, 1.0)
    rows.coef(first + np.arange(len(linked)), y_of[hosts[linked]], -limit[linked])

    cost = np.concatenate([problem.dynamic[hosts] * problem.load[types], problem.idle[off]])
    result = optimize.milp(
        cost, integrality=np.ones(len(cost)),
        bounds=optimize.Bounds(0, np.concatenate([limit, np.ones(len(off))])),
        constraints=rows.constraint(len(cost)),
        options={"time_limit": time_limit or 1e6, "mip_rel_gap": 1e-7})
    if result.status == 2:
        raise problem.insufficient()
    if result.x is None:
        LOG.warning("region %s: HiGHS found no placement in %s s (%s)",
                    problem.region, time_limit, result.message)
        return None, False
    counts = np.zeros(problem.limit.shape, dtype=np.int64)
    counts[types, hosts] = np.rint(result.x[:n_vars]).astype(np.int64)
    return counts, result.status == 0


def _gather(problem, counts):
    """``counts`` with serving instances moved onto anchored hosts, at no cost.

    Anchored hosts: those the caller named, and those taking a non-serving instance
    here. A serving instance moves from a host that is not anchored onto an anchored
    host already paid for (on before, or used by ``counts``) with the same dynamic
    watts, while that host has room: the cost never rises.
    """
    state = _State(problem, counts)
    anchored = problem.anchored | (counts[~problem.serving].sum(axis=0) > 0)
    for target in np.flatnonzero(anchored & state.paid):
        same = np.isclose(problem.dynamic, problem.dynamic[target]) & ~anchored
        for t in np.flatnonzero(problem.serving):
            for donor in np.flatnonzero(same & (state.counts[t] > 0)):
                move = min(state.counts[t, donor], state.fits(t)[target],
                           problem.limit[t, target] - state.counts[t, target])
                if move > 0:
                    column = np.zeros(len(problem.keys), dtype=np.int64)
                    column[t] = move
                    state.put(column, donor, sign=-1)
                    state.put(column, target)
    return state.counts


class _Rows:
    """Linear constraints built block by block: ``add`` rows, then their ``coef`` entries."""

    def __init__(self):
        self.rows, self.cols, self.vals, self.lower, self.upper = [], [], [], [], []
        self.count = 0

    def add(self, lower, upper):
        """Append ``len(lower)`` rows with these bounds; return the first row's index."""
        first = self.count
        self.lower.append(np.asarray(lower, dtype=float))
        self.upper.append(np.asarray(upper, dtype=float))
        self.count += len(self.lower[-1])
        return first

    def coef(self, rows, cols, values):
        rows = np.asarray(rows)
        self.rows.append(rows)
        self.cols.append(np.asarray(cols))
        self.vals.append(np.broadcast_to(np.asarray(values, dtype=float), rows.shape))

    def constraint(self, n_cols):
        matrix = sparse.csr_array((np.concatenate(self.vals),
                                   (np.concatenate(self.rows), np.concatenate(self.cols))),
                                  shape=(self.count, n_cols))
        return optimize.LinearConstraint(matrix, np.concatenate(self.lower),
                                         np.concatenate(self.upper))


def _solve_greedy(problem):
    """The cheapest of several :func:`_greedy` starts, each polished by :func:`_improve`.

    One start is the plain greedy; the others first power on one of the
    :data:`GREEDY_STARTS` off hosts that are cheapest per vCPU on their own,
    which the plain greedy may pass over after filling hosts already on.
    Should no start place everything (capacity fragmented in a way the greedy
    cannot see through), the integer program decides whether anything can.
    """
    best = None
    for first in [None, *_start_hosts(problem)]:
        counts = _greedy(problem, first)
        if counts is not None:
            counts = _improve(problem, counts)
            if best is None or problem.cost(counts) < problem.cost(best) - _EPS:
                best = counts
    if best is not None:
        return best
    counts, _ = _solve_exact(problem, EXACT_TIME_LIMIT)
    if counts is None:
        raise problem.insufficient()
    return counts


def _start_hosts(problem):
    """Off hosts that would serve the most of the demand at the fewest watts per vCPU."""
    state = _State(problem, np.zeros(problem.limit.shape, dtype=np.int64))
    take = state.fill(problem.count, ~problem.on)
    packed = problem.vcpus @ take
    price = problem.idle + problem.dynamic * (problem.load @ take)
    ratio = np.where(packed > 0, price / np.maximum(packed, 1), np.inf)
    best = np.argsort(ratio, kind="stable")[:GREEDY_STARTS]
    return [int(h) for h in best if np.isfinite(ratio[h])]


def _greedy(problem, first=None):
    """Power hosts one at a time, each time the one with the lowest watts per vCPU it takes.

    Every host is offered the remaining instances (largest first, as many as
    fit); its price is its idle watts if still unpaid plus the dynamic watts
    of what it takes. Hosts already on have no idle price, so they fill first
    unless they are inefficient. ``first``, if given, is filled before the
    others. None if the instances do not all fit.
    """
    state = _State(problem, np.zeros(problem.limit.shape, dtype=np.int64))
    remaining = problem.count.copy()
    if first is not None:
        only = np.zeros(len(problem.hosts), dtype=bool)
        only[first] = True
        take = state.fill(remaining, only)[:, first]
        state.put(take, first)
        remaining -= take
    while remaining.any():
        take = state.fill(remaining, np.ones(len(problem.hosts), dtype=bool))
        packed = problem.vcpus @ take
        if not packed.any():
            return None
        price = np.where(state.paid, 0.0, problem.idle) + problem.dynamic * (problem.load @ take)
        host = int(np.argmin(np.where(packed > 0, price / np.maximum(packed, 1), np.inf)))
        state.put(take[:, host], host)
        remaining -= take[:, host]
    return state.counts


def _improve(problem, counts):
    """Local search from ``counts``: apply cost-cutting moves until none is left.

    Moves: empty a powered-on host into hosts already paid for; move a host's
    instances to one cheaper unused host; merge two powered-on hosts into one
    unused host; move single instances to hosts with cheaper dynamic watts;
    move an instance to a host made room on by moving one of another type away.
    """
    state = _State(problem, counts)
    for _ in range(4 * len(problem.hosts) + 10):  # moves cut the cost; this caps odd cases
        if not (state.empty_one() or state.swap_one() or state.merge_two() or state.shift_one()
                or state.exchange_one()):
            break
    return state.counts


class _State:
    """A partial or complete placement with the residual capacity of every host."""

    def __init__(self, problem, counts):
        self.p, self.counts = problem, counts.copy()
        self.cpu = problem.free_cpu - problem.vcpus @ counts
        self.ram = problem.free_ram - problem.ram @ counts
        self.room = problem.cap - (problem.vcpus * problem.serving) @ counts

    @property
    def used(self):
        return self.counts.sum(axis=0) > 0

    @property
    def paid(self):
        """Hosts whose idle watts are already spent: on before, or used by this placement."""
        return self.p.on | self.used

    def put(self, column, host, sign=1):
        """Add (``sign`` -1: remove) the instances ``column[t]`` to ``host``."""
        p = self.p
        self.counts[:, host] += sign * column
        self.cpu[host] -= sign * (p.vcpus @ column)
        self.ram[host] -= sign * (p.ram @ column)
        self.room[host] -= sign * ((p.vcpus * p.serving) @ column)

    def fill(self, wanted, hosts):
        """``take[t, h]``: how many of ``wanted`` each host in mask ``hosts`` holds on its own."""
        p = self.p
        take = np.zeros(p.limit.shape, dtype=np.int64)
        cpu, ram, room = self.cpu.copy(), self.ram.copy(), self.room.copy()
        for t in range(len(p.keys)):
            fits = np.minimum(cpu // p.vcpus[t], ram // max(p.ram[t], 1))
            if p.serving[t]:
                fits = np.minimum(fits, room // p.vcpus[t])
            take[t] = np.where(hosts, np.clip(fits, 0, wanted[t]), 0)
            cpu -= take[t] * p.vcpus[t]
            ram -= take[t] * p.ram[t]
            room -= take[t] * p.vcpus[t] * p.serving[t]
        return take

    def host_price(self, host, column):
        return (0.0 if self.p.on[host] else self.p.idle[host]) + self.p.dynamic[host] * (self.p.load @ column)

    def cheapest_unused(self, column):
        """``(host, price)`` of the cheapest unused, off host holding ``column`` alone, or None."""
        p = self.p
        fits = ((self.cpu >= p.vcpus @ column) & (self.ram >= p.ram @ column)
                & (self.room >= (p.vcpus * p.serving) @ column) & ~self.paid)
        if not fits.any():
            return None
        price = np.where(fits, p.idle + p.dynamic * (p.load @ column), np.inf)
        host = int(np.argmin(price))
        return host, price[host]

    def fits(self, t):
        """How many more instances of type ``t`` each host holds now."""
        p = self.p
        count = np.minimum(self.cpu // p.vcpus[t], self.ram // max(p.ram[t], 1))
        if p.serving[t]:
            count = np.minimum(count, self.room // p.vcpus[t])
        return np.maximum(count, 0)

    def empty_one(self):
        """Move everything on one powered-on host onto hosts already paid for."""
        p = self.p
        order = np.argsort(p.dynamic, kind="stable")
        for host in np.flatnonzero(self.used & ~p.on):
            column = self.counts[:, host].copy()
            self.put(column, host, -1)
            others = self.paid
            moved = np.zeros_like(self.counts)
            for t in np.flatnonzero(column):  # onto the cheapest dynamic watts first
                room = np.where(others, self.fits(t), 0)[order]
                moved[t, order] = np.clip(column[t] - (np.cumsum(room) - room), 0, room)
                self.counts[t] += moved[t]  # residuals follow below
                self.cpu -= moved[t] * p.vcpus[t]
                self.ram -= moved[t] * p.ram[t]
                self.room -= moved[t] * p.vcpus[t] * p.serving[t]
            saving = self.host_price(host, column) - float(p.dynamic @ (p.load @ moved))
            if (moved.sum(axis=1) == column).all() and saving > _EPS:
                return True
            for h in np.flatnonzero(moved.sum(axis=0)):  # undo
                self.put(moved[:, h], h, -1)
            self.put(column, host)
        return False

    def swap_one(self):
        """Move one powered-on host's instances to a single cheaper unused host."""
        for host in np.flatnonzero(self.used & ~self.p.on):
            column = self.counts[:, host].copy()
            found = self.cheapest_unused(column)
            if found and found[1] < self.host_price(host, column) - _EPS:
                self.put(column, host, -1)
                self.put(column, found[0])
                return True
        return False

    def merge_two(self):
        """Move the instances of two powered-on hosts to one unused host costing less."""
        opened = np.flatnonzero(self.used & ~self.p.on)
        for i, first in enumerate(opened):
            for second in opened[i + 1:]:
                column = self.counts[:, first] + self.counts[:, second]
                found = self.cheapest_unused(column)
                before = (self.host_price(first, self.counts[:, first])
                          + self.host_price(second, self.counts[:, second]))
                if found and found[1] < before - _EPS:
                    for host in (first, second):
                        self.put(self.counts[:, host].copy(), host, -1)
                    self.put(column, found[0])
                    return True
        return False

    def shift_one(self):
        """Move one instance to a paid host with cheaper dynamic watts (or emptying its host)."""
        p = self.p
        for t, host in zip(*np.nonzero(self.counts)):
            gain = (p.dynamic[host] - p.dynamic) * p.load[t]
            if self.counts[:, host].sum() == 1 and not p.on[host]:
                gain = gain + p.idle[host]  # the host goes back to sleep
            fits = (self.fits(t) > 0) & self.paid
            fits[host] = False
            if not fits.any():
                continue
            best = int(np.argmax(np.where(fits, gain, -np.inf)))
            if gain[best] > _EPS:
                unit = np.eye(len(p.keys), dtype=np.int64)[t]
                self.put(unit, host, -1)
                self.put(unit, best)
                return True
        return False

    def exchange_one(self):
        """Move an instance of type t from host a to host b, making room on b by moving
        one of type s from b to a paid host c (a itself, or the cheapest other), if cheaper."""
        p = self.p
        cheapest = []  # per type: the two paid hosts with the cheapest dynamic watts that fit one
        for kind in range(len(p.keys)):
            fits = np.flatnonzero(self.paid & (self.fits(kind) > 0))
            cheapest.append(fits[np.argsort(p.dynamic[fits], kind="stable")[:2]])
        for t, a in zip(*np.nonzero(self.counts)):
            for s in range(len(p.keys)):
                for b in np.flatnonzero(self.counts[s]) if s != t else ():
                    if b == a or not self._fits_instead(b, t, s):
                        continue
                    targets = [c for c in cheapest[s] if c not in (a, b)][:1]
                    targets += [a] if self._fits_instead(a, s, t) else []
                    for c in targets:
                        gain = ((p.dynamic[a] - p.dynamic[b]) * p.load[t]
                                + (p.dynamic[b] - p.dynamic[c]) * p.load[s])
                        if gain > _EPS:
                            unit = np.eye(len(p.keys), dtype=np.int64)
                            self.put(unit[t], a, -1)
                            self.put(unit[s], b, -1)
                            self.put(unit[t], b)
                            self.put(unit[s], c)
                            return True
        return False

    def _fits_instead(self, host, added, removed):
        """Whether ``host`` holds one instance of type ``added`` once one of ``removed`` leaves."""
        p = self.p
        return bool(self.cpu[host] + p.vcpus[removed] >= p.vcpus[added]
                    and self.ram[host] + p.ram[removed] >= p.ram[added]
                    and self.room[host] + p.vcpus[removed] * p.serving[removed]
                    >= p.vcpus[added] * p.serving[added])
