"""Entity tags of vCDNs and ``If-Match`` preconditions (RFC 9110, sections 8.8.3 and 13.1.1).

A vCDN's entity tag is its revision (``Instance.revision``), which every accepted
change bumps, sent strong: ``"7"`` (a revision names one exact representation).
``If-Match`` compares strongly (RFC 9110, section 13.1.1), so a weak tag (``W/"7"``)
never matches; ``*`` matches any vCDN that exists. A weak tag of the current revision
(a proxy may weaken the ETag it passes on) gets a 412 that says so and which tag to
send, not one saying the vCDN changed.
"""
import re

from cdnaas.common import errors

#: one entity tag of an If-Match list: optionally weak, then a quoted opaque tag
_TAG = r'(W/)?"([\x21\x23-\x7e]*)"'
_LIST = re.compile(rf"[ \t]*{_TAG}(?:[ \t]*,[ \t]*{_TAG})*[ \t]*")
MAX_HEADER = 1024


def etag(revision):
    """The ``ETag`` header value of ``revision``."""
    return f'"{int(revision)}"'


def check_if_match(header, revision):
    """Raise unless the ``If-Match`` header ``header`` (None: absent) matches ``revision``.

    :raises BadRequest: the header is not ``*`` or a list of entity tags.
    :raises PreconditionFailed: no tag in it is the current one (a weak one of the
        current revision is told apart).
    """
    if header is None:
        return
    text = header.strip()
    if text == "*":
        return
    tags = _parse(text)
    current = str(int(revision))
    if any(not weak and tag == current for weak, tag in tags):
        return
    if any(weak and tag == current for weak, tag in tags):
        raise errors.PreconditionFailed(
            f"If-Match compares entity tags strongly (RFC 9110, section 13.1.1), so the weak "
            f"tag W/{etag(revision)} never matches; send the ETag exactly as the API gave it, "
            f"{etag(revision)} (without W/: something between you and the API weakened it)",
            field="If-Match")
    raise errors.PreconditionFailed(
        f"the vCDN changed since you read it (its ETag is now {etag(revision)}, you sent "
        f"{text[:80]}); GET it again, check the change still makes sense, and send that "
        "ETag in If-Match", field="If-Match")


def _parse(text):
    """``[(weak, opaque tag)]`` of a comma-separated list of entity tags."""
    if not text or len(text) > MAX_HEADER:
        raise errors.BadRequest(f"If-Match must be * or a list of at most {MAX_HEADER} "
                                'characters of entity tags like "3" (the ETag of a GET)',
                                field="If-Match")
    if not _LIST.fullmatch(text):
        raise errors.BadRequest('If-Match must be * or entity tags like "3" (the ETag a GET '
                                f"answered), comma-separated; got {text[:80]!r}",
                                field="If-Match")
    return [(bool(weak), tag) for weak, tag in re.findall(_TAG, text)]
