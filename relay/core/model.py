"""The platform's notification payload (pydantic, at the edge) and relay's delivery types (plain data)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from itertools import accumulate
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict, Field, StrictStr, ValidationInfo, field_validator
from pydantic_core import PydanticCustomError

from relay.config.server import MAX_EVENT_ID_LENGTH
from relay.core.states import State as State  # re-exported: the model's delivery states

# The pydantic error type of a payload over a configured limit (metrics count these apart).
LIMIT_ERROR = "limit_exceeded"


class PayloadLimits(Protocol):
    """What `server.limits` bounds; given to validation as `context={"limits": ...}` (absent: no bounds)."""

    @property
    def max_messages(self) -> int: ...
    @property
    def max_recipients(self) -> int: ...
    @property
    def max_kind_length(self) -> int: ...
    @property
    def max_event_id_length(self) -> int: ...


def _limits(info: ValidationInfo) -> PayloadLimits | None:
    # Workers re-read notifications that were accepted under other limits: only the edge passes them.
    context = info.context
    return context.get("limits") if isinstance(context, dict) else None


def _over(what: str, limit: int, actual: int) -> PydanticCustomError:
    return PydanticCustomError(LIMIT_ERROR, "{what}: {actual} is over the limit of {limit}", locals())


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
        limits = _limits(info)
        if limits is not None and len(value) > limits.max_event_id_length:
            raise _over("eventId length", limits.max_event_id_length, len(value))
        return value


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
        # Before validating the items: a list over the limit is refused without reading it.
        limits = _limits(info)
        if limits is not None and isinstance(value, list) and len(value) > limits.max_recipients:
            raise _over("number of recipients", limits.max_recipients, len(value))
        return value


class Notification(_Open):
    kind: StrictStr = Field(min_length=1)
    sender: StrictStr
    body: dict[str, Any]
    messages: list[Message]
    metadata: Metadata

    @field_validator("kind")
    @classmethod
    def _short_kind(cls, value: str, info: ValidationInfo) -> str:
        limits = _limits(info)
        if limits is not None and len(value) > limits.max_kind_length:
            raise _over("kind length", limits.max_kind_length, len(value))
        return value

    @field_validator("messages", mode="before")
    @classmethod
    def _few_messages(cls, value: Any, info: ValidationInfo) -> Any:
        limits = _limits(info)
        if limits is not None and isinstance(value, list) and len(value) > limits.max_messages:
            raise _over("number of messages", limits.max_messages, len(value))
        return value

    @property
    def event_id(self) -> str:
        return self.metadata.eventId


# JSON nesting, measured on the text without parsing it (a parser recurses once per level).
# A string may run to the end of the text: a match is then still found at once. Were an unterminated
# string a failed match, the scan would retry at every later quote, quadratic in the text's length.
_STRING = re.compile(r'"(?:[^"\\]|\\.)*(?:"|\\?\Z)', re.DOTALL)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_DEPTH_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}
_TOKEN = re.compile(_STRING.pattern + r"|[\[\]{},:]", re.DOTALL)


def json_depth(text: str) -> int:
    """How deeply arrays and objects nest in `text` (a bare value is 0), at C speed and without recursion.

    Strings are removed first, so brackets inside them do not count; the text need not be valid JSON.
    """
    brackets = _NOT_BRACKET.sub("", _STRING.sub("", text))
    return max(0, max(accumulate(map(_DEPTH_STEP.__getitem__, brackets)), default=0))


def _key(token: str) -> str:
    try:
        key = json.loads(token)
    except ValueError:
        key = token[1:-1]
    return str(key)


def too_deep_at(text: str, limit: int) -> str | None:
    """The dotted path of the first array or object nested deeper than `limit`, or None.

    A token scan with an explicit stack (no recursion); it stops at the first container too deep.
    """
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


@dataclass(frozen=True)
class PlannedDelivery:
    """One (message, channel[, recipient]) pair the routing produced: the unit of sending and retrying."""

    message_index: int
    recipient_type: str | None
    channel: str
    template: str
    # Per-recipient channels only: the recipient object, its reference and the address to send to.
    recipient: dict[str, Any] | None = None
    recipient_ref: str | None = None
    address: str | None = None
    recipient_index: int | None = None
    # Set when the delivery cannot be made (no usable address): recorded as skipped with this reason.
    skip_reason: str | None = None
    fallback: tuple[str, ...] = field(default_factory=tuple)
    # No usable address in the payload, but the platform catalog can be asked for the reference's.
    lookup: bool = False
    # The route that planned it: its name, `routes[i]`, or `default` (relay.core.routing.route_label).
    route: str | None = None
