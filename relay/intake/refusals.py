"""The webhook's refusals: each finished error answer a step of the intake raises (`Refused`), with the reason
its rejection is counted under, and the 503s of a queue that cannot take a notification now."""

from __future__ import annotations

from typing import Any

from starlette.responses import Response

from relay.web.errors import RETRY_AFTER, error_response


class Refused(Exception):
    """A finished error answer from one step of the webhook intake; `reason` labels the rejection metric."""

    def __init__(self, response: Response, reason: str | None) -> None:
        super().__init__(reason)
        self.response, self.reason = response, reason


def refused(status: int, error: str, user_message: str, solution: str, reason: str, **options: Any) -> Refused:
    return Refused(error_response(status, [error], user_message, solutions=[solution], **options), reason)


def unauthorized() -> Refused:
    # One answer for every failure: which part was wrong (token, password, signature, clock) is only logged.
    return refused(
        401,
        "missing or invalid credentials",
        "The webhook call was not authenticated.",
        "Send the credentials configured for this webhook (a token, Basic credentials or a signature).",
        "auth",
        headers={"WWW-Authenticate": 'Bearer realm="relay"'},
    )


def too_large(limit: int) -> Refused:
    return refused(
        413,
        f"body larger than {limit} bytes",
        "The notification is too large.",
        f"Send at most {limit} bytes, or raise server.max_body_bytes.",
        "size",
    )


def headers_too_large(limit: int) -> Refused:
    return refused(
        431,
        f"request headers larger than {limit} bytes",
        "The request's headers are too large.",
        f"Send at most {limit} bytes of headers, or raise server.limits.max_header_bytes.",
        "headers",
    )


def not_json_type(content_type: str | None) -> Refused:
    return refused(
        415,
        f"content type {content_type or '(none)'!r} is not JSON",
        "The notification must be sent as JSON.",
        "Send the body with Content-Type: application/json.",
        "content_type",
    )


def bad_json(reason: str) -> Refused:
    return refused(400, reason, "The notification is not valid JSON.", "Send one JSON object as the body.", "json")


def not_a_number(path: str, status: int) -> Refused:
    return refused(
        status,
        f"{path or 'the body'}: not a finite number (NaN, Infinity, or past the range of a double, like 1e400)",
        "The notification holds a number relay cannot store.",
        "Send numbers between about -1.8e308 and 1.8e308 (or send the value as a string).",
        "json",
        field=path,
    )


def too_deep(limit: int, path: str) -> Refused:
    return refused(
        422,
        f"{path or 'the body'}: JSON nested deeper than {limit} levels",
        f"The notification is nested deeper than {limit} levels.",
        f"Flatten the payload, or raise server.limits.max_depth (now {limit}).",
        "limits",
        field=path,
    )


def not_object(data: Any) -> Refused:
    return refused(
        422,
        f"the body must be a JSON object, not {type(data).__name__}",
        "The notification must be a JSON object.",
        "Send one notification object as the body.",
        "schema",
        field="",
    )


def unavailable() -> Response:
    return error_response(
        503,
        ["the queue is unavailable; nothing was accepted"],
        "relay cannot store notifications right now.",
        problems=["Redis did not answer or did not confirm the write."],
        solutions=["Send the notification again after Retry-After seconds."],
        headers={"Retry-After": RETRY_AFTER},
    )


def not_replicated() -> Response:
    """Its retry with the same eventId is answered 202 once the replicas hold it."""
    return error_response(
        503,
        ["the notification is not yet held by enough Redis replicas; it was not acknowledged"],
        "relay cannot confirm the notification is stored safely right now.",
        problems=["Fewer Redis replicas than redis.min_replicas acknowledged the write within redis.replica_timeout."],
        solutions=["Send the notification again, with the same eventId, after Retry-After seconds."],
        headers={"Retry-After": RETRY_AFTER},
    )
