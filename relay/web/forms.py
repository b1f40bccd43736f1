"""Browser forms, for the admin page and the people's pages alike: where a POST came from, and a bounded
read of its URL-encoded (or, for one-click unsubscribe, multipart) body."""

from __future__ import annotations

import ipaddress
import re
from urllib.parse import parse_qsl, urlsplit

from starlette.requests import ClientDisconnect, Request

from relay.config import Config
from relay.config.server import Network

_MULTIPART_FIELD = re.compile(rb'name="([^"\r\n]{1,100})"\r\n(?:[^\r\n]*\r\n)*?\r\n([^\r\n]{0,1000})\r\n')


def same_origin(request: Request, config: Config) -> bool:
    """A browser's POST names its page's origin: it must be relay's own (absent: an older client, allowed).

    relay's own host is the Host the request came to, `preferences.public_url`'s, and X-Forwarded-Host when
    the request came from one of `server.trusted_proxies` (its last value: the one that proxy set). From
    any other peer X-Forwarded-Host is the client's own word, and ignored."""
    source = request.headers.get("origin") or request.headers.get("referer")
    if source is None:
        return True
    if source == "null":
        return False
    hosts = {request.headers.get("host", "")}
    if config.preferences.public_url:
        hosts.add(urlsplit(str(config.preferences.public_url)).netloc)
    forwarded = request.headers.get("x-forwarded-host", "").rsplit(",", 1)[-1].strip()
    if forwarded and _from_trusted_proxy(request, config.server.trusted_networks()):
        hosts.add(forwarded)
    return urlsplit(source).netloc in hosts - {""}


def _from_trusted_proxy(request: Request, trusted: tuple[Network, ...]) -> bool:
    try:
        peer = ipaddress.ip_address(request.client.host if request.client else "")
    except ValueError:
        return False
    return any(peer in network for network in trusted)


FORM_MEDIA = ("application/x-www-form-urlencoded", "multipart/form-data")


def is_form(request: Request) -> bool:
    """Whether the body is declared a form (URL-encoded, or multipart as some mail providers post RFC 8058)."""
    return request.headers.get("content-type", "").split(";", 1)[0].strip().lower() in FORM_MEDIA


async def bounded_body(request: Request, limit: int) -> bytes | None:
    """The body, if it is at most `limit` bytes (read no further); None when larger or cut off."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        return None
    chunks: list[bytes] = []
    size = 0
    try:
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                return None
            chunks.append(chunk)
    except ClientDisconnect:
        return None
    return b"".join(chunks)


async def read_fields(request: Request, limit: int, max_fields: int) -> list[tuple[str, str]] | None:
    """A form's fields in order (a name may repeat: checkboxes), URL-encoded or multipart, of at most `limit`
    bytes and `max_fields` fields; None when the body is none of these."""
    media = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    if media not in FORM_MEDIA:
        return None
    body = await bounded_body(request, limit)
    if body is None:
        return None
    if media == "multipart/form-data":  # what some mail providers send for RFC 8058: simple fields only
        found = [
            (k.decode("utf-8", "replace"), v.decode("utf-8", "replace")) for k, v in _MULTIPART_FIELD.findall(body)
        ]
        return found if len(found) <= max_fields else None
    try:
        return parse_qsl(body.decode("utf-8", "replace"), keep_blank_values=True, max_num_fields=max_fields)
    except ValueError:
        return None
