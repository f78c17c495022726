"""Generated-case fuzz of the five OpenAPI documents against a real stack (issue 12, part 6).

A small fixed budget (about 400 cases per document, fixed seed) runs in the suite;
``benchmarks/fuzz.py`` runs 20,000+. Any 5xx, any status the operation does not document
and any answer that breaks its schema or content type fails, listing examples.
"""
import pytest

from tests.support import fuzz
from tests.support.api import populate
from tests.support.stack import running_stack

#: cases per document (the whole run takes about a minute here)
BUDGET = 400


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    with running_stack(None, tmp_path_factory.mktemp("fuzz")) as running:
        populate(running)
        running.known = fuzz.known_values(running)
        yield running


@pytest.mark.fuzz
@pytest.mark.parametrize("document", fuzz.DOCUMENTS)
def test_generated_cases_answer_as_documented(stack, document):
    tally = fuzz.fuzz_document(stack, document, BUDGET, stack.acme.token, known=stack.known)
    lines = []
    fuzz.report([tally], out=lines.append)
    assert tally.cases >= BUDGET // 2, "\n".join(lines)
    assert tally.clean, "\n".join(lines)
