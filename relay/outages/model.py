"""When a channel is down (docs/delivery.md, "When a channel is down"): the rules, as data and pure functions; the
state itself lives in Redis (`relay.outages.store`), shared by every worker."""

from __future__ import annotations

from collections.abc import Sequence

from relay.core.model import iso
from relay.core.outcome import Delivered, Outcome, Transient

MAX_PROBE = 600.0  # seconds: the longest wait between two probes of a down channel
# seconds: a send this old counts half in the share of failures among a channel's recent sends. Down takes `after`
# failures in a row and at least as many failures as successes: a busy channel (a send a second or more) failing
# one in ten at random is not down for a row of them by chance, and one that dies while busy is down about this
# long after. A quiet one is down at its `after`-th failure, as a row lasting this long makes any channel down.
SHARE_HALF_LIFE = 5.0
DOWN_PREFIX = "channel down since "

OK, TRANSIENT, PERMANENT = "ok", "transient", "permanent"


def kind_of(outcome: Outcome) -> str:
    """How a send's outcome counts for its channel: a success, a failure in a row, or neither."""
    if isinstance(outcome, Delivered):
        return OK
    return TRANSIENT if isinstance(outcome, Transient) else PERMANENT


def probe_schedule(probe: float) -> list[float]:
    """The waits between probes: `probe`, doubling, up to MAX_PROBE (the last one repeats)."""
    steps = [min(probe, MAX_PROBE)]
    while steps[-1] < MAX_PROBE:
        steps.append(min(steps[-1] * 2, MAX_PROBE))
    return steps


def down_reason(since: float, last_error: str) -> str:
    """A held delivery's `lastError` while its channel is down (`last_error` is redacted already)."""
    return f"{DOWN_PREFIX}{iso(since)}: {last_error}"


def held_by_outage(last_error: str | None) -> bool:
    """Whether a held delivery waits for its channel (not for quiet hours, a digest, a person's hours)."""
    return bool(last_error) and str(last_error).startswith(DOWN_PREFIX)


def p95(bounds: Sequence[float], counts: Sequence[int]) -> float | None:
    """The upper bound of the bucket holding the 95th percentile (`counts` has one more, above the last bound),
    as Prometheus' histogram_quantile would name it at most. None without a send."""
    total = sum(counts)
    if total == 0:
        return None
    seen = 0
    for i, count in enumerate(counts):
        seen += count
        if seen >= 0.95 * total:
            return float(bounds[i]) if i < len(bounds) else float(bounds[-1])
    return float(bounds[-1])
