"""The vCDN's origins (field ``origins``): a secondary origin the fetch fails over to,
origins and lifetimes per path prefix, headers sent to the origin and the ``Host`` it is
asked for.

The vCDN's ``origin`` stays the primary. Stored form (every key present)::

    {"secondary": "https://backup.example.com" | None,
     "failover": {"statuses": [502, 503], "connect_timeout": 5, "read_timeout": 30},
     "paths": [{"prefix": "/live/", "origin": "primary" | "secondary", "ttl": "1m" | None}],
     "headers": [{"name": "X-Origin-Auth", "value": "...", "secret": True}],
     "host": "www.example.com" | None}

A fetch goes to the path's origin (the primary unless a prefix says otherwise) and,
where the vCDN has a secondary, to the other one when it cannot connect within
``connect_timeout`` seconds, gets no answer within ``read_timeout`` seconds, or answers one
of ``statuses``. nginx reports connect errors and timeouts as 502 and 504, so an origin's
own 502 or 504 also fails over. The secondary is checked as the primary is
(:func:`cdnaas.common.origin_policy.accepted_origin`: the operator's origin policy,
:mod:`cdnaas.common.origin_policy`). A prefix's ``ttl`` keeps its answers that long (a
cache rule placed before the vCDN's own, :mod:`cdnaas.common.caching`). Headers go to
whichever origin is asked; a ``secret`` one is shown back as ``****`` (send its value
again to change the list). ``host`` replaces the origin's name in the ``Host`` header (the
TLS name stays the origin's).

The secret is kept as the other service fields are (in SO's and RO's databases), not
encrypted apart.
"""
from cdnaas.common import caching, origin_policy, validation
from cdnaas.delivery import fields

FIELD = "origins"
ROLES = ("cache",)

#: Origin answers a fetch may fail over on (connect errors and timeouts always do).
STATUSES = (403, 404, 500, 502, 503, 504)
MAX_PATHS = 16
MAX_HEADERS = 8
MASK = "****"
DEFAULT_FAILOVER = {"statuses": [], "connect_timeout": 5, "read_timeout": 30}
DEFAULTS = {"secondary": None, "failover": DEFAULT_FAILOVER, "paths": [], "headers": [],
            "host": None}
_KEYS = tuple(DEFAULTS)


def check(value, field):
    """``value`` checked into its stored form (module docstring); None: the defaults.

    :raises BadRequest: naming the first field refused and what to send.
    """
    fields.object_of(value, field, _KEYS)
    secondary = value.get("secondary")
    if secondary is not None:
        secondary = origin_policy.accepted_origin(secondary, f"{field}.secondary").url
    stored = {"secondary": secondary,
              "failover": _failover(value.get("failover", DEFAULT_FAILOVER), f"{field}.failover",
                                secondary is not None),
              "paths": _paths(value.get("paths", []), f"{field}.paths", secondary),
              "headers": _headers(value.get("headers", []), f"{field}.headers"),
              "host": _host(value.get("host"), f"{field}.host")}
    return None if stored == DEFAULTS else stored


def _failover(value, field, has_secondary):
    fields.object_of(value, field, tuple(DEFAULT_FAILOVER))
    statuses = fields.list_of(value.get("statuses", []), f"{field}.statuses", len(STATUSES))
    if statuses and not has_secondary:
        fields.bad(f"{field}.statuses", "needs a secondary origin to fail over to; set "
                                        "secondary too")
    for index, status in enumerate(statuses):
        if status not in STATUSES or isinstance(status, bool):
            fields.bad(f"{field}.statuses[{index}]",
                       f"{status!r} is not one of {', '.join(map(str, STATUSES))}")
    return {"statuses": sorted(set(statuses)),
            "connect_timeout": fields.integer(value.get("connect_timeout", 5),
                                              f"{field}.connect_timeout", 1, 10),
            "read_timeout": fields.integer(value.get("read_timeout", 30),
                                           f"{field}.read_timeout", 1, 60)}


