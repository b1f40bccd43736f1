"""A delivery's states (their values are what Redis and the API hold); free of pydantic, for the command line."""

from __future__ import annotations

import enum


class State(enum.StrEnum):
    QUEUED = "queued"
    RETRYING = "retrying"
    DELIVERED = "delivered"
    FAILED = "failed"
    SKIPPED = "skipped"
    # A group looked up in the catalog: its members got deliveries of their own (`members`).
    EXPANDED = "expanded"
    # Outside its route's active time intervals or inside a mute one: it goes at `notBefore`.
    HELD = "held"


# Still to be sent: a held delivery too, once its scheduled job wakes it (relay.delivery.jobs).
OPEN = frozenset({State.QUEUED, State.RETRYING, State.HELD})
# Sent at once after planning; a held delivery (open too) waits for its scheduled job.
SENDABLE = frozenset({State.QUEUED, State.RETRYING})
