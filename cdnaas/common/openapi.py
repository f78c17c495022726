"""Run-time request validation against a service's OpenAPI document.

The document under ``api-spec/`` is the one source of truth: openapi-core
checks every request against it before a view runs, and its findings are
turned into one 400 answer that lists every problem and names each field.

A document whose root says ``x-strict-query: true`` (the customer API's) also has
every query parameter a route does not declare, and every parameter sent more than
once, refused: openapi-core itself lets both through, and a view reading the first
value would silently ignore what the client meant (``?sort=name``, ``?limit=1&limit=9``).
"""
import functools
import logging
import re

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

    def validate_current_request(self):
        """``before_request`` hook: raise :class:`BadRequest` listing every problem."""
        if request.url_rule is None:  # Flask answers 404/405 itself
            return
        problems = []
        for error in self.openapi.iter_request_errors(FlaskOpenAPIRequest(request)):
            if isinstance(error, (PathNotFound, OperationNotFound)):
                raise errors.NotFound(f"{request.method} {request.path} is not part of this API")
            if isinstance(error, SecurityValidationError):
                continue  # authentication is the service's own job (see auth modules)
            problems.extend(_describe(error))
        if self.strict_query:
            problems.extend(self._query_problems())
        if problems:
            first = problems[0]
            message = "; ".join(f"{p['field']}: {p['problem']}" if p["field"] else p["problem"]
                                for p in problems)
            raise errors.BadRequest(f"invalid request: {message}", field=first["field"],
                                    details=problems)

    def _query_problems(self):
        """[{field, problem}] of query parameters the current route does not declare or
        that are sent more than once (the route is known: openapi-core found it)."""
        path = re.sub(r"<(?:[a-z]+:)?([a-z_]+)>", r"{\1}", request.url_rule.rule)
        item = self.openapi.spec / "paths" / path
        declared = list(dict.fromkeys(parameter["name"]
                                      for where in (item, item / request.method.lower())
                                      for parameter in where.get("parameters", [])
                                      if parameter["in"] == "query"))
        allowed = f"this route takes {', '.join(declared)}" if declared else \
            "this route takes no query parameters"
        problems = []
        for name in request.args:
            if name not in declared:
                problems.append({"field": name, "problem": f"is not a parameter of this "
                                                           f"route; remove it ({allowed})"})
            elif len(request.args.getlist(name)) > 1:
                problems.append({"field": name, "problem": "is sent more than once; send it "
                                                           "once"})
        return problems

    def paths(self):
        """(method, path) pairs the document declares, e.g. ``("GET", "/api/v1/vcdns/{id}")``."""
        return {(method.upper(), path)
                for path, item in self.document.get("paths", {}).items()
                for method in item if method in {"get", "post", "put", "patch", "delete"}}


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
