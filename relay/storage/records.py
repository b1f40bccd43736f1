"""Keys and records in Redis: what was received (events), what was planned and sent (deliveries), and the
names of the counters. Plain data: the Redis commands are in `relay.storage.store`."""

from __future__ import annotations

import json
import logging
import math
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from relay.core.model import Delivery, State

log = logging.getLogger("relay.storage")

PREFIX = "relay:"
RECEIVED = PREFIX + "received"  # stream: an entry {eventId} a notification accepted, its ID the receivedAt in ms
FAILED = PREFIX + "failed"  # zset delivery id -> time it failed
HELD = PREFIX + "held"  # zset delivery id -> notBefore, of the deliveries held now (by any gate)
METRICS = PREFIX + "metrics"  # hash of counters, shared by API and workers
WORKERS = PREFIX + "workers"  # zset worker name -> last heartbeat
SCAN_LIMIT = 20_000
LATENCY = "relay_delivery_latency_seconds"  # accepted -> delivered
SEND_LATENCY = "relay_send_duration_seconds"  # one send through Apprise, by channel
LATENCY_BUCKETS = (
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 3600.0,
)  # fmt: skip  # most index entries one listing reads


def _text(value: Any) -> str:
    """What Redis answered, as text; bytes that are not UTF-8 (a hand edit) read with U+FFFD, never an error."""
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


def key_part(value: str) -> str:
    """`%` and `:` escaped: no payload value ends one key with another's suffix, and no two share a key."""
    return value.replace("%", "%25").replace(":", "%3A")


def event_key(event_id: str) -> str:
    return f"{PREFIX}event:{key_part(event_id)}"


def delivery_key(delivery_id: str) -> str:
    return f"{PREFIX}delivery:{delivery_id}"


def _label_value(value: str) -> str:
    # Values come from payloads (kinds): keep them short and free of the field's separators.
    clean = "".join(c if c not in "|,=\n" else "_" for c in value)
    return clean[:100]


def bucket_field(name: str, seconds: float, **labels: str) -> str:
    """The histogram bucket's field (the first bound at or above); its exemplar is kept under it too."""
    bound = next((f"{b:g}" for b in LATENCY_BUCKETS if seconds <= b), "+Inf")
    return metric_field(name + "_slot", le=bound, **labels)


def metric_field(name: str, **labels: str) -> str:
    if not labels:
        return name
    return _field(name, tuple(sorted(labels.items())))


@lru_cache(maxsize=4096)
def _field(name: str, labels: tuple[tuple[str, str], ...]) -> str:
    # Made for every delivery stored, from a handful of distinct label sets: made once each.
    return name + "|" + ",".join(f"{k}={_label_value(v)}" for k, v in labels)


class UnknownState(ValueError):
    """A stored delivery whose state this relay does not know (written by a newer relay, or by hand)."""

    def __init__(self, delivery_id: str, value: str) -> None:
        super().__init__(f"delivery {delivery_id} has a state this relay does not know: {value!r}")
        self.delivery_id, self.value = delivery_id, value


def state_of(data: dict[str, str], ident: str) -> State:
    value = data.get("state", State.QUEUED)
    try:
        return State(value)
    except ValueError:
        raise UnknownState(ident, value) from None


# Short stored names save some 80 B a delivery (memory: issue 36); those a script reads are not renamed.
STORED = {
    "eventId": "e", "kind": "k", "messageIndex": "m", "recipientType": "rt", "recipient": "r", "address": "a",
    "channel": "ch", "template": "t", "templateUsed": "tu", "state": "s", "attempts": "n", "maxAttempts": "max",
    "lastError": "err", "createdAt": "c", "updatedAt": "u", "fallback": "fb", "attemptTimes": "times",
    "fallbackFor": "for", "recipientIndex": "ri", "members": "mem", "route": "ro", "released": "rel",
    "trace": "tr", "firstTry": "ft", "attemptLog": "log", "sentTitle": "st", "sentText": "sx", "thread": "th",
    "fellBackFrom": "fbf",
}  # fmt: skip
_MODEL_NAME = {short: name for name, short in STORED.items()}


