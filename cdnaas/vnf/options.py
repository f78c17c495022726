"""The vCDN's service options (a SIG's ``service``: cache rules, slices, delivery options,
access control, ACME, origins) checked again as a VNF's config renders them, and put in
nginx's terms. The customer API checked them first; a stored value that no longer passes
raises :class:`~.fields.ConfigError`, naming it."""
import dataclasses
import re

from cdnaas import delivery
from cdnaas.common import caching, challenges, errors, slicing
from cdnaas.delivery import access, origins, responses
from cdnaas.vnf import fields
from cdnaas.vnf.fields import ConfigError


def _checked_again(check, *args):
    """``check(*args)``, a customer-facing check of the service options; its refusal
    (:class:`~cdnaas.common.errors.BadRequest`) is the config's :class:`ConfigError`."""
    try:
        return check(*args)
    except errors.BadRequest as exc:
        raise ConfigError(exc.message) from None


@dataclasses.dataclass(frozen=True)
class CacheRules:
    """A vCDN's cache rules (:mod:`cdnaas.common.caching`) as a cache's template renders
    them (:func:`nginx_cache_rules`).

    :param locations: per TTL rule, in the customer's order, ``(regex, ttl, rule)``: a
        regular-expression location (nginx tries them in order, the first match wins,
        as the rules say) keeping answers ``ttl``; ``rule`` describes it for a comment.
    :param default_ttl: what ``location /`` keeps answers for.
    :param key: the ``proxy_cache_key`` (and purge key) expression: ``$uri`` (the
        decoded path) with the query string, without it, or with the listed arguments.
    :param ignore_cache_control: ``proxy_ignore_headers Cache-Control Expires``.
    """

    locations: tuple
    default_ttl: str
    key: str
    ignore_cache_control: bool


def nginx_cache_rules(rules: dict | None, paths: list = (), signed: bool = False) -> CacheRules:
    """``rules`` (a SIG's ``service.cache_rules``; None: the defaults) checked again
    (:func:`cdnaas.common.caching.cache_rules`) and put in nginx's terms; the ``paths``
    of the vCDN's origins (:func:`cdnaas.delivery.origins.render`) that set a ``ttl`` come
    first, as prefix rules.

    :param signed: the vCDN signs URLs (:mod:`cdnaas.delivery.access`): a key with the
        whole query string leaves a signed URL's token out (``$cdnaas_key_args``,
        ``nginx-cache-access.conf.j2``).

    :raises ConfigError: a rule is refused (named, with the reason).
    """
    rules = _checked_again(caching.cache_rules, rules)
    prefix_rules = [{"match": "prefix", "path": p["prefix"], "ttl": p["ttl"]}
                    for p in paths if p["ttl"] is not None]
    prefixed = [_checked_again(caching.cache_rules, {"ttl": [rule]})["ttl"][0]
                for rule in prefix_rules]
    locations = []
    for rule in prefixed + rules["ttl"]:
        literal = rule["path"].replace(".", r"\.")  # the only regex character paths allow
        regex = {"prefix": f"^{literal}", "suffix": f"{literal}$",
                 "exact": f"^{literal}$"}[rule["match"]]
        locations.append((regex, rule["ttl"], f"{rule['match']} {rule['path']}"))
    query = rules["query_string"]
    if query == "include":
        key = "$uri$cdnaas_key_args" if fields.boolean("signed", signed) else "$uri$is_args$args"
    elif query == "ignore":
        key = "$uri"
    else:
        key = '"$uri?' + "&".join(f"{name}=$arg_{name}" for name in query) + '"'
    return CacheRules(locations=tuple(locations), default_ttl=rules["default_ttl"], key=key,
                      ignore_cache_control=rules["origin_cache_control"] == "ignore")


def keyed_by_slice(key: str, variable: str) -> str:
    """The cache key ``key`` (a :class:`CacheRules` key) of one slice of an object, the
    slice's range given by the nginx ``variable`` (:data:`.endpoints.SLICE_RANGE_VARIABLE` where the
    cache fetches, the purge header where it purges): always last and always
    ``bytes=N-M``, so no two objects' slices share a key; empty, the object's whole key
    (``key``'s value)."""
    if not re.fullmatch(r"\$[a-z_]{1,64}", variable):
        fields.refuse("slice variable", variable, "is not an nginx variable like $slice_range")
    return f'"{key.strip(chr(34))}{variable}"'


def nginx_slice_size(value) -> str:
    """``value`` (a SIG's ``service.slice_size``; None: :data:`cdnaas.common.slicing.DEFAULT`)
    checked again (:func:`cdnaas.common.slicing.slice_bytes`).

    :raises ConfigError: it is refused (named, with the reason).
    """
    value = slicing.DEFAULT if value is None else value
    _checked_again(slicing.slice_bytes, value)
    return value


def delivery_values(service: dict | None, role: str | None = None) -> dict:
    """The vCDN's delivery options (a SIG's ``service``; :mod:`cdnaas.delivery`) checked
    again and put in the templates' terms: one variable per option (those the configs of
    ``role`` render; None: every one).

    :raises ConfigError: an option is refused (named, with the reason).
    """
    return _checked_again(delivery.template_values, service, role)


def cache_files(service: dict | None) -> dict:
    """The files a cache's config refers to beside it, for the SIG's ``service`` (its
    delivery options, checked again): ``{path relative to the prefix directory: text}``
    (the error pages of :mod:`cdnaas.delivery.responses`). nginx reads them per request:
    a changed file needs no reload.

    :raises ConfigError: an option is refused (named, with the reason).
    """
    return _checked_again(responses.files, service)


def acme_thumbprint(service) -> str | None:
    """The ACME account thumbprint a cache of a SIG with this ``service`` answers
    challenges with (:mod:`cdnaas.common.challenges`), checked again; None: none."""
    return _checked_again(challenges.thumbprint_of, service)


def fetched(field, origin, address) -> dict:
    """How a cache reaches ``origin`` at ``address``: ``{"scheme", "server"
    (address:port), "host_header", "sni"}``."""
    ip = fields.address(f"{field}_address", address)
    scheme, host, port = fields.origin(origin)
    return {"scheme": scheme, "server": fields.host_port(ip, port),
            "host_header": fields.host_header(scheme, host, port), "sni": host}


def secondary_fetched(service, address) -> dict | None:
    """How the fetch server reaches the secondary origin of ``service`` at ``address``
    (None: the vCDN has none)."""
    secondary = _checked_again(origins.secondary_origin, service)
    if secondary is None:
        return None
    if address is None:
        fields.refuse("secondary_address", address, "is missing: the vCDN has a secondary origin "
                                              f"({secondary.url}); resolve its host")
    return fetched("secondary", secondary, address)


def access_files(service: dict | None) -> list:
    """The files a cache of a SIG with this ``service`` reads for its access control
    (:func:`cdnaas.delivery.access.vnf_files`: ``[(name, text, mode)]`` under its prefix).

    :raises ConfigError: the stored option is refused or a key cannot be opened.
    """
    return _checked_again(access.vnf_files, service)
