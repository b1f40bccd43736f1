"""The admin page at /ui: recent notifications and their deliveries, failures with replay, counters.

Server-rendered (Jinja, autoescaped), no JavaScript. Authentication follows the admin API's:

- With `server.admin_tokens`, a browser logs in once with one of them. The session cookie holds
  `expiry.nonce.HMAC-SHA256(token, expiry|nonce)`, never the token: it is HttpOnly, SameSite=Strict,
  limited to /ui, Secure over HTTPS, and valid for SESSION_SECONDS. It is checked against every
  configured token, so every API replica accepts it and removing a token from the config ends the
  sessions opened with it. Scripts may send the API's own `Authorization: Bearer` header instead.
- With no admin_tokens the admin API is open, and so is the page (fine on loopback only).

Every POST made with the cookie (replay, logout) must carry a CSRF token derived from the session
cookie (HMAC keyed by the cookie, which a page of another site can neither read nor set), and any
Origin or Referer it sends must be this host. Channel URLs and secrets are never shown: deliveries
show their channel's name only.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import math
import secrets
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, cast
from urllib.parse import parse_qs, quote, urlsplit

from jinja2 import Environment, PackageLoader, StrictUndefined
from redis.exceptions import RedisError
from starlette.concurrency import run_in_threadpool
from starlette.requests import ClientDisconnect, Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from relay.core.model import State
from relay.intake.auth import admin_allowed
from relay.runtime.bootstrap import Runtime
from relay.storage.queue import QUEUE_NAME
from relay.storage.store import EVENTS, FAILED, METRICS, DeliveryRecord, event_deliveries_key, event_key, iso

log = logging.getLogger("relay.admin.ui")

COOKIE = "relay_ui"
COOKIE_PATH = "/ui"
SESSION_SECONDS = 12 * 3600
OPEN_SIGNATURE = "open"  # the signature part of a session cookie when no admin token is configured
MAX_FORM_BYTES = 16 * 1024
WORKER_SEEN_WITHIN = 30.0
EVENTS_PER_PAGE = 25
MAX_EVENTS_PER_PAGE = 200
DELIVERIES_PER_EVENT = 50
FAILED_SHOWN = 100
ERROR_SHOWN = 300  # characters of a delivery's last error shown in a table cell

_env = Environment(
    loader=PackageLoader("relay.admin", "ui_templates"),
    autoescape=True,
    undefined=StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
)


# -- sessions and CSRF ------------------------------------------------------------------------------


def _sign(token: str, expiry: int, nonce: str) -> str:
    return hmac.new(token.encode(), f"relay-ui-session|{expiry}|{nonce}".encode(), hashlib.sha256).hexdigest()


def new_session(token: str | None, now: float | None = None) -> str:
    """A session cookie value: signed with `token`, or marked open when no admin token is configured."""
    expiry = int((now if now is not None else time.time()) + SESSION_SECONDS)
    nonce = secrets.token_urlsafe(18)
    signature = _sign(token, expiry, nonce) if token is not None else OPEN_SIGNATURE
    return f"{expiry}.{nonce}.{signature}"


def session_valid(tokens: list[str], value: str | None, now: float | None = None) -> bool:
    if not value:
        return False
    parts = value.split(".")
    if len(parts) != 3 or not parts[0].isdigit() or not parts[1]:
        return False
    expiry, nonce, signature = int(parts[0]), parts[1], parts[2]
    if expiry < (now if now is not None else time.time()) or expiry > time.time() + SESSION_SECONDS + 60:
        return False
    if not tokens:
        return signature == OPEN_SIGNATURE
    # Compare with every token, without stopping early: timing tells nothing about which one matched.
    found = False
    for token in tokens:
        found |= hmac.compare_digest(signature.encode(), _sign(token, expiry, nonce).encode())
    return found


def csrf_token(session: str) -> str:
    return hmac.new(session.encode(), b"relay-ui-csrf", hashlib.sha256).hexdigest()


def _matching_token(tokens: list[str], given: str) -> str | None:
    match = None
    for token in tokens:
        if hmac.compare_digest(given.encode(), token.encode()):
            match = token
    return match


def _same_origin(request: Request) -> bool:
    """A browser's POST names its page's origin: it must be this host (absent: an older client, allowed)."""
    source = request.headers.get("origin") or request.headers.get("referer")
    if source is None:
        return True
    if source == "null":
        return False
    hosts = {request.headers.get("host", ""), request.headers.get("x-forwarded-host", "")} - {""}
    return urlsplit(source).netloc in hosts


def _secure(request: Request) -> bool:
    return request.url.scheme == "https" or request.headers.get("x-forwarded-proto", "").lower() == "https"


def _set_session(response: Response, request: Request, value: str) -> None:
    response.set_cookie(
        COOKIE,
        value,
        max_age=SESSION_SECONDS,
        path=COOKIE_PATH,
        httponly=True,
        samesite="strict",
        secure=_secure(request),
    )


def _clear_session(response: Response, request: Request) -> None:
    response.delete_cookie(COOKIE, path=COOKIE_PATH, httponly=True, samesite="strict", secure=_secure(request))


async def _read_form(request: Request) -> dict[str, str] | None:
    """A URL-encoded form of at most MAX_FORM_BYTES; None when the body is not one."""
    media = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    if media != "application/x-www-form-urlencoded":
        return None
    chunks: list[bytes] = []
    size = 0
    try:
        async for chunk in request.stream():
            size += len(chunk)
            if size > MAX_FORM_BYTES:
                return None
            chunks.append(chunk)
    except ClientDisconnect:
        return None
    parsed = parse_qs(b"".join(chunks).decode("utf-8", "replace"), keep_blank_values=True, max_num_fields=20)
    return {k: v[0] for k, v in parsed.items()}


# -- what the page shows ----------------------------------------------------------------------------


@dataclass
class DeliveryRow:
    id: str
    event_id: str
    kind: str
    channel: str
    recipient_type: str
    recipient: str
    state: str
    attempts: int
    max_attempts: int
    error: str
    error_full: str
    created: float
    updated: float
    fallback_for: str | None
    route: str | None = None

    @classmethod
    def of(cls, r: DeliveryRecord) -> DeliveryRow:
        error = r.lastError or ""
        short = error if len(error) <= ERROR_SHOWN else error[: ERROR_SHOWN - 1] + "…"
        return cls(
            id=r.id,
            event_id=r.eventId,
            kind=r.kind,
            channel=r.channel,
            recipient_type=(r.recipientType or "").removeprefix("recipient-type:"),
            recipient=r.recipient or "",
            state=r.state,
            attempts=r.attempts,
            max_attempts=r.maxAttempts,
            error=short,
            error_full=error,
            created=r.createdAt,
            updated=r.updatedAt,
            fallback_for=r.fallbackFor,
            route=r.route,
        )

    @property
    def failed(self) -> bool:
        return self.state == State.FAILED.value


@dataclass
class EventView:
    event_id: str
    kind: str
    received: float
    total: int
    deliveries: list[DeliveryRow] = field(default_factory=list)

    @property
    def anchor(self) -> str:
        return anchor(self.event_id)

    @property
    def states(self) -> list[tuple[str, int]]:
        counts = Counter(d.state for d in self.deliveries)
        return [(s.value, counts[s.value]) for s in State if counts[s.value]]

    @property
    def has_failed(self) -> bool:
        # Deliveries past the ones shown may have failed too: offer the event's replay then as well.
        return any(d.failed for d in self.deliveries) or self.total > len(self.deliveries)


@dataclass
class FailedGroup:
    event_id: str
    kind: str
    deliveries: list[DeliveryRow] = field(default_factory=list)

    @property
    def anchor(self) -> str:
        return anchor(self.event_id)


@dataclass
class Page:
    counters: dict[str, int]
    events: list[EventView]
    failed: list[FailedGroup]
    failed_total: int
    older: float | None

    @property
    def failed_shown(self) -> int:
        return sum(len(g.deliveries) for g in self.failed)


def anchor(event_id: str) -> str:
    return "ev-" + hashlib.sha256(event_id.encode()).hexdigest()[:16]


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def counters(rt: Runtime) -> dict[str, int]:
    totals: dict[str, float] = defaultdict(float)
    for key, value in rt.redis.hgetall(METRICS).items():
        name, _, labels = _text(key).partition("|")
        pairs = dict(p.split("=", 1) for p in labels.split(",") if "=" in p)
        if name == "relay_deliveries_total":
            name = f"{name}:{pairs.get('state', '')}"
        totals[name] += float(value)
    pipe = rt.redis.pipeline(transaction=False)
    pipe.llen(f"rq:queue:{QUEUE_NAME}")
    pipe.zcard(FAILED)
    depth, failed = pipe.execute()
    return {
        "received": int(totals["relay_notifications_received_total"]),
        "duplicates": int(totals["relay_notifications_duplicate_total"]),
        "delivered": int(totals["relay_deliveries_total:delivered"]),
        "failed_kept": int(failed),
        "queue_depth": int(depth),
        "workers_alive": len(rt.store.workers_seen(WORKER_SEEN_WITHIN)),
    }


def _events(rt: Runtime, event_ids: list[str]) -> list[EventView]:
    if not event_ids:
        return []
    pipe = rt.redis.pipeline(transaction=False)
    for event_id in event_ids:
        pipe.hmget(event_key(event_id), ["kind", "receivedAt"])
        pipe.lrange(event_deliveries_key(event_id), 0, DELIVERIES_PER_EVENT - 1)
        pipe.llen(event_deliveries_key(event_id))
    answers = pipe.execute()
    views: list[tuple[EventView, list[str]]] = []
    for i, event_id in enumerate(event_ids):
        (kind, received), ids, total = answers[3 * i : 3 * i + 3]
        if received is None:  # expired; its index entry goes at the next prune
            continue
        view = EventView(event_id, _text(kind or b""), float(received), int(total))
        views.append((view, [_text(d) for d in ids]))
    records = {r.id: r for r in rt.store.deliveries(d for _, ids in views for d in ids) if r is not None}
    for view, ids in views:
        view.deliveries = [DeliveryRow.of(records[d]) for d in ids if d in records]
    return [view for view, _ in views]


def build_page(rt: Runtime, event_id: str | None, before: float | None, limit: int) -> Page:
    older: float | None = None
    if event_id is not None:
        event_ids = [event_id]
    else:
        high = f"({before!r}" if before is not None else "+inf"  # "(": strictly older than the last one shown
        found = cast(
            list[tuple[bytes, float]],
            rt.redis.zrevrangebyscore(EVENTS, high, "-inf", start=0, num=limit + 1, withscores=True),
        )
        event_ids = [_text(e) for e, _ in found[:limit]]
        if len(found) > limit:
            older = float(found[limit - 1][1])
    events = _events(rt, event_ids)

    pipe = rt.redis.pipeline(transaction=False)
    pipe.zrevrange(FAILED, 0, FAILED_SHOWN - 1)
    pipe.zcard(FAILED)
    failed_ids, failed_total = pipe.execute()
    groups: dict[str, FailedGroup] = {}
    for record in rt.store.deliveries(_text(d) for d in failed_ids):
        if record is None or record.state != State.FAILED.value:
            continue
        group = groups.setdefault(record.eventId, FailedGroup(record.eventId, record.kind))
        group.deliveries.append(DeliveryRow.of(record))
    return Page(counters(rt), events, list(groups.values()), int(failed_total), older)


def replay(rt: Runtime, delivery_id: str | None, event_id: str | None) -> tuple[int, str | None]:
    """Requeue the failed delivery, or every failed delivery of the event; others are left alone.

    Returns how many were requeued and the notification they belong to.
    """
    ids = [delivery_id] if delivery_id else rt.store.event_delivery_ids(event_id or "")
    records = [r for r in rt.store.deliveries(ids) if r is not None]
    owner = records[0].eventId if records else event_id
    return rt.intake.replay(records, rt.config.retry.attempts), owner


# -- rendering --------------------------------------------------------------------------------------


def _ago(ts: float, now: float) -> str:
    seconds = max(0, int(now - ts))
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{seconds // size} {unit} ago"
    return f"{seconds} s ago" if seconds >= 5 else "just now"


def _when(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _render(name: str, status: int = 200, headers: dict[str, str] | None = None, **context: Any) -> HTMLResponse:
    nonce = secrets.token_urlsafe(16)
    now = time.time()
    html = _env.get_template(name).render(
        style_nonce=nonce, ago=lambda ts: _ago(ts, now), when=_when, iso=iso, quote=quote, **context
    )
    policy = (
        f"default-src 'none'; style-src 'nonce-{nonce}'; img-src 'self' data:; "
        "form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
    )
    return HTMLResponse(
        html,
        status,
        headers={
            "Content-Security-Policy": policy,
            "X-Frame-Options": "DENY",
            "X-Content-Type-Options": "nosniff",
            "Referrer-Policy": "same-origin",
            "Cache-Control": "no-store",
            **(headers or {}),
        },
    )


def _error(status: int, title: str, message: str, headers: dict[str, str] | None = None) -> HTMLResponse:
    return _render("error.html.j2", status, headers, title=title, message=message)


# -- routes -----------------------------------------------------------------------------------------


def ui_routes(rt: Runtime) -> list[BaseRoute]:
    # rt.config is read at each request: a reload (SIGHUP, POST /api/v1/reload) changes the tokens.
    def tokens() -> list[str]:
        return rt.config.server.admin_tokens

    def header_auth(request: Request) -> bool:
        """The admin API's own header credentials (for scripts); only when tokens are configured."""
        return bool(tokens()) and admin_allowed(rt.config.server, request.headers)

    def session_of(request: Request) -> str | None:
        value = request.cookies.get(COOKIE)
        return value if session_valid(tokens(), value) else None

    async def page(request: Request) -> Response:
        session = session_of(request)
        fresh = None
        if session is None and not header_auth(request):
            if tokens():
                return RedirectResponse("/ui/login", 303)
            fresh = session = new_session(None)
        q = request.query_params
        try:
            limit = max(1, min(MAX_EVENTS_PER_PAGE, int(q.get("limit", EVENTS_PER_PAGE))))
            before = float(q["before"]) if q.get("before") else None
            if before is not None and not math.isfinite(before):
                raise ValueError("before must be finite")
        except ValueError:
            return _error(400, "Invalid query", "limit must be a number of notifications; before a timestamp.")
        event_id = (q.get("event") or "").strip() or None
        try:
            data = await run_in_threadpool(build_page, rt, event_id, before, limit)
        except RedisError as exc:
            log.warning("admin page: Redis unavailable (%s)", type(exc).__name__)
            return _error(
                503,
                "Redis is unavailable",
                "relay cannot read its records right now. Try again shortly.",
                headers={"Retry-After": "5"},
            )
        refresh, replayed = q.get("refresh", ""), q.get("replayed", "")
        response = _render(
            "index.html.j2",
            page=data,
            csrf=csrf_token(session) if session else "",
            open_mode=not tokens(),
            logged_in=bool(tokens()) and session is not None,
            event_filter=event_id,
            limit=limit,
            replayed=replayed if replayed.isdigit() and len(replayed) <= 6 else None,
            refresh=int(refresh) if refresh.isdigit() and len(refresh) <= 4 and 5 <= int(refresh) <= 3600 else None,
        )
        if fresh is not None:
            _set_session(response, request, fresh)
        return response

    async def login_form(request: Request) -> Response:
        if not tokens() or session_of(request) is not None:
            return RedirectResponse("/ui", 303)
        return _render("login.html.j2", error=None)

    async def login(request: Request) -> Response:
        if not _same_origin(request):
            return _error(403, "Forbidden", "The form was not sent from this relay's own page.")
        if not tokens():
            return RedirectResponse("/ui", 303)
        form = await _read_form(request)
        token = _matching_token(tokens(), (form or {}).get("token", ""))
        if token is None:
            client = request.client.host if request.client else "?"
            log.warning("admin page: failed login from %s", client)
            return _render("login.html.j2", 401, error="That is not one of this relay's admin tokens.")
        response = RedirectResponse("/ui", 303)
        _set_session(response, request, new_session(token))
        return response

    async def logout(request: Request) -> Response:
        response = RedirectResponse("/ui/login" if tokens() else "/ui", 303)
        session = request.cookies.get(COOKIE)
        form = await _read_form(request)
        if session and _same_origin(request) and form and _csrf_ok(session, form):
            _clear_session(response, request)
            return response
        return _error(403, "Forbidden", "Log out from the admin page itself.")

    def _csrf_ok(session: str, form: dict[str, str]) -> bool:
        return hmac.compare_digest(form.get("csrf", "").encode(), csrf_token(session).encode())

    async def do_replay(request: Request) -> Response:
        by_header = header_auth(request)
        session = session_of(request)
        if not by_header and session is None:
            if tokens():
                return _error(401, "Not logged in", "Your session has ended: log in again, then replay.")
            return _error(403, "Forbidden", "Replay from the admin page itself (reload it first).")
        form = await _read_form(request)
        if form is None:
            return _error(400, "Invalid request", "The replay form was not sent as a form.")
        if not by_header and (not _same_origin(request) or session is None or not _csrf_ok(session, form)):
            return _error(403, "Forbidden", "The replay was not sent from this relay's own page. Reload it and retry.")
        delivery_id = form.get("id", "").strip() or None
        event_id = form.get("eventId", "").strip() or None
        if (delivery_id is None) == (event_id is None):
            return _error(400, "Invalid request", "Replay one delivery (id) or one notification (eventId).")
        try:
            count, owner = await run_in_threadpool(replay, rt, delivery_id, event_id)
        except RedisError as exc:
            log.warning("admin page: replay failed, Redis unavailable (%s)", type(exc).__name__)
            return _error(503, "Redis is unavailable", "Nothing was replayed. Try again shortly.")
        log.info(
            "admin page: replayed %d deliveries",
            count,
            extra={"eventId": owner, **({"deliveryId": delivery_id} if delivery_id else {})},
        )
        # Back to the view the button was on (one notification, or the list), at the notification.
        target = f"/ui?replayed={count}"
        view = form.get("view", "").strip()
        if view:
            target += "&event=" + quote(view, safe="")
        if owner:
            target += "#" + anchor(owner)
        return RedirectResponse(target, 303)

    return [
        Route("/ui", page, methods=["GET"]),
        Route("/ui/login", login_form, methods=["GET"]),
        Route("/ui/login", login, methods=["POST"]),
        Route("/ui/logout", logout, methods=["POST"]),
        Route("/ui/replay", do_replay, methods=["POST"]),
    ]
