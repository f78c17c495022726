"""The real tools check what was rendered: ``nginx -t``, ``dnsmasq --test``, ``nft -c``."""
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from cdnaas.vnf.fields import ConfigError

_TOOL_TIMEOUT = 30


def prepare_nginx_prefix(prefix_dir: str) -> None:
    """Create ``logs/`` and ``temp/`` under ``prefix_dir`` (nginx creates the rest)."""
    for sub in ("logs", "temp"):
        Path(prefix_dir, sub).mkdir(parents=True, exist_ok=True)


def check_nginx(config_text: str, prefix_dir: str | None = None) -> None:
    """Run ``nginx -t`` on ``config_text``.

    :param prefix_dir: the prefix the config was rendered with: its directories are
        prepared (:func:`prepare_nginx_prefix`) and nginx runs with ``-p`` on it.
        None: a temporary prefix, enough only for configs whose paths exist already.
    :raises ConfigError: nginx is missing or rejects the config (its own words).

    nginx binds the listen addresses while it checks: call this where they exist
    (in the VNF's network namespace).
    """
    with tempfile.TemporaryDirectory(prefix="cdnaas-nginx-check-") as scratch:
        prefix = prefix_dir or scratch
        prepare_nginx_prefix(prefix)
        conf = Path(scratch, "nginx.conf")
        conf.write_text(config_text, encoding="utf-8")
        _run(["nginx", "-t", "-q", "-e", "stderr", "-p", f"{prefix}/", "-c", str(conf)], "nginx")


def check_dnsmasq(config_text: str) -> None:
    """Run ``dnsmasq --test`` on ``config_text`` (syntax and option values).

    :raises ConfigError: dnsmasq is missing or rejects the config (its own words).
    """
    with tempfile.TemporaryDirectory(prefix="cdnaas-dnsmasq-check-") as scratch:
        conf = Path(scratch, "dnsmasq.conf")
        conf.write_text(config_text, encoding="utf-8")
        _run(["dnsmasq", "--test", f"--conf-file={conf}"], "dnsmasq")


def check_nft(ruleset: str) -> None:
    """Run ``nft -c -f`` on ``ruleset``: the kernel checks it, nothing is applied.

    :raises ConfigError: not root, nft missing, or the ruleset is rejected (nft's words).
    """
    if os.geteuid() != 0:
        raise ConfigError("checking nftables rules needs root (nft -c asks the kernel)")
    with tempfile.TemporaryDirectory(prefix="cdnaas-nft-check-") as scratch:
        rules = Path(scratch, "steering.nft")
        rules.write_text(ruleset, encoding="utf-8")
        _run(["nft", "-c", "-f", str(rules)], "nft")


def tool_path(tool: str) -> str:
    """Absolute path of ``tool`` on PATH or in the sbin directories.

    :raises ConfigError: it is not installed.
    """
    path = shutil.which(tool) or shutil.which(tool, path="/usr/sbin:/sbin")
    if path is None:
        raise ConfigError(f"{tool} is not installed (needed to check and run the VNFs)")
    return path


def _run(argv, tool):
    command = [tool_path(argv[0]), *argv[1:]]
    try:
        result = subprocess.run(command, capture_output=True, text=True,
                                timeout=_TOOL_TIMEOUT, check=False)
    except subprocess.TimeoutExpired:
        raise ConfigError(f"{tool} did not finish checking within {_TOOL_TIMEOUT} s") from None
    if result.returncode != 0:
        words = (result.stderr.strip() or result.stdout.strip()
                 or f"exit status {result.returncode}")
        raise ConfigError(f"{tool} rejected the configuration: {words}")
