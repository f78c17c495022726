"""A rendered config's generation: a digest of the config as rendered, which the VNF reports
(an nginx management listener's :data:`.endpoints.GENERATION_PATH`, a dnsmasq's TXT record
of :data:`.endpoints.GENERATION_NAME`), so RO's health can tell which config a VNF runs."""
import hashlib
import re

#: What a template renders where the generation goes (the templates' ``generation``
#: value), in double quotes: no value can carry a quote, so only a template's slot
#: matches; :func:`stamp` fills it in.
SLOT = "generation pending"
_UNSTAMPED = f'"{SLOT}'
_GENERATION = re.compile(r'(?:^|")generation ([0-9a-f]{16})\b', re.MULTILINE)


def stamp(text: str) -> str:
    """``text``, a rendered config, with its generation filled in: the first 16 hex digits
    of the SHA-256 of the config as rendered, so a config always has the same generation
    and any change of it gives another. A config whose template has no generation slot
    (a flavor's own template that does not include the stock management pieces) is
    returned as it is."""
    if _UNSTAMPED not in text:
        return text
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]
    return text.replace(_UNSTAMPED, f'"generation {digest}')


def generation_of(text: str) -> str | None:
    """The generation in ``text``: a config :func:`stamp` filled in, or what a VNF reported;
    None when it has none."""
    match = _GENERATION.search(text)
    return match.group(1) if match else None
