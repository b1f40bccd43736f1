"""Error answers in the platform's convention (seed 000, "Error bodies")."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError
from pydantic.json_schema import SkipJsonSchema
from starlette.responses import JSONResponse

from relay.core.redaction import scrub


class MoreInfo(BaseModel):
    problems: list[str]
    solutions: list[str]


class ErrorBody(BaseModel):
    """The body of every 4xx and 5xx answer, of every endpoint (the OpenAPI document's `Error`)."""

    model_config = ConfigDict(title="Error")

    errors: list[str]
    userMessage: str
    # The dotted path of the offending field, where there is one (absent otherwise, never null).
    inputErrorField: str | SkipJsonSchema[None] = None
    moreInfo: MoreInfo


def error_body(
    errors: list[str],
    user_message: str,
    field: str | None = None,
    problems: list[str] | None = None,
    solutions: list[str] | None = None,
) -> dict[str, Any]:
    # Error texts may quote Apprise, Redis or a payload: none of them may carry a configured secret.
    errors = [scrub(e) for e in errors]
    body = ErrorBody(
        errors=errors,
        userMessage=scrub(user_message),
        inputErrorField=None if field is None else scrub(field),
        moreInfo=MoreInfo(
            problems=errors if problems is None else [scrub(p) for p in problems],
            solutions=[scrub(s) for s in solutions or []],
        ),
    )
    return body.model_dump(exclude_none=True)


def error_response(
    status: int,
    errors: list[str],
    user_message: str,
    field: str | None = None,
    solutions: list[str] | None = None,
    headers: dict[str, str] | None = None,
    problems: list[str] | None = None,
) -> JSONResponse:
    return JSONResponse(error_body(errors, user_message, field, problems, solutions), status, headers=headers)


# Seconds a client is asked to wait, with a 503, before it tries again (Redis unavailable).
RETRY_AFTER = "5"


def is_json(content_type: str) -> bool:
    """Whether a Content-Type names JSON (`application/json`, or any `application/...+json`)."""
    media = content_type.split(";", 1)[0].strip().lower()
    return media == "application/json" or (media.startswith("application/") and media.endswith("+json"))


def dotted(loc: tuple[int | str, ...]) -> str:
    return ".".join(str(p) for p in loc)


def validation_response(exc: ValidationError, what: str = "notification") -> JSONResponse:
    problems = []
    for e in exc.errors(include_url=False):
        msg = e["msg"].removeprefix("Value error, ")
        problems.append(f"{dotted(e['loc'])}: {msg}" if e["loc"] else msg)
    first = exc.errors(include_url=False)[0]["loc"] if exc.errors() else ()
    return error_response(
        422,
        problems,
        f"The {what} does not follow the expected schema: {problems[0] if problems else 'invalid'}",
        field=dotted(first) or None,
        solutions=[f"Fix the field(s) named in problems and send the {what} again."],
    )