def delivery_from_hash(stored: dict[str, str], ident: str) -> Delivery:
    data = {_MODEL_NAME.get(k, k): v for k, v in stored.items()}
    log = [{k: entry.get(k) for k in _ATTEMPT_KEYS} | entry for entry in json.loads(data.get("attemptLog") or "[]")]
    return Delivery(
        id=ident,
        eventId=data["eventId"],
        kind=data.get("kind", ""),
        messageIndex=int(data.get("messageIndex", 0)),
        recipientType=data.get("recipientType") or None,
        recipient=data.get("recipient") or None,
        address=data.get("address") or None,
        channel=data.get("channel", ""),
        template=data.get("template", "auto"),
        state=state_of(data, ident),
        attempts=int(data.get("attempts", 0)),
        maxAttempts=int(data.get("maxAttempts", 1)),
        lastError=data.get("lastError") or None,
        createdAt=float(data.get("createdAt", 0)),
        updatedAt=float(data.get("updatedAt", 0)),
        fallback=json.loads(data.get("fallback", "[]")),
        attemptTimes=json.loads(data["attemptTimes"]) if "attemptTimes" in data else [e.get("at") for e in log],
        fallbackFor=data.get("fallbackFor") or None,
        recipientIndex=int(data["recipientIndex"]) if data.get("recipientIndex") else None,
        members=json.loads(data.get("members") or "[]"),
        route=data.get("route") or None,
        notBefore=float(data["notBefore"]) if data.get("notBefore") else None,
        items=json.loads(data.get("items") or "[]"),
        digest=data.get("digest") or None,
        templateUsed=data.get("templateUsed") or None,
        released=data.get("released") == "1",
        trace=data.get("trace") or None,
        firstTry=data.get("firstTry") or None,
        attemptLog=log,
        sentTitle=data.get("sentTitle") or None,
        sentText=data.get("sentText") or None,
        thread=json.loads(data["thread"]) if data.get("thread") else None,
        fellBackFrom=data.get("fellBackFrom") or None,
    )


# Fields stored only when they differ from what `delivery_from_hash` reads in their absence (memory: issue 36);
# a write deletes those that went back to it (`unset_fields`).
OMITTED_WHEN_EMPTY = (
    "messageIndex", "recipientType", "recipient", "address", "template", "templateUsed", "attempts", "maxAttempts",
    "lastError", "fallback", "attemptTimes", "fallbackFor", "recipientIndex", "members", "route", "notBefore",
)  # fmt: skip
_OMITTED_STORED = [STORED.get(k, k) for k in OMITTED_WHEN_EMPTY]
_READ_AS = {"messageIndex": "0", "template": "auto", "attempts": "0", "maxAttempts": "1", "fallback": "[]"}


def delivery_to_hash(d: Delivery) -> dict[str, str]:
    """No `id` (its key has it), nor `items` (only the gathering script writes it)."""
    return {STORED.get(k, k): v for k, v in _whole_hash(d).items()}


def _whole_hash(d: Delivery) -> dict[str, str]:
    times = [e.get("at") for e in d.attemptLog]
    full = {
        "eventId": d.eventId,
        "kind": d.kind,
        "messageIndex": str(d.messageIndex),
        "recipientType": d.recipientType or "",
        "recipient": d.recipient or "",
        "address": d.address or "",
        "channel": d.channel,
        "template": d.template,
        "templateUsed": d.templateUsed or "",
        "state": d.state.value,
        "attempts": str(d.attempts),
        "maxAttempts": str(d.maxAttempts),
        "lastError": d.lastError or "",
        "createdAt": stamp(d.createdAt),
        "updatedAt": stamp(d.updatedAt),
        "fallback": _json(d.fallback) if d.fallback else "",
        # Left out when the attempt log has the same times (read from it); "[]" when it has others.
        "attemptTimes": "" if times == d.attemptTimes else _json(d.attemptTimes),
        "fallbackFor": d.fallbackFor or "",
        "recipientIndex": "" if d.recipientIndex is None else str(d.recipientIndex),
        "members": _json(d.members) if d.members else "",
        "route": d.route or "",
        "notBefore": "" if d.notBefore is None else stamp(d.notBefore),
        **({"released": "1"} if d.released else {}),  # never unset, likewise
        # Set once by the gathering script and never unset: a copy read before it was set stores nothing.
        **({"digest": d.digest} if d.digest else {}),
        # Only with tracing on (relay.tracing), and never unset.
        **({"trace": d.trace} if d.trace else {}),
        **({"firstTry": d.firstTry} if d.firstTry else {}),
        # Written once tried (a record never tried has none).
        **({"attemptLog": _json(_compact(d.attemptLog))} if d.attemptLog else {}),
        **({"sentTitle": d.sentTitle} if d.sentTitle is not None else {}),
        **({"sentText": d.sentText} if d.sentText is not None else {}),
        **({"thread": _json(d.thread)} if d.thread else {}),  # set at planning, never unset
        **({"fellBackFrom": d.fellBackFrom} if d.fellBackFrom else {}),  # likewise
    }
    return {k: v for k, v in full.items() if v not in ("", _READ_AS.get(k)) or k not in OMITTED_WHEN_EMPTY}


