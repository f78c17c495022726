"""Generated-case fuzz of every OpenAPI document in api-spec/ against a real stack.

Starts the five services (noop VIM driver, embedded SQLite), registers regions, hosts,
the static template and tenants acme/globex (tests/support/api.py), then sends at least
``--cases`` generated requests (schemathesis, fixed seed, valid and invalid half each)
spread over the five documents, and prints per document: cases, server errors (5xx),
undocumented statuses, responses breaking their schema or content type, seconds.
Issue 12's bar: 0 server errors and 0 undocumented statuses over >= 20,000 cases.

    .venv/bin/python benchmarks/fuzz.py [--cases 20000] [--seed 20170601] [--only api,so]
"""
import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.support import fuzz  # noqa: E402
from tests.support.api import populate  # noqa: E402
from tests.support.stack import running_stack  # noqa: E402


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=22_000, help="cases over all documents")
    parser.add_argument("--seed", type=int, default=fuzz.SEED)
    parser.add_argument("--only", default=",".join(fuzz.DOCUMENTS),
                        help="comma-separated documents (api, so, sidr, ro, im)")
    args = parser.parse_args(argv)
    documents = [name for name in args.only.split(",") if name]
    with tempfile.TemporaryDirectory(prefix="cdnaas-fuzz-") as tmp:
        with running_stack(None, Path(tmp)) as stack:
            populate(stack)
            tallies = fuzz.fuzz(stack, args.cases // len(documents), stack.acme.token,
                                documents, args.seed, fuzz.known_values(stack))
    total = fuzz.report(tallies)
    print(f"seed {args.seed}; bar: 0 server errors and 0 undocumented statuses over >= 20,000 "
          f"cases: {'met' if total.cases >= 20_000 and not total.server_errors and not total.undocumented else 'not met'}")
    return 0 if total.clean else 1


if __name__ == "__main__":
    sys.exit(main())
