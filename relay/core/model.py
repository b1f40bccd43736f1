"""The platform's notification payload (pydantic, at the edge) and relay's delivery types (plain data)."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from itertools import accumulate
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, StrictStr, ValidationInfo, field_validator
from pydantic_core import PydanticCustomError

from relay.config.server import MAX_EVENT_ID_LENGTH, LimitsConfig
from relay.core.states import State as State  # re-exported: the model's delivery states

# The pydantic error type of a payload over a configured limit (metrics count these apart).
LIMIT_ERROR = "limit_exceeded"
Value = TypeVar("Value")


def _bounded(value: Value, info: ValidationInfo, what: str, limit_of: Callable[[LimitsConfig], int]) -> Value:
    """`value`, unless it is longer than `server.limits` allow, given to validation as `context={"limits": ...}`
    (absent: no bounds). Workers re-read notifications that were accepted under other limits: only the edge passes
    them."""
    limits = info.context.get("limits") if isinstance(info.context, dict) else None
    limit = limit_of(limits) if limits is not None else None
    if limit is not None and isinstance(value, list | str) and len(value) > limit:
        context = {"what": what, "limit": limit, "actual": len(value)}
        raise PydanticCustomError(LIMIT_ERROR, "{what}: {actual} is over the limit of {limit}", context)
    return value


class _Open(BaseModel):
    # The platform adds fields over time: accept and keep them.
    model_config = ConfigDict(extra="allow")


class Metadata(_Open):
    eventId: StrictStr = Field(min_length=1, max_length=MAX_EVENT_ID_LENGTH)
    createdAt: StrictStr | None = None

    @field_validator("eventId")
    @classmethod
    def _not_blank(cls, value: str, info: ValidationInfo) -> str:
        if not value.strip():
            raise ValueError("eventId must not be blank")
        return _bounded(value, info, "eventId length", lambda limits: limits.max_event_id_length)


class Message(_Open):
    recipientType: StrictStr | None = None
    recipientType_v2: StrictStr | None = None
    # Recipient objects are free-form: userRef plus resolved user fields, any of them null.
    recipients: list[dict[str, Any]] = Field(default_factory=list)
    title: StrictStr | None = None
    message: StrictStr | None = None

    @field_validator("recipients", mode="before")
    @classmethod
    def _few_recipients(cls, value: Any, info: ValidationInfo) -> Any:
        if value is None:
            return []  # a message with no recipient listed (null) still reaches audience channels
        # Before validating the items: a list over the limit is refused without reading it (not a list: the
        # schema's error, not a limit's).
        if not isinstance(value, list):
            return value
        return _bounded(value, info, "number of recipients", lambda limits: limits.max_recipients)


class Notification(_Open):
    kind: StrictStr = Field(min_length=1)
    sender: StrictStr
    body: dict[str, Any]
    messages: list[Message]
    metadata: Metadata

    @field_validator("kind")
    @classmethod
    def _short_kind(cls, value: str, info: ValidationInfo) -> str:
        return _bounded(value, info, "kind length", lambda limits: limits.max_kind_length)

    @field_validator("messages", mode="before")
    @classmethod
    def _few_messages(cls, value: Any, info: ValidationInfo) -> Any:
        if not isinstance(value, list):
            return value  # the schema's error, not a limit's
        return _bounded(value, info, "number of messages", lambda limits: limits.max_messages)

    @property
    def event_id(self) -> str:
        return self.metadata.eventId


# JSON nesting, measured on the text without parsing it (a parser recurses once per level). An unterminated
# string matches to the end of the text: as a failed match it would be retried at every later quote.
_STRING = re.compile(r'"(?:[^"\\]|\\.)*(?:"|\\?\Z)', re.DOTALL)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_DEPTH_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}
_TOKEN = re.compile(_STRING.pattern + r"|[\[\]{},:]", re.DOTALL)


def json_depth(text: str) -> int:
    """How deeply arrays and objects nest in `text` (a bare value is 0; strings removed first), without recursion."""
    brackets = _NOT_BRACKET.sub("", _STRING.sub("", text))
    return max(0, max(accumulate(map(_DEPTH_STEP.__getitem__, brackets)), default=0))


def _key(token: str) -> str:
    try:
        key = json.loads(token)
    except ValueError:
        key = token[1:-1]
    return str(key)


def too_deep_at(text: str, limit: int) -> str | None:
    """The dotted path of the first array or object nested deeper than `limit`, or None (no recursion)."""
    # One frame per open container: [is_object, key or index of the current member].
    stack: list[list[Any]] = []
    last_string = ""
    for match in _TOKEN.finditer(text):
        token = match.group()
        if token in ("[", "{"):
            if len(stack) >= limit:
                return ".".join(str(frame[1]) for frame in stack)
            stack.append([token == "{", "" if token == "{" else 0])
        elif token in ("]", "}"):
            if stack:
                stack.pop()
        elif not stack:
            continue
        elif token == ":" and stack[-1][0]:
            stack[-1][1] = _key(last_string)
        elif token == "," and not stack[-1][0]:
            stack[-1][1] += 1
        elif token.startswith('"'):
            last_string = token
    return None


def kind_name(kind: str) -> str:
    return kind.removeprefix("notification:")


def recipient_type_name(recipient_type: str) -> str:
    return recipient_type.removeprefix("recipient-type:")


def iso(ts: float) -> str:
    """An epoch time as the API writes it: ISO 8601, UTC, milliseconds."""
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%S.") + f"{int(ts * 1000) % 1000:03d}Z"


def delivery_id(event_id: str, message_index: int, channel: str, recipient_index: int | None) -> str:
    """Stable: planning the same event twice yields the same ids, so nothing is created twice."""
    raw = f"{event_id}\x00{message_index}\x00{channel}\x00{'' if recipient_index is None else recipient_index}"
    return "d" + hashlib.sha256(raw.encode()).hexdigest()[:24]


def trace_id(traceparent: str | None) -> str | None:
    """The trace id in a W3C traceparent (`00-<trace id>-<span id>-<flags>`), None when there is none."""
    parts = (traceparent or "").split("-")
    return parts[1] if len(parts) == 4 and len(parts[1]) == 32 else None


@dataclass
class Delivery:
    """One (message, channel[, recipient]) of a notification, the unit of sending and retrying."""

    id: str
    eventId: str
    kind: str
    messageIndex: int
    channel: str
    # The route's template choice (`auto`, a name, or `platform`): every attempt renders with it.
    template: str
    maxAttempts: int
    createdAt: float
    updatedAt: float
    recipientType: str | None = None
    # Per-recipient channels: the recipient's reference (else address), its address (None until looked up), index.
    recipient: str | None = None
    address: str | None = None
    recipientIndex: int | None = None
    state: State = State.QUEUED
    attempts: int = 0
    lastError: str | None = None  # why it failed, or was skipped
    fallback: list[str] = field(default_factory=list)
    attemptTimes: list[float] = field(default_factory=list)
    fallbackFor: str | None = None
    members: list[str] = field(default_factory=list)  # an expanded group's member deliveries
    # The route that planned it (a name, `routes[i]` or `default`).
    route: str | None = None
    # Its message's `recipientType_v2`, which no route names: it fell back on the legacy `recipientType`.
    fellBackFrom: str | None = None
    # A held delivery: when (epoch seconds) its route's time intervals let it go out.
    notBefore: float | None = None
    # A digest: the deliveries it carries, in order; written only by relay.storage.scripts.GATHER (no undoing).
    items: list[str] = field(default_factory=list)
    # A delivery gathered into a digest: the digest's id. The digest sends it; it follows the digest's state.
    digest: str | None = None
    # The template file the last render used (or `platform`): shown, never fed back into the choice.
    templateUsed: str | None = None
    # Released by an operator (`relay release`): it goes out now, held by nothing (quiet hours, a digest's).
    released: bool = False
    # Tracing: the traceparent its tries are spans under, and its first try's, which later tries link to.
    trace: str | None = None
    firstTry: str | None = None
    # Its last tries, oldest first, and what the last sent (None: the payload's own title or text).
    attemptLog: list[dict[str, Any]] = field(default_factory=list)
    sentTitle: str | None = None
    sentText: str | None = None
    # Its conversation (relay.threads): {"key", "root": the first message's delivery id, "reply": bool}.
    thread: dict[str, Any] | None = None
    # This worker leases the delivery (it will send it): the update that stores the outcome lets go.
    held_lease: bool = field(default=False, init=False, compare=False, repr=False)
    # This try probes its down channel (relay.outages.sending): a failure waits the next probe step.
    probing: bool = field(default=False, init=False, compare=False, repr=False)

    @property
    def lookup(self) -> bool:
        """A recipient with no usable address in the payload: the platform catalog is asked for it when sent."""
        return self.recipientIndex is not None and self.address is None and self.state is not State.SKIPPED

    def public(self, with_event: bool = False) -> dict[str, Any]:
        """The delivery as the API shows it (SPEC's shape, plus a few extra fields; relay.admin.api.Delivery)."""
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
        given = {
            "fallbackFor": self.fallbackFor,
            "fellBackFrom": self.fellBackFrom,
            "members": self.members,
            "notBefore": iso(self.notBefore) if self.notBefore is not None else None,
            "items": self.items,
            "digest": self.digest,
        }
        out.update({k: v for k, v in given.items() if v})  # each only when it has one
        if self.thread:
            out["thread"] = {"root": None, "reply": False, **self.thread}
        if self.trace:
            out["traceId"] = trace_id(self.trace)
        if with_event:
            out["eventId"] = self.eventId
            out["kind"] = self.kind
        return out
