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
    """The schema of the answer ``(document, method, path, status[, "field[]"])`` names."""
    name, method, path, status, *inner = spec
    document = f"{name}.yaml"
    response, document = _resolve(_document(document)["paths"][path][method]["responses"][status],
                                  document)
    schema, document = _resolve(response["content"]["application/json"]["schema"], document)
    for part in inner:
        schema, document = _resolve(schema["properties"][part.removesuffix("[]")], document)
        if part.endswith("[]"):
            schema, document = _resolve(schema["items"], document)
    return schema


@pytest.mark.parametrize("record", answers.RECORDS, ids=lambda r: r.__name__)
def test_record_matches_its_schema(record):
    schema = _schema(record.SPEC)
    properties, required = schema["properties"], set(schema.get("required", ()))
    for field in dataclasses.fields(record):
        if field.name == "body":
            continue
        assert field.name in properties, f"{record.__name__}.{field.name} is not in {record.SPEC}"
        if field.default is dataclasses.MISSING:
            assert field.name in required, \
                f"{record.__name__}.{field.name} is required but {record.SPEC} does not require it"


def test_from_json_builds_nested_records_and_keeps_the_body():
    sent = {"vcdn": {"id": "v1", "tenant": "acme", "revision": 3, "name": "x"},
            "operation": {"id": "o1", "vcdn_id": "v1", "type": "UPDATE", "state": "PENDING"}}
    accepted = answers.from_json(answers.Accepted, sent)
    assert accepted.vcdn.tenant == "acme" and accepted.operation.id == "o1"
    assert accepted.vcdn.body["name"] == "x" and accepted.body is sent
    with pytest.raises(dataclasses.FrozenInstanceError):
        accepted.vcdn.tenant = "globex"


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
