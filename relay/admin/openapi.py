"""The OpenAPI document (GET /openapi.json), made from the app's routes, its handlers' descriptions
(relay/web/operation.py) and the types that validate the requests and type the answers."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, Literal

from pydantic import BaseModel, TypeAdapter
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute
from starlette.schemas import EndpointInfo, SchemaGenerator

from relay import __version__
from relay.web.errors import ErrorBody
from relay.web.operation import ERRORS, JSON, Answer, Operation, operation_of

REF = "#/components/schemas/{model}"
ERROR = "Error"
SECURITY_SCHEMES = {
    "webhookToken": {"type": "http", "scheme": "bearer"},
    "webhookBasic": {"type": "http", "scheme": "basic"},
    "adminToken": {"type": "http", "scheme": "bearer"},
    "adminSession": {"type": "apiKey", "in": "cookie", "name": "relay_ui"},
}
_PATH_PARAMETER = re.compile(r"{([^}]+)}")


class _Schemas:
    """The components' schemas, filled as operations name their types."""

    def __init__(self) -> None:
        self.components: dict[str, Any] = {}

    def of(self, kind: Any, mode: Literal["validation", "serialization"] = "serialization") -> dict[str, Any]:
        if isinstance(kind, dict):
            return kind
        if isinstance(kind, type) and issubclass(kind, BaseModel):
            schema = kind.model_json_schema(ref_template=REF, mode=mode)
        else:
            schema = TypeAdapter(kind).json_schema(ref_template=REF, mode=mode)
        self.components.update(schema.pop("$defs", {}))
        if schema.get("type") == "object" and isinstance(kind, type):
            name = ERROR if kind is ErrorBody else kind.__name__
            self.components[name] = schema
            return {"$ref": REF.format(model=name)}
        return schema

    def parameters(self, model: type[BaseModel]) -> list[dict[str, Any]]:
        schema = model.model_json_schema(ref_template=REF)
        self.components.update(schema.pop("$defs", {}))
        required = set(schema.get("required", []))
        out = []
        for name, field in schema["properties"].items():
            # An absent parameter is no null: the defaults that matter (limit's 50) are kept.
            field = {k: v for k, v in field.items() if k != "title" and not (k == "default" and v is None)}
            parameter = {"name": name, "in": "query", "required": name in required}
            if "description" in field:
                parameter["description"] = field.pop("description")
            out.append({**parameter, "schema": field})
        return out


def _answer(answer: Answer, schemas: _Schemas) -> dict[str, Any]:
    out: dict[str, Any] = {"description": answer.description}
    if answer.body is not None:
        out["content"] = {answer.media: {"schema": schemas.of(answer.body)}}
    return out


def _operation(endpoint: EndpointInfo, schemas: _Schemas) -> dict[str, Any]:
    described = operation_of(endpoint.func)
    if described is None:  # a route added without a description still appears, with any answer
        doc = (endpoint.func.__doc__ or endpoint.func.__name__).strip().splitlines()[0]
        described = Operation(doc, {}, extra={"responses": {"default": {"description": "Any answer"}}})
    out: dict[str, Any] = {"summary": described.summary}
    if described.tags:
        out["tags"] = list(described.tags)
    if described.security is not None:
        out["security"] = described.security
    parameters = [
        {"name": name, "in": "path", "required": True, "schema": {"type": "string"}}
        for name in _PATH_PARAMETER.findall(endpoint.path)
    ]
    if described.query is not None:
        parameters += schemas.parameters(described.query)
    if parameters:
        out["parameters"] = parameters
    if described.request is not None:
        body = schemas.of(described.request, mode="validation")
        out["requestBody"] = {
            "required": described.request_required,
            "content": {described.request_media: {"schema": body}},
        }
    responses = {str(status): _answer(answer, schemas) for status, answer in described.answers.items()}
    error = {"content": {JSON: {"schema": schemas.of(ErrorBody)}}}
    responses |= {str(status): {"description": ERRORS[status], **error} for status in described.errors}
    out["responses"] = dict(sorted(responses.items()))
    return out | described.extra


def openapi_document(routes: Sequence[BaseRoute]) -> dict[str, Any]:
    """The document of an app serving `routes`: every route, with each of its methods (HEAD aside)."""
    schemas = _Schemas()
    paths: dict[str, dict[str, Any]] = {}
    for endpoint in SchemaGenerator({}).get_endpoints(list(routes)):
        paths.setdefault(endpoint.path, {})[endpoint.http_method] = _operation(endpoint, schemas)
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "relay",
            "version": __version__,
            "description": "Webhook notification relay: intake, delivery records and replay.",
        },
        "paths": paths,
        "components": {"schemas": dict(sorted(schemas.components.items())), "securitySchemes": SECURITY_SCHEMES},
    }


class OpenApi:
    """GET /openapi.json: the document of the app that serves it, made once."""

    def __init__(self) -> None:
        self.document: dict[str, Any] | None = None

    @Operation("This document", {200: Answer("OpenAPI 3.1", {"type": "object"})})
    async def serve(self, request: Request) -> Response:
        if self.document is None:
            self.document = openapi_document(request.app.routes)
        return JSONResponse(self.document)
