"""What a customer says about caching, checked into a narrow, known-safe form.

**Cache rules** (``cache_rules`` in a vCDN's create or PATCH body; SO stores them in
the instance and the SIG's ``service.cache_rules``; RO renders them into every cache's
nginx config, :func:`cdnaas.vnf.cache.cache_config`)::

    {"ttl": [{"match": "prefix" | "suffix" | "exact", "path": "/static/", "ttl": "1h"}],
     "default_ttl": "10m",
     "query_string": "include" | "ignore" | ["arg", ...],
     "origin_cache_control": "honour" | "ignore"}

- ``ttl``: at most :data:`MAX_RULES` rules, tried in order, the first whose ``path``
  matches the request's path (decoded, without its query string) gives its ``ttl``;
  paths of ``A-Z a-z 0-9 _ . / ~ -`` (prefix and exact ones start with ``/``), no ``..``;
- ``default_ttl``: the TTL of paths no rule matches (10m);
- TTLs are nginx times (``30s``, ``10m``, ``12h``, ``7d``) from 1 s to 365 days; with
  ``origin_cache_control`` ``honour`` (the default) they apply to answers the origin
  gives no lifetime (``Cache-Control``/``Expires`` decide the others, ``no-store``
  answers are not kept); with ``ignore`` they apply to every answer;
- ``query_string``: ``include`` (the default: ``/a?x=1`` and ``/a?x=2`` are two
  objects), ``ignore`` (one object), or a list of at most :data:`MAX_ARGS` argument
  names (``[A-Za-z0-9_]``) kept in the key, the others ignored.

:func:`cache_rules` fills the defaults; rules equal to the defaults are the stock
behaviour, and :func:`stored_rules` gives None for them (nothing stored, the SIG
unchanged).

**Invalidations and prefetches** (:func:`invalidation`, :func:`prefetch`): at most
:data:`MAX_PATHS` paths and :data:`MAX_PREFIXES` prefixes, each a request path of
``A-Z a-z 0-9 _ . ~ / -`` and ``%XX`` escapes, paths optionally with a query string of
the same characters and ``= &``. The escapes are decoded before the last checks: the
result must be UTF-8 text without control characters (``%0a``, ``%00``, ``%7f``...),
and the path must have no ``.`` or ``..`` segment and no ``//`` (``/%2e%2e/x`` and
``/a%2f%2fb`` are refused). They are sent, as given, as HTTP request targets to the
caches' management listeners, never written into a config.

Every pattern is applied to the whole string (``fullmatch``).
"""
import re
import unicodedata
from urllib.parse import unquote_to_bytes

from cdnaas.common import errors

MAX_RULES = 32
MAX_ARGS = 16
MAX_PATHS = 1000
MAX_PREFIXES = 100
MAX_PATH_LENGTH = 1024
MATCHES = ("prefix", "suffix", "exact")
DEFAULTS = {"ttl": [], "default_ttl": "10m", "query_string": "include",
            "origin_cache_control": "honour"}

_TIME = re.compile(r"([1-9][0-9]{0,5})([smhd])")
_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
MAX_TTL_SECONDS = 365 * 86400
_RULE_PATH = re.compile(r"[A-Za-z0-9_./~-]{1,256}")
_ARG = re.compile(r"[A-Za-z0-9_]{1,64}")
_ESCAPE = r"%[0-9A-Fa-f]{2}"
_REQUEST_PATH = re.compile(rf"/(?:[A-Za-z0-9_.~/-]|{_ESCAPE})*")
_QUERY = re.compile(rf"(?:[A-Za-z0-9_.~=&-]|{_ESCAPE})*")


def _bad(field, message):
    raise errors.BadRequest(f"{field} {message}", field=field)


def _object(value, field, keys):
    if not isinstance(value, dict):
        _bad(field, "must be an object")
    unknown = sorted(set(value) - set(keys), key=str)
    if unknown:
        _bad(f"{field}.{unknown[0]}", f"is not known; send only {', '.join(keys)}")
    return value


def ttl(value, field):
    """``value`` if it is an nginx time from 1 s to 365 days (``30s``, ``10m``, ``1h``, ``7d``)."""
    seconds(value, field)
    return value


def seconds(value, field) -> int:
    """The seconds of the nginx time ``value`` (``30s``, ``10m``, ``1h``, ``7d``: 1 s to
    365 days).

    :raises BadRequest: naming ``field``.
    """
    found = _TIME.fullmatch(value) if isinstance(value, str) else None
    if not found or int(found[1]) * _SECONDS[found[2]] > MAX_TTL_SECONDS:
        _bad(field, f"{value!r} is not a time like 30s, 10m, 12h or 7d (1 s to 365 days)")
    return int(found[1]) * _SECONDS[found[2]]


def rule_path(value, match, field):
    """``value`` if it is a rule's path pattern for ``match`` (``prefix``, ``suffix`` or
    ``exact``): 1 to 256 of ``A-Z a-z 0-9 _ . / ~ -``, starting with / but for a suffix.

    :raises BadRequest: naming ``field``.
    """
    if not isinstance(value, str) or not _RULE_PATH.fullmatch(value) \
            or ".." in value or (match != "suffix" and not value.startswith("/")):
        start = "" if match == "suffix" else ", starting with /"
        _bad(field, f"{value!r} is not a path pattern: 1 to 256 of A-Z a-z 0-9 _ . / ~ -"
                    f"{start}, without ..")
    return value


