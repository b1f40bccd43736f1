"""Browser forms, for the admin page and the people's pages alike: where a POST came from, and a bounded read
of its body as Starlette parses every form (`Request.form`)."""

from __future__ import annotations

from urllib.parse import urlsplit

from starlette.datastructures import UploadFile
from starlette.exceptions import HTTPException
from starlette.formparsers import MultiPartException
from starlette.requests import ClientDisconnect, Request
from starlette.types import Message

from relay.config import Config
from relay.web.errors import Answered, error_response
from relay.web.throttle import from_trusted_proxy

MAX_FORM_BYTES = 16 * 1024


def same_origin(request: Request, config: Config) -> bool:
    """Relay's own (absent: allowed): the Host, `preferences.public_url`'s, or a trusted proxy's X-Forwarded-Host."""
    source = request.headers.get("origin") or request.headers.get("referer")
    if source is None:
        return True
    if source == "null":
        return False
    hosts = {request.headers.get("host", "")}
    if config.preferences.public_url:
        hosts.add(urlsplit(str(config.preferences.public_url)).netloc)
    forwarded = request.headers.get("x-forwarded-host", "").rsplit(",", 1)[-1].strip()
    if forwarded and from_trusted_proxy(request, config.server.trusted_networks()):
        hosts.add(forwarded)
    return urlsplit(source).netloc in hosts - {""}


FORM_MEDIA = ("application/x-www-form-urlencoded", "multipart/form-data")


async def bounded_body(request: Request, limit: int) -> bytes | None:
    """The body, if it is at most `limit` bytes (read no further; a body of exactly the limit is fine); None when
    larger. ClientDisconnect, as `Request.body`, when the client went before it was whole."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        return None
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
    return b"".join(chunks)


class FormRefused(Answered):
    """A body that is not a form relay reads (415, 413, 400, and why), answered in the error convention."""

    def __init__(self, status: int, problem: str) -> None:
        super().__init__(
            error_response(status, [problem], "The form could not be read.", solutions=["Send the page's form."])
        )


async def read_form(request: Request, max_fields: int, limit: int = MAX_FORM_BYTES) -> list[tuple[str, str]]:
    """A form's fields in order (checkboxes repeat), within `limit` bytes and `max_fields`; else FormRefused."""
    try:
        body = await bounded_body(request, limit)
    except ClientDisconnect:
        raise FormRefused(400, "the client closed the connection") from None
    if body is None:
        raise FormRefused(413, f"the form is over {limit} bytes")
    if not body:
        return []  # a POST with no body: an empty form
    media = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    if media not in FORM_MEDIA:
        raise FormRefused(415, "the body is not a form (application/x-www-form-urlencoded or multipart/form-data)")

    async def once() -> Message:  # the bounded body, handed to the parser as the request's stream
        return {"type": "http.request", "body": body, "more_body": False}

    try:
        form = await Request(request.scope, once).form(max_files=0, max_fields=max_fields, max_part_size=limit)
    except (HTTPException, MultiPartException) as exc:
        raise FormRefused(400, f"the form cannot be read: {getattr(exc, 'detail', None) or exc}") from None
    fields = form.multi_items()
    if any(isinstance(v, UploadFile) for _, v in fields):
        raise FormRefused(400, "the form cannot be read: it holds a file")
    return [(k, str(v)) for k, v in fields]
