"""Keys and records in Redis: what was received (events), what was planned and sent (deliveries), and the
names of the counters. Plain data: the Redis commands are in `relay.storage.store`."""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any

from relay.core.digest import DIGEST_TEMPLATE
from relay.core.model import State, kind_name
from relay.core.rendering import AUTO, FORMATS

PREFIX = "relay:"
EVENTS = PREFIX + "events"  # zset eventId -> received time
DELIVERIES = PREFIX + "deliveries"  # zset delivery id -> created time
FAILED = PREFIX + "failed"  # zset delivery id -> time it failed
HELD = PREFIX + "held"  # zset delivery id -> notBefore, of the deliveries held now (quiet hours)
METRICS = PREFIX + "metrics"  # hash of counters, shared by API and workers
WORKERS = PREFIX + "workers"  # zset worker name -> last heartbeat
SCAN_LIMIT = 20_000
LATENCY = "relay_delivery_latency_seconds"  # accepted -> delivered
SEND_LATENCY = "relay_send_duration_seconds"  # one send through Apprise, by channel
LATENCY_BUCKETS = (
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 3600.0,
)  # fmt: skip  # most index entries one listing reads


# Slots of a channel's rate limit: each call books the next free one (a virtual schedule, GCRA-like),


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def now() -> float:
    return time.time()


def iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%S.") + f"{int(ts * 1000) % 1000:03d}Z"


def event_key(event_id: str) -> str:
    return f"{PREFIX}event:{event_id}"


def event_deliveries_key(event_id: str) -> str:
    return f"{PREFIX}event:{event_id}:deliveries"


def dedup_key(event_id: str) -> str:
    return f"{PREFIX}dedup:{event_id}"


def delivery_key(delivery_id: str) -> str:
    return f"{PREFIX}delivery:{delivery_id}"


def lock_key(delivery_id: str) -> str:
    return f"{PREFIX}lock:{delivery_id}"


def delivery_id(event_id: str, message_index: int, channel: str, recipient_index: int | None) -> str:
    """Stable: planning the same event twice yields the same ids, so nothing is created twice."""
    raw = f"{event_id}\x00{message_index}\x00{channel}\x00{'' if recipient_index is None else recipient_index}"
    return "d" + hashlib.sha256(raw.encode()).hexdigest()[:24]


def _label_value(value: str) -> str:
    # Values come from payloads (kinds): keep them short and free of the field's separators.
    clean = "".join(c if c not in "|,=\n" else "_" for c in value)
    return clean[:100]


def metric_field(name: str, **labels: str) -> str:
    if not labels:
        return name
    return _field(name, tuple(sorted(labels.items())))


@lru_cache(maxsize=4096)
def _field(name: str, labels: tuple[tuple[str, str], ...]) -> str:
    # Made for every delivery stored, from a handful of distinct label sets: made once each.
    return name + "|" + ",".join(f"{k}={_label_value(v)}" for k, v in labels)


