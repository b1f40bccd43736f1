"""The platform's notification payload (pydantic, at the edge) and relay's delivery types (plain data)."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, StrictStr, field_validator

MAX_EVENT_ID_LENGTH = 512


class _Open(BaseModel):
    # The platform adds fields over time: accept and keep them.
    model_config = ConfigDict(extra="allow")


class Metadata(_Open):
    eventId: StrictStr = Field(min_length=1, max_length=MAX_EVENT_ID_LENGTH)
    createdAt: StrictStr | None = None

    @field_validator("eventId")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("eventId must not be blank")
        return value


class Message(_Open):
    recipientType: StrictStr | None = None
    recipientType_v2: StrictStr | None = None
    # Recipient objects are free-form: userRef plus resolved user fields, any of them null.
    recipients: list[dict[str, Any]] = Field(default_factory=list)
    title: StrictStr | None = None
    message: StrictStr | None = None


class Notification(_Open):
    kind: StrictStr = Field(min_length=1)
    sender: StrictStr
    body: dict[str, Any]
    messages: list[Message]
    metadata: Metadata

    @property
    def event_id(self) -> str:
        return self.metadata.eventId


def kind_name(kind: str) -> str:
    return kind.removeprefix("notification:")


def recipient_type_name(recipient_type: str) -> str:
    return recipient_type.removeprefix("recipient-type:")


class State(enum.StrEnum):
    QUEUED = "queued"
    RETRYING = "retrying"
    DELIVERED = "delivered"
    FAILED = "failed"
    SKIPPED = "skipped"


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
