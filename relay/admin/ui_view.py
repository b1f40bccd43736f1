"""What the admin page shows, and its replay and release."""

from __future__ import annotations

import hashlib
from collections import Counter
from dataclasses import dataclass, field

from redis import Redis

from relay.admin.counters import CounterReader, Counters
from relay.admin.ui_query import PageQuery
from relay.core.model import Delivery, State, trace_id
from relay.silences.model import Silence, past_retention
from relay.silences.store import Silences
from relay.storage import requeue
from relay.storage.activity import Minute, last_hour
from relay.storage.received import received_page
from relay.storage.records import _text
from relay.storage.store import FAILED, HELD, Store
from relay.storage.work_queue import WorkQueue

DELIVERIES_PER_EVENT = 50  # in the list of notifications
DELIVERIES_OF_ONE = 500  # in the view of one notification (more: relay status, or the admin API's pages)
FAILED_SHOWN = 100
HELD_SHOWN = 100
DELIVERIES_LISTED = 50  # chosen by the page's filters, a page (`cursor`) at a time
ERROR_SHOWN = 300  # characters of a delivery's last error shown in a table cell


@dataclass
class DeliveryRow:
    """One delivery as the page shows it, with the notification its digest is listed with (for the link)."""

    delivery: Delivery
    digest_event: str | None = None  # an item of a digest: the notification its digest is listed with (None: unknown)

    @property
    def anchor(self) -> str:
        return anchor(self.delivery.id, "dl-")

    @property
    def digest_anchor(self) -> str:
        return anchor(self.delivery.digest or "", "dl-")

    @property
    def recipient_type(self) -> str:
        """Its type, and the message's own when it fell back on it (two messages of one type told apart)."""
        shown = (self.delivery.recipientType or "").removeprefix("recipient-type:")
        fell = (self.delivery.fellBackFrom or "").removeprefix("recipient-type:")
        return f"{shown} (for {fell})" if fell else shown

    @property
    def error_full(self) -> str:
        return self.delivery.lastError or ""

    @property
    def error(self) -> str:
        """The last error, cut to fit a table cell."""
        error = self.error_full
        return error if len(error) <= ERROR_SHOWN else error[: ERROR_SHOWN - 1] + "…"

    @property
    def not_before(self) -> float | None:
        """Only while held: when it goes out (a delivered record keeps its old notBefore; the page never shows it)."""
        return self.delivery.notBefore if self.held else None

    @property
    def items(self) -> int:
        """A digest: how many deliveries it carries."""
        return len(self.delivery.items)

    @property
    def held(self) -> bool:
        return self.delivery.state is State.HELD

    @property
    def held_by(self) -> str:
        """Why a held delivery waits: its gate's words (`channel down since ...`, `silenced by <id> ...`, `the
        person's active hours`), else its digest or the route's quiet hours."""
        if self.items:
            return f"digest of {self.items} gathering"
        if self.delivery.lastError:
            return str(self.delivery.lastError).removeprefix("held by ")
        return "waits in its digest" if self.delivery.digest else "quiet hours"

    @property
    def failed(self) -> bool:
        return self.delivery.state is State.FAILED

    @property
    def delivered(self) -> bool:
        return self.delivery.state is State.DELIVERED


@dataclass
class EventView:
    event_id: str
    kind: str
    received: float
    total: int
    deliveries: list[DeliveryRow] = field(default_factory=list)
    trace_id: str | None = None  # with tracing on: the notification's trace (README, "Tracing")

    @property
    def anchor(self) -> str:
        return anchor(self.event_id)

    @property
    def states(self) -> list[tuple[str, int]]:
        counts = Counter(d.delivery.state for d in self.deliveries)
        return [(s, counts[s]) for s in State if counts[s]]

    @property
    def has_digest(self) -> bool:
        return any(d.delivery.digest or d.items for d in self.deliveries)

    @property
    def has_held(self) -> bool:
        return any(d.held for d in self.deliveries)

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


@dataclass(frozen=True)
class SilenceRow:
    silence: Silence
    state: str  # active or pending, now
    note: str | None = None  # a hold longer than retention (relay.silences.model.past_retention)


@dataclass
class Page:
    counters: dict[str, int]
    events: list[EventView]
    failed: list[FailedGroup]
    failed_total: int
    older: str | None  # more notifications than those listed: the next page's cursor
    held: list[DeliveryRow] = field(default_factory=list)  # soonest first
    held_total: int = 0
    silences: list[SilenceRow] = field(default_factory=list)  # active and pending, oldest start first
    activity: list[Minute] = field(default_factory=list)  # the last hour's, oldest minute first
    listed: list[DeliveryRow] | None = None  # with filters: the deliveries they choose, newest first
    listed_next: str | None = None  # more than those listed match: the cursor of the next page

    @property
    def failed_shown(self) -> int:
        return sum(len(g.deliveries) for g in self.failed)


def anchor(ident: str, prefix: str = "ev-") -> str:
    return prefix + hashlib.sha256(ident.encode()).hexdigest()[:16]


def page_counters(c: Counters) -> dict[str, int]:
    return {
        "received": int(c.total("relay_notifications_received_total")),
        "duplicates": int(c.total("relay_notifications_duplicate_total")),
        "delivered": int(c.total("relay_deliveries_total", state=State.DELIVERED)),
        "failed_kept": c.gauges["relay_deliveries_failed_kept"],
        "queue_depth": c.gauges["relay_queue_depth"],
        "workers_alive": c.gauges["relay_workers_alive"],
    }


