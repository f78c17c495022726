"""Generated-case fuzzing of the five OpenAPI documents against a running stack.

Shared by ``tests/service/test_fuzz.py`` (a small fixed budget in the suite) and
``benchmarks/fuzz.py`` (20,000+ cases). schemathesis generates requests from each
document in ``api-spec/`` (valid ones and ones that break the document, half each, with
a fixed seed), sends them to the service with a fresh credential per case (the operator
token, or now and then a tenant's, for the API; a 5-minute service token for the others),
and every answer is checked: no 5xx (``not_a_server_error``), a status the operation
documents (``status_code_conformance``), a body and content type its document states
(``response_schema_conformance``, ``content_type_conformance``).
"""
import collections
import dataclasses
import time

import requests
import schemathesis
from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis.errors import Unsatisfiable
from schemathesis.core.failures import FailureGroup
from schemathesis.specs.openapi.checks import (content_type_conformance,
                                               response_schema_conformance,
                                               status_code_conformance)

from cdnaas.common import config
from tests.support.api import vcdn_body

DOCUMENTS = ("api", "so", "sidr", "ro", "im")
SEED = 20170601
MODES = (schemathesis.GenerationMode.POSITIVE, schemathesis.GenerationMode.NEGATIVE)
#: one API case in this many uses the tenant token instead of the operator's
TENANT_EVERY = 4
#: most passes over a document's operations to reach its budget
ROUNDS = 4
#: failures kept per kind and document, to print
KEEP = 5


@dataclasses.dataclass
class Tally:
    """What the fuzz of one document found."""

    document: str
    cases: int = 0
    server_errors: int = 0
    undocumented: int = 0
    schema_violations: int = 0
    seconds: float = 0.0
    examples: list = dataclasses.field(default_factory=list)
    statuses: collections.Counter = dataclasses.field(default_factory=collections.Counter)

    @property
    def clean(self):
        return not (self.server_errors or self.undocumented or self.schema_violations)

    def row(self):
        return (f"{self.document:5} {self.cases:7,} {self.server_errors:13} "
                f"{self.undocumented:12} {self.schema_violations:17} {self.seconds:8.1f}")


HEADER = ("doc     cases server_errors undocumented schema_violations  seconds")


def fuzz(stack, budget, tenant_token=None, documents=DOCUMENTS, rounds_seed=SEED, known=None):
    """Fuzz ``documents`` against ``stack`` (a :class:`tests.support.stack.RunningStack`),
    about ``budget`` cases per document, spread evenly over its operations and modes.

    :param known: path parameter name -> values that exist (:func:`known_values`); every
        other generated case names one of them, so operations reach real records.
    :returns: one :class:`Tally` per document.
    """
    return [fuzz_document(stack, name, budget, tenant_token, rounds_seed, known)
            for name in documents]


def known_values(stack):
    """Records a populated stack (:func:`tests.support.api.populate`) holds, plus a vCDN
    of tenant acme leased here, by the path parameter names that reach them."""
    accepted = stack.acme.ok("POST", "/vcdns", 202, json=vcdn_body("fuzzed"))
    stack.acme.wait(accepted["operation"]["id"])
    vcdn_id, operation_id = accepted["vcdn"]["id"], accepted["operation"]["id"]
    return {"region": ["eu-west", "us-east"], "host": ["eu-1", "us-1"], "tenant": ["acme"],
            "flavor": ["static"], "version": [1], "vcdn_id": [vcdn_id],
            "instance_id": [vcdn_id], "deployment_id": [vcdn_id], "operation_id": [operation_id]}


def fuzz_document(stack, name, budget, tenant_token=None, rounds_seed=SEED, known=None):
    schema = schemathesis.openapi.from_path(str(config.api_spec_path(name)))
    operations = [result.ok() for result in schema.get_all_operations()]
    tally = Tally(name)
    session = requests.Session()
    credentials = _credentials(stack, name, tenant_token)
    started = time.perf_counter()
    for round_ in range(ROUNDS):  # operations with few inputs run dry: others make up for them
        before, missing = tally.cases, budget - tally.cases
        per_strategy = max(1, missing // (len(operations) * len(MODES)))
        for operation in operations:
            for mode in MODES:
                _run(operation.as_strategy(generation_mode=mode), per_strategy,
                     rounds_seed + round_,
                     lambda case: _one(case, stack.urls[name], session, credentials, tally,
                                       known or {}))
        if tally.cases >= budget or tally.cases - before < missing // 10:
            break
    tally.seconds = time.perf_counter() - started
    return tally


def _run(strategy, examples, rounds_seed, body):
    @seed(rounds_seed)
    @settings(max_examples=examples, deadline=None, database=None, derandomize=False,
              phases=[Phase.generate], suppress_health_check=list(HealthCheck),
              report_multiple_bugs=False)
    @given(strategy)
    def run(case):
        body(case)

    try:
        run()
    except Unsatisfiable:  # nothing to break (no parameter, no body) or nothing left to make
        pass


def _credentials(stack, name, tenant_token):
    """A function of the case number giving the Authorization header to send."""
    if name != "api":
        return lambda _number: stack.service_headers("fuzz")["Authorization"]
    operator = f"Bearer {stack.operator_token}"
    tenant = f"Bearer {tenant_token}" if tenant_token else operator
    return lambda number: tenant if number % TENANT_EVERY == TENANT_EVERY - 1 else operator


def _one(case, base_url, session, credentials, tally, known):
    headers = {"Authorization": credentials(tally.cases)}
    if tally.cases % 2 and case.path_parameters:
        for param, values in known.items():
            if param in case.path_parameters:
                case.path_parameters[param] = values[tally.cases % len(values)]
    tally.cases += 1
    try:
        response = case.call(base_url=base_url, session=session, headers=headers, timeout=60)
    except requests.RequestException as exc:
        tally.server_errors += 1
        _keep(tally, "no answer", case, str(exc))
        return
    tally.statuses[response.status_code] += 1
    if response.status_code >= 500:
        tally.server_errors += 1
        _keep(tally, f"server error {response.status_code}", case, response.text)
    for kind, checks in (("undocumented", [status_code_conformance]),
                         ("schema_violations", [response_schema_conformance,
                                                content_type_conformance])):
        try:
            case.validate_response(response, checks=checks)
        except (FailureGroup, AssertionError) as exc:
            setattr(tally, kind, getattr(tally, kind) + 1)
            _keep(tally, f"{kind} {response.status_code}", case, f"{exc} {response.text}")


def _keep(tally, kind, case, detail):
    if sum(1 for k, *_ in tally.examples if k == kind) < KEEP:
        request = f"{case.method} {case.formatted_path} query={case.query} body={case.body!r}"
        tally.examples.append((kind, request[:400], detail[:600]))


def report(tallies, out=print):
    """Print one row per document, a total, and the examples kept."""
    out(HEADER)
    for tally in tallies:
        out(tally.row())
        out("        statuses: " + ", ".join(f"{code} x{count}"
                                          for code, count in sorted(tally.statuses.items())))
    total = Tally("total", sum(t.cases for t in tallies), sum(t.server_errors for t in tallies),
                  sum(t.undocumented for t in tallies), sum(t.schema_violations for t in tallies),
                  sum(t.seconds for t in tallies))
    out(total.row())
    for tally in tallies:
        for kind, request, detail in tally.examples:
            out(f"- {tally.document} {kind}: {request}\n    {detail}")
    return total
