"""The vCDN's response rules (field ``response_rules``): headers added to and removed from
the caches' answers, a CORS preset, custom error pages and compression.

Stored form (every key present)::

    {"add_headers": [{"name": "X-Frame-Options", "value": "DENY"}],
     "remove_headers": ["X-Powered-By"],
     "cors": None | {"allow_origins": "*" | ["https://app.example.com"],
                     "allow_methods": ["GET", "HEAD", "OPTIONS"], "max_age": 600},
     "error_pages": [{"status": 404, "body": "<html>...</html>"}],
     "compression": {"gzip": False, "brotli": False, "types": []}}

Added headers go on every answer (errors too); removed ones are the origin's, hidden
from viewers (names and values: :mod:`cdnaas.delivery.fields`). With ``cors`` every
answer says ``Access-Control-Allow-Origin`` (``*``, or the request's ``Origin`` when it
is listed, with ``Vary: Origin``), ``-Allow-Methods``, ``-Allow-Headers`` (any the
preflight asks for) and ``-Max-Age``; an ``OPTIONS`` request (a preflight) is answered
204 by the cache. An error page (403, 404, 500, 502, 503, 504; HTML, 64 KB for all together)
replaces the body of every answer of its status, the cache's and the origin's: the cache
serves it from a file under its prefix (:func:`files`), never from its config.
Compression (gzip, brotli: Debian ``libnginx-mod-http-brotli-filter``) applies to
answers of the listed MIME types (``text/html`` is always among gzip's).
"""
import re

from cdnaas.delivery import fields

FIELD = "response_rules"
ROLES = ("cache",)

MAX_HEADERS = 8
PAGE_STATUSES = (403, 404, 500, 502, 503, 504)
MAX_PAGE_BYTES = 64 * 1024
MAX_TYPES = 16
MAX_CORS_ORIGINS = 16
METHODS = ("GET", "HEAD", "OPTIONS")
#: where a cache keeps its error pages, under its prefix directory (``<status>.html``)
PAGES_DIR = "cdnaas-error-pages"
#: the brotli filter module (Debian ``libnginx-mod-http-brotli-filter``)
BROTLI_MODULE = "/usr/lib/nginx/modules/ngx_http_brotli_filter_module.so"
DEFAULT_COMPRESSION = {"gzip": False, "brotli": False, "types": []}
DEFAULTS = {"add_headers": [], "remove_headers": [], "cors": None, "error_pages": [],
            "compression": DEFAULT_COMPRESSION}
#: Headers the cache sets itself (besides :data:`fields.RESERVED`): not added nor removed.
_OWN = fields.RESERVED | {"x-cache-status", "x-served-by", "x-shield-cache-status",
                          "x-shield-served-by", "content-type", "vary"}
_MIME = re.compile(r"[a-z0-9][a-z0-9!#$&^_.+-]{0,63}/[a-z0-9][a-z0-9!#&^_.+-]{0,126}")
_CORS_ORIGIN = re.compile(r"https?://[a-z0-9.-]{1,253}(?::[0-9]{1,5})?")


def check(value, field):
    """``value`` checked into its stored form (module docstring); None: the defaults.

    :raises BadRequest: naming the first field refused and what to send.
    """
    fields.object_of(value, field, tuple(DEFAULTS))
    stored = {"add_headers": _added(value.get("add_headers", []), f"{field}.add_headers"),
              "remove_headers": _removed(value.get("remove_headers", []),
                                         f"{field}.remove_headers"),
              "cors": _cors(value.get("cors"), f"{field}.cors"),
              "error_pages": _pages(value.get("error_pages", []), f"{field}.error_pages"),
              "compression": _compression(value.get("compression", DEFAULT_COMPRESSION),
                                          f"{field}.compression")}
    return None if stored == DEFAULTS else stored


def _added(value, field):
    out, seen = [], set()
    for index, item in enumerate(fields.list_of(value, field, MAX_HEADERS)):
        where = f"{field}[{index}]"
        fields.object_of(item, where, ("name", "value"), required=("name", "value"))
        name = fields.name(item["name"], f"{where}.name", _OWN)
        if name.lower() in seen or name.lower().startswith("access-control-"):
            fields.bad(f"{where}.name", f"{name!r} is given twice or is a CORS header (set "
                                        "cors instead)")
        seen.add(name.lower())
        out.append({"name": name, "value": fields.value_text(item["value"], f"{where}.value")})
    return out


def _removed(value, field):
    names = [fields.name(n, f"{field}[{i}]", _OWN)
             for i, n in enumerate(fields.list_of(value, field, MAX_HEADERS))]
    return sorted(set(names), key=str.lower)


