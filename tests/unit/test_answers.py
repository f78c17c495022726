"""The answer records of :mod:`cdnaas.common.answers` against ``api-spec/``: each field is a
property of the answer it models (required there when the record requires it), so a change
of the documents that breaks a record fails here; and :func:`from_json` builds them."""
import dataclasses
import pathlib

import pytest
import yaml

from cdnaas.common import answers, errors

SPEC = pathlib.Path(__file__).resolve().parents[2] / "api-spec"


def _document(name):
    return yaml.safe_load((SPEC / name).read_text())


def _resolve(node, document):
    """``node`` with its ``$ref`` followed (within ``document``, or into another file)."""
    while "$ref" in node:
        where, _, pointer = node["$ref"].partition("#")
        if where:
            document = where
        node = _document(document)
        for part in pointer.strip("/").split("/"):
            node = node[part]
    return node, document


def _schema(spec):
    """The schema of the answer ``(document, method, path, status[, part...])`` names: a
    part is a property (``"name"``), the items of an array property (``"name[]"``) or a
    branch of a ``oneOf`` (``"oneOf:N"``); an ``allOf`` is merged into one object."""
    name, method, path, status, *inner = spec
    document = f"{name}.yaml"
    response, document = _resolve(_document(document)["paths"][path][method]["responses"][status],
                                  document)
    schema, document = _merged(response["content"]["application/json"]["schema"], document)
    for part in inner:
        if part.startswith("oneOf:"):
            node = schema["oneOf"][int(part.removeprefix("oneOf:"))]
        else:
            node = schema["properties"][part.removesuffix("[]")]
        schema, document = _merged(node, document)
        if part.endswith("[]"):
            schema, document = _merged(schema["items"], document)
    return schema


def _merged(node, document):
    """``node`` resolved, its ``allOf`` branches merged: ``(schema, document)``."""
    schema, document = _resolve(node, document)
    if "allOf" not in schema:
        return schema, document
    properties, required = {}, []
    for branch in schema["allOf"]:
        part, _ = _merged(branch, document)
        properties.update(part.get("properties", {}))
        required += part.get("required", [])
    return {"type": "object", "properties": properties, "required": required}, document


@pytest.mark.parametrize("record", answers.RECORDS, ids=lambda r: r.__name__)
def test_record_matches_its_schema(record):
    _check(record, _schema(record.SPEC))


def _check(record, schema):
    """Assert each field of ``record`` is a property of ``schema``, required there when the
    record requires it."""
    properties, required = schema["properties"], set(schema.get("required", ()))
    for name, needed in answers.fields(record):
        if name == "body":
            continue
        assert name in properties, f"{record.__name__}.{name} is not in {record.SPEC}"
        if needed:
            assert name in required, \
                f"{record.__name__}.{name} is required but {record.SPEC} does not require it"


def test_from_json_builds_nested_records_and_keeps_the_body():
    sent = {"vcdn": {"id": "v1", "tenant": "acme", "revision": 3, "origin": "o.example"},
            "operation": {"id": "o1", "vcdn_id": "v1", "type": "UPDATE", "state": "PENDING"}}
    accepted = answers.from_json(answers.Accepted, sent)
    assert accepted.vcdn.tenant == "acme" and accepted.operation.id == "o1"
    assert accepted.vcdn.body["origin"] == "o.example" and accepted.body is sent
    with pytest.raises(dataclasses.FrozenInstanceError):
        accepted.operation.state = "DONE"
    with pytest.raises(AttributeError):  # a row is a tuple
        accepted.vcdn.tenant = "globex"
    assert "o.example" not in repr(accepted.vcdn)  # the body is left out


def test_from_json_builds_tuples_of_records_and_refuses_a_missing_field():
    vnf = {"name": "cache-1", "role": "cache", "region": "r1", "host": None, "address": "a",
           "vcpus": 2}
    deployment = {"id": "d", "driver": "noop", "status": "ACTIVE", "steps": [], "error": None,
                  "last_error": None, "sig_digest": None, "entry_point": None,
                  "region_endpoints": {}, "vnfs": [vnf]}
    built = answers.from_json(answers.Deployment, deployment)
    assert built.vnfs == (answers.DeployedVnf("cache-1", "cache", "r1", None, "a", 2),)
    with pytest.raises(errors.UpstreamError, match="status"):
        answers.from_json(answers.Deployment, {k: v for k, v in deployment.items() if k != "status"})
    with pytest.raises(errors.UpstreamError):
        answers.from_json(answers.Deployment, [])


def test_a_renamed_field_of_the_spec_fails_the_check():
    """A property renamed in the documents (RO's ``health`` of a reading) is caught."""
    schema = _schema(answers.Readings.SPEC)
    renamed = dict(schema, properties={("health_check" if k == "health" else k): v
                                       for k, v in schema["properties"].items()})
    with pytest.raises(AssertionError, match="Readings.health"):
        _check(answers.Readings, renamed)


def test_readings_build_rows_down_to_each_minute_and_an_error_reads_as_unread():
    vnf = {"name": "eu-cache-0", "role": "cache", "region": "eu"}
    sent = {"id": "d", "traffic_error": None,
            "health": {"healthy": False, "vnfs": [dict(vnf, healthy=False, detail="down")]},
            "metrics": {"id": "d", "vnfs": [dict(vnf, host="h1", vcpus=2, read_at=1.5,
                                                 active_connections=None, requests=7,
                                                 cpu_seconds=None)]},
            "traffic": {"id": "d", "cursor": "c2", "more": False, "regions": [
                {"region": "eu", "vnf": "eu-lb-0", "records": 1, "skipped": 0, "lost": False,
                 "minutes": [{"minute": "2026-01-01T00:00:00Z", "requests": 1, "bytes_out": 9,
                              "hits": 1, "misses": 0, "status": {"2xx": 1}}]}]}}
    built = answers.from_json(answers.Readings, sent)
    assert built.health.vnfs[0].lasting is False and built.health.vnfs[0].detail == "down"
    assert built.metrics.vnfs[0].requests == 7
    assert built.traffic.regions[0].minutes[0].bytes_out == 9
    assert answers.from_json(answers.Readings, dict(sent, traffic=None)).traffic is None
    unread = answers.from_json(answers.Unread, {"id": "d", "error": {"status": 404,
                                                                     "message": "gone"}})
    assert unread.error.message == "gone"
    with pytest.raises(errors.UpstreamError, match="cursor"):
        answers.from_json(answers.Readings, dict(sent, traffic={"id": "d", "more": False,
                                                                "regions": []}))
