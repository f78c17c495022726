"""The sample origin: the tests that start no process (the unit tier); the others, and what the
module covers, are in tests/service/test_origin.py."""


from cdnaas.origin import server as origin


def test_objects_differ_by_path():
    assert origin.object_bytes("/video/hd/seg-1.m4s", 1000) != \
        origin.object_bytes("/video/hd/seg-2.m4s", 1000)
