"""The admin page's chart of the last hour: deliveries per minute by outcome, as an inline SVG's bars."""

from __future__ import annotations

from dataclasses import dataclass, field

from relay.storage.activity import Minute

WIDTH, HEIGHT = 600, 120  # the SVG's own units; it is drawn as wide as the page
BAR_GAP = 2
# The outcomes drawn, bottom up; every other state reached (held, skipped, queued again...) counts as "other".
OUTCOMES = ("delivered", "failed", "retrying", "other")


@dataclass(frozen=True)
class Segment:
    outcome: str
    count: int
    y: float
    height: float


@dataclass(frozen=True)
class Bar:
    start: float  # the minute's start, epoch seconds
    x: float
    width: float
    counts: dict[str, int]
    segments: list[Segment] = field(default_factory=list)

    @property
    def total(self) -> int:
        return sum(self.counts.values())


@dataclass(frozen=True)
class Chart:
    bars: list[Bar]
    peak: int  # the tallest minute's count: the chart's top
    totals: dict[str, int]  # by outcome, over the hour

    @property
    def empty(self) -> bool:
        return self.peak == 0

    @property
    def start(self) -> float:
        return self.bars[0].start

    @property
    def end(self) -> float:
        return self.bars[-1].start + 60


def chart(minutes: list[Minute]) -> Chart:
    """Bars of the same scale, each minute's outcomes stacked, delivered at the bottom."""
    per_minute: list[dict[str, int]] = []
    for minute in minutes:
        counts = dict.fromkeys(OUTCOMES, 0)
        for state, n in minute.counts.items():
            counts[state if state in OUTCOMES else "other"] += n
        per_minute.append(counts)
    peak = max((sum(c.values()) for c in per_minute), default=0)
    slot = WIDTH / max(1, len(minutes))
    bars = []
    for i, (minute, counts) in enumerate(zip(minutes, per_minute, strict=True)):
        bar = Bar(minute.start, i * slot + BAR_GAP / 2, slot - BAR_GAP, counts)
        top = float(HEIGHT)
        for outcome in OUTCOMES:
            if counts[outcome] and peak:
                height = HEIGHT * counts[outcome] / peak
                top -= height
                bar.segments.append(Segment(outcome, counts[outcome], round(top, 2), round(height, 2)))
        bars.append(bar)
    totals = {o: sum(c[o] for c in per_minute) for o in OUTCOMES}
    return Chart(bars, peak, totals)
