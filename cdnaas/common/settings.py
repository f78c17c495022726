"""Every setting of CDNaaS, declared once: name, kind, default and what it means.

Settings are environment variables, read at call time (never frozen at import), so
one set of variables describes a deployment for the CLI, ``docker-compose.yml`` and
the tests alike. Code reads them through :func:`get` (or the helpers of
:mod:`cdnaas.common.config`); the configuration reference of the docs site
(``docs/configuration.md``) is generated from this declaration as the site is built, and
``python -m cdnaas.common.settings`` prints the same table in a terminal.
"""
import dataclasses
import os
import sys

from cdnaas.common import errors

KINDS = ("text", "number", "integer", "list", "flag")


@dataclasses.dataclass(frozen=True)
class Setting:
    """One setting.

    :param kind: how the value is read: ``text``, ``number`` (float), ``integer``,
        ``list`` (comma-separated, empty items dropped) or ``flag`` (``1``/``0``).
    :param default: the value when the variable is unset or empty (None: no value);
        ``default_text`` says it in words when it is computed elsewhere.
    """

    name: str
    kind: str
    default: object
    help: str
    group: str
    default_text: str | None = None

    def read(self, environ=None):
        """The value now (the default when unset or empty) in ``environ`` (default:
        ``os.environ``; a child process's environment before it starts).

        :raises cdnaas.common.errors.CdnaasError: (500) a value of the wrong kind,
            naming the setting and what it takes.
        """
        raw = (os.environ if environ is None else environ).get(self.name)
        if raw is None or raw == "":
            return self.default
        try:
            return _PARSE[self.kind](raw)
        except ValueError:
            raise errors.CdnaasError(f"setting {self.name}={raw!r} is not a valid "
                                     f"{self.kind}: {self.help}") from None

    @property
    def shown_default(self):
        if self.default_text is not None:
            return self.default_text
        if self.default in (None, "", []):
            return "-"
        if isinstance(self.default, list):
            return f"`{','.join(self.default)}`"
        if isinstance(self.default, float) and self.default.is_integer():
            return f"`{int(self.default)}`"
        return f"`{self.default}`"


def _flag(raw):
    if raw not in ("0", "1"):
        raise ValueError(raw)
    return raw == "1"


_PARSE = {
    "text": str,
    "number": float,
    "integer": int,
    "list": lambda raw: [item.strip() for item in raw.split(",") if item.strip()],
    "flag": _flag,
}

#: what ``CDNAAS_ORIGIN_DENY`` refuses when unset (keywords of cdnaas.common.origin_policy)
ORIGIN_DENY_DEFAULT = ["loopback", "link-local", "metadata", "unspecified", "vnf-pool"]

