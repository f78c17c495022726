"""Run-time request validation against a service's OpenAPI document.

The document under ``api-spec/`` is the one source of truth: openapi-core
checks every request against it before a view runs, and its findings are
turned into one 400 answer that lists every problem and names each field.

A document whose root says ``x-strict-query: true`` (the customer API's) also has
every query parameter a route does not declare, and every parameter sent more than
once, refused: openapi-core itself lets both through, and a view reading the first
value would silently ignore what the client meant (``?sort=name``, ``?limit=1&limit=9``).

Each route's checks are compiled once, at its first request (:class:`_Operation`): its
parameters' and body's schemas as jsonschema validators made by openapi-core's own
factory (the same validator classes and format checkers). A request they find valid is
valid; anything else (a finding, or a form the compiled checks do not read: a parameter
that is not a plain string or integer, a body that is not JSON...) is validated again by
openapi-core from the document, whose findings the 400 lists. openapi-core built every
schema's validator again for every request (about 2 ms of CPU a request in each service).
"""
import functools
import logging
import re
import threading

import yaml
from flask import request
from openapi_core import OpenAPI
from openapi_core.contrib.flask import FlaskOpenAPIRequest
from openapi_core.templating.paths.exceptions import OperationNotFound, PathNotFound
from openapi_core.validation.request.exceptions import (
    MissingRequestBody, MissingRequiredParameter, ParameterValidationError,
    RequestBodyValidationError, SecurityValidationError)
from openapi_core.validation.schemas.exceptions import InvalidSchemaValue

from cdnaas.common import errors

LOG = logging.getLogger(__name__)


class RequestValidator:
    """Validates Flask requests against the OpenAPI document at ``spec_path``."""

    def __init__(self, spec_path):
        with open(spec_path, encoding="utf-8") as handle:
            self.document = yaml.safe_load(handle)
        self.openapi = OpenAPI.from_file_path(str(spec_path))  # resolves $refs to sibling files
        self.strict_query = self.document.get("x-strict-query", False) is True
        self._operations = {}  # (Flask rule, method) -> _Operation or None (not documented)
        self._lock = threading.Lock()

    def validate_current_request(self):
        """``before_request`` hook: raise :class:`BadRequest` listing every problem."""
        if request.url_rule is None:  # Flask answers 404/405 itself
            return
        operation = self._operation(request.url_rule.rule, request.method)
        if operation is not None and operation.accepts(request) and \
                not (self.strict_query and operation.query_problems(request.args)):
            return
        self._validate_in_full()

    def _operation(self, rule, method):
        """The compiled :class:`_Operation` of a Flask ``rule`` and ``method``; None when the
        document has no such operation (openapi-core then says so)."""
        key = (rule, method)
        try:
            return self._operations[key]
        except KeyError:
            pass
        with self._lock:
            if key not in self._operations:
                item = self.openapi.spec / "paths" / _template(rule)
                found = None
                if item.exists() and method.lower() in item:
                    found = _Operation(self.openapi, item, item / method.lower())
                self._operations[key] = found
            return self._operations[key]

    def _validate_in_full(self):
        """openapi-core's validation of the current request from the document."""
        problems = []
        for error in self.openapi.iter_request_errors(FlaskOpenAPIRequest(request)):
            if isinstance(error, (PathNotFound, OperationNotFound)):
                raise errors.NotFound(f"{request.method} {request.path} is not part of this API")
            if isinstance(error, SecurityValidationError):
                continue  # authentication is the service's own job (see auth modules)
            problems.extend(_describe(error))
        if self.strict_query:
            operation = self._operation(request.url_rule.rule, request.method)
            problems.extend(operation.query_problems(request.args) if operation else [])
        if problems:
            first = problems[0]
            message = "; ".join(f"{p['field']}: {p['problem']}" if p["field"] else p["problem"]
                                for p in problems)
            raise errors.BadRequest(f"invalid request: {message}", field=first["field"],
                                    details=problems)

    def paths(self):
        """(method, path) pairs the document declares, e.g. ``("GET", "/api/v1/vcdns/{id}")``."""
        return {(method.upper(), path)
                for path, item in self.document.get("paths", {}).items()
                for method in item if method in {"get", "post", "put", "patch", "delete"}}