class PageData:
    """Reads what the page shows (blocking: run it off the event loop)."""

    def __init__(self, redis: Redis, store: Store, counters: CounterReader) -> None:
        self.redis, self.store, self.counters = redis, store, counters

    def events(self, event_ids: list[str], shown: int = DELIVERIES_PER_EVENT) -> list[EventView]:
        """The notifications, each with its first `shown` deliveries and how many it has."""
        views: list[tuple[EventView, list[str]]] = []
        # An expired or unreadable event is left out (logged): one bad key never takes the page down.
        events = self.store.events(event_ids)
        for event in (events[i] for i in event_ids if i in events):
            view = EventView(event.eventId, event.kind, event.receivedAt, len(event.deliveries))
            view.trace_id = trace_id(event.trace)
            views.append((view, event.deliveries[:shown]))
        records = {r.id: r for r in self.store.deliveries(d for _, ids in views for d in ids) if r is not None}
        for view, ids in views:
            view.deliveries = [DeliveryRow(records[d]) for d in ids if d in records]
        self.link_digests([d for view, _ in views for d in view.deliveries], records)
        return [view for view, _ in views]

    def link_digests(self, rows: list[DeliveryRow], known: dict[str, Delivery]) -> None:
        """Each item's digest's notification (a digest is listed with its first item's), for the link to it."""
        missing = list({r.delivery.digest for r in rows if r.delivery.digest and r.delivery.digest not in known})
        found = {**known, **{r.id: r for r in self.store.deliveries(missing) if r is not None}}
        for row in rows:
            if row.delivery.digest and row.delivery.digest in found:
                row.digest_event = found[row.delivery.digest].eventId

    def page(self, query: PageQuery) -> Page:
        older: str | None = None
        event_ids: list[str] = []
        if query.event is not None:
            event_ids = [query.event]
        elif not query.filtered:
            event_ids, older = received_page(self.redis, query.before, query.limit)
        # With filters, their deliveries are listed instead of the notifications.
        events = (
            [] if query.filtered else self.events(event_ids, DELIVERIES_OF_ONE if query.event else DELIVERIES_PER_EVENT)
        )
        chosen = query.filters()

        pipe = self.redis.pipeline(transaction=False)
        pipe.zrevrange(FAILED, 0, FAILED_SHOWN - 1)
        pipe.zcard(FAILED)
        pipe.zrange(HELD, 0, HELD_SHOWN - 1)  # by notBefore: soonest first
        pipe.zcard(HELD)
        failed_ids, failed_total, held_ids, held_total = pipe.execute()
        groups: dict[str, FailedGroup] = {}
        for record in self.store.deliveries(_text(d) for d in failed_ids):
            if record is None or record.state is not State.FAILED or (query.filtered and not chosen.matches(record)):
                continue
            group = groups.setdefault(record.eventId, FailedGroup(record.eventId, record.kind))
            group.deliveries.append(DeliveryRow(record))
        held = [
            DeliveryRow(r)
            for r in self.store.deliveries(_text(d) for d in held_ids)
            if r and r.state is State.HELD and (not query.filtered or chosen.matches(r))
        ]
        self.link_digests(held, {})
        counters = page_counters(self.counters.read())
        at = self.counters.clock()
        silences = [s for s in Silences(self.redis).all() if s.endsAt > at]
        page = Page(counters, events, list(groups.values()), int(failed_total), older, held, int(held_total))
        page.silences = [SilenceRow(s, s.state(at), past_retention(s, at, self.store.retention)) for s in silences]
        page.activity = last_hour(self.redis, at)
        if query.filtered:
            listed, page.listed_next = chosen.page(self.store, DELIVERIES_LISTED, query.cursor)
            page.listed = [DeliveryRow(r) for r in listed]
            self.link_digests(page.listed, {})
        return page

    def target(self, delivery_id: str | None, event_id: str | None) -> tuple[list[Delivery], str | None]:
        """A button's deliveries (the one, or the notification's) and their notification; never every one."""
        if not delivery_id and not event_id:
            raise ValueError("one delivery or one notification")
        ids = [delivery_id] if delivery_id else self.store.event_delivery_ids(event_id or "")
        records = [r for r in self.store.deliveries(ids) if r is not None]
        return records, records[0].eventId if records else event_id

    def replay(
        self, work: WorkQueue, attempts: int, delivery_id: str | None, event_id: str | None
    ) -> tuple[int, str | None]:
        """Requeue the failed delivery, or the event's failed ones: how many, and their notification."""
        records, owner = self.target(delivery_id, event_id)
        return requeue.replay(work, records, attempts), owner

    def held_of(self, delivery_id: str | None, event_id: str | None) -> list[DeliveryRow]:
        """The held deliveries a release of this delivery, or of this notification, is about."""
        rows = [DeliveryRow(r) for r in self.target(delivery_id, event_id)[0] if r.state is State.HELD]
        self.link_digests(rows, {})
        return rows

    def release(
        self, work: WorkQueue, delivery_id: str | None, event_id: str | None, dry_run: bool = False
    ) -> tuple[int, str | None]:
        """The admin API's release of the held delivery, or the notification's: how many, and their notification."""
        records, owner = self.target(delivery_id, event_id)
        return requeue.release(work, [r for r in records if r.state is State.HELD], dry_run), owner
