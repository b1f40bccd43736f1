"""Which deliveries a listing, a replay or a release is about: filters from a query or a body, and their use."""

from __future__ import annotations

from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any, Self

from pydantic import BaseModel, Field, StrictStr, field_validator
from pydantic.json_schema import SkipJsonSchema

from relay.core.model import Delivery, State
from relay.core.times import since
from relay.storage.lists import CURSOR_PATTERN as LIST_CURSOR
from relay.storage.lists import Cursor
from relay.storage.records import SCAN_LIMIT
from relay.storage.store import Store

MAX_LISTED = 500
# A duration back from now (90s, 2h, 1h30m, 7d) or an ISO 8601 date or time.
SINCE_PATTERN = r"^(\d+(\.\d+)?(ms|s|m|h|d|w))+$|^\d+(\.\d+)?$|^\d{4}-\d{2}-\d{2}([T ][0-9:.]+)?(Z|[+-]\d{2}:?\d{2})?$"


def since_value(value: Any, now: float) -> float | None:
    if value is None or value == "":
        return None
    try:
        return since(str(value), now)
    except ValueError:
        raise ValueError(f"since {value!r} is neither a duration (2h) nor an ISO 8601 time") from None


def _since(value: str | None) -> str | None:
    since_value(value, 0.0)  # raises on anything but a duration or a time
    return value


def _cursor(value: str | None) -> str | None:
    try:
        if value is not None:
            Cursor.parse(value)  # the pattern lets `45e~x` by; its score must be a number too
    except ValueError:
        raise ValueError(f"cursor {value!r} is not one a listing gave") from None
    return value


class _Query(BaseModel):
    @classmethod
    def of(cls, query: Any) -> Self:
        """From a request's query parameters (empty ones count as absent)."""
        return cls.model_validate({k: v for k, v in query.items() if v})


class DeliveryQuery(_Query):
    """GET /api/v1/deliveries: its query parameters."""

    state: State | SkipJsonSchema[None] = None
    kind: str | SkipJsonSchema[None] = None
    channel: str | SkipJsonSchema[None] = None
    since: str | SkipJsonSchema[None] = Field(None, json_schema_extra={"pattern": SINCE_PATTERN})
    eventId: str | SkipJsonSchema[None] = None
    limit: int = Field(50, ge=1, description=f"at most {MAX_LISTED} are listed, whatever the limit")
    cursor: str | SkipJsonSchema[None] = Field(
        None,
        pattern=LIST_CURSOR,
        json_schema_extra={"pattern": LIST_CURSOR},
        description='the cursor in the previous answer\'s `Link: <...>; rel="next"` header (absent: the newest)',
    )

    _check_since = field_validator("since")(_since)
    _check_cursor = field_validator("cursor")(_cursor)


EVENT_PAGE = 500  # deliveries of one notification in one answer, unless `limit` says otherwise
MAX_EVENT_PAGE = 1000
CURSOR_PATTERN = r"^[0-9]{1,9}$"


def _order(r: Delivery) -> tuple[float, str]:
    return (r.createdAt, r.id)


class EventQuery(_Query):
    """GET /api/v1/events/{eventId}: which page of the notification's deliveries."""

    limit: int = Field(
        EVENT_PAGE, ge=1, description=f"deliveries in this answer; at most {MAX_EVENT_PAGE}, whatever the limit"
    )
    cursor: str | SkipJsonSchema[None] = Field(
        None,
        pattern=CURSOR_PATTERN,
        # The parameter's own schema (the pattern above applies to the string branch, which it does not show).
        json_schema_extra={"pattern": CURSOR_PATTERN},
        description="the `next` of the previous answer, as given (absent: from the first delivery)",
    )

    @property
    def start(self) -> int:
        return int(self.cursor or 0)

    @property
    def count(self) -> int:
        return min(self.limit, MAX_EVENT_PAGE)


class ReplayRequest(BaseModel):
    """POST /api/v1/deliveries/replay: which failed deliveries to requeue (no filter: every failed one)."""

    ids: list[StrictStr] | None = None
    eventId: StrictStr | None = None
    kind: StrictStr | None = None
    channel: StrictStr | None = None
    since: StrictStr | None = None
    dryRun: bool = False

    _check_since = field_validator("since")(_since)

    @field_validator("dryRun", mode="before")
    @classmethod
    def _truthy(cls, value: Any) -> bool:
        return bool(value)  # as JSON's truthiness has always been read here


