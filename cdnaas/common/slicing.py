"""The slice size of a flavor's caches: how large the pieces are that a cache fetches
from its origin and keeps (nginx's ``slice`` module), so a range of a large object costs
the origin one slice, not the whole object.

A flavor's service template may say ``slice_size`` (``api-spec/service-template.schema.json``):
an nginx size of ``k`` or ``m`` from :data:`MIN_BYTES` to :data:`MAX_BYTES`; without it
:data:`DEFAULT`. SIDR checks it when the template is registered, SO copies it into the
SIG's ``service.slice_size`` when it plans a vCDN of the flavor, RO checks it again when
it renders a cache's config (:func:`cdnaas.vnf.cache.cache_config`).
"""
import re

from cdnaas.common import errors

#: the slice size of a flavor whose template says none
DEFAULT = "1m"
MIN_BYTES = 512 << 10
MAX_BYTES = 64 << 20
_UNITS = {"k": 1 << 10, "m": 1 << 20}
_SIZE = re.compile(r"([1-9][0-9]{0,5})([km])")


def slice_bytes(value, field="slice_size") -> int:
    """The bytes of slice size ``value`` (an nginx size like ``512k``, ``1m``, ``64m``).

    :raises BadRequest: naming ``field``: not such a size, or outside 512k..64m.
    """
    found = _SIZE.fullmatch(value) if isinstance(value, str) else None
    size = int(found[1]) * _UNITS[found[2]] if found else 0
    if not MIN_BYTES <= size <= MAX_BYTES:
        raise errors.BadRequest(f"{field} {value!r} is not a size like 512k, 1m or 64m "
                                "(k or m, from 512k to 64m)", field=field)
    return size
