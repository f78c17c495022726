"""The operator's zone on the embedded default: a Knot DNS server the stack starts.

``python -m cdnaas.ro.zones.knot`` (what :class:`cdnaas.cli.stack.Stack` runs when the
zone publisher is ``local``) writes the server's files under
``<state dir>/cdnaas-zone/`` and becomes ``knotd`` in the foreground: its configuration
(``templates/knot-operator-zone.conf.j2``), the zone file when there is none yet
(``templates/operator-zone.zone.j2``: SOA and apex NS; what RO publishes is added by
RFC 2136 updates and kept there by Knot across restarts), and the key (TSIG,
HMAC-SHA256) RO signs its updates with, readable by this user only. The server listens
on every address of this machine at ``CDNAAS_LOCAL_ZONE_PORT``: RO updates it on
127.0.0.1, a local region's clients (and their resolvers) reach it at their bridge's
gateway. Every value rendered into a file is checked first.
"""
import base64
import dataclasses
import os
import re
import secrets
import sys
from pathlib import Path

import dns.exception
import dns.flags
import dns.message
import dns.query
import dns.rdatatype
import jinja2

from cdnaas.common import config
from cdnaas.ro.zones.base import ZoneRefused, operator_zone

#: the name of RO's update key, as the server's ACL and RO's TSIG name it
KEY_NAME = "cdnaas-ro"
CONFIG_TEMPLATE = "knot-operator-zone.conf.j2"
ZONE_TEMPLATE = "operator-zone.zone.j2"
#: a path Knot's configuration may quote as it is
_PATH = re.compile(r"/[A-Za-z0-9_./-]{1,255}")


@dataclasses.dataclass(frozen=True)
class ServerFiles:
    """Where the local zone server keeps its files (``<state dir>/cdnaas-zone``)."""

    folder: Path

    @property
    def config(self):
        return self.folder / "knot.conf"

    @property
    def key(self):
        return self.folder / "update.key"

    @property
    def log(self):
        return self.folder / "knot.log"

    @property
    def run_dir(self):
        return self.folder / "run"

    @property
    def db_dir(self):
        return self.folder / "db"

    def zone_file(self, zone):
        return self.folder / f"{zone}.zone"


def server_files(state_dir=None):
    """The :class:`ServerFiles` of the stack whose state dir is ``state_dir`` (default:
    ``CDNAAS_STATE_DIR``)."""
    return ServerFiles(Path(state_dir or config.state_path()) / "cdnaas-zone")


def port():
    """Where the local zone server listens (``CDNAAS_LOCAL_ZONE_PORT``)."""
    return config.setting("CDNAAS_LOCAL_ZONE_PORT")


def update_key(files=None):
    """``(key name, base64 secret)`` RO signs its updates with.

    :raises OSError: the server's files were never written (no stack started it).
    """
    return KEY_NAME, (files or server_files()).key.read_text(encoding="ascii").strip()


def config_text(files, zone, listen_port, key_secret):
    """Knot's configuration serving ``zone`` at ``listen_port`` with updates by key.

    :raises ZoneRefused: a value is not acceptable (named).
    """
    if not _PATH.fullmatch(str(files.folder)):
        raise ZoneRefused(f"state dir {str(files.folder)!r} must be an absolute path of "
                          "letters, digits and _ . / - for the local zone server's files")
    if isinstance(listen_port, bool) or not isinstance(listen_port, int) \
            or not 1 <= listen_port <= 65535:
        raise ZoneRefused(f"CDNAAS_LOCAL_ZONE_PORT {listen_port!r} is not a port")
    try:
        if len(base64.b64decode(key_secret, validate=True)) < 32:
            raise ValueError(key_secret)
    except (ValueError, TypeError):
        raise ZoneRefused(f"the update key in {files.key} is not 32 bytes or more of "
                          "base64") from None
    return _render(CONFIG_TEMPLATE, zone=zone, port=listen_port, key_name=KEY_NAME,
                            key_secret=key_secret, run_dir=files.run_dir,
                            log_file=files.log, db_dir=files.db_dir, zone_dir=files.folder)


def zone_text(zone, ttl):
    """The zone file ``zone`` starts from: its SOA (negative answers kept ``ttl``
    seconds) and apex NS.

    :raises ZoneRefused: ``ttl`` is not seconds from 1 to 86400.
    """
    if isinstance(ttl, bool) or not isinstance(ttl, int) or not 1 <= ttl <= 86400:
        raise ZoneRefused(f"CDNAAS_ZONE_TTL {ttl!r} must be seconds from 1 to 86400")
    return _render(ZONE_TEMPLATE, zone=zone, ttl=ttl)


def _render(name, **values):
    """``templates/<name>`` rendered with ``values`` (every one given: StrictUndefined).
    Not :mod:`cdnaas.vnf`'s renderer: the server's process starts with the
    stack and imports only what it needs."""
    environment = jinja2.Environment(
        loader=jinja2.FileSystemLoader(config.REPO_ROOT / "templates"),
        undefined=jinja2.StrictUndefined, autoescape=False, keep_trailing_newline=True,
        trim_blocks=True, lstrip_blocks=True)
    return environment.get_template(name).render(**values)


def prepare(files=None):
    """Write the server's files for the settings in force (the key and the zone file
    only when absent); return the :class:`ServerFiles`.

    :raises ZoneRefused: a setting is not acceptable.
    """
    files = files or server_files()
    zone = operator_zone()
    for folder in (files.folder, files.run_dir, files.db_dir):
        folder.mkdir(parents=True, exist_ok=True)
    if not files.key.exists():
        descriptor = os.open(files.key, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "w", encoding="ascii") as handle:
            handle.write(base64.b64encode(secrets.token_bytes(32)).decode("ascii") + "\n")
    text = config_text(files, zone, port(), update_key(files)[1])
    files.config.write_text(text, encoding="utf-8")
    os.chmod(files.config, 0o600)  # it holds the key
    if not files.zone_file(zone).exists():
        files.zone_file(zone).write_text(zone_text(zone, config.setting("CDNAAS_ZONE_TTL")),
                                         encoding="ascii")
    return files


def answers(listen_port=None, zone=None, timeout=0.5):
    """Whether the local zone server answers for ``zone``'s SOA with authority."""
    query = dns.message.make_query(f"{zone or operator_zone()}.", dns.rdatatype.SOA)
    query.flags &= ~dns.flags.RD
    try:
        answer = dns.query.udp(query, "127.0.0.1", port=listen_port or port(), timeout=timeout)
    except (OSError, dns.exception.DNSException):
        return False
    return bool(answer.flags & dns.flags.AA) and any(
        r.rdtype == dns.rdatatype.SOA for r in answer.answer)


def main():
    """Write the files, then become ``knotd`` in the foreground (same process id)."""
    files = prepare()
    sys.stdout.flush()
    os.execvp("knotd", ["knotd", "-c", str(files.config)])


if __name__ == "__main__":
    main()
