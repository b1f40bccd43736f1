"""The pages people reach through signed links (relay.web.links): their preference page, and one-click
unsubscribe (RFC 8058). The link is the key, to its own person's preferences only. A POST that saves the page
carries a token derived from its link and any Origin must be this host; the one-click POST needs neither (mail
providers send it bare); a GET never changes anything (mail scanners fetch links).
"""

from __future__ import annotations

import hashlib
import hmac
import logging
from collections.abc import Callable
from dataclasses import replace
from typing import Any, TypeVar

import anyio
import anyio.to_thread
from redis import Redis
from redis.exceptions import RedisError
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

from relay.config import Config
from relay.core.names import channel_label, clean_name, readable_ref
from relay.people.view import DAYS, apply_switches, hours_form, hours_from_form, other_opt_outs, rows, zone_choices
from relay.preferences.model import Preference, PreferenceError, human_kind
from relay.preferences.store import SEEN_DAYS, Preferences
from relay.web.errors import RETRY_AFTER, Answered, error_response
from relay.web.forms import read_form, same_origin
from relay.web.html import secure_page, templates
from relay.web.links import (
    PREFERENCES_PATH,
    SCOPE_PREFERENCES,
    SCOPE_UNSUBSCRIBE,
    UNSUBSCRIBE_PATH,
    Link,
    LinkRefused,
    make_token,
    read_token,
)
from relay.web.operation import FORM, FORM_FIELDS, Operation, html_answer
from relay.web.throttle import PREFERENCES, UNSUBSCRIBE, Guard

log = logging.getLogger("relay.people")
MAX_FIELDS = 600
NAME_WAIT = 1.0  # seconds a page waits for a person's name
_env = templates("relay.people", "templates")

NameOf = Callable[[str], str | None]
T = TypeVar("T")


async def shown_name(name_of: NameOf | None, person: str) -> str:
    """Who a page is for: their name as the runtime finds it, waited for at most NAME_WAIT, else their readable
    reference. A page never waits long on the platform, nor fails for it."""
    found: str | None = None
    if name_of is not None:
        with anyio.move_on_after(NAME_WAIT):
            try:  # a look-up still running when the page stops waiting ends on its own (its answer is cached)
                found = await anyio.to_thread.run_sync(name_of, person, abandon_on_cancel=True)
            except Exception as exc:  # a name is never worth an error page
                log.warning("a person's name was not found, their reference shown: %s", type(exc).__name__)
    return clean_name(found) or readable_ref(person)


def page(name: str, status: int = 200, **context: Any) -> HTMLResponse:
    # The page's address is its key: kept out of caches and other sites (relay.web.html), and out of indexes.
    return secure_page(
        lambda nonce: _env.get_template(name).render(style_nonce=nonce, **context),
        status,
        {"X-Robots-Tag": "noindex"},
    )


def _operation(summary: str, answers: dict[int, str], errors: tuple[int, ...], form: bool = False) -> Operation:
    html = {status: html_answer(text) for status, text in answers.items()}
    fields = FORM_FIELDS if form else None
    return Operation(summary, html, errors, fields, request_media=FORM, security=[{}], tags=("people",))


def csrf_for(secret: str, token: str) -> str:
    return hmac.new(secret.encode(), b"relay-people-csrf:" + token.encode(), hashlib.sha256).hexdigest()


