"""What an HTTP handler says about itself, for the OpenAPI document (relay/admin/openapi.py)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Any])
ATTRIBUTE = "openapi_operation"
JSON = "application/json"
HTML = "text/html"
FORM = "application/x-www-form-urlencoded"
# The short description of each error status an endpoint answers (with the error body).
ERRORS = {
    400: "Bad request",
    401: "Missing or invalid credentials",
    403: "Forbidden",
    404: "Not found",
    409: "Conflict with the configuration",
    410: "Gone (expired)",
    413: "Body too large",
    415: "Not JSON",
    422: "Schema violation",
    429: "Too many refused credentials from this address; see Retry-After",
    431: "Request headers too large",
    503: "Unavailable; see Retry-After",
}
WEBHOOK_SECURITY: list[dict[str, list[str]]] = [{"webhookToken": []}, {"webhookBasic": []}, {}]
ADMIN_SECURITY: list[dict[str, list[str]]] = [{"adminToken": []}]
# A form's fields, as a page's form posts them (`request_media=FORM`).
FORM_FIELDS = {"type": "object", "additionalProperties": {"type": "string"}}


@dataclass(frozen=True)
class Answer:
    description: str
    # The body's type (a pydantic model, a TypedDict, list[...]), a JSON schema, or None: no body.
    body: Any = None
    media: str = JSON


@dataclass(frozen=True)
class Operation:
    summary: str
    answers: dict[int, Answer]
    errors: tuple[int, ...] = ()  # statuses answered with the error body
    request: Any = None  # the request body's type
    request_required: bool = True
    request_media: str = JSON
    query: Any = None  # a pydantic model: its fields are the query parameters
    security: list[dict[str, list[str]]] | None = None
    tags: tuple[str, ...] = ()
    extra: dict[str, Any] = field(default_factory=dict)  # more of the operation object, as is

    def __call__(self, handler: F) -> F:
        """`@Operation(...)` describes the handler below it (a method too: a bound method reads its function's
        attributes)."""
        setattr(handler, ATTRIBUTE, self)
        return handler


def html_answer(description: str) -> Answer:
    return Answer(description, {"type": "string"}, HTML)


def operation_of(handler: Any) -> Operation | None:
    found = getattr(handler, ATTRIBUTE, None)
    return found if isinstance(found, Operation) else None
