"""HTTPS policy (``https_policy``): how a vCDN with a certificate treats plain HTTP, which
TLS versions and names its balancers' handshakes take, and the HSTS header it sends::

    {"http": "allow" | "redirect" | "refuse",
     "hsts": {"max_age": 31536000, "include_subdomains": false, "preload": false} | null,
     "min_tls_version": "1.2" | "1.3",
     "unknown_sni": "refuse" | "serve"}

- ``http``: ``allow`` (the default) serves plain HTTP as HTTPS; ``redirect`` answers it
  301 to ``https://<Host><path and query>`` (308 for methods other than GET and HEAD, so
  a client keeps its method and body); ``refuse`` answers it 403. Both need the vCDN to
  serve HTTPS (:func:`check_served`);
- ``hsts``: ``Strict-Transport-Security`` on every HTTPS answer (never on plain HTTP):
  ``max_age`` seconds (0 to :data:`MAX_HSTS_AGE`, two years; 0 tells browsers to forget
  it), ``includeSubDomains``, ``preload`` (only with a max_age of a year or more and
  include_subdomains, as browsers' preload lists ask); null (the default): no header;
- ``min_tls_version``: the oldest TLS version a handshake may use (1.2 by default);
- ``unknown_sni``: ``refuse`` (the default) fails the handshake of a client that names
  (SNI) no name the vCDN serves, or names none (a client connecting by address);
  ``serve`` gives it the vCDN's certificate, as before this option.

The balancers (the role that ends TLS) render it: ``nginx-lb-https-policy.conf.j2`` on
the local driver, the HTTPS listener and L7 policies of Octavia on OpenStack
(:mod:`cdnaas.ro.vim.openstack.https`).
"""
from cdnaas.common import errors
from cdnaas.delivery import fields

FIELD = "https_policy"
ROLES = ("load_balancer",)

HTTP_MODES = ("allow", "redirect", "refuse")
TLS_VERSIONS = ("1.2", "1.3")
SNI_MODES = ("refuse", "serve")
MAX_HSTS_AGE = 63072000  # two years
PRELOAD_MIN_AGE = 31536000  # a year: the least browsers' preload lists take
DEFAULTS = {"http": "allow", "hsts": None, "min_tls_version": "1.2", "unknown_sni": "refuse"}
HSTS_DEFAULTS = {"include_subdomains": False, "preload": False}


def _one_of(value, field, allowed):
    if not isinstance(value, str) or value not in allowed:
        fields.bad(field, f"must be one of {', '.join(allowed)}")
    return value


def _flag(value, field):
    if not isinstance(value, bool):
        fields.bad(field, "must be true or false")
    return value


def _hsts(value, field):
    fields.object_of(value, field, ("max_age", "include_subdomains", "preload"))
    if "max_age" not in value:
        fields.bad(f"{field}.max_age", f"is required: seconds browsers keep to HTTPS (0 to "
                                 f"{MAX_HSTS_AGE}; a year is {PRELOAD_MIN_AGE})")
    age = value["max_age"]
    if isinstance(age, bool) or not isinstance(age, int) or not 0 <= age <= MAX_HSTS_AGE:
        fields.bad(f"{field}.max_age", f"must be an integer of seconds from 0 to {MAX_HSTS_AGE}")
    out = {"max_age": age, **{k: _flag(value.get(k, d), f"{field}.{k}")
                              for k, d in HSTS_DEFAULTS.items()}}
    if out["preload"] and (age < PRELOAD_MIN_AGE or not out["include_subdomains"]):
        fields.bad(f"{field}.preload", f"needs max_age of at least {PRELOAD_MIN_AGE} (a year) and "
                                 "include_subdomains true, as browsers' preload lists ask")
    return out


def check(value, field) -> dict | None:
    """``value`` checked into its stored form (every key, defaults filled in), or None
    when it asks for the defaults.

    :raises BadRequest: naming the first field refused (``<field>.http``...) and what to
        send instead.
    """
    fields.object_of(value, field, tuple(DEFAULTS))
    out = {"http": _one_of(value.get("http", "allow"), f"{field}.http", HTTP_MODES),
           "hsts": None if value.get("hsts") is None else _hsts(value["hsts"], f"{field}.hsts"),
           "min_tls_version": _one_of(value.get("min_tls_version", "1.2"),
                                      f"{field}.min_tls_version", TLS_VERSIONS),
           "unknown_sni": _one_of(value.get("unknown_sni", "refuse"), f"{field}.unknown_sni",
                                  SNI_MODES)}
    return None if out == DEFAULTS else out


def view(stored) -> dict:
    """The policy as the vCDN's view shows it (``stored`` None: the defaults)."""
    return dict(stored or DEFAULTS)


def hsts_header(hsts) -> str | None:
    """The ``Strict-Transport-Security`` value of a stored ``hsts`` (None: no header)."""
    if hsts is None:
        return None
    return "; ".join([f"max-age={int(hsts['max_age'])}"]
                     + ["includeSubDomains"] * bool(hsts["include_subdomains"])
                     + ["preload"] * bool(hsts["preload"]))


def render(stored) -> dict:
    """What the balancer templates get as ``https_policy`` (``stored`` None: the defaults):
    ``{"http": allow|redirect|refuse, "hsts": header value or None, "protocols": nginx's
    ssl_protocols, "reject_unknown_sni": bool}``."""
    policy = stored or DEFAULTS
    return {"http": policy["http"], "hsts": hsts_header(policy["hsts"]),
            "protocols": " ".join(f"TLSv{v}" for v in TLS_VERSIONS
                                  if float(v) >= float(policy["min_tls_version"])),
            "reject_unknown_sni": policy["unknown_sni"] == "refuse"}


def check_served(stored, serves_https, field=FIELD) -> None:
    """Refuse a policy that needs HTTPS (``http`` redirect or refuse) for a vCDN that
    serves none (no certificate).

    :param field: what to name: the policy's field where the request set it, else the
        certificate the request removes.
    :raises Unprocessable: naming ``field`` (``https_policy.http`` or ``certificate``).
    """
    mode = (stored or DEFAULTS)["http"]
    if mode != "allow" and not serves_https:
        named = f"{field}.http" if field == FIELD else field
        raise errors.Unprocessable(
            f"{named}: https_policy.http {mode} needs HTTPS, and the vCDN would serve none "
            "(no certificate): send a certificate, or set https_policy.http to allow",
            field=named)
