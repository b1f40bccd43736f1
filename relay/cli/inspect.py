"""`relay status`, `relay deliveries`, `relay delivery`, `relay replay`, `relay release`: what happened, read from
relay's Redis. The tables show the route each delivery came from, a digest column for digests and their items,
`notBefore` only while held, `nextAttemptAt` while retrying, long cells cut with an ellipsis (whole with --wide;
--format json prints the records as the admin API does)."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from relay.cli.common import Command, output_options, runtime, table
from relay.config.urls import masked_url
from relay.core.states import State
from relay.runtime.logs import escape

# The states `--state` offers, as written on the command line (relay.core.states loads no model).
STATES = tuple(s.value for s in State)

BATCH = 100
STATUS_COLUMNS = [
    "id", "recipientType", "recipient", "address", "channel", "route", "state", "attempts", "updatedAt", "lastError",
]  # fmt: skip
LIST_COLUMNS = [
    "id", "eventId", "kind", "recipientType", "recipient", "channel", "route", "state", "attempts", "updatedAt",
    "lastError",
]  # fmt: skip
FACTS = "id eventId kind channel route recipientType recipient address state attempts lastError notBefore createdAt"
TRIES = ["at", "outcome", "status", "said", "error", "seconds", "probe"]


def digest_mark(delivery: dict[str, Any]) -> str | None:
    """A digest says how many it carries; an item names its digest."""
    if delivery.get("items"):
        return f"digest of {len(delivery['items'])}"
    if delivery.get("digest"):
        return f"in {delivery['digest']}"
    return None


def _row(delivery: dict[str, Any]) -> dict[str, Any]:
    # A delivered (or failed...) record keeps the notBefore it was held until: the table shows it only while held.
    held = delivery.get("state") == State.HELD
    return {**delivery, "digest": digest_mark(delivery), "notBefore": delivery.get("notBefore") if held else None}


def deliveries_table(deliveries: list[dict[str, Any]], columns: list[str], wide: bool = False) -> str:
    rows = [_row(d) for d in deliveries]
    shown = list(columns)
    if any(r["digest"] for r in rows):
        shown.insert(shown.index("state") + 1, "digest")
    shown += [name for name in ("notBefore", "nextAttemptAt") if any(r.get(name) for r in rows)]
    return table(rows, shown, wide)


def _redis_line(rt: Any) -> str:
    from relay.runtime.bootstrap import redis_url

    url = masked_url(redis_url(rt.config))  # `rq info -u` and rq-dashboard take it (add the password)
    return f"redis {url}  (rq info -u {url})"


def cmd_status(args: argparse.Namespace) -> int:
    from relay.admin.api import event_page
    from relay.admin.selection import MAX_EVENT_PAGE

    rt = runtime(args)
    event = event_page(rt.store, args.event_id, 0, MAX_EVENT_PAGE)
    if event is None:
        print(f"no notification with eventId {args.event_id!r}; {_redis_line(rt)}", file=sys.stderr)
        return 1
    page: Any = event
    while "next" in page:  # every delivery, a page at a time (as the admin API gives them)
        page = event_page(rt.store, args.event_id, int(page.pop("next")), MAX_EVENT_PAGE) or {}
        event["deliveries"] += page.get("deliveries", [])
    records = with_next_try(rt.store, event["deliveries"])
    if args.format == "json":
        print(json.dumps({**event, "deliveries": records}, indent=2))
        print(_redis_line(rt), file=sys.stderr)  # stdout stays one JSON document
        return 0
    print(escape(f"event {event['eventId']}  kind {event['kind']}  received {event['receivedAt']}"))
    print(deliveries_table(records, STATUS_COLUMNS, args.wide))
    print(_redis_line(rt))
    return 0


def with_next_try(store: Any, rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """A retrying delivery's next try (`nextAttemptAt`), read from the work queue: its record does not keep it."""
    from relay.core.model import iso

    due = store.leases.due_times([r["id"] for r in rows if r["state"] == State.RETRYING])
    return [{**r, "nextAttemptAt": iso(due[r["id"]])} if r["id"] in due else dict(r) for r in rows]


def _filters(args: argparse.Namespace, state: State | None, now: float) -> Any:
    from relay.admin.selection import Filters, since_value

    return Filters(state, args.kind, args.channel, since_value(args.since, now), args.event)


def cmd_delivery(args: argparse.Namespace) -> int:
    """One delivery whole, as `GET /api/v1/deliveries/{id}` and its page show it."""
    from relay.admin.detail import read_detail

    found = read_detail(runtime(args).store, args.delivery_id)
    if found is None:
        print(f"relay: no delivery with id {args.delivery_id!r} (unknown, or its record has expired)", file=sys.stderr)
        return 1
    shown = found[1]
    if args.format == "json":
        print(json.dumps(shown, indent=2, ensure_ascii=False))
        return 0
    for key in (k for k in [*FACTS.split(), "updatedAt", "digest", "traceId"] if shown.get(k) not in (None, "")):
        print(escape(f"{key + ':':<15}{shown[key]}"))
    print(f"\ntries (the last {len(shown['attemptLog'])} of {shown['attempts']}):")
    print(table(shown["attemptLog"], TRIES, args.wide))
    message = shown.get("message") or {"title": "none yet (never tried)", "text": ""}
    print("\n" + escape(f"message sent: {message['title']}"))
    for line in message["text"].splitlines():
        print(escape(f"  {line}"))
    return 0


