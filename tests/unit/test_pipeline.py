"""The step runner both VIM drivers run their flows with (:mod:`cdnaas.ro.vim.pipeline`),
and the change an update works from (:func:`cdnaas.ro.vim.changes.sig_change`)."""
import concurrent.futures
import logging
import threading

import pytest

from cdnaas.common.sig import ServiceInstanceGraph
from cdnaas.ro.vim import pipeline
from cdnaas.ro.vim.changes import sig_change
from tests.support.sigs import sample_sig
from tests.unit.test_comforts_unit import deployment_of


def context(reports=None):
    """A context of a one-cache SIG whose progress goes to ``reports`` (a list)."""
    sig = ServiceInstanceGraph.from_dict(sample_sig("v", {"north": 1}))
    reports = [] if reports is None else reports
    return pipeline.Context(deployment_id="v", sig=sig,
                            progress=lambda *report: reports.append(report))


def test_a_failing_step_reverts_what_ran_newest_first_and_raises_its_error():
    done = []

    def work(name, fails=False):
        def execute(ctx):
            ctx.undo.push(f"{name}'s part", done.append, f"undo {name}'s part")
            if fails:
                raise RuntimeError(f"{name} broke")
            done.append(name)
        return pipeline.Step(name, execute, lambda ctx: done.append(f"revert {name}"))
    flow = [work("first"), work("second"), work("third", fails=True), work("fourth")]
    with pytest.raises(RuntimeError, match="third broke"):
        pipeline.run(flow, context())
    assert done == ["first", "second",
                    "undo third's part", "revert third",  # the failing step is reverted too
                    "undo second's part", "revert second",
                    "undo first's part", "revert first"]


def test_a_failing_revert_is_logged_the_others_run_and_the_step_error_is_raised(caplog):
    reverted = []

    def broken_revert(_ctx):
        raise OSError("revert broke")

    def fail(_ctx):
        raise ValueError("step broke")
    flow = [pipeline.Step("a", lambda ctx: None, lambda ctx: reverted.append("a")),
            pipeline.Step("b", lambda ctx: None, broken_revert),
            pipeline.Step("c", fail)]
    with caplog.at_level(logging.WARNING, logger="cdnaas.ro.vim.pipeline"), \
            pytest.raises(ValueError, match="step broke"):
        pipeline.run(flow, context())
    assert reverted == ["a"]
    assert "undo of b failed: revert broke" in caplog.text
    assert "c failed for v" in caplog.text


def test_a_flow_that_succeeds_reverts_nothing_and_keeps_its_reverts_for_no_one():
    reverted = []
    ctx = context()
    flow = [pipeline.Step("a", lambda c: c.addresses.update(a="10.0.0.1"),
                          lambda c: reverted.append("a"))]
    assert pipeline.run(flow, ctx) is ctx and ctx.addresses == {"a": "10.0.0.1"}
    assert reverted == [] and len(ctx.undo) == 0
    with pytest.raises(RuntimeError):  # the next flow on it reverts only its own
        pipeline.run([pipeline.Step("b", fail, lambda c: reverted.append("b"))], ctx)
    assert reverted == ["b"]


def fail(_ctx):
    raise RuntimeError("step broke")


def test_an_isolated_step_reverts_its_own_work_alone_or_never():
    done = []

    def part(name, fails=False):
        def execute(ctx):
            ctx.undo.push(name, done.append, f"undo {name}")
            if fails:
                raise RuntimeError(f"{name} broke")
        return pipeline.Step(name, execute)
    ctx = context()
    ctx.undo.push("before", done.append, "undo before")
    with pytest.raises(RuntimeError, match="repair broke"):
        pipeline.isolated(part("repair", fails=True)).execute(ctx)
    assert done == ["undo repair"] and len(ctx.undo) == 1  # the outer reverts are kept
    with pytest.raises(RuntimeError, match="rebuild broke"):
        pipeline.isolated(part("rebuild", fails=True), revert_on_failure=False).execute(ctx)
    pipeline.isolated(part("legs")).execute(ctx)
    assert done == ["undo repair"] and len(ctx.undo) == 1


def test_each_runs_its_items_in_parallel_and_reports_under_its_name():
    reports, seen = [], []
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        step = pipeline.each("boot caches", lambda ctx: [1, 2, 3],
                             lambda ctx, item: seen.append(item * 10), pool)
        pipeline.run([step, pipeline.each("configure DNS", lambda ctx: [],
                                          lambda ctx, item: None, pool)], context(reports))
    assert sorted(seen) == [10, 20, 30]
    assert reports[0] == ("boot caches", 0, 3) and reports[3] == ("boot caches", 3, 3)
    assert reports[-1] == ("configure DNS", 0, 0)  # a step of no items still reports


def test_steps_together_run_side_by_side_and_a_failure_reverts_both():
    reverted, both = [], threading.Barrier(2, timeout=5)

    def meet(_ctx):
        both.wait()  # would time out were they run one after the other

    def meet_and_fail(ctx):
        both.wait()
        raise RuntimeError("caches broke")
    flow = [pipeline.together(pipeline.Step("shield", meet, lambda c: reverted.append("shield")),
                              pipeline.Step("caches", meet_and_fail,
                                            lambda c: reverted.append("caches")))]
    with pytest.raises(RuntimeError, match="caches broke"):
        pipeline.run(flow, context())
    assert sorted(reverted) == ["caches", "shield"]


def sig_of(caches, origin_port=8080, **service):
    document = sample_sig("v", caches)
    document["origin"] = {"scheme": "http", "host": "192.0.2.10", "port": origin_port}
    return ServiceInstanceGraph.from_dict({**document, "service": service})


def certificate(ref):
    """What a SIG's service says of the certificate ``ref`` it serves HTTPS with."""
    return {"certificate_ref": ref, "fingerprint_sha256": str(len(ref)) * 64}


def test_the_change_says_whether_caches_names_and_certificate_change():
    before = sig_of({"north": 2})
    unknown = sig_change(deployment_of(before), sig_of({"north": 3}, origin_port=9090))
    assert not (unknown.caches_reconfigured or unknown.renamed or unknown.tls)
    moved = sig_change(deployment_of(before), sig_of({"north": 2}, origin_port=9090), before)
    assert moved.caches_reconfigured and not moved.renamed and not moved.settles
    named = sig_change(deployment_of(before), sig_of({"north": 2}, hostnames=["www.example.org"]),
                       before)
    assert named.renamed and not named.caches_reconfigured and named.service_changed
    https = sig_of({"north": 2}, tls=certificate("one"))
    assert sig_change(deployment_of(before), https, before).tls == "on"
    assert sig_change(deployment_of(https), before, https).tls == "off"
    rotated = sig_change(deployment_of(https), sig_of({"north": 2}, tls=certificate("other")),
                         https)
    assert rotated.tls == "rotated" and rotated.settles
    assert not sig_change(deployment_of(before), sig_of({"north": 3}), before).service_changed


def test_the_change_tells_a_vnf_moved_to_another_region_from_one_moved_to_another_host():
    before = ServiceInstanceGraph.from_dict(sample_sig("v", {"north": 2, "south": 1}))
    after = ServiceInstanceGraph.from_dict(sample_sig("v", {"south": 2, "west": 1}))
    found = sig_change(deployment_of(before), after)
    assert [v.name for v in found.relocated] == [v.name for v in found.moved] == ["dns-1"]
