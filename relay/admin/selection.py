"""Which deliveries a listing or a replay is about: filters from a query or a body, and their use."""

from __future__ import annotations

from fnmatch import fnmatchcase
from typing import Any

from relay.core.model import State
from relay.runtime.bootstrap import Runtime
from relay.storage.store import FAILED, DeliveryRecord, parse_since

STATES = {s.value for s in State}


class Filters:
    """Which deliveries a listing or a replay is about."""

    def __init__(
        self,
        state: str | None = None,
        kind: str | None = None,
        channel: str | None = None,
        since: float | None = None,
        event_id: str | None = None,
        ids: list[str] | None = None,
    ) -> None:
        self.state, self.kind, self.channel, self.since = state, kind, channel, since
        self.event_id, self.ids = event_id, ids

    @classmethod
    def from_query(cls, q: Any) -> Filters:
        state = q.get("state") or None
        if state is not None and state not in STATES:
            raise ValueError(f"state {state!r} is not one of {', '.join(sorted(STATES))}")
        return cls(
            state,
            q.get("kind") or None,
            q.get("channel") or None,
            since_value(q.get("since")),
            q.get("eventId") or q.get("event") or None,
        )

    @classmethod
    def from_body(cls, body: dict[str, Any]) -> Filters:
        ids = body.get("ids")
        if ids is not None and (not isinstance(ids, list) or not all(isinstance(i, str) for i in ids)):
            raise ValueError("ids must be a list of delivery ids")
        for key in ("eventId", "kind", "channel", "since"):
            if body.get(key) is not None and not isinstance(body[key], str):
                raise ValueError(f"{key} must be a string")
        return cls(
            State.FAILED.value,
            body.get("kind"),
            body.get("channel"),
            since_value(body.get("since")),
            body.get("eventId"),
            ids,
        )

    def matches(self, r: DeliveryRecord) -> bool:
        if self.state and r.state != self.state:
            return False
        if self.kind and not fnmatchcase(r.kind, self.kind):
            return False
        if self.channel and r.channel != self.channel:
            return False
        if self.since is not None and r.updatedAt < self.since and r.createdAt < self.since:
            return False
        return not (self.event_id and r.eventId != self.event_id)

    def candidates(self, rt: Runtime) -> list[DeliveryRecord]:
        if self.ids is not None:
            return [r for r in rt.store.deliveries(self.ids) if r is not None]
        if self.event_id:
            return [r for r in rt.store.deliveries(rt.store.event_delivery_ids(self.event_id)) if r is not None]
        index = FAILED if self.state == State.FAILED.value else None
        return list(rt.store.iter_recent(None, index) if index else rt.store.iter_recent(self.since))

    def select(self, rt: Runtime, limit: int) -> list[DeliveryRecord]:
        found = [r for r in self.candidates(rt) if self.matches(r)]
        found.sort(key=lambda r: (r.createdAt, r.id), reverse=True)
        return found[:limit]

    def replay(self, rt: Runtime, dry_run: bool) -> tuple[int, list[dict[str, str]]]:
        candidates = self.candidates(rt)
        chosen = [r for r in candidates if self.matches(r)]
        not_replayed = []
        if self.ids is not None:
            known = {r.id for r in candidates}
            not_replayed = [{"id": r.id, "state": r.state} for r in candidates if r.state != State.FAILED.value]
            not_replayed += [{"id": i, "state": "unknown"} for i in self.ids if i not in known]
        count = rt.intake.replay(chosen, rt.config.retry.attempts, dry_run)
        return count, not_replayed


def since_value(value: Any) -> float | None:
    if value is None or value == "":
        return None
    try:
        return parse_since(str(value))
    except ValueError:
        raise ValueError(f"since {value!r} is neither a duration (2h) nor an ISO 8601 time") from None