class _Operation:
    """One operation's request checks, compiled from the document once.

    :param openapi: the document (``openapi_core.OpenAPI``).
    :param item: its path item and ``operation`` (``SchemaPath``).
    """

    #: schema types whose parameters are read here (others go to openapi-core each time)
    PARAMETER_TYPES = {"string": str, "integer": int}
    _INTEGER = re.compile(r"-?[0-9]{1,18}")

    def __init__(self, openapi, item, operation):
        spec = openapi.spec
        factory = openapi.request_validator_cls.schema_validators_factory
        self.readable = True  # False: every request of it goes to openapi-core
        self.parameters = []  # (name, where, required, type, jsonschema validator)
        seen = set()
        for where in (operation, item):  # an operation's parameter overrides its path's
            for parameter in where.get("parameters", []):
                name, place = (parameter / "name").read_str(), (parameter / "in").read_str()
                if (name, place) not in seen:
                    seen.add((name, place))
                    self._add_parameter(spec, factory, parameter, name, place)
        self.query_names = list(dict.fromkeys(
            (parameter / "name").read_str() for where in (item, operation)
            for parameter in where.get("parameters", [])
            if (parameter / "in").read_str() == "query"))
        self.body = None  # (required, jsonschema validator) of an application/json body
        if "requestBody" in operation:
            body = operation / "requestBody"
            content = body.get("content", {})
            if list(content.keys()) == ["application/json"] and \
                    "schema" in content / "application/json":
                self.body = ((body / "required").read_bool(default=False),
                             factory.create(spec, content / "application/json" / "schema")
                             .validator)
            else:
                self.readable = False
        allowed = ", ".join(self.query_names)
        self.allowed = f"this route takes {allowed}" if allowed else \
            "this route takes no query parameters"

    def _add_parameter(self, spec, factory, parameter, name, place):
        schema = parameter / "schema"
        with schema.resolve() as resolved:
            kind = resolved.contents.get("type") if "schema" in parameter else None
        plain = place in ("path", "query") and "content" not in parameter and \
            "style" not in parameter and "explode" not in parameter and \
            "allowEmptyValue" not in parameter and kind in self.PARAMETER_TYPES
        if not plain:
            self.readable = False
            return
        self.parameters.append((name, place, (parameter / "required").read_bool(default=False),
                                kind, factory.create(spec, schema).validator))

    def accepts(self, flask_request):
        """Whether the compiled checks find ``flask_request`` valid (False: not valid, or
        not theirs to say)."""
        if not self.readable:
            return False
        for name, place, required, kind, validator in self.parameters:
            values = flask_request.view_args if place == "path" else flask_request.args
            raw = values.get(name)
            if raw is None:
                if required:
                    return False
                continue
            raw = str(raw)
            if kind == "integer":
                if not self._INTEGER.fullmatch(raw):
                    return False
                raw = int(raw)
            elif place == "query" and raw == "":
                return False
            if not validator.is_valid(raw):
                return False
        if self.body is not None:
            required, validator = self.body
            if not flask_request.get_data(cache=True):
                return not required
            if flask_request.mimetype != "application/json" or \
                    not validator.is_valid(flask_request.get_json(silent=True)):
                return False
        return True

    def query_problems(self, args):
        """[{field, problem}] of query parameters ``args`` (``request.args``) holds that the
        operation does not declare, or holds more than once."""
        problems = []
        for name in args:
            if name not in self.query_names:
                problems.append({"field": name, "problem": f"is not a parameter of this "
                                                           f"route; remove it ({self.allowed})"})
            elif len(args.getlist(name)) > 1:
                problems.append({"field": name, "problem": "is sent more than once; send it "
                                                           "once"})
        return problems


def _template(rule):
    """The document's path of a Flask rule (``/vcdns/<vcdn_id>`` -> ``/vcdns/{vcdn_id}``)."""
    return re.sub(r"<(?:[a-z]+:)?([a-z_]+)>", r"{\1}", rule)


def _describe(error):
    """Turn one openapi-core finding into [{field, problem}] entries."""
    if isinstance(error, MissingRequestBody):
        return [{"field": "body", "problem": "a JSON body is required"}]
    if isinstance(error, MissingRequiredParameter):
        return [{"field": error.name, "problem": "this parameter is required"}]
    cause = error.__cause__
    if isinstance(error, ParameterValidationError) and isinstance(cause, InvalidSchemaValue):
        return [{"field": error.name, "problem": e.message} for e in cause.schema_errors]
    if isinstance(error, ParameterValidationError):
        return [{"field": error.name, "problem": str(cause or error)}]
    if isinstance(error, RequestBodyValidationError) and isinstance(cause, InvalidSchemaValue):
        return [_schema_problem(e) for e in cause.schema_errors]
    if isinstance(error, RequestBodyValidationError):
        return [{"field": "body", "problem": _body_problem(error)}]
    return [{"field": None, "problem": str(error)}]


def _schema_problem(schema_error):
    location = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in schema_error.absolute_path)
    field = location.lstrip(".") or "body"
    validator = schema_error.validator
    if validator == "additionalProperties":
        known = set(schema_error.schema.get("properties", {}))
        unknown = sorted(set(schema_error.instance) - known)
        field = ".".join(filter(None, [location.lstrip("."), unknown[0] if unknown else None])) or field
        problem = f"unknown field(s) {', '.join(unknown)}; remove them (allowed: {', '.join(sorted(known))})"
    elif validator == "required":
        missing = next((name for name in schema_error.validator_value
                        if name not in schema_error.instance), "")
        field = ".".join(filter(None, [location.lstrip("."), missing])) or field
        problem = f"{missing} is required; add it"
    elif validator == "type":
        problem = f"{schema_error.message}; expected {schema_error.validator_value}"
    else:
        problem = schema_error.message
    return {"field": field, "problem": problem}


def _body_problem(error):
    text = str(error.__cause__ or error)
    if "deserialize" in text.lower():
        return "the body is not valid JSON; send one JSON object"
    if "mimetype" in text.lower():
        return f"send the body with one of the media types this endpoint accepts ({text})"
    return text


@functools.cache
def validator_for(spec_path):
    """One :class:`RequestValidator` per document, parsed once per process."""
    return RequestValidator(spec_path)