def cmd_deliveries(args: argparse.Namespace) -> int:
    """When more follow, the cursor to go on from is said on stderr (stdout stays the table, or one JSON)."""
    rt = runtime(args)
    filters = _filters(args, State(args.state) if args.state else None, rt.clock())
    found: list[Any] = []
    cursor = args.cursor
    while len(found) < args.limit:
        page, cursor = filters.page(rt.store, args.limit - len(found), cursor)
        found += page
        if cursor is None:
            break
    rows = with_next_try(rt.store, [r.public(with_event=True) for r in found])
    print(json.dumps(rows, indent=2) if args.format == "json" else deliveries_table(rows, LIST_COLUMNS, args.wide))
    if cursor is not None:
        print(f"more: --cursor {cursor}", file=sys.stderr)
    return 0


def cmd_replay(args: argparse.Namespace) -> int:
    from relay.storage.requeue import replay

    return _act_on(
        args,
        State.FAILED,
        lambda rt, batch: replay(rt.work, batch, rt.config.retry.attempts),
        lambda r: f"would replay {r.id}  event {r.eventId}  channel {r.channel}  last error: {r.lastError}",
        "{} would be replayed (dry run)",
        "replayed {}",
    )


def cmd_release(args: argparse.Namespace) -> int:
    from relay.storage.requeue import release

    return _act_on(
        args,
        State.HELD,
        lambda rt, batch: release(rt.work, batch),
        lambda r: f"would release {r.id}  event {r.eventId}  channel {r.channel}  held until {r.public()['notBefore']}",
        "{} would be sent now (dry run)",
        "released {}: they go out now",
    )


def _act_on(
    args: argparse.Namespace,
    state: State,
    act: Callable[[Any, list[Any]], int],
    would: Callable[[Any], str],
    dry_run_done: str,
    done_text: str,
) -> int:
    """In batches; the dry run's list, the bar and the count are the deliveries sent (a digest once)."""
    from relay.storage.requeue import carried

    rt = runtime(args)
    chosen, _ = _filters(args, state, rt.clock()).chosen(rt.store)
    going = carried(rt.store, chosen, state)
    if args.dry_run:
        for r in going:
            print(would(r) + (f"  (a digest of {len(r.items)})" if r.items else ""))
        print(dry_run_done.format(_count(len(going), state)))
        return 0
    done = 0
    for start in range(0, len(going), BATCH):
        done += act(rt, going[start : start + BATCH])
        _progress(done, len(going))
    if going:
        print(file=sys.stderr)
    print(done_text.format(_count(done, state)))
    return 0


def _count(n: int, state: str) -> str:
    return f"{n} {state} {'delivery' if n == 1 else 'deliveries'}"


def _progress(done: int, total: int, width: int = 30) -> None:
    filled = int(width * done / total) if total else width
    print(f"\r[{'#' * filled}{'.' * (width - filled)}] {done}/{total}", end="", file=sys.stderr, flush=True)


def add_commands(command: Command) -> None:
    for name, help_ in (("deliveries", "table of deliveries, newest first"), ("replay", "requeue failed deliveries")):
        c = command(name, help_)
        _filter_options(c)
        c.add_argument("--since", help="a duration back from now (2h) or an ISO time")
        if name == "deliveries":
            c.add_argument("--state", choices=list(STATES))
            c.add_argument("--limit", type=int, default=50)
            c.add_argument("--cursor", help="go on after the last listing (the cursor it said)")
            output_options(c)
            c.set_defaults(func=cmd_deliveries)
        else:
            c.add_argument("--dry-run", action="store_true", help="say what would be replayed; change nothing")
            c.set_defaults(func=cmd_replay)
    c = command(
        "release",
        "send held deliveries now, past quiet hours, a person's hours, a digest's window or a silence (one whose "
        "channel is down still waits for it)",
    )
    _filter_options(c)
    c.add_argument("--dry-run", action="store_true", help="say what would be released; change nothing")
    c.set_defaults(func=cmd_release, since=None)
    c = command("status", "one notification's deliveries (with the address of each), and the Redis they came from")
    c.add_argument("event_id")
    output_options(c)
    c.set_defaults(func=cmd_status)
    c = command("delivery", "one delivery whole: its record, every try and the message it sent (as its page shows)")
    c.add_argument("delivery_id", help="the delivery's id (`relay status` and `relay deliveries` list them)")
    output_options(c)
    c.set_defaults(func=cmd_delivery)


def _filter_options(c: argparse.ArgumentParser) -> None:
    c.add_argument("--event", help="one notification's deliveries (its eventId)")
    c.add_argument("--kind", help="kinds matching this pattern (* any characters): notification:access-*")
    c.add_argument("--channel", help="one channel's deliveries (its name in the config)")
