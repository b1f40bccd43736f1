"""The admin page's sessions and CSRF protection. The cookie holds `expiry.nonce.HMAC-SHA256(token,
expiry|nonce)`, never the token, checked against every configured token (every replica accepts it; removing a
token ends its sessions); logging out records the nonce in Redis until the cookie would expire. A POST carries a
CSRF token keyed by the cookie (another site can neither read nor set it), and any Origin or Referer it sends
must be this host. With no admin_tokens the page is open, as the API is. `PageAccess` asks all of it of a
request; a refusal is raised as `Answered` (the login, the error page)."""

from __future__ import annotations

import hashlib
import hmac
import logging
import secrets
from collections.abc import Callable
from typing import TypeVar

from redis import Redis
from redis.exceptions import RedisError
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

from relay.admin.ui_render import render
from relay.config import Config
from relay.storage.sessions import EndedSessions
from relay.web import forms
from relay.web.auth import admin_allowed, admin_token_offered, any_equal
from relay.web.errors import RETRY_AFTER, Answered
from relay.web.forms import same_origin
from relay.web.throttle import API, Guard

log = logging.getLogger("relay.admin.ui")
T = TypeVar("T")
UNREAD = "relay cannot read its records right now. Try again shortly."
UNCHECKED = "relay cannot check your session right now. Try again shortly."

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


async def read_form(request: Request) -> dict[str, str]:
    """A form of at most 16 KiB and 20 fields (the first value of each name); else Answered (FormRefused)."""
    return dict(reversed(await forms.read_form(request, max_fields=20)))


class PageAccess:
    """Who is at the page: a session, or the admin API's header (scripts); and the page a refusal shows. The
    config is read at each request (a reload changes the tokens)."""

    def __init__(self, redis: Redis, config: Callable[[], Config], clock: Callable[[], float], guard: Guard) -> None:
        self.config, self.clock, self.guard = config, clock, guard
        self.sessions = EndedSessions(redis)

    def tokens(self) -> list[str]:
        return self.config().server.admin_tokens

    def error(self, status: int, title: str, message: str, headers: dict[str, str] | None = None) -> HTMLResponse:
        return render("error.html.j2", self.clock(), status, headers, title=title, message=message)

    async def read(self, load: Callable[[], T], failed: str = UNREAD) -> T:
        """`load()` (a read, or a session's, silence's or release's write) off the event loop; when Redis fails under
        it, Answered: the 503 page saying `failed`, logged with it."""
        try:
            return await run_in_threadpool(load)
        except RedisError as exc:
            log.warning("admin page: Redis unavailable (%s): %s", type(exc).__name__, failed)
            page = self.error(503, "Redis is unavailable", failed, headers={"Retry-After": RETRY_AFTER})
            raise Answered(page) from None

    def throttled_page(self, seconds: int) -> HTMLResponse:
        return self.error(
            429,
            "Too many failed attempts",
            f"Too many wrong admin tokens came from your address. Wait {seconds} seconds, then try again.",
        )

    async def header_auth(self, request: Request) -> bool:
        """The admin API's header credentials (scripts): a wrong one counts on the API's surface (Answered: 429)."""
        if not self.tokens() or not admin_token_offered(request.headers):
            return False
        if (throttled := await self.guard.check(request, API, page=self.throttled_page)) is not None:
            raise Answered(throttled)
        if admin_allowed(self.config().server, request.headers):
            return True
        await self.guard.failed(request, API, "no valid admin token (admin page)")
        return False

    async def session_of(self, request: Request) -> str | None:
        """The request's cookie, signed, unexpired and not logged out of (Redis failing: Answered, the 503 page)."""
        value = request.cookies.get(COOKIE)
        parts = session_parts(value)
        if parts is None or not session_valid(self.tokens(), value, self.clock()):
            return None
        if not self.tokens():  # an open session is anyone's to make: there is nothing to log out of
            return value
        nonce = parts[1]
        return None if await self.read(lambda: self.sessions.ended(nonce), UNCHECKED) else value

    async def viewing(self, request: Request) -> tuple[str | None, str | None]:
        """(the session or None with the API's header, a fresh one to set); Answered: the login, a 429, a 503."""
        session = await self.session_of(request)
        if session is not None:
            return session, None
        if await self.header_auth(request):
            return None, None
        if self.tokens():
            raise Answered(RedirectResponse("/ui/login", 303))
        fresh = new_session(None, self.clock())
        return fresh, fresh

    async def posted_form(self, request: Request, what: str) -> dict[str, str]:
        """A button's form, from a session with its CSRF token and this origin, or with the API's header."""
        by_header = await self.header_auth(request)
        session = None if by_header else await self.session_of(request)
        if not by_header and session is None:
            if self.tokens():
                raise Answered(self.error(401, "Not logged in", f"Your session has ended: log in again, then {what}."))
            raise Answered(
                self.error(403, "Forbidden", f"{what.capitalize()} from the admin page itself (reload it first).")
            )
        form = await read_form(request)
        if not by_header and (not same_origin(request, self.config()) or session is None or not csrf_ok(session, form)):
            raise Answered(
                self.error(
                    403, "Forbidden", f"The {what} was not sent from this relay's own page. Reload it and retry."
                )
            )
        return form