def _cors(value, field):
    if value is None:
        return None
    fields.object_of(value, field, ("allow_origins", "allow_methods", "max_age"),
                     required=("allow_origins",))
    origins = value["allow_origins"]
    if origins != "*":
        fields.list_of(origins, f"{field}.allow_origins", MAX_CORS_ORIGINS)
        if not origins:
            fields.bad(f"{field}.allow_origins", "must be \"*\" or a list of 1 to "
                                                 f"{MAX_CORS_ORIGINS} origins")
        for index, origin in enumerate(origins):
            if not isinstance(origin, str) or not _CORS_ORIGIN.fullmatch(origin):
                fields.bad(f"{field}.allow_origins[{index}]",
                           f"{origin!r} is not an origin like https://app.example.com "
                           "(lower case, no path)")
        origins = sorted(set(origins))
    methods = fields.list_of(value.get("allow_methods", list(METHODS)),
                             f"{field}.allow_methods", len(METHODS))
    for index, method in enumerate(methods):
        if method not in METHODS:
            fields.bad(f"{field}.allow_methods[{index}]",
                       f"{method!r} is not one of {', '.join(METHODS)}")
    return {"allow_origins": origins,
            "allow_methods": [m for m in METHODS if m in methods] or list(METHODS),
            "max_age": fields.integer(value.get("max_age", 600), f"{field}.max_age", 0, 86400)}


def _pages(value, field):
    out, seen = [], set()
    for index, item in enumerate(fields.list_of(value, field, len(PAGE_STATUSES))):
        where = f"{field}[{index}]"
        fields.object_of(item, where, ("status", "body"), required=("status", "body"))
        status = item["status"]
        if isinstance(status, bool) or status not in PAGE_STATUSES or status in seen:
            fields.bad(f"{where}.status", f"{status!r} is not one of "
                                          f"{', '.join(map(str, PAGE_STATUSES))} (once each)")
        seen.add(status)
        body = item["body"]
        if not isinstance(body, str) or not body or "\x00" in body \
                or len(body.encode("utf-8", "surrogatepass")) > MAX_PAGE_BYTES:
            fields.bad(f"{where}.body", f"must be HTML text of 1 byte to {MAX_PAGE_BYTES // 1024}"
                                        " KB (UTF-8, no NUL)")
        try:
            body.encode("utf-8")
        except UnicodeEncodeError:
            fields.bad(f"{where}.body", "is not UTF-8 text")
        out.append({"status": status, "body": body})
    if sum(len(page["body"].encode("utf-8")) for page in out) > MAX_PAGE_BYTES:
        fields.bad(field, f"has more than {MAX_PAGE_BYTES // 1024} KB of pages together; "
                          "make them smaller")
    return sorted(out, key=lambda page: page["status"])


def _compression(value, field):
    fields.object_of(value, field, tuple(DEFAULT_COMPRESSION))
    out = {}
    for key in ("gzip", "brotli"):
        out[key] = value.get(key, False)
        if not isinstance(out[key], bool):
            fields.bad(f"{field}.{key}", "must be true or false")
    types = fields.list_of(value.get("types", []), f"{field}.types", MAX_TYPES)
    for index, mime in enumerate(types):
        if not isinstance(mime, str) or not _MIME.fullmatch(mime):
            fields.bad(f"{field}.types[{index}]", f"{mime!r} is not a MIME type like "
                                                  "application/json (lower case type/subtype)")
    out["types"] = sorted(set(types))
    if (out["gzip"] or out["brotli"]) and not out["types"]:
        fields.bad(f"{field}.types", "is empty: name the MIME types to compress")
    return out


def view(stored):
    """The stored rules (the defaults when None)."""
    return stored or DEFAULTS


def render(stored):
    """What the cache templates get: ``{"add": [(name, value)], "remove": [names],
    "cors": None | {"origins": "*" | [..], "methods": "GET, HEAD", "max_age"},
    "pages": [(status, uri)], "pages_location", "gzip", "brotli", "types": "a/b c/d",
    "brotli_module": path or None}``."""
    stored = stored or DEFAULTS
    cors, compression = stored["cors"], stored["compression"]
    return {"add": [(h["name"], h["value"]) for h in stored["add_headers"]],
            "remove": list(stored["remove_headers"]),
            "cors": None if cors is None else {
                "origins": cors["allow_origins"], "methods": ", ".join(cors["allow_methods"]),
                "max_age": cors["max_age"]},
            "pages": [(p["status"], f"/{PAGES_DIR}/{p['status']}.html")
                      for p in stored["error_pages"]],
            "pages_location": f"/{PAGES_DIR}/", "pages_dir": PAGES_DIR,
            "gzip": compression["gzip"], "brotli": compression["brotli"],
            "types": " ".join(compression["types"]),
            "brotli_module": BROTLI_MODULE if compression["brotli"] else None}


def files(service) -> dict:
    """The files a cache needs for the response rules of a SIG's ``service`` (checked
    again): ``{path under its prefix directory: text}`` (the error pages).

    :raises BadRequest: the stored rules are refused.
    """
    stored = (service or {}).get(FIELD)
    if stored is None:
        return {}
    stored = check(stored, f"service.{FIELD}") or DEFAULTS
    return {f"{PAGES_DIR}/{p['status']}.html": p["body"] for p in stored["error_pages"]}
