"""How `relay status` and `relay deliveries` lay deliveries out in a table: the route each came from, a
digest column for digests and their items, `notBefore` only while held, `nextAttemptAt` while retrying, long
cells cut with an ellipsis (whole with --wide; --format json prints the records as the admin API does)."""

from __future__ import annotations

from typing import Any

from relay.cli.common import table
from relay.core.states import State

STATUS_COLUMNS = [
    "id", "recipientType", "recipient", "address", "channel", "route", "state", "attempts", "updatedAt", "lastError",
]  # fmt: skip
LIST_COLUMNS = [
    "id", "eventId", "kind", "recipientType", "recipient", "channel", "route", "state", "attempts", "updatedAt",
    "lastError",
]  # fmt: skip


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
