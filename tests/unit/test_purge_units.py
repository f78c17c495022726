"""Purge and prefetch: the tests that start no process (the unit tier); the others, and what
the module covers, are in tests/system/test_purge.py."""
import pytest

from cdnaas.common import caching, errors

HOSTILE_PATHS = ["a", "/a b", "/a\nb", "/a\r\nHost: x", "/a\x00", "/a;b", "/a{b", "/$uri",
                 '/a"', "/a'", "/../etc/passwd", "/a/./b", "/a//b", "/é", "/%zz", "/a#b",
                 "/" + "a" * 1100, 7, None, ["/a"],
                 # escapes are decoded before the last checks (issue 26)
                 "/x%0a", "/x%0D%0AHost:%20y", "/x%00", "/x%7f", "/x%c2%85", "/%2e%2e/x",
                 "/a/%2E/b", "/a%2f..%2fb", "/a%2F%2Fb", "/x%ff", "/x?a=%0a", "/x?a=%00"]


# --- validation -------------------------------------------------------------------------

@pytest.mark.parametrize("path", HOSTILE_PATHS)
def test_hostile_paths_are_refused_naming_the_field(path):
    for check, body, field in ((caching.invalidation, {"paths": ["/ok", path]}, "paths[1]"),
                               (caching.invalidation, {"prefixes": [path]}, "prefixes[0]"),
                               (caching.prefetch, {"paths": [path]}, "paths[0]")):
        with pytest.raises(errors.BadRequest) as caught:
            check(body)
        assert caught.value.field == field


@pytest.mark.parametrize("body,field", [
    ({}, "paths"), ({"paths": [], "prefixes": []}, "paths"), ({"paths": "/a"}, "paths"),
    ({"paths": ["/a"] * 1001}, "paths"), ({"prefixes": ["/a"] * 101}, "prefixes"),
    ({"prefixes": ["/a?x=1"]}, "prefixes[0]"), ({"paths": ["/a"], "all": True}, "body.all"),
])
def test_bad_invalidations_are_refused(body, field):
    with pytest.raises(errors.BadRequest) as caught:
        caching.invalidation(body)
    assert caught.value.field == field


def test_good_requests_pass_once_each():
    assert caching.invalidation({"paths": ["/a?v=1&x=%22", "/a?v=1&x=%22", "/b%20c"]}) == \
        {"paths": ["/a?v=1&x=%22", "/b%20c"], "prefixes": []}
    assert caching.prefetch({"paths": ["/video/hd/seg-1.m4s"]}) == \
        {"paths": ["/video/hd/seg-1.m4s"]}
    # escapes of printable UTF-8 text pass and are kept as given; dots inside a name too
    escaped = ["/caf%C3%A9", "/a%2Eb/..c/x..", "/q?x=%3F%26&y=%2e%2e"]
    assert caching.prefetch({"paths": escaped}) == {"paths": escaped}


@pytest.mark.parametrize("path,words", [
    ("/x%0a", "control character U+000A"), ("/x%00", "control character U+0000"),
    ("/%2e%2e/x", ". or .. segment"), ("/a%2F%2Fb", "empty segment"), ("/x%ff", "UTF-8"),
])
def test_a_refusal_says_what_the_escapes_decode_to(path, words):
    with pytest.raises(errors.BadRequest) as caught:
        caching.invalidation({"paths": [path]})
    assert words in str(caught.value) and caught.value.field == "paths[0]"
