"""What one try of a delivery came to, and `next_step`: the one place that decides whether to try again (RQ
only carries out the wait)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from relay.core.model import State


@dataclass(frozen=True)
class Delivered:
    posted: str | None = None  # Slack's `<channel id>:<ts>` of the message posted (relay.threads)


@dataclass(frozen=True)
class Transient:
    """Worth trying again: a network error, 408, 425, 429, 5xx, an SMTP 4xx."""

    reason: str
    retry_after: float | None = None  # seconds the service asked for (Retry-After of a 429 or 503)
    status: int | None = None  # the HTTP status or SMTP reply code the service answered
    said: str | None = None  # the service's own words with it (scrubbed of secrets, bounded)


@dataclass(frozen=True)
class Permanent:
    """Trying again will not help: a 4xx, an unknown user, SMTP 5xx, a bad URL."""

    reason: str
    status: int | None = None
    said: str | None = None


Outcome = Delivered | Transient | Permanent


@dataclass(frozen=True)
class Step:
    state: State
    retry_in: float | None = None  # seconds until the next try, when state is RETRYING
    reason: str | None = None  # lastError: None when delivered


def backoff_delay(backoff: Sequence[float], attempt: int) -> float:
    """Wait before try number attempt+1 (attempt counts from 1); the last step repeats."""
    if not backoff:
        return 0.0
    return float(backoff[min(attempt - 1, len(backoff) - 1)])


def next_step(outcome: Outcome, attempts: int, max_attempts: int, backoff: Sequence[float]) -> Step:
    """A transient failure is tried again while tries are left, after the backoff step or the Retry-After."""
    if isinstance(outcome, Delivered):
        return Step(State.DELIVERED)
    if isinstance(outcome, Transient) and attempts < max_attempts:
        delay = outcome.retry_after if outcome.retry_after is not None else backoff_delay(backoff, attempts)
        return Step(State.RETRYING, delay, outcome.reason)
    return Step(State.FAILED, None, outcome.reason)


MAX_LOGGED = 20  # tries a delivery's attempt log keeps (the last ones)
MAX_LOGGED_TEXT = 500  # characters of an error, or of the service's words, each entry keeps


def _cut(text: str | None) -> str | None:
    if text is None or len(text) <= MAX_LOGGED_TEXT:
        return text
    return text[: MAX_LOGGED_TEXT - 1] + "…"


def attempt_entry(outcome: Outcome, at: float, took: float | None) -> dict[str, Any]:
    """One try as the attempt log keeps it (relay.admin.detail.Attempt)."""
    entry: dict[str, Any] = {"at": at, "outcome": type(outcome).__name__.lower()}
    entry.update(status=None, said=None, error=None)
    if not isinstance(outcome, Delivered):
        entry.update(status=outcome.status, said=_cut(outcome.said), error=_cut(outcome.reason))
    entry["seconds"] = None if took is None else round(took, 4)
    return entry


def logged(log: list[dict[str, Any]], entry: dict[str, Any]) -> list[dict[str, Any]]:
    """The attempt log with one more try, keeping the last MAX_LOGGED."""
    return [*log, entry][-MAX_LOGGED:]
