"""A balancer VNF's certificate files: the tenant's chain and key under its prefix.

Each certificate is written once under ``<prefix>/tls/``, named by its fingerprint
(``<sha256[:16]>.crt`` and ``.key``, the directory 0700 and the files 0600: readable by
root only, as nginx's master reads them), so a rotation writes the new files beside the
old ones, checks and reloads nginx on them, and only then removes the old ones
(:func:`prune`): a config that fails its check never left the balancer without the files
it runs on.
"""
import os
from pathlib import Path

from cdnaas.common.certificates import ocsp_responders
from cdnaas.common.service_auth import write_private_lines

DIRECTORY = "tls"


def write(prefix, bundle, port):
    """Write ``bundle``'s chain and key under ``prefix`` (unless there already); return the
    ``tls`` argument of :func:`cdnaas.vnf.balancer.lb_config` for ``port`` (stapling where
    the certificate names an OCSP responder), or None when ``bundle`` is None (HTTP only)."""
    if bundle is None:
        return None
    folder = Path(prefix) / DIRECTORY
    folder.mkdir(mode=0o700, exist_ok=True)
    os.chmod(folder, 0o700)
    stem = bundle.facts.fingerprint_sha256[:16]
    paths = {"certificate": folder / f"{stem}.crt", "key": folder / f"{stem}.key"}
    for kind, text in (("certificate", bundle.certificate), ("key", bundle.private_key)):
        if not paths[kind].exists():  # 0600, whole or not at all
            write_private_lines(paths[kind], [text.rstrip("\n")], replace=True)
    return {"port": port, "certificate": str(paths["certificate"]), "key": str(paths["key"]),
            "stapling": bool(ocsp_responders(bundle.certificate))}


def prune(prefix, config_text):
    """Remove the certificate files under ``prefix`` that ``config_text`` (the config nginx
    now runs on) does not name."""
    folder = Path(prefix) / DIRECTORY
    if not folder.is_dir():
        return
    for path in folder.iterdir():
        if str(path) not in config_text:
            path.unlink(missing_ok=True)

