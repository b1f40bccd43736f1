"""Error answers in the platform's convention, scrubbed of the process's secrets on their way out."""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError
from pydantic.json_schema import SkipJsonSchema
from starlette.responses import JSONResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from relay.core.redaction import Redactor


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


def error_response(
    status: int,
    errors: list[str],
    user_message: str,
    field: str | None = None,
    solutions: list[str] | None = None,
    headers: dict[str, str] | None = None,
    problems: list[str] | None = None,
) -> JSONResponse:
    # Error texts may quote Apprise, Redis or a payload: the app scrubs them as they leave (ScrubbedErrors).
    body = ErrorBody(
        errors=errors,
        userMessage=user_message,
        inputErrorField=field,
        moreInfo=MoreInfo(problems=errors if problems is None else problems, solutions=solutions or []),
    )
    return JSONResponse(body.model_dump(exclude_none=True), status, headers=headers)


class Answered(Exception):
    """An answer a handler's helper gives for the whole request (a refusal, an error page), raised to end the
    handler there: the app answers with it as it is (relay.runtime.app)."""

    def __init__(self, response: Response) -> None:
        super().__init__(response.status_code)
        self.response = response


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


def _scrubbed(value: Any, redactor: Redactor) -> Any:
    if isinstance(value, str):
        return redactor.scrub(value)
    if isinstance(value, list):
        return [_scrubbed(v, redactor) for v in value]
    if isinstance(value, dict):
        return {k: _scrubbed(v, redactor) for k, v in value.items()}
    return value


class ScrubbedErrors:
    """ASGI middleware: every JSON error answer leaves scrubbed by `redactor` (which a reload adds to)."""

    def __init__(self, app: ASGIApp, redactor: Redactor) -> None:
        self.app, self.redactor = app, redactor

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start: Message | None = None
        parts: list[bytes] = []

        async def sending(message: Message) -> None:
            nonlocal start
            if message["type"] == "http.response.start" and message["status"] >= 400 and _json_answer(message):
                start = message  # held until its body is whole
                return
            if start is None or message["type"] != "http.response.body":
                await send(message)
                return
            parts.append(message.get("body", b""))
            if message.get("more_body", False):
                return
            body = self._scrub(b"".join(parts))
            headers = [(k, v) for k, v in start["headers"] if k.lower() != b"content-length"]
            await send({**start, "headers": [*headers, (b"content-length", str(len(body)).encode())]})
            await send({"type": "http.response.body", "body": body})

        await self.app(scope, receive, sending)

    def _scrub(self, body: bytes) -> bytes:
        try:
            value = json.loads(body)
        except ValueError:
            return self.redactor.scrub(body.decode("utf-8", "replace")).encode()
        # As Starlette's JSONResponse writes it.
        out = json.dumps(_scrubbed(value, self.redactor), ensure_ascii=False, allow_nan=False, separators=(",", ":"))
        return out.encode()


def _json_answer(start: Message) -> bool:
    return any(k.lower() == b"content-type" and is_json(v.decode("latin-1")) for k, v in start["headers"])