class PeoplePages:
    def __init__(
        self,
        redis: Redis,
        settings: Callable[[], Config],
        clock: Callable[[], float],
        guard: Guard | None = None,
        name_of: NameOf | None = None,  # a person's name (`shown_name`); None: their readable reference
    ) -> None:
        self.guard = guard
        self.name_of = name_of
        self.store = Preferences(redis)
        self.settings = settings
        self.clock = clock

    @_operation(
        "A person's preference page (a signed link from their notifications)",
        {200: "The page"},
        (403, 404, 410, 429, 503),
    )
    async def preferences(self, request: Request) -> Response:
        link, token = await self._link(request, SCOPE_PREFERENCES)
        return await self._preferences_page(token, link.person, saved=request.query_params.get("saved") == "1")

    @_operation(
        "Save a person's preference page (form fields `csrf`, `row`, `on`, `hours`, `day`, `start`, `end`, `zone`)",
        {303: "Saved: back to the page", 422: "Not saved: the page says why"},
        (400, 403, 404, 410, 413, 415, 429, 503),
        form=True,
    )
    async def save(self, request: Request) -> Response:
        link, token = await self._link(request, SCOPE_PREFERENCES)
        form = await read_form(request, MAX_FIELDS)
        if not _from_page(request, dict(form), self.settings(), token):
            return error_response(403, ["the form did not come from this page"], "Reload the page and save again.")
        try:
            hours = hours_from_form(form)
        except ValueError as exc:
            return await self._preferences_page(token, link.person, problem=str(exc), status=422)
        config = self.settings()

        def change(pref: Preference) -> bool:
            shown = rows(config, pref, self.store.sent(link.person, self.clock()))
            apply_switches(pref, shown, form)
            pref.activeHours = hours
            return True

        try:
            await _off_loop(lambda: self.store.update(link.person, change, self.clock()))
        except PreferenceError as exc:  # nothing stored: one that could not be read back
            return await self._preferences_page(token, link.person, problem=f"Not saved: {exc.message}.", status=422)
        log.info("preferences saved from the preference page")
        return RedirectResponse(f"{PREFERENCES_PATH}{token}?saved=1", 303, headers=_NO_STORE)

    async def _preferences_page(
        self, token: str, person: str, saved: bool = False, problem: str | None = None, status: int = 200
    ) -> Response:
        pref, sent = await _off_loop(lambda: (self.store.get(person), self.store.sent(person, self.clock())))
        name = await shown_name(self.name_of, person)
        config = self.settings()
        shown, hours = rows(config, pref, sent), hours_form(pref.activeHours if pref else None)
        return page(
            "preferences.html.j2",
            status,
            who=name,
            rows=shown,
            others=other_opt_outs(config, pref, shown),
            hours=hours,
            weekdays=DAYS,
            zones=zone_choices(hours.zone),
            days=SEEN_DAYS,
            critical=config.preferences.critical_kinds,
            csrf=csrf_for(config.preferences.secret or "", token),
            action=PREFERENCES_PATH + token,
            saved=saved,
            problem=problem,
        )

    @_operation(
        "What one-click unsubscribe would do, with a button (changes nothing: mail scanners fetch links)",
        {200: "The confirmation page"},
        (403, 404, 410, 429, 503),
    )
    async def confirm(self, request: Request) -> Response:
        link, token = await self._link(request, SCOPE_UNSUBSCRIBE)
        pref = await _off_loop(lambda: self.store.get(link.person))
        opted = pref is not None and pref.opted_out(link.kind, link.channel) is not None
        return self._unsubscribe_page(link, token, opted, None, await shown_name(self.name_of, link.person))

    @_operation(
        "One-click unsubscribe (RFC 8058: `List-Unsubscribe=One-Click`), or its undo (`undo`, `csrf`)",
        {200: "Done (idempotent)"},
        (400, 403, 404, 409, 410, 413, 415, 429, 503),
        form=True,
    )
    async def unsubscribe(self, request: Request) -> Response:
        link, token = await self._link(request, SCOPE_UNSUBSCRIBE)
        values = dict(await read_form(request, 20))
        at = self.clock()
        if values.get("List-Unsubscribe") == "One-Click":
            problem = await _off_loop(lambda: self._opt_out(link, at))
            if problem is not None:
                return error_response(
                    409,
                    [f"the opt-out cannot be stored: {problem}"],
                    "You are not unsubscribed: relay cannot keep this choice with the others you made.",
                    solutions=["Use the link to your preference page, or ask your support desk."],
                    headers=_NO_STORE,
                )
            log.info("one-click unsubscribe")
            return self._unsubscribe_page(link, token, True, "out", await shown_name(self.name_of, link.person))
        if values.get("undo"):
            if not _from_page(request, values, self.settings(), token):
                return error_response(403, ["the form did not come from this page"], "Reload the page and try again.")
            # Where they stand now: another opt-out (a pattern of theirs, say) may still hold this kind.
            pref = await _off_loop(
                lambda: self.store.update(link.person, lambda p: p.without_opt_out(link.kind, link.channel), at)
            )
            still = pref.opted_out(link.kind, link.channel) is not None
            name = await shown_name(self.name_of, link.person)
            return self._unsubscribe_page(link, token, still, "in" if not still else None, name)
        return error_response(
            400,
            ["the body is neither List-Unsubscribe=One-Click nor an undo"],
            "Nothing was changed.",
            solutions=["POST List-Unsubscribe=One-Click (form-encoded) to unsubscribe."],
        )

    def _opt_out(self, link: Link, at: float) -> str | None:
        """Read back as the gates read it: None when it holds, else why not (never "unsubscribed" for nothing)."""
        try:  # what `update` stores has passed the gates' own reading (it refuses, and stores nothing, else)
            pref = self.store.update(link.person, lambda p: p.with_opt_out(link.kind, link.channel), at)
        except PreferenceError as exc:
            log.warning("one-click unsubscribe not stored: %s", exc.message)
            return exc.message
        return None if pref.opted_out(link.kind, link.channel) is not None else "not stored"

    def _unsubscribe_page(self, link: Link, token: str, opted_out: bool, done: str | None, name: str) -> Response:
        config = self.settings()
        secret = config.preferences.secret or ""
        # The page of the same person, bound to the same address and made at the same time (so it expires with
        # this link): following it grants nothing the e-mail's own "Manage your notifications" link does not.
        prefs_token = make_token(secret, replace(link, scope=SCOPE_PREFERENCES, kind="", channel=""))
        return page(
            "unsubscribe.html.j2",
            200,
            kind_title=human_kind(link.kind),
            channel=channel_label(config, link.channel),
            who=name,
            opted_out=opted_out,
            done=done,
            csrf=csrf_for(secret, token),
            action=UNSUBSCRIBE_PATH + token,
            preferences=PREFERENCES_PATH + prefs_token,
        )

    async def _link(self, request: Request, scope: str) -> tuple[Link, str]:
        """The signed link; else Answered, the refusal. An expired one is not counted to a 429: people click old
        mail."""
        prefs = self.settings().preferences
        token = str(request.path_params.get("token", ""))
        if not prefs.secret:
            raise Answered(_refused(request, 404, "Preferences are not enabled on this relay."))
        surface = PREFERENCES if scope == SCOPE_PREFERENCES else UNSUBSCRIBE
        if self.guard is not None:
            throttled = await self.guard.check(request, surface)
            if throttled is not None:
                raise Answered(throttled)
        try:
            return read_token(prefs.secret, token, scope, self.clock(), prefs.link_ttl), token
        except LinkRefused as exc:
            if self.guard is not None and exc.status == 403:
                await self.guard.failed(request, surface, "invalid link")
            raise Answered(_refused(request, exc.status, exc.message)) from None


