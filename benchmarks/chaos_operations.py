"""The stream of API operations of the chaos soak (``benchmarks/chaos.py``): a region's
demand up or down, a purge, a third vCDN created or deleted, one every few seconds, each
followed to its end; and the requests for the soak's qoe-video vCDNs."""
import dataclasses
import time

import requests

from cdnaas.so import states
from tests.support.api import vcdn_body

#: the region of the third vCDN
THIRD_REGION = "eu-west"
#: a region's demand (viewers at MOS 4.0) that takes one cache of 1 vCPU, and one that takes
#: two of 3 vCPUs (qoe-video's KVM model): a change adds or removes a cache and resizes one
DEMANDS = (2000, 32000)


def regions(demands):
    """The regions of a vCDN's request for ``demands`` (``{region: viewers}``)."""
    return [{"name": name, "demand": demand, "quality": {"min_mos": 4.0}}
            for name, demand in demands.items()]


def body(name, origin, demands):
    """A qoe-video vCDN of ``demands`` (``{region: viewers}``)."""
    return vcdn_body(name, flavor="qoe-video", origin=origin, regions=regions(demands))


@dataclasses.dataclass
class Operation:
    """One API call of the stream: ``answer`` is ``202`` (then ``operation_id``, its last
    ``state`` and when it was first seen ended), another status with its message, or
    ``unreachable``."""

    label: str
    at: float
    answer: str
    operation_id: str = None
    state: str = None
    error: str = None
    ended: float = None


class Operations:
    """The stream of API operations on the vCDNs ``vcdns`` (``{label: view}``): the next
    one drawn by ``rng``; each followed to its end by :meth:`poll`."""

    def __init__(self, api, vcdns, origin, rng):
        self.api, self.vcdns, self.origin, self.rng = api, vcdns, origin, rng
        self.demands = {label: {r["name"]: DEMANDS[0] for r in vcdn["regions"]}
                        for label, vcdn in vcdns.items()}
        self.third = None  # vCDN C's id while it exists
        self.sent = []

    def send_next(self):
        """Send the next operation; return its :class:`Operation`."""
        kind = self.rng.choice(("demand", "purge", "third"))
        label = self.rng.choice(sorted(self.vcdns))
        vcdn_id = self.vcdns[label]["id"]
        if kind == "demand":
            region = self.rng.choice(sorted(self.demands[label]))
            demands = dict(self.demands[label])
            up = demands[region] == DEMANDS[0]
            demands[region] = DEMANDS[1] if up else DEMANDS[0]
            operation, _answer = self._send(
                f"demand {'up' if up else 'down'} {label} {region}", "PATCH",
                f"/vcdns/{vcdn_id}", {"regions": regions(demands)})
            if operation.operation_id:
                self.demands[label] = demands
        elif kind == "purge":
            operation, _answer = self._send(f"purge {label}", "POST",
                                            f"/vcdns/{vcdn_id}/invalidations",
                                            {"prefixes": ["/video/low/"]})
        elif self.third is None:
            operation, answer = self._send("create C", "POST", "/vcdns", body(
                "chaos-c", self.origin, {THIRD_REGION: DEMANDS[0]}))
            if operation.operation_id:
                self.third = answer["vcdn"]["id"]
        else:
            operation, _answer = self._send("delete C", "DELETE", f"/vcdns/{self.third}", None)
            if operation.operation_id or operation.answer.startswith("404"):
                self.third = None
        return operation

    def _send(self, label, method, path, payload):
        operation = Operation(label, time.monotonic(), "unreachable")
        try:
            answer = self.api.call(method, path, json=payload)
        except requests.RequestException as exc:
            operation.error = type(exc).__name__
            self.sent.append(operation)
            return operation, None
        found = answer.json() if answer.content else {}
        operation.answer = str(answer.status_code)
        if answer.status_code == 202:
            operation.operation_id = found["operation"]["id"]
            operation.state = found["operation"]["state"]
        else:
            operation.error = str(found.get("message") or found)[:160]
        self.sent.append(operation)
        return operation, found

    def poll(self):
        """Read the state of every operation not yet ended (an unreachable API: next time)."""
        for operation in self.open():
            try:
                answer = self.api.call("GET", f"/operations/{operation.operation_id}")
            except requests.RequestException:
                return
            if answer.status_code == 200:
                found = answer.json()
                operation.state, operation.error = found["state"], found.get("error")
                if operation.state in states.TERMINAL:
                    operation.ended = time.monotonic()

    def open(self):
        """The accepted operations that have not ended."""
        return [o for o in self.sent if o.operation_id and o.state not in states.TERMINAL]

    def settle(self, bound):
        """Poll until every accepted operation has ended, at most ``bound`` seconds."""
        deadline = time.monotonic() + bound
        while self.open() and time.monotonic() < deadline:
            self.poll()
            time.sleep(0.5)


def run_operations(operations, stop, every, rng, failures):
    """Send an operation every ``every`` s (0.5-1.5 times it) until ``stop``, polling the
    open ones meanwhile; what went wrong in this loop itself goes to ``failures``."""
    due = time.monotonic() + rng.uniform(0.5, 1.5) * every
    while not stop.wait(min(1.0, max(0.0, due - time.monotonic()))):
        try:
            operations.poll()
            if time.monotonic() >= due:
                due = time.monotonic() + rng.uniform(0.5, 1.5) * every
                operations.send_next()
        except Exception as exc:  # pylint: disable=broad-except  # the soak goes on
            failures.append(f"operations: {type(exc).__name__}: {exc}")
