"""Keys and records in Redis: what was received (events), what was planned and sent (deliveries), and the
names of the counters. Plain data: the Redis commands are in `relay.storage.store`."""

from __future__ import annotations

import json
import logging
import math
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from relay.core.digest import DIGEST_TEMPLATE
from relay.core.model import Delivery, State, kind_name
from relay.core.rendering import AUTO, FORMATS

log = logging.getLogger("relay.storage")

PREFIX = "relay:"
EVENTS = PREFIX + "events"  # an earlier relay's zset eventId -> received time (read, never written now)
RECEIVED = PREFIX + "received"  # stream: an entry {eventId} a notification accepted, its ID the receivedAt in ms
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


def key_part(value: str) -> str:
    """A payload's value (an eventId) as one part of a key: `%` and `:` percent-escaped, so that no value ends
    one of relay's keys with another's suffix (eventId `X:deliveries` is not the delivery list of `X`) and no
    two values share a key. A value with neither (a UUID) is its own key part: the keys an earlier relay
    stored, with the value as it was, are the same keys."""
    return value.replace("%", "%25").replace(":", "%3A")


def event_key(event_id: str) -> str:
    """The event's record: what was received, and the ids of its deliveries (its `deliveries` field)."""
    return f"{PREFIX}event:{key_part(event_id)}"


def event_deliveries_key(event_id: str) -> str:
    """Where an earlier relay listed the event's deliveries (a list; read, never written now)."""
    return f"{PREFIX}event:{key_part(event_id)}:deliveries"


def dedup_key(event_id: str) -> str:
    """An earlier relay's dedup key of the event (read, never written now: the event record is the dedup)."""
    return f"{PREFIX}dedup:{key_part(event_id)}"


@dataclass(frozen=True)
class LegacyKeys:
    """Where a relay before key escaping stored an event whose id holds `%` or `:` (read when today's keys
    hold nothing; docs/operations.md, upgrading)."""

    event: str
    deliveries: str
    dedup: str


def legacy_keys(event_id: str) -> LegacyKeys | None:
    """The event's keys as an earlier relay named them, when they are not today's; None for most ids."""
    if key_part(event_id) == event_id:
        return None
    return LegacyKeys(f"{PREFIX}event:{event_id}", f"{PREFIX}event:{event_id}:deliveries", f"{PREFIX}dedup:{event_id}")


def delivery_key(delivery_id: str) -> str:
    return f"{PREFIX}delivery:{delivery_id}"


def _label_value(value: str) -> str:
    # Values come from payloads (kinds): keep them short and free of the field's separators.
    clean = "".join(c if c not in "|,=\n" else "_" for c in value)
    return clean[:100]


def bucket_field(name: str, seconds: float, **labels: str) -> str:
    """The field the histogram `name` counts `seconds` under (its bucket: the first bound at or above); its
    exemplar is kept under the same field (`relay.storage.exemplars`)."""
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


def state_of(data: dict[str, str], ident: str | None = None) -> State:
    """The stored state (`queued` when none is stored); UnknownState for a value that is none of them."""
    value = data.get("state", State.QUEUED)
    try:
        return State(value)
    except ValueError:
        raise UnknownState(ident or data.get("id", "?"), value) from None


# The names a delivery's fields are stored under: a record holds its names beside its values, once per
# delivery, and these save some 80 B of a one-message notification's (memory: issue 36). The model's names
# are the API's. Those a script reads (`digest`, `items`, `notBefore`) are not renamed. An earlier relay's
# records, under the model's names (`eventId` among them), are read, and rewritten, as they are.
STORED = {
    "eventId": "e", "kind": "k", "messageIndex": "m", "recipientType": "rt", "recipient": "r", "address": "a",
    "channel": "ch", "template": "t", "templateUsed": "tu", "state": "s", "attempts": "n", "maxAttempts": "max",
    "lastError": "err", "createdAt": "c", "updatedAt": "u", "fallback": "fb", "attemptTimes": "times",
    "fallbackFor": "for", "recipientIndex": "ri", "members": "mem", "route": "ro", "released": "rel",
    "trace": "tr", "firstTry": "ft", "attemptLog": "log", "sentTitle": "st", "sentText": "sx",
}  # fmt: skip
_MODEL_NAME = {short: name for name, short in STORED.items()}


def stored_whole(data: dict[str, str]) -> bool:
    """Whether a record's hash is an earlier relay's, its fields under the model's names."""
    return STORED["eventId"] not in data


def delivery_from_hash(data: dict[str, str], ident: str | None = None) -> Delivery:
    """The delivery `ident` (the id its key holds) as its hash holds it; UnknownState when its state is none
    this relay knows. A record stores no `id` (its key has it); an earlier relay's has, read when `ident` is
    not given, and its fields' names are the model's (`stored_whole`)."""
    whole = stored_whole(data)
    if not whole:
        data = {_MODEL_NAME.get(k, k): v for k, v in data.items()}
    record = _delivery(data, ident)
    record.names_whole = whole
    return record


def _delivery(data: dict[str, str], ident: str | None) -> Delivery:
    template, used = data.get("template", "auto"), data.get("templateUsed") or None
    used = None if used == "-" else used  # none used yet, beside a template named like a file
    log = [{k: entry.get(k) for k in _ATTEMPT_KEYS} | entry for entry in json.loads(data.get("attemptLog") or "[]")]
    if "templateUsed" not in data and template.endswith(".j2"):
        template, used = legacy_choice(template, data.get("kind", "")), template
    return Delivery(
        id=data["id"] if ident is None else ident,
        eventId=data["eventId"],
        kind=data.get("kind", ""),
        messageIndex=int(data.get("messageIndex", 0)),
        recipientType=data.get("recipientType") or None,
        recipient=data.get("recipient") or None,
        address=data.get("address") or None,
        channel=data.get("channel", ""),
        template=template,
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
        templateUsed=used,
        released=data.get("released") == "1",
        trace=data.get("trace") or None,
        firstTry=data.get("firstTry") or None,
        attemptLog=log,
        sentTitle=data.get("sentTitle") or None,
        sentText=data.get("sentText") or None,
    )