def _paths(value, field, secondary):
    out, seen = [], set()
    for index, item in enumerate(fields.list_of(value, field, MAX_PATHS)):
        where = f"{field}[{index}]"
        fields.object_of(item, where, ("prefix", "origin", "ttl"), required=("prefix",))
        prefix = caching.rule_path(item["prefix"], "prefix", f"{where}.prefix")
        if prefix in seen:
            fields.bad(f"{where}.prefix", f"{prefix!r} is given twice")
        seen.add(prefix)
        origin = item.get("origin", "primary")
        if origin not in ("primary", "secondary"):
            fields.bad(f"{where}.origin", f"{origin!r} is not primary or secondary")
        if origin == "secondary" and secondary is None:
            fields.bad(f"{where}.origin", "is secondary but no secondary origin is given; "
                                          "set secondary too")
        ttl = item.get("ttl")
        out.append({"prefix": prefix, "origin": origin,
                    "ttl": None if ttl is None else caching.ttl(ttl, f"{where}.ttl")})
    return out


def _headers(value, field):
    out, seen = [], set()
    for index, item in enumerate(fields.list_of(value, field, MAX_HEADERS)):
        where = f"{field}[{index}]"
        fields.object_of(item, where, ("name", "value", "secret"), required=("name", "value"))
        name = fields.name(item["name"], f"{where}.name")
        if name.lower() in seen:
            fields.bad(f"{where}.name", f"{name!r} is given twice")
        seen.add(name.lower())
        secret = item.get("secret", False)
        if not isinstance(secret, bool):
            fields.bad(f"{where}.secret", "must be true or false")
        text = fields.value_text(item["value"], f"{where}.value")
        if secret and text == MASK:
            fields.bad(f"{where}.value", "is the mask the view shows; send the secret's value")
        out.append({"name": name, "value": text, "secret": secret})
    if sum(h["secret"] for h in out) > 1:
        fields.bad(field, "has more than one secret header; mark one only")
    return out


def _host(value, field):
    if value is None:
        return None
    if not isinstance(value, str) or len(value) > validation.MAX_HOSTNAME \
            or not validation.HOSTNAME.fullmatch(value):
        fields.bad(field, f"{value!r} is not a host name (lower-case labels of a-z, 0-9 "
                          "and -, like www.example.com)")
    return value


def view(stored):
    """The stored origins (the defaults when None), secret header values masked."""
    shown = dict(stored or DEFAULTS)
    shown["headers"] = [{**h, "value": MASK} if h["secret"] else h for h in shown["headers"]]
    return shown


def secondary_origin(service):
    """The secondary :class:`~cdnaas.common.sig.Origin` of a SIG's ``service`` (None:
    none), for a VIM driver to resolve (the policy was applied when it was accepted)."""
    url = ((service or {}).get(FIELD) or {}).get("secondary")
    return None if url is None else validation.parse_origin(url, f"service.{FIELD}.secondary")


def render(stored):
    """What the cache templates get: ``{"fetch": whether a fetch server is needed (any
    origin setting but lifetimes), "statuses" (those failing over, connect errors' 502 and
    timeouts' 504 among them), "connect_timeout", "read_timeout" (nginx
    times), "cache_read_timeout" (what a cache waits for the whole fetch, failover
    included), "paths": [{prefix, origin, ttl}], "headers": [(name, value)], "host"}``."""
    stored = stored or DEFAULTS
    failover = stored["failover"]
    fetch = (stored["secondary"] is not None or bool(stored["headers"])
             or stored["host"] is not None or failover != DEFAULT_FAILOVER)
    budget = 2 * (failover["connect_timeout"] + failover["read_timeout"])
    return {"fetch": fetch,
            "statuses": " ".join(map(str, sorted({502, 504, *failover["statuses"]}))),
            "connect_timeout": f"{failover['connect_timeout']}s",
            "read_timeout": f"{failover['read_timeout']}s",
            "cache_read_timeout": f"{budget + 5}s" if fetch else "30s",
            "paths": [dict(p) for p in stored["paths"]],
            "headers": [(h["name"], h["value"]) for h in stored["headers"]],
            "host": stored["host"]}