def _rule(value, field):
    _object(value, field, ("match", "path", "ttl"))
    for key in ("match", "path", "ttl"):
        if key not in value:
            _bad(f"{field}.{key}", "is missing")
    if value["match"] not in MATCHES:
        _bad(f"{field}.match", f"{value['match']!r} is not one of {', '.join(MATCHES)}")
    return {"match": value["match"],
            "path": rule_path(value["path"], value["match"], f"{field}.path"),
            "ttl": ttl(value["ttl"], f"{field}.ttl")}


def _query_string(value, field):
    if value in ("include", "ignore"):
        return value
    if not isinstance(value, list) or not value or len(value) > MAX_ARGS:
        _bad(field, f"must be include, ignore or a list of 1 to {MAX_ARGS} argument names "
                    "kept in the cache key")
    for index, name in enumerate(value):
        if not isinstance(name, str) or not _ARG.fullmatch(name):
            _bad(f"{field}[{index}]", f"{name!r} is not an argument name (1 to 64 of A-Z, "
                                      "a-z, 0-9, _)")
    return sorted(set(value))  # the key is the same whatever the request's order


def cache_rules(value, field="cache_rules") -> dict:
    """The rules in ``value`` (None: none) checked, with every default filled in.

    :raises BadRequest: naming the first field refused and what to send instead.
    """
    value = {} if value is None else value
    _object(value, field, tuple(DEFAULTS))
    rules = value.get("ttl", [])
    if not isinstance(rules, list) or len(rules) > MAX_RULES:
        _bad(f"{field}.ttl", f"must be a list of at most {MAX_RULES} rules")
    policy = value.get("origin_cache_control", DEFAULTS["origin_cache_control"])
    if policy not in ("honour", "ignore"):
        _bad(f"{field}.origin_cache_control", f"{policy!r} is not honour or ignore")
    return {"ttl": [_rule(rule, f"{field}.ttl[{i}]") for i, rule in enumerate(rules)],
            "default_ttl": ttl(value.get("default_ttl", DEFAULTS["default_ttl"]),
                               f"{field}.default_ttl"),
            "query_string": _query_string(value.get("query_string",
                                                    DEFAULTS["query_string"]),
                                          f"{field}.query_string"),
            "origin_cache_control": policy}


def stored_rules(value, field="cache_rules") -> dict | None:
    """:func:`cache_rules` of ``value``, or None when they are the defaults (stored as nothing)."""
    rules = cache_rules(value, field)
    return None if rules == DEFAULTS else rules


def with_rules(service, rules) -> dict:
    """A vCDN's ``service`` options with ``rules`` (:func:`stored_rules`; None: the
    defaults, left out) as its cache rules."""
    out = {k: v for k, v in (service or {}).items() if k != "cache_rules"}
    if rules:
        out["cache_rules"] = rules
    return out


def request_path(value, field, query=True) -> str:
    """``value`` if it is a request path (with a query string when ``query``) as the
    module docstring says: its characters, then what its ``%XX`` escapes decode to.

    :raises BadRequest: naming ``field``.
    """
    path, mark, args = value.partition("?") if isinstance(value, str) else ("", "", "")
    if (not isinstance(value, str) or len(value) > MAX_PATH_LENGTH
            or not _REQUEST_PATH.fullmatch(path) or (mark and not query)
            or not _QUERY.fullmatch(args)):
        with_query = " and an optional ?query of the same and = &" if query else ""
        _bad(field, f"{value!r} is not a path: / then A-Z a-z 0-9 _ . ~ / - and %XX "
                    f"escapes{with_query}, at most {MAX_PATH_LENGTH} characters")
    problem = _decoded_problem(path, is_path=True) or _decoded_problem(args, is_path=False)
    if problem:
        _bad(field, f"{value!r} {problem}; send the path as the viewers request it")
    return value


def _decoded_problem(text, is_path):
    """What is wrong with ``text`` once its ``%XX`` escapes are decoded (None: nothing):
    not UTF-8, a control character, or (``is_path``) a ``.``/``..`` segment or ``//``."""
    try:
        decoded = unquote_to_bytes(text).decode("utf-8")
    except UnicodeDecodeError:
        return "has escapes that do not decode to UTF-8 text"
    control = next((c for c in decoded if unicodedata.category(c) == "Cc"), None)
    if control is not None:
        return f"decodes to the control character U+{ord(control):04X}"
    parts = decoded.split("/")[1:]
    if is_path and any(part in (".", "..") for part in parts):
        return "has a . or .. segment (after decoding its escapes)"
    if is_path and "" in parts[:-1]:
        return "has an empty segment // (after decoding its escapes)"
    return None


def _paths(body, key, limit, query):
    paths = body.get(key, [])
    if not isinstance(paths, list) or len(paths) > limit:
        _bad(key, f"must be a list of at most {limit} paths")
    return list(dict.fromkeys(request_path(p, f"{key}[{i}]", query)
                              for i, p in enumerate(paths)))


def invalidation(body) -> dict:
    """``{"paths": [...], "prefixes": [...]}`` checked (duplicates dropped); at least one.

    :raises BadRequest: naming the first field refused.
    """
    _object(body, "body", ("paths", "prefixes"))
    checked = {"paths": _paths(body, "paths", MAX_PATHS, True),
               "prefixes": _paths(body, "prefixes", MAX_PREFIXES, False)}
    if not checked["paths"] and not checked["prefixes"]:
        _bad("paths", "and prefixes are both empty; send a path or a prefix to purge")
    return checked


def prefetch(body) -> dict:
    """``{"paths": [...]}`` checked (duplicates dropped); at least one path.

    :raises BadRequest: naming the first field refused.
    """
    _object(body, "body", ("paths",))
    checked = {"paths": _paths(body, "paths", MAX_PATHS, True)}
    if not checked["paths"]:
        _bad("paths", "is empty; send the paths every cache should fetch")
    return checked
