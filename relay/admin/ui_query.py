"""What the admin page's address asks for (a notification or the list, filters, refresh, a button's notice).
Only what is parsed here is ever echoed back into the page or its links."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import parse_qsl, urlencode

from relay.admin.selection import Filters
from relay.core.model import State
from relay.storage.lists import Cursor
from relay.storage.received import Before, parse_before

EVENTS_PER_PAGE = 25
MAX_EVENTS_PER_PAGE = 200
MAX_TEXT = 300  # characters of an eventId, channel or kind pattern kept from the query
# What a button's form carries back (`back`): the view it was on, and nothing else.
VIEW_KEYS = ("event", "state", "channel", "kind")


def _count(value: str) -> str | None:
    """A count from the query (replayed=, released=, expired=, added=): digits only, so nothing else is ever echoed."""
    return value if value.isdigit() and len(value) <= 6 else None


def _text(q: Mapping[str, str], key: str) -> str | None:
    return (q.get(key) or "").strip()[:MAX_TEXT] or None


@dataclass(frozen=True)
class PageQuery:
    event: str | None = None
    before: Before | None = None  # the list of notifications' page: below this one (`relay.storage.received`)
    limit: int = EVENTS_PER_PAGE
    state: State | None = None
    channel: str | None = None
    kind: str | None = None
    refresh: int | None = None
    replayed: str | None = None
    released: str | None = None
    expired: str | None = None  # a silence expired from the page: how many it released
    added: str | None = None  # a silence added from the page ("1")
    of: str | None = None  # the notification a replay or a release was about (the notice links to it)
    cursor: str | None = None  # with filters: where the listed deliveries' page starts (a listing's `next`)

    @classmethod
    def of_query(cls, q: Mapping[str, str]) -> PageQuery:
        """Raises ValueError for a limit, a before, a state or a cursor that is none."""
        limit = max(1, min(MAX_EVENTS_PER_PAGE, int(q.get("limit") or EVENTS_PER_PAGE)))
        before = parse_before(q["before"]) if q.get("before") else None
        refresh = q.get("refresh", "")
        return cls(
            event=_text(q, "event"),
            before=before,
            limit=limit,
            state=State(q["state"]) if q.get("state") else None,
            channel=_text(q, "channel"),
            kind=_text(q, "kind"),
            refresh=int(refresh) if refresh.isdigit() and len(refresh) <= 4 and 5 <= int(refresh) <= 3600 else None,
            replayed=_count(q.get("replayed", "")),
            released=_count(q.get("released", "")),
            expired=_count(q.get("expired", "")),
            added=_count(q.get("added", "")),
            of=_text(q, "of"),
            cursor=Cursor.parse(q["cursor"]).text() if q.get("cursor") else None,
        )

    @property
    def filtered(self) -> bool:
        return bool(self.state or self.channel or self.kind)

    def filters(self) -> Filters:
        return Filters(self.state, self.kind, self.channel, event_id=self.event)

    def view(self) -> dict[str, str]:
        """The view's own parameters (for its links and for the way back after a button)."""
        values = {"event": self.event, "state": self.state, "channel": self.channel, "kind": self.kind}
        return {k: str(v) for k, v in values.items() if v}

    def link(self, **extra: str | float | int) -> str:
        """This view's address, with `extra` parameters first."""
        query = urlencode({**{k: str(v) for k, v in extra.items()}, **self.view()})
        return "/ui?" + query if query else "/ui"


def back_query(form: Mapping[str, str]) -> str:
    """The view a button was on, from its form's `back` (the view's query) or `view` (an eventId)."""
    kept = {k: v for k, v in parse_qsl(form.get("back", "")) if k in VIEW_KEYS and v}
    view = form.get("view", "").strip()
    if view:
        kept["event"] = view
    return urlencode({k: v[:MAX_TEXT] for k, v in kept.items()})