_NO_STORE = {"Cache-Control": "no-store", "Referrer-Policy": "no-referrer"}


def _from_page(request: Request, form: dict[str, str], config: Config, token: str) -> bool:
    """A form posted by the page itself: its token (derived from the link) and, if named, this origin."""
    given = form.get("csrf", "").encode("utf-8", "replace")
    expected = csrf_for(config.preferences.secret or "", token).encode()
    return same_origin(request, config) and hmac.compare_digest(given, expected)


def _refused(request: Request, status: int, message: str) -> Response:
    if "text/html" in request.headers.get("accept", ""):
        titles = {403: "This link is not valid", 404: "Not available", 410: "This link no longer works"}
        return page("error.html.j2", status, title=titles.get(status, "Not available"), message=message)
    reason = {403: "invalid link", 404: "preferences are not enabled", 410: "expired link"}.get(status, "refused")
    return error_response(status, [reason], message, headers=_NO_STORE)


async def _off_loop(call: Callable[[], T]) -> T:
    """`call()` off the event loop; when Redis fails under it, Answered: the 503."""
    try:
        return await run_in_threadpool(call)
    except RedisError:
        raise Answered(
            error_response(
                503,
                ["Redis is unavailable"],
                "Your preferences cannot be read right now.",
                solutions=["Try again in a minute."],
                headers={"Retry-After": RETRY_AFTER, **_NO_STORE},
            )
        ) from None
