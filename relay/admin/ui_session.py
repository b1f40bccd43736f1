"""The admin page's sessions and CSRF protection. The cookie holds `expiry.nonce.HMAC-SHA256(token,
expiry|nonce)`, never the token, checked against every configured token (every replica accepts it; removing a
token ends its sessions); logging out records the nonce in Redis until the cookie would expire. A POST carries a
CSRF token keyed by the cookie (another site can neither read nor set it), and any Origin or Referer it sends
must be this host. With no admin_tokens the page is open, as the API is."""

from __future__ import annotations

import hashlib
import hmac
import secrets

from starlette.requests import Request
from starlette.responses import Response

from relay.web import forms
from relay.web.auth import any_equal
from relay.web.forms import same_origin as same_origin  # the page's POSTs are checked as every form's

COOKIE = "relay_ui"
COOKIE_PATH = "/ui"
SESSION_SECONDS = 12 * 3600
OPEN_SIGNATURE = "open"  # the signature part of a session cookie when no admin token is configured


def _sign(token: str, expiry: int, nonce: str) -> str:
    return hmac.new(token.encode(), f"relay-ui-session|{expiry}|{nonce}".encode(), hashlib.sha256).hexdigest()


def new_session(token: str | None, now: float) -> str:
    """A session cookie value: signed with `token`, or marked open when no admin token is configured."""
    expiry = int(now + SESSION_SECONDS)
    nonce = secrets.token_urlsafe(18)
    signature = _sign(token, expiry, nonce) if token is not None else OPEN_SIGNATURE
    return f"{expiry}.{nonce}.{signature}"


def session_parts(value: str | None) -> tuple[int, str, str] | None:
    """A session cookie's expiry, nonce and signature (None: not shaped like one); not checked."""
    parts = (value or "").split(".")
    if len(parts) != 3 or not parts[0].isdigit() or len(parts[0]) > 12 or not parts[1]:
        return None
    return int(parts[0]), parts[1], parts[2]


def session_valid(tokens: list[str], value: str | None, now: float) -> bool:
    """Whether the cookie is signed by a configured token and unexpired (relay.storage.sessions: logged out)."""
    parts = session_parts(value)
    if parts is None:
        return False
    expiry, nonce, signature = parts
    if expiry < now or expiry > now + SESSION_SECONDS + 60:
        return False
    if not tokens:
        return signature == OPEN_SIGNATURE
    return any_equal([signature.encode()], [_sign(token, expiry, nonce).encode() for token in tokens])


def csrf_token(session: str) -> str:
    return hmac.new(session.encode(), b"relay-ui-csrf", hashlib.sha256).hexdigest()


def csrf_ok(session: str, form: dict[str, str]) -> bool:
    return hmac.compare_digest(form.get("csrf", "").encode(), csrf_token(session).encode())


def matching_token(tokens: list[str], given: str) -> str | None:
    match = None
    for token in tokens:
        if hmac.compare_digest(given.encode(), token.encode()):
            match = token
    return match


def _secure(request: Request) -> bool:
    return request.url.scheme == "https" or request.headers.get("x-forwarded-proto", "").lower() == "https"


def set_session(response: Response, request: Request, value: str) -> None:
    response.set_cookie(
        COOKIE,
        value,
        max_age=SESSION_SECONDS,
        path=COOKIE_PATH,
        httponly=True,
        samesite="strict",
        secure=_secure(request),
    )


def clear_session(response: Response, request: Request) -> None:
    response.delete_cookie(COOKIE, path=COOKIE_PATH, httponly=True, samesite="strict", secure=_secure(request))


async def read_form(request: Request) -> dict[str, str] | Response:
    """A form of at most 16 KiB and 20 fields (the first value of each name), or the error answer."""
    try:
        return dict(reversed(await forms.read_form(request, max_fields=20)))
    except forms.FormRefused as exc:
        return exc.answer()