class ReleaseRequest(ReplayRequest):
    """POST /api/v1/deliveries/release: which held deliveries to send now (no filter: every held one)."""


@dataclass(frozen=True)
class Filters:
    """Which deliveries a listing or a replay is about."""

    state: State | None = None
    kind: str | None = None
    channel: str | None = None
    since: float | None = None
    event_id: str | None = None
    ids: list[str] | None = None

    @classmethod
    def from_query(cls, q: DeliveryQuery, now: float) -> Filters:
        return cls(q.state, q.kind, q.channel, since_value(q.since, now), q.eventId)

    @classmethod
    def from_body(cls, body: ReplayRequest, now: float, state: State = State.FAILED) -> Filters:
        """`now`: what a `since` given as a duration counts back from."""
        return cls(state, body.kind, body.channel, since_value(body.since, now), body.eventId, body.ids)

    def matches(self, r: Delivery) -> bool:
        if self.state is not None and r.state is not self.state:
            return False
        if self.kind and not fnmatchcase(r.kind, self.kind):
            return False
        if self.channel and r.channel != self.channel:
            return False
        if self.since is not None and r.updatedAt < self.since and r.createdAt < self.since:
            return False
        return not (self.event_id and r.eventId != self.event_id)

    def candidates(self, store: Store) -> list[Delivery]:
        """The named ones, the notification's, else the newest the filters match (at most SCAN_LIMIT)."""
        if self.ids is not None:
            return [r for r in store.deliveries(self.ids) if r is not None]
        if self.event_id:
            return [r for r in store.deliveries(store.event_delivery_ids(self.event_id)) if r is not None]
        found: list[Delivery] = []
        cursor: Cursor | None = None
        # Failed or held ones since a time: those that failed (were held) since, too, as a replay always chose.
        since = None if self.state in (State.FAILED, State.HELD) else self.since
        while len(found) < SCAN_LIMIT:
            page, cursor = self._indexed(store, MAX_LISTED, cursor, since)
            found += page
            if cursor is None:
                break
        return found

    def _indexed(
        self, store: Store, limit: int, cursor: Cursor | None, since: float | None
    ) -> tuple[list[Delivery], Cursor | None]:
        """One page from the lists of those created since `since`, matching the filters, records still kept."""
        state = self.state.value if self.state is not None else None
        entries, after = store.lists.page(state, self.channel, self.kind, since, limit, cursor)
        found = [r for r in store.deliveries(i for i, _ in entries) if r is not None and self.matches(r)]
        return found, after

    def page(self, store: Store, limit: int, cursor: str | None = None) -> tuple[list[Delivery], str | None]:
        """Up to `limit` (at most MAX_LISTED) picked deliveries after `cursor`, newest first; the next cursor."""
        after, limit = Cursor.parse(cursor) if cursor else None, min(limit, MAX_LISTED)
        if self.ids is not None or self.event_id:  # a few: read whole, ordered as the lists order theirs
            found = sorted((r for r in self.candidates(store) if self.matches(r)), key=_order, reverse=True)
            if after is not None:
                found = [r for r in found if _order(r) < (float(after.score), after.id)]
            more = found[limit:]
            found = found[:limit]
            return found, Cursor(repr(found[-1].createdAt), found[-1].id).text() if more else None
        found = []
        while len(found) < limit:  # records expired before the lists were pruned leave a page short: read on
            page, after = self._indexed(store, limit - len(found), after, self.since)
            found += page
            if after is None:
                break
        return found, after.text() if after is not None else None

    def chosen(self, store: Store) -> tuple[list[Delivery], list[dict[str, str]]]:
        """The deliveries picked, and those of `ids` not in the wanted state (with their state, or "unknown")."""
        candidates = self.candidates(store)
        chosen = [r for r in candidates if self.matches(r)]
        passed: list[dict[str, str]] = []
        if self.ids is not None:
            known = {r.id for r in candidates}
            passed = [{"id": r.id, "state": r.state} for r in candidates if r.state is not self.state]
            passed += [{"id": i, "state": "unknown"} for i in self.ids if i not in known]
        return chosen, passed