# An attempt log's entries keep no null (`relay.core.outcome.attempt_entry`): read back with these.
_ATTEMPT_KEYS = ("at", "outcome", "status", "said", "error", "seconds")


def _compact(log: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: millis(v) / 1000 if k == "at" else v for k, v in entry.items() if v is not None} for entry in log]


def millis(at: float) -> int:
    """Cut down: a time stored is never after the reading it came from (`at * 1000` may round up)."""
    ms = math.floor(at * 1000)
    return ms - 1 if ms / 1000 > at else ms


def stamp(at: float) -> str:
    """Epoch seconds to the millisecond, as the API shows it (and fewer bytes than its repr)."""
    return f"{millis(at) / 1000:.3f}"


def _json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))


def unset_fields(fields: dict[str, str]) -> list[str]:
    """The fields a stored record may hold that `fields` leaves out: a write deletes them."""
    return [k for k in _OMITTED_STORED if k not in fields]


@dataclass
class EventRecord:
    eventId: str
    kind: str
    receivedAt: float
    payload: str
    trace: str = ""  # the W3C traceparent of its work, with tracing on (relay.tracing)
    # Its deliveries' ids in the order planned (fields `deliveries`, `deliveries.1`, ...: `relay.storage.scripts`).
    deliveries: list[str] = field(default_factory=list)


def read_event(data: Any, event_id: str) -> EventRecord | None:
    """The event in an answer to its HGETALL; None for none, and for one that cannot be read (a key of another type,
    a hash relay did not write): logged and left out, it takes no page, listing or other event down."""
    key = event_key(event_id)
    if isinstance(data, Exception):
        log.error("event unreadable at %s (%s): left out", key, data, extra={"eventId": event_id})
        return None
    if not data:
        return None
    try:
        d = {_text(k): _text(v) for k, v in data.items()}
        payload = d["payload"]
        parts = (d.get(f"deliveries.{n}", "") for n in range(1, int(d.get("parts", 0)) + 1))
        # Once each: a delivery expired and planned again (an event accepted again after the window) is added again.
        ids = list(dict.fromkeys(" ".join((d.get("deliveries", ""), *parts)).split()))
        return EventRecord(event_id, _kind_of(payload), float(d["receivedAt"]), payload, d.get("trace", ""), ids)
    except (KeyError, ValueError, TypeError) as exc:
        log.error("event unreadable at %s (%s): left out", key, type(exc).__name__, extra={"eventId": event_id})
        return None


def _kind_of(payload: str) -> str:
    """The kind; "" in a payload that is no notification (its planning fails and says so)."""
    try:
        found = json.loads(payload)
    except ValueError:
        return ""
    kind = found.get("kind", "") if isinstance(found, dict) else ""
    return kind if isinstance(kind, str) else ""


def read_delivery(data: Any, ident: str) -> Delivery | None:
    """None for none, for an unknown state (a newer relay's: left as it is, never overwritten), and for a record
    that cannot be read (logged)."""
    if isinstance(data, Exception):
        log.error("delivery unreadable (%s): left out", data, extra={"deliveryId": ident})
        return None
    if not data:
        return None
    try:
        return delivery_from_hash({_text(k): _text(v) for k, v in data.items()}, ident)
    except UnknownState as exc:
        log.warning("delivery left alone: %s", exc, extra={"deliveryId": exc.delivery_id})
        return None
    except (KeyError, ValueError, TypeError) as exc:
        log.error("delivery unreadable (%s: %s): left out", type(exc).__name__, exc, extra={"deliveryId": ident})
        return None