DECLARED = (
    # -- deployment -------------------------------------------------------------------------
    Setting("CDNAAS_<SVC>_URL", "text", None, "where each service is reached (SVC = API, SO, "
            "SIDR, RO, IM)", "deployment", default_text="`http://127.0.0.1:870x`"),
    Setting("CDNAAS_<SVC>_BIND", "text", None, "where a service listens (compose: "
            "`0.0.0.0:870x`)", "deployment", default_text="host:port of its URL"),
    Setting("CDNAAS_DATABASE_URL", "text", None, "shared SQLAlchemy URL, e.g. "
            "`postgresql+psycopg://cdnaas@db/cdnaas`", "deployment",
            default_text="one SQLite file per service in the state dir"),
    Setting("CDNAAS_STATE_DIR", "text", None, "SQLite files, logs, pid file, service key",
            "deployment", default_text="`~/.local/state/cdnaas`"),
    Setting("CDNAAS_SERVICE_KEY_FILE", "text", None, "the installation's service key, which "
            "SO, SIDR, RO and IM require of their callers (made by `cdnaas db upgrade`)",
            "deployment", default_text="`<state dir>/service.key`"),
    Setting("CDNAAS_SECRET_KEY_FILE", "text", None, "RO's key (Fernet) encrypting tenants' "
            "certificates and keys at rest (made by `cdnaas db upgrade` and RO); RO replicas "
            "share it", "deployment", default_text="`<state dir>/secrets.key`"),
    Setting("CDNAAS_LOG_LEVEL", "text", "INFO", "log level of the services", "deployment"),
    Setting("CDNAAS_MAX_BODY_BYTES", "integer", 1048576, "largest request body a service "
            "reads (413 beyond)", "deployment"),
    Setting("CDNAAS_DNS_DOMAIN", "text", "cdn.example.net", "vCDN hostnames are "
            "`<vcdn>.<tenant>.<domain>`", "deployment"),
    Setting("CDNAAS_PRICE_TABLE", "text", None, "the operator's price table (YAML)",
            "deployment", default_text="`cdnaas/so/prices.yaml`"),
    Setting("CDNAAS_REPLICA_NAME", "text", None, "this replica's name in the claims it "
            "takes (replicas of a service on one database need distinct names)", "deployment",
            default_text="host name and port of the service"),
    Setting("CDNAAS_LEASE_SECONDS", "number", 15.0, "how long a replica's claim on an "
            "operation or deployment lasts unless renewed; a dead replica's work is taken "
            "over after this", "deployment"),
    Setting("CDNAAS_CLOCK_FILE", "text", None, "a file holding the time services take as now "
            "(tests and demos of leases); empty file: the real clock", "deployment"),
    # -- identity and policy of the customer API ---------------------------------------------
    Setting("CDNAAS_AUTH_STRATEGY", "text", "local", "who the customer API takes requests "
            "from (read when it starts): `local` tokens of this installation, or `keystone` "
            "tokens checked by keystonemiddleware's `auth_token` (docs/operator-openstack.md)",
            "identity"),
    Setting("CDNAAS_KEYSTONE_CLOUD", "text", None, "`keystone`: the `clouds.yaml` entry of "
            "the service user `auth_token` validates tokens with (Keystone's URL, the user's "
            "credentials, the region)", "identity"),
    Setting("CDNAAS_KEYSTONE_OPERATOR_PROJECT", "text", None, "`keystone`: the id of the "
            "operator's own project, whose admins are operators as with a system-scoped "
            "token", "identity", default_text="none (system scope only)"),
    Setting("CDNAAS_POLICY_FILE", "text", None, "a `policy.yaml` overriding the API's "
            "default rules (`docs/policy.yaml.sample`), read again when it changes",
            "identity", default_text="none (the defaults in code)"),
    # -- origins and models -----------------------------------------------------------------
    Setting("CDNAAS_ORIGIN_DENY", "list", ORIGIN_DENY_DEFAULT, "origins refused: CIDRs, "
            "addresses, host names and keywords (`default`, `private`, `unresolved`, "
            "`none`; see the security model)", "origins"),
    Setting("CDNAAS_ORIGIN_ALLOW", "list", [], "origins allowed before the deny list is "
            "read: CIDRs, addresses or host names, each optionally with `:port`", "origins"),
    Setting("CDNAAS_ORIGIN_RESOLVE_TIMEOUT", "number", 2.0, "seconds allowed to resolve an "
            "origin's host name for the policy", "origins"),
    Setting("CDNAAS_MODEL_DIRS", "list", [], "folders of the operator's own model files "
            "(calibrations), searched after a plugin's folder", "origins"),
    # -- customer API -----------------------------------------------------------------------
    Setting("CDNAAS_TOKEN_MAX_DAYS", "number", 365.0, "longest lifetime of a local API "
            "token, and the lifetime of one asked for without an expiry (0: no maximum; such "
            "tokens never expire)", "api"),
    Setting("CDNAAS_TOKEN_CACHE_SECONDS", "number", 2.0, "how long an API process keeps a "
            "local token it validated before reading it again (0: never kept); another "
            "replica may accept a token revoked elsewhere for up to this long", "api"),
    # -- Service Orchestrator ---------------------------------------------------------------
    Setting("CDNAAS_DEPLOY_LEAD_SECONDS", "number", 60.0, "how early a future lease is "
            "deployed", "so"),
    Setting("CDNAAS_DEPLOY_TIMEOUT", "number", 600.0, "how long SO follows one RO action, "
            "retrying while RO is unreachable", "so"),
    Setting("CDNAAS_SO_SCHEDULER_INTERVAL", "number", 1.0, "seconds between SO's looks for "
            "leases to start", "so"),
    Setting("CDNAAS_ACME_DIRECTORY", "text", None, "the operator's ACME (RFC 8555) directory "
            "URL SO orders managed certificates from (unset: vCDNs cannot ask for one)", "so"),
    Setting("CDNAAS_ACME_CA_BUNDLE", "text", None, "PEM file of the CA that issued the ACME "
            "server's own HTTPS certificate (unset: the system's CAs)", "so"),
    Setting("CDNAAS_ACME_ACCOUNT_FILE", "text", None, "SO's ACME account (key and URL), "
            "encrypted with CDNAAS_SECRET_KEY_FILE's kind of key kept beside it (`.key`); SO "
            "replicas share it", "so", default_text="`<state dir>/acme-account.json`"),
    Setting("CDNAAS_ACME_INTERVAL", "number", 60.0, "seconds between SO's passes over managed "
            "certificates (first issue, renewal)", "so"),
    Setting("CDNAAS_ACME_RENEW_AT", "number", 0.6667, "fraction of a managed certificate's "
            "lifetime after which SO renews it (0 to 1)", "so"),
    Setting("CDNAAS_ACME_TIMEOUT", "number", 90.0, "seconds an ACME order may take, from "
            "ordering to the issued certificate", "so"),
    Setting("CDNAAS_WEBHOOK_KEY_FILE", "text", None, "SO's key (Fernet) encrypting webhook "
            "signing secrets at rest (made by `cdnaas db upgrade` and SO); SO replicas share "
            "it", "so", default_text="`<state dir>/webhooks.key`"),
    Setting("CDNAAS_WEBHOOK_INTERVAL", "number", 1.0, "seconds between SO's looks for "
            "webhook deliveries due and reminders (certificates, leases) to send", "so"),
    Setting("CDNAAS_WEBHOOK_ATTEMPTS", "integer", 6, "attempts of one webhook delivery "
            "before it is given up (FAILED)", "so"),
    Setting("CDNAAS_WEBHOOK_BACKOFF_SECONDS", "number", 120.0, "wait before a delivery's "
            "second attempt, doubled before each next one (6 attempts: about an hour)", "so"),
    Setting("CDNAAS_WEBHOOK_TIMEOUT", "number", 10.0, "seconds one delivery attempt waits "
            "for the receiver's answer", "so"),
    Setting("CDNAAS_WEBHOOK_LOG_DAYS", "number", 30.0, "how long SO keeps deliveries that "
            "ended (delivered or given up) and their attempts: the delivery log", "so"),
    Setting("CDNAAS_CERT_EXPIRY_DAYS", "list", ["30", "14", "7", "1"], "days before a "
            "certificate's end at which `certificate.expiring` is sent; the vCDN's view shows "
            "the expiry state `expiring` from the largest on", "so"),
    Setting("CDNAAS_HOSTNAME_CHECK", "flag", True, "a customer's hostname is served only once "
            "SO sees its CNAME to the vCDN's entry point (or its TXT token at "
            "`_cdnaas.<hostname>`); `0` serves names as they are accepted", "so"),
    Setting("CDNAAS_HOSTNAME_RESOLVER", "text", None, "the resolver (`ip` or `ip:port`) SO "
            "looks customers' hostnames up through", "so",
            default_text="this machine's (`/etc/resolv.conf`)"),
    Setting("CDNAAS_HOSTNAME_CHECK_INTERVAL", "number", 30.0, "seconds between SO's looks at "
            "the custom hostnames still pending", "so"),
    Setting("CDNAAS_QUOTA_VCDNS", "integer", 100, "a tenant's vCDNs (not DELETED or FAILED), "
            "unless the operator set another default or the tenant's own quota", "so"),
    Setting("CDNAAS_QUOTA_VCPUS_PER_REGION", "integer", 1024, "vCPUs a tenant's vCDNs may "
            "reserve in any one region (likewise)", "so"),
    Setting("CDNAAS_QUOTA_HOSTNAMES", "integer", 64, "custom hostnames over a tenant's "
            "vCDNs (likewise)", "so"),
    Setting("CDNAAS_QUOTA_PURGES_PER_HOUR", "integer", 1000, "invalidations and prefetches a "
            "tenant may start in an hour (likewise)", "so"),
    # -- Resource Orchestrator and drivers --------------------------------------------------
    Setting("CDNAAS_VIM_DRIVER", "text", "local", "RO's VIM driver (entry point name: "
            "`local`, `openstack`, `noop`)", "ro"),
    Setting("CDNAAS_ZONE_PUBLISHER", "text", "local", "how RO delegates each vCDN's name in "
            "the operator's zone (`CDNAAS_DNS_DOMAIN`) to its DNS VNFs (entry point name: "
            "`local`, `designate`, `noop`)", "ro"),
    Setting("CDNAAS_ZONE_TTL", "integer", 60, "seconds resolvers keep a vCDN's NS and glue "
            "records (how long an old DNS VNF address may still be asked after a region "
            "change)", "ro"),
    Setting("CDNAAS_LOCAL_ZONE_PORT", "integer", 10053, "port (UDP and TCP, every address of "
            "this machine) of the operator zone's server the stack starts for the `local` "
            "publisher; a local region's clients reach it at their bridge's gateway", "ro"),
    Setting("CDNAAS_RO_WORKERS", "integer", 8, "threads of RO that run deployments", "ro"),
    Setting("CDNAAS_LOCAL_POOL", "text", "198.18.0.0/15", "where the local driver takes each "
            "region's /24", "ro"),
    Setting("CDNAAS_LOCAL_DRAIN_SECONDS", "number", 30.0, "how long the local driver lets a "
            "removed cache's connections finish", "ro"),
    Setting("CDNAAS_LOCAL_HOST_CPUS", "text", None, "hosts of the `local` driver as CPU sets "
            "of this machine (`eu-1=0;eu-2=1-3,6`): each VNF's cgroup is pinned to its "
            "planned host's set; a host not listed runs unpinned", "ro",
            default_text="`CDNAAS_POWER_LOCAL_CPUS`'s hosts, else none (unpinned)"),
    Setting("CDNAAS_CALIBRATION_ORIGIN_HOST", "text", "127.0.0.1", "the address of RO's "
            "machine as the VIM's servers reach it, where a calibration serves its sample "
            "origin (`openstack`: RO's address on the operator's management network)", "ro",
            default_text="`127.0.0.1` (the `local` driver's caches reach it)"),
    Setting("CDNAAS_LOCAL_LOG_ROTATE_MB", "number", 64.0, "size past which the local driver "
            "rotates a balancer's usage log once RO's reader has read it (it keeps one "
            "previous generation)", "ro"),
    Setting("CDNAAS_LOG_STREAM_QUEUE_RECORDS", "integer", 50000, "records a VNF's log "
            "shipper holds per log-stream destination while its collector does not take "
            "them; beyond, the oldest are dropped and counted", "ro"),
    Setting("CDNAAS_OS_CLOUD", "text", None, "the `clouds.yaml` entry of the `openstack` "
            "driver (else `OS_CLOUD`)", "openstack"),
    Setting("CDNAAS_OS_OWNER", "text", "cdnaas", "owner tag of everything this RO creates",
            "openstack"),
    Setting("CDNAAS_OS_POOL", "text", "10.200.0.0/16", "where each vCDN region's /24 comes "
            "from", "openstack"),
    Setting("CDNAAS_OS_NETWORK", "text", None, "an operator network used by every region "
            "instead of one network per vCDN and region", "openstack"),
    Setting("CDNAAS_OS_MANAGEMENT_CIDR", "list", [], "prefixes allowed to read the caches' "
            "status page on port 8081 (a `/0` is refused)", "openstack"),
    Setting("CDNAAS_OS_HOSTS", "list", [], "CDNaaS host = Nova compute host, where the "
            "names differ (`north-1=compute-17,north-2=compute-18`); a host not listed is "
            "the compute host of the same name", "openstack"),
    Setting("CDNAAS_OS_CREATE_FLAVORS", "flag", False, "`1`: create a flavor when none fits "
            "(admin role)", "openstack", default_text="`0`"),
    Setting("CDNAAS_OS_FLAVOR_DISK_GB", "integer", 4, "disk of the flavors it creates",
            "openstack"),
    Setting("CDNAAS_OS_BOOT_TIMEOUT", "number", 600.0, "seconds to wait for servers",
            "openstack"),
    Setting("CDNAAS_OS_LB_TIMEOUT", "number", 600.0, "seconds to wait for balancers",
            "openstack"),
    Setting("CDNAAS_OS_DELETE_TIMEOUT", "number", 300.0, "seconds to wait for deletions",
            "openstack"),
    Setting("CDNAAS_OS_DNS_TIMEOUT", "number", 180.0, "seconds a rebuilt DNS server has to "
            "answer before the vCDN's next one is rebuilt", "openstack"),
    Setting("CDNAAS_OS_GUEST_BOOT_SECONDS", "number", 180.0, "how long after its server's "
            "launch a cache's guest may not answer on its management port before its health "
            "says so (where RO reaches the management port)", "openstack"),
    Setting("CDNAAS_OS_POLL_INTERVAL", "number", 1.0, "how often the waits look (s)",
            "openstack"),
    Setting("CDNAAS_OS_BARBICAN_MAX_SECRET_BYTES", "integer", 20000, "the largest secret "
            "the cloud's Barbican keeps (its `max_allowed_secret_in_bytes`): a certificate "
            "part above it is refused (422) before anything is stored", "openstack"),
    Setting("CDNAAS_POWER_DRIVER", "text", "log", "RO's host power driver (entry point name: "
            "`log` records and logs, `noop`, `openstack`, `local`)", "ro"),
    Setting("CDNAAS_DESIGNATE_CLOUD", "text", None, "the `clouds.yaml` entry of the "
            "`designate` zone publisher: the operator's zone lives in its project", "ro",
            default_text="the VIM driver's cloud"),
    Setting("CDNAAS_DESIGNATE_TIMEOUT", "number", 120.0, "seconds the `designate` zone "
            "publisher waits for a change to be served by every DNS server of the zone's "
            "pool (ACTIVE)", "ro"),
    Setting("CDNAAS_POWER_OS_CLOUD", "text", None, "the `clouds.yaml` entry (admin) of the "
            "`openstack` power driver", "ro", default_text="the VIM driver's cloud"),
    Setting("CDNAAS_POWER_TIMEOUT", "number", 300.0, "seconds the `openstack` power driver "
            "waits for a bare-metal node to power on", "ro"),
    Setting("CDNAAS_POWER_LOCAL_CPUS", "list", [], "hosts as CPUs of this machine "
            "(`eu-1=2-3,6,eu-2=4`) for the `local` power driver, and for pinning unless "
            "`CDNAAS_LOCAL_HOST_CPUS` is set (then both read that); a host not listed is "
            "recorded only", "ro"),
    # -- Instance Manager -------------------------------------------------------------------
    Setting("CDNAAS_IM_INTERVAL", "number", 10.0, "seconds between IM reconcile passes (one "
            "control period)", "im"),
    Setting("CDNAAS_IM_RETENTION_HOURS", "number", 24.0, "how long IM keeps time-series "
            "points of every pass", "im"),
    Setting("CDNAAS_IM_HISTORY_DAYS", "number", 30.0, "how long IM keeps the history: a "
            "point per series and 10 minutes (means of the passes)", "im"),
    Setting("CDNAAS_IM_RETRY_SECONDS", "number", 60.0, "how long IM waits before asking SO "
            "again for a change SO refused", "im"),
    Setting("CDNAAS_IM_HEAL_LIMIT", "integer", 3, "heals the IM starts per vCDN region "
            "within an hour; past them it holds off and records it (a host that breaks every "
            "VNF needs an operator)", "im"),
    Setting("CDNAAS_IM_WORKERS", "integer", 8, "threads on which an IM pass reads its vCDNs "
            "(RO's counters, health and traffic) at once", "im"),
    Setting("CDNAAS_IM_HEADROOM_SHARE", "number", 0.12, "share of each region's demand kept "
            "spare on hosts that are on, for a rise met while a host boots", "im"),
    Setting("CDNAAS_IM_HEADROOM_VCPUS", "integer", 0, "spare vCPUs each region keeps awake "
            "at least (when set, at least its biggest cache)", "im"),
    Setting("CDNAAS_IM_WAKE_LEAD_SECONDS", "number", 600.0, "how early a marked host is woken "
            "for a lease that needs it", "im"),
    Setting("CDNAAS_IM_HOST_IDLE_PASSES", "integer", 12, "passes a host carries nothing and "
            "is not needed before the IM switches it off", "im"),
    Setting("CDNAAS_IM_HOST_BOOT_SECONDS", "number", 120.0, "how long a host takes from power "
            "on to taking VNFs: the IM wakes hosts this far ahead of a rising demand", "im"),
    Setting("CDNAAS_IM_POWER_DWELL_SECONDS", "number", 1800.0, "least time between two power "
            "changes of one host: one switched on is not switched off sooner, one switched "
            "off is woken sooner only when no other host of its region will do (0: no dwell)",
            "im"),
    Setting("CDNAAS_IM_USAGE_DAYS", "number", 400.0, "how long IM keeps each vCDN's usage "
            "per region and minute (traffic, viewer-, vCPU-hours, energy: the bills)", "im"),
    Setting("CDNAAS_IM_RAPL_DIR", "text", "/sys/class/powercap", "where RAPL counters are "
            "read", "im"),
    Setting("CDNAAS_IM_RAPL_HOST", "text", None, "which registered host the RAPL counters "
            "measure", "im", default_text="this machine's hostname"),
    # -- CLI --------------------------------------------------------------------------------
    Setting("CDNAAS_TOKEN", "text", None, "the CLI's API token", "cli"),
    Setting("CDNAAS_CONFIG", "text", None, "the CLI's settings file (token, API URL)", "cli",
            default_text="`~/.config/cdnaas/config.yaml`"),
)

BY_NAME = {setting.name: setting for setting in DECLARED}

#: each ``Setting.group``'s title in the configuration reference, in the order shown
GROUPS = {
    "deployment": "Deployment: where the services are, their state, keys and clock",
    "identity": "Identity and policy of the customer API",
    "origins": "Origins and models",
    "api": "Customer API",
    "so": "Service Orchestrator (SO)",
    "ro": "Resource Orchestrator (RO): VIM, zone and power drivers",
    "openstack": "The openstack VIM driver",
    "im": "Instance Manager (IM)",
    "cli": "Command line",
}


def get(name, environ=None):
    """The value of the declared setting ``name`` now, in ``environ`` (default:
    ``os.environ``).

    :raises KeyError: ``name`` is not declared (a programming error).
    """
    return BY_NAME[name].read(environ)


def markdown_table(group=None):
    """The configuration table (Markdown) of every setting, or of ``group``'s."""
    lines = ["| variable | default | meaning |", "|---|---|---|"]
    lines += [f"| `{s.name}` | {s.shown_default} | {s.help} |" for s in DECLARED
              if group in (None, s.group)]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":  # python -m cdnaas.common.settings: every setting, in a terminal
    sys.stdout.write(markdown_table())
