"""A balancer VNF's ACME HTTP-01 answer files, under its prefix.

While SO's order for a vCDN's managed certificate runs, each answer is a file
``<prefix>/acme-challenge/<token>`` holding the key authorization, which nginx serves at
``/.well-known/acme-challenge/<token>`` (``nginx-acme-challenge.conf.j2``): writing them
needs no reload. The answers are public (the CA fetches them over plain HTTP), so the
files are readable by nginx's workers. The token names a file only once checked again
here (:func:`cdnaas.common.challenges.parse`).
"""
import os
from pathlib import Path

from cdnaas.common import challenges

DIRECTORY = "acme-challenge"


def folder(prefix) -> str:
    """The answers' folder under ``prefix`` (made, 0755): the ``acme_challenges`` argument
    of :func:`cdnaas.ro.vnfconfig.lb_config`."""
    path = Path(prefix) / DIRECTORY
    path.mkdir(mode=0o755, exist_ok=True)
    return str(path)


def write(prefix, answers):
    """Make ``answers`` (a list of ``{token, key_authorization}``) the only answers under
    ``prefix``: each written whole (0644, the key authorization alone), every other
    answer file removed.

    :raises BadRequest: an answer is refused (:func:`cdnaas.common.challenges.parse`).
    """
    wanted = challenges.parse(answers)
    path = Path(folder(prefix))
    for token, answer in wanted.items():  # whole or not at all: a temporary file moved in
        temporary = path / f".{token}.{os.getpid()}"
        temporary.write_text(answer, encoding="ascii")
        os.chmod(temporary, 0o644)
        os.replace(temporary, path / token)
    for stale in path.iterdir():
        if stale.name not in wanted:
            stale.unlink(missing_ok=True)