@dataclass
class DeliveryRecord:
    id: str
    eventId: str
    kind: str
    messageIndex: int
    recipientType: str | None
    recipient: str | None
    address: str | None
    channel: str
    # The route's template choice (`auto`, a name, or `platform`): every attempt renders with it.
    template: str
    state: State
    attempts: int
    maxAttempts: int
    lastError: str | None
    createdAt: float
    updatedAt: float
    fallback: list[str]
    attemptTimes: list[float]
    fallbackFor: str | None = None
    recipientIndex: int | None = None
    members: list[str] = field(default_factory=list)  # an expanded group's member deliveries
    # The route that planned it (a name, `routes[i]` or `default`); None in records made before routes had one.
    route: str | None = None
    # A held delivery: when (epoch seconds) its route's time intervals let it go out.
    notBefore: float | None = None
    # A digest: the deliveries it carries, in the order they joined it. Written only by the gathering script
    # (relay.storage.scripts.GATHER), never by `to_hash`, so that no stored state can undo an item's joining.
    items: list[str] = field(default_factory=list)
    # A delivery gathered into a digest: the digest's id. The digest sends it; it follows the digest's state.
    digest: str | None = None
    # The template file the last render used (or `platform`): shown, never fed back into the choice.
    templateUsed: str | None = None
    # Released by an operator (`relay release`): it goes out now, held by nothing (quiet hours, a digest's).
    released: bool = False
    # This worker holds the record's send lock: the update that stores the outcome releases it.
    held_lock: bool = field(default=False, init=False, compare=False, repr=False)
    # This worker leases the record (it will send it): the update that stores the outcome lets go.
    held_lease: bool = field(default=False, init=False, compare=False, repr=False)

    @classmethod
    def from_hash(cls, data: dict[str, str]) -> DeliveryRecord:
        template, used = data.get("template", "auto"), data.get("templateUsed") or None
        if "templateUsed" not in data and template.endswith(".j2"):
            template, used = legacy_choice(template, data.get("kind", "")), template
        return cls(
            id=data["id"],
            eventId=data["eventId"],
            kind=data.get("kind", ""),
            messageIndex=int(data.get("messageIndex", 0)),
            recipientType=data.get("recipientType") or None,
            recipient=data.get("recipient") or None,
            address=data.get("address") or None,
            channel=data.get("channel", ""),
            template=template,
            state=state_of(data),
            attempts=int(data.get("attempts", 0)),
            maxAttempts=int(data.get("maxAttempts", 1)),
            lastError=data.get("lastError") or None,
            createdAt=float(data.get("createdAt", 0)),
            updatedAt=float(data.get("updatedAt", 0)),
            fallback=json.loads(data.get("fallback", "[]")),
            attemptTimes=json.loads(data.get("attemptTimes", "[]")),
            fallbackFor=data.get("fallbackFor") or None,
            recipientIndex=int(data["recipientIndex"]) if data.get("recipientIndex") else None,
            members=json.loads(data.get("members") or "[]"),
            route=data.get("route") or None,
            notBefore=float(data["notBefore"]) if data.get("notBefore") else None,
            items=json.loads(data.get("items") or "[]"),
            digest=data.get("digest") or None,
            templateUsed=used,
            released=data.get("released") == "1",
        )

    def to_hash(self) -> dict[str, str]:
        return {
            "id": self.id,
            "eventId": self.eventId,
            "kind": self.kind,
            "messageIndex": str(self.messageIndex),
            "recipientType": self.recipientType or "",
            "recipient": self.recipient or "",
            "address": self.address or "",
            "channel": self.channel,
            "template": self.template,
            "templateUsed": self.templateUsed or "",
            "state": self.state.value,
            "attempts": str(self.attempts),
            "maxAttempts": str(self.maxAttempts),
            "lastError": self.lastError or "",
            "createdAt": repr(self.createdAt),
            "updatedAt": repr(self.updatedAt),
            "fallback": json.dumps(self.fallback),
            "attemptTimes": json.dumps(self.attemptTimes),
            "fallbackFor": self.fallbackFor or "",
            "recipientIndex": "" if self.recipientIndex is None else str(self.recipientIndex),
            "members": json.dumps(self.members) if self.members else "",
            "route": self.route or "",
            "notBefore": "" if self.notBefore is None else repr(self.notBefore),
            **({"released": "1"} if self.released else {}),  # never unset, likewise
            # Set once by the gathering script and never unset: a copy read before it was set stores nothing.
            **({"digest": self.digest} if self.digest else {}),
        }

    def public(self, with_event: bool = False) -> dict[str, Any]:
        """The delivery as the API shows it (SPEC's shape, plus a few extra fields)."""
        out: dict[str, Any] = {
            "id": self.id,
            "recipientType": self.recipientType,
            "recipient": self.recipient,
            "channel": self.channel,
            "route": self.route,
            "state": self.state,
            "attempts": self.attempts,
            "lastError": self.lastError,
            "createdAt": iso(self.createdAt),
            "updatedAt": iso(self.updatedAt),
            "address": self.address,
            "template": self.templateUsed or self.template,  # the template used, once it has been rendered
            "attemptTimes": [iso(t) for t in self.attemptTimes],
        }
        if self.fallbackFor:
            out["fallbackFor"] = self.fallbackFor
        if self.members:
            out["members"] = self.members
        if self.notBefore is not None:
            out["notBefore"] = iso(self.notBefore)
        if self.items:
            out["items"] = self.items
        if self.digest:
            out["digest"] = self.digest
        if with_event:
            out["eventId"] = self.eventId
            out["kind"] = self.kind
        return out


class UnknownState(ValueError):
    """A stored delivery whose state this relay does not know (written by a newer relay, or by hand)."""

    def __init__(self, delivery_id: str, value: str) -> None:
        super().__init__(f"delivery {delivery_id} has a state this relay does not know: {value!r}")
        self.delivery_id, self.value = delivery_id, value


def state_of(data: dict[str, str]) -> State:
    """The stored state (`queued` when none is stored); UnknownState for a value that is none of them."""
    value = data.get("state", State.QUEUED)
    try:
        return State(value)
    except ValueError:
        raise UnknownState(data.get("id", "?"), value) from None


def legacy_choice(used: str, kind: str) -> str:
    """The template choice of a record stored by a relay that wrote the template used over it: a file of the
    kind's own was found by `auto`, a digest's file by the digest's lookup, any other file was named."""
    if used.removeprefix("relay:").startswith(DIGEST_TEMPLATE + "/"):  # relay's own digest template, or one's own
        return DIGEST_TEMPLATE
    name = used.removesuffix(".j2")
    name = name.rsplit(".", 1)[0] if name.rsplit(".", 1)[-1] in FORMATS else name
    return AUTO if name.startswith(kind_name(kind) + "/") else name


@dataclass
class EventRecord:
    eventId: str
    kind: str
    receivedAt: float
    payload: str


def hash_pairs(flat: Any) -> dict[Any, Any]:
    """A hash as a Lua script returns HGETALL's reply (field, value, field, value, ...); nothing: {}."""
    items = flat if isinstance(flat, list) else []
    return dict(zip(items[::2], items[1::2], strict=True))


def event_from_hash(data: Any) -> EventRecord | None:
    """The event stored in a hash read with HGETALL (None when there was none)."""
    if not data:
        return None
    d = {_text(k): _text(v) for k, v in data.items()}
    return EventRecord(d["eventId"], d.get("kind", ""), float(d.get("receivedAt", 0)), d.get("payload", "{}"))


def parse_since(value: str | None) -> float | None:
    """`since` as a duration back from now ("2h") or an ISO 8601 time."""
    if value is None or value == "":
        return None
    from relay.config.durations import parse_duration

    try:
        return now() - parse_duration(value)
    except ValueError:
        pass
    text = value.strip().replace("Z", "+00:00")
    parsed = datetime.fromisoformat(text)
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.timestamp()