# Fields stored only when they differ from what `delivery_from_hash` reads in their absence (memory: issue 36);
# a write deletes those that went back to it (`unset_fields`). An earlier relay stored them all, empty ones too.
OMITTED_WHEN_EMPTY = (
    "messageIndex", "recipientType", "recipient", "address", "template", "templateUsed", "attempts", "maxAttempts",
    "lastError", "fallback", "attemptTimes", "fallbackFor", "recipientIndex", "members", "route", "notBefore",
)  # fmt: skip
_READ_AS = {"messageIndex": "0", "template": "auto", "attempts": "0", "maxAttempts": "1", "fallback": "[]"}


def delivery_to_hash(d: Delivery) -> dict[str, str]:
    """The delivery's hash, as the scripts store it (`items` aside: only the gathering script writes it), with
    no `id` (its key has it: `delivery_key`), its fields under their STORED names (an earlier relay's record
    keeps the model's)."""
    fields = _whole_hash(d)
    return fields if d.names_whole else {STORED.get(k, k): v for k, v in fields.items()}


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
        # Kept beside a template named like a file, which an earlier relay's records read as the file used.
        "templateUsed": d.templateUsed or ("-" if d.template.endswith(".j2") else ""),
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
        # Written once tried (a record never tried has none): an earlier relay's records have none either.
        **({"attemptLog": _json(_compact(d.attemptLog))} if d.attemptLog else {}),
        **({"sentTitle": d.sentTitle} if d.sentTitle is not None else {}),
        **({"sentText": d.sentText} if d.sentText is not None else {}),
    }
    return {k: v for k, v in full.items() if v not in ("", _READ_AS.get(k)) or k not in OMITTED_WHEN_EMPTY}


# An attempt log's entries keep no null (`relay.core.outcome.attempt_entry`): read back with these.
_ATTEMPT_KEYS = ("at", "outcome", "status", "said", "error", "seconds")


def _compact(log: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: millis(v) / 1000 if k == "at" else v for k, v in entry.items() if v is not None} for entry in log]


def millis(at: float) -> int:
    """`at` (epoch seconds) in whole milliseconds, cut down: a time stored is never after the clock's reading it
    came from (`at * 1000` may round up to the next millisecond: undone)."""
    ms = math.floor(at * 1000)
    return ms - 1 if ms / 1000 > at else ms


def stamp(at: float) -> str:
    """A time as a record stores it: epoch seconds to the millisecond, as the API shows it (and a few bytes a
    time fewer than its repr: memory, issue 36). Read back with float(), as an earlier relay's."""
    return f"{millis(at) / 1000:.3f}"


def _json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))


def unset_fields(fields: dict[str, str]) -> list[str]:
    """The fields a stored record may hold that `fields` (as `delivery_to_hash` made them) leaves out: a write
    deletes them."""
    names = OMITTED_WHEN_EMPTY if stored_whole(fields) else [STORED.get(k, k) for k in OMITTED_WHEN_EMPTY]
    return [k for k in names if k not in fields]


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
    trace: str = ""  # the W3C traceparent of its intake, with tracing on (relay.tracing)
    # Its deliveries' ids in the order planned (fields `deliveries`, `deliveries.1`, ...: `relay.storage.scripts`).
    deliveries: list[str] = field(default_factory=list)
    key: str = ""  # where it is stored: today's key, or the raw key an earlier relay gave it


def event_from_hash(data: Any, event_id: str, raw_key: bool = False) -> EventRecord | None:
    """The event `event_id` stored in a hash read with HGETALL (None when there was none, and when it is
    another event's: one naming another eventId; at the raw key of an earlier relay (`raw_key`), one naming
    none, today's of another id); ValueError or KeyError for a hash that is no event relay wrote.

    A record stores neither its eventId (its key has it) nor its kind (its payload has it), nor an empty
    trace (memory: issue 36); an earlier relay's records have all three, and are read as they are."""
    if not data:
        return None
    d = {_text(k): _text(v) for k, v in data.items()}
    if d.get("eventId", None if raw_key else event_id) != event_id:
        return None
    payload = d["payload"]
    kind = d["kind"] if "kind" in d else _kind_of(payload)
    parts = (d.get(f"deliveries.{n}", "") for n in range(1, int(d.get("parts", 0)) + 1))
    ids = " ".join((d.get("deliveries", ""), *parts)).split()
    return EventRecord(event_id, kind, float(d["receivedAt"]), payload, d.get("trace", ""), ids)


def _kind_of(payload: str) -> str:
    """The kind in a stored payload ("" in one that is no notification: its planning fails and says so)."""
    try:
        found = json.loads(payload)
    except ValueError:
        return ""
    kind = found.get("kind", "") if isinstance(found, dict) else ""
    return kind if isinstance(kind, str) else ""


def read_delivery(data: Any, ident: str) -> Delivery | None:
    """The record in a hash as redis-py returns it; None for none, and for one in a state this relay does
    not know (a newer relay's): such a record is listed by nobody and left as it is, never overwritten. A
    record that cannot be read (a key of another type, a hash relay did not write) is logged, and None."""
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
